"""Write a sweep's report: index.md, a self-contained index.html (plots embedded), CSVs."""
from __future__ import annotations

import base64
import html
import io
import platform
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report import tables  # noqa: E402

THRESHOLD = 0.8


def _png(fig) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def plot_task(board: pd.DataFrame, task: str) -> bytes:
    """Accuracy against eval length for one task, one line per scheme (mean ± std over seeds)."""
    b = board[board.task == task]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for scheme, g in b.groupby("scheme"):
        g = g.sort_values("eval_len")
        ax.errorbar(g.eval_len, g["mean"], yerr=g["std"], marker="o", ms=3, capsize=2, label=scheme)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("eval length (tokens)")
    ax.set_ylabel("reciprocal rank" if task in tables.PRIMARY else "exact match")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(task)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _png(fig)


def plot_recency(df: pd.DataFrame) -> bytes | None:
    """Recency gap of the last layer's output against window size, per pattern, at init and trained."""
    d = tables.diagnostics(df, "recency_gap")
    if d.empty:
        return None
    d = d[(d.site == "resid_out") & (d.layer == d.layer.max())].copy()
    d["window"] = d["window"].fillna(0).astype(int)
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for (pattern, at), g in d.groupby(["pattern", "at"]):
        g = g.groupby("window").value.mean()
        ax.plot(g.index, g.values, marker="o", ls="-" if at == "trained" else "--", label=f"{pattern} ({at})")
    ax.set_xlabel("window (0: no window)")
    ax.set_ylabel("recency gap f(1) - f(L)")
    ax.set_title("last layer output: recency gap against window")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def plot_profiles(df: pd.DataFrame) -> bytes | None:
    """Recency profiles f(d) of each layer's output against lag, one panel per pattern and window
    (trained: solid, init: dashed), mean over seeds."""
    d = tables.diagnostics(df, "recency_cos")
    if d.empty:
        return None
    d = d[d.site == "resid_out"].copy()
    d["window"] = d["window"].fillna(0).astype(int)
    d["lag"] = d["lag"].astype(int)
    panels = sorted(d.groupby(["pattern", "window"]).groups)
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), dpi=90, squeeze=False, sharey=True)
    for ax, (pattern, window) in zip(axes.flat, panels):
        g = d[(d.pattern == pattern) & (d.window == window)]
        for (layer, at), h in g.groupby(["layer", "at"]):
            if at not in ("init", "trained"):
                continue
            h = h.groupby("lag").value.mean()
            ax.plot(h.index, h.values, ls="-" if at == "trained" else "--", color=f"C{layer}",
                    label=f"layer {layer}" if at == "trained" else None)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{pattern} w={window}" if window else pattern, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.supxlabel("lag d")
    fig.supylabel("cos(h_i, h_{i-d})")
    return _png(fig)


def provenance(df: pd.DataFrame) -> dict:
    runs = df.drop_duplicates("run_id")
    stamps = pd.to_datetime(runs.timestamp, errors="coerce", utc=True)
    return {
        "git commit": ", ".join(sorted(str(s) for s in runs.git_sha.dropna().unique())),
        "runs": int(runs.run_id.nunique()),
        "seeds": ", ".join(str(int(s)) for s in sorted(runs.seed.dropna().unique())),
        "run wall time (sum)": f"{runs.wall_s.sum():.0f} s",
        "first / last run finished": f"{stamps.min():%Y-%m-%d %H:%M} / {stamps.max():%Y-%m-%d %H:%M} UTC",
        "report built": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
                        f"({platform.system()}, {__import__('os').cpu_count()} CPUs)",
    }


def build(df: pd.DataFrame, sweep: str, tie: str = "min", threshold: float = THRESHOLD) -> dict:
    """Every table of the report, computed once."""
    board = tables.leaderboard(df)
    return {
        "sweep": sweep, "board": board, "mrr": tables.mrr(board, tie), "tie": tie, "threshold": threshold,
        "tasks": sorted(board.task.unique()), "effective": tables.effective_length(board, threshold),
        "breakdowns": {c: tables.breakdown(df, c) for c in tables.varied(df)},
        "recency": tables.recency_table(df), "recency_plot": plot_recency(df), "profile_plot": plot_profiles(df),
        "provenance": provenance(df),
    }


RECENCY_TEXT = ("Mean cosine similarity of hidden states (block outputs) at lag 1 minus at the far lag L "
                "(the largest grid lag at most half the training length), by layer, at initialization and "
                "after training; mean over seeds. Rows: pattern and window (0: no window).")

TIE_TEXT = {"min": "ties share the best rank of their group (1, 1, 3)",
            "average": "ties share the mean of the ranks they span (1.5, 1.5, 3)"}


def _intro(r: dict) -> str:
    return (f"Mean Reciprocal Rank over (task × eval length) cells: in each cell schemes are ranked by their "
            f"mean score over seeds; {TIE_TEXT[r['tie']]}; an empty cell ranks last. Effective length: the "
            f"longest eval length up to which the score stays at or above {r['threshold']:.2f}. "
            f"Scores are exact match (reciprocal rank for ranking tasks), mean ± std over seeds.")


def markdown(r: dict) -> str:
    out = [f"# PosBench leaderboard: `{r['sweep']}`", "", _intro(r), "", "## Mean Reciprocal Rank", "",
           r["mrr"].to_markdown(index=False, floatfmt=".3f"), ""]
    for task in r["tasks"]:
        out += [f"## {task}", "", tables.pivot(r["board"], task).to_markdown(), "",
                f"![{task}](plots/{task}.png)", ""]
    out += ["## Effective length", "", r["effective"].to_markdown(), ""]
    if not r["recency"].empty:
        out += ["## Recency gap (diagnostics)", "", RECENCY_TEXT, "", r["recency"].to_markdown(floatfmt=".3f"), "",
                "![recency](plots/recency.png)", "", "![profiles](plots/profiles.png)", ""]
    for column, t in r["breakdowns"].items():
        out += [f"## By {column}", "", t.to_markdown(floatfmt=".3f"), ""]
    out += ["## Provenance", ""] + [f"- {k}: {v}" for k, v in r["provenance"].items()] + [""]
    return "\n".join(out)


def _table_html(t: pd.DataFrame, index: bool = True, floatfmt: str = "{:.3f}") -> str:
    return t.to_html(index=index, escape=True, float_format=floatfmt.format, na_rep="—", border=0)


def html_page(r: dict, plots: dict[str, bytes]) -> str:
    esc = html.escape
    parts = [f"<h1>PosBench leaderboard: <code>{esc(r['sweep'])}</code></h1>", f"<p>{esc(_intro(r))}</p>",
             "<h2>Mean Reciprocal Rank</h2>", _table_html(r["mrr"], index=False)]
    for task in r["tasks"]:
        img = base64.b64encode(plots[task]).decode()
        parts += [f"<h2>{esc(task)}</h2>", _table_html(tables.pivot(r["board"], task)),
                  f'<img alt="{esc(task)}" src="data:image/png;base64,{img}">']
    parts += ["<h2>Effective length</h2>", _table_html(r["effective"], floatfmt="{:.0f}")]
    if not r["recency"].empty:
        img = base64.b64encode(r["recency_plot"]).decode()
        prof = base64.b64encode(r["profile_plot"]).decode()
        parts += ["<h2>Recency gap (diagnostics)</h2>", f"<p>{esc(RECENCY_TEXT)}</p>", _table_html(r["recency"]),
                  f'<img alt="recency" src="data:image/png;base64,{img}">',
                  f'<img alt="profiles" src="data:image/png;base64,{prof}">']
    for column, t in r["breakdowns"].items():
        parts += [f"<h2>By {esc(column)}</h2>", _table_html(t)]
    parts += ["<h2>Provenance</h2><ul>"] + [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in r["provenance"].items()]
    parts += ["</ul>"]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
             "text-align:right}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>PosBench: {esc(r['sweep'])}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def write(df: pd.DataFrame, sweep: str, out_dir: Path, tie: str = "min", threshold: float = THRESHOLD) -> Path:
    """Write index.md, index.html, leaderboard.csv, mrr.csv and plots/ under ``out_dir``."""
    r = build(df, sweep, tie, threshold)
    out_dir = Path(out_dir)
    (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    plots = {task: plot_task(r["board"], task) for task in r["tasks"]}
    for task, png in plots.items():
        (out_dir / "plots" / f"{task}.png").write_bytes(png)
    if r["recency_plot"] is not None:
        (out_dir / "plots" / "recency.png").write_bytes(r["recency_plot"])
        (out_dir / "plots" / "profiles.png").write_bytes(r["profile_plot"])
    r["board"][["scheme", "task", "eval_len", "mean", "std", "n"]].to_csv(out_dir / "leaderboard.csv", index=False)
    r["mrr"].to_csv(out_dir / "mrr.csv", index=False)
    (out_dir / "index.md").write_text(markdown(r))
    (out_dir / "index.html").write_text(html_page(r, plots))
    return out_dir
