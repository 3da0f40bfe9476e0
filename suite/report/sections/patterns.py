"""Layer patterns against their uniform parents, with the mechanism beside the scores: the
``hybrids`` board's question (README, "Layer patterns"). Present on a board that holds runs of a
pattern that mixes position schemes (``positions`` such as 'rope+nope') and of its parent.

* The best arm beyond L: the first arm by OOD MRR (the headline MRR, ``Context.mrr``), the
  arms whose interval lies wholly below its own (separated at 95 %), and the families on which
  its mean OOD score is the best or not separated from the best (``difference.verdict``); where
  that arm is a uniform stack (the board's ALiBi), the same for the best layer pattern. The
  section stands before the summary heatmap, so a board of patterns opens with its verdict.
* Each pattern against its uniform RoPE parent: RoPE in every layer with the pattern's local span
  (``rope swa w=16`` for command_a, ``rope chunked c=16`` for llama4), or with full attention when
  the pattern has none (smollm3, rnope). Per family, each run's mean score over the lengths beyond
  L; the pattern's mean minus its parent's over seeds, with Welch's 95 % interval, read as better,
  worse or not separated in the metric's own direction (bits per byte: lower is better).
* The mechanism (runs stored with ``eval.diagnostics``): per arm, the trained recency gap of the
  last layer's output (cosine similarity of hidden states at lag 1 minus at the far lag) and the
  trained logit gap of the last layer (mean attention logit at distance 1 minus at the far lag,
  heads averaged), the last layer being the global NoPE layer of every hybrid preset on the board
  (tests/test_presets.py); and Spearman's rank correlation of each with the OOD MRR across arms,
  with a 95 % percentile bootstrap interval over the arms (``rho_interval``): do the arms that
  generalize best have a global layer that reads recency (Yang et al. 2025, arXiv 2501.18795, on
  the division of labour between local RoPE and global NoPE layers)? Yes where the interval lies
  above 0, the opposite where it lies below, not decided at 95 % where it holds 0. Beside it, the
  curve the logit gap summarizes: each arm's trained last-layer attention logit against distance
  (``logit_profile``, heads averaged, mean over seeds and families), one line per arm.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from suite.model.span_kinds import KINDS
from suite.report.blocks import Heading, Image, Paragraph, Strong, Table
from suite.report.boards import scheme_label
from suite.report.difference import verdict, welch_interval
from suite.report.plots import Plot, height_for, legend_beside, plt, png
from suite.report.sections.base import Section
from suite.report.sections.recency import diagnostics
from suite.report.stats import percentile_interval

VERDICTS = ("Each layer pattern against its uniform RoPE parent, the verdict by family (the next table gives each "
            "family's difference and interval): the families on which the pattern is better, worse or not separated "
            "at 95 %.")
TEXT = ("Each layer pattern against its uniform RoPE parent (RoPE in every layer, with the pattern's local span, "
        "or full attention when it has none), family by family: the pattern's mean score over the lengths beyond L "
        "minus its parent's, mean over seeds with Welch's 95 % interval, and whether that makes it better, worse or "
        "not separated (in the metric's own direction: for bits per byte lower is better).")
MECHANISM = ("The mechanism, on the trained models: the recency gap of the last layer's output (cosine similarity "
             "of hidden states at lag 1 minus at the far lag) and the logit gap of the last layer (mean attention "
             "logit at distance 1 minus at the far lag, heads averaged); the last layer is every hybrid's global "
             "NoPE layer. Mean over seeds and families; '-' where the far lag lies outside the last layer's span.")
RHO = ("Intervals: 95 % percentile bootstrap over the arms (drawn with replacement, 1000 replicates, seed 0); "
       "'yes' where the interval lies above 0, 'the opposite' where it lies below.")


def is_hybrid(row) -> bool:
    return row["pattern"] != "uniform" and "+" in str(row["positions"])


def parent_label(row) -> str:
    """The scheme label of a pattern's uniform RoPE parent: its local span and size, else full."""
    local = [s for s in str(row["spans"]).split("+") if s != "full"]
    parent = {"positions": "rope", "pattern": "uniform", "spans": local[0] if local else "full"}
    for size in KINDS:  # window, chunk: the parent keeps the pattern's local size
        parent[size] = row.get(size) if local else None
    return scheme_label(parent)


def ood_by_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's mean headline score over the lengths beyond L: ``scheme, task, seed, score, up``."""
    ood = rows[rows.len_ratio > 1]
    out = ood.groupby(["scheme", "task", "seed"], as_index=False).agg(score=("value", "mean"), up=("higher_is_better", "first"))
    return out


def _cell(a, b, up) -> dict:
    diff, low, high = welch_interval(a, b)
    return {"diff": diff, "low": low, "high": high, "verdict": verdict(a, b, bool(up))}


def against_parents(rows: pd.DataFrame) -> pd.DataFrame:
    """``pattern, parent, task, diff, low, high, verdict``, one row per pattern and family."""
    runs, out = ood_by_run(rows), []
    hybrids = rows[rows.apply(is_hybrid, axis=1)].drop_duplicates("scheme")
    for _, h in hybrids.iterrows():
        parent = parent_label(h)
        for task, g in runs[runs.scheme.isin([h.scheme, parent])].groupby("task"):
            a, b = g[g.scheme == h.scheme].score, g[g.scheme == parent].score
            if len(a) and len(b):
                out.append({"pattern": h.scheme, "parent": parent, "task": task, **_cell(a, b, g.up.iloc[0])})
    return pd.DataFrame(out)


def best_beyond_l(mrr: pd.DataFrame, rows: pd.DataFrame, among: set | None = None) -> dict | None:
    """The first arm by OOD MRR (of the arms ``among``, default every arm), its place among every
    arm, the arms separated from it (its interval wholly above theirs), and the families where it is
    best or not separated from the best arm of that family."""
    if mrr.empty or "mrr_ood_low" not in mrr:
        return None
    mine = mrr[mrr.scheme.isin(among)] if among is not None else mrr
    if mine.empty:
        return None
    top = mine.iloc[0]
    below = [s for s, high in zip(mrr.scheme, mrr.mrr_ood_high) if s != top.scheme and high < top.mrr_ood_low]
    runs, families = ood_by_run(rows), []
    for task, g in runs.groupby("task"):
        up = bool(g.up.iloc[0])
        means = g.groupby("scheme").score.mean()
        best = means.idxmax() if up else means.idxmin()
        mine = g[g.scheme == top.scheme].score
        if len(mine) and (best == top.scheme or verdict(mine, g[g.scheme == best].score, up) in ("not separated", "same")):
            families.append(task)
    return {"scheme": top.scheme, "mrr": top.mrr_ood, "low": top.mrr_ood_low, "high": top.mrr_ood_high,
            "place": list(mrr.scheme).index(top.scheme) + 1, "arms": len(mrr),
            "separated": below, "families": families, "tasks": sorted(runs.task.unique())}


def mechanism(df: pd.DataFrame, rows: pd.DataFrame, mrr: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(per arm: OOD MRR, trained recency gap and logit gap of the last layer; Spearman's rho of
    each against the MRR across arms). A run's arm is its label on the board (``rows``)."""
    parts, arm = {}, rows.drop_duplicates("run_id").set_index("run_id").scheme
    for metric, column, extra in (("recency_gap", "recency gap", {"site": "resid_out"}), ("logit_gap", "logit gap", {"head": "mean"})):
        d = diagnostics(df, metric)
        if d.empty:
            continue
        d["scheme"] = d.run_id.map(arm)
        d = d[(d["at"] == "trained") & (d.layer == d.layer.max())]
        for key, value in extra.items():
            if key in d:
                d = d[d[key].astype(str) == value]
        parts[column] = d.groupby("scheme").value.mean()
    if not parts:
        return pd.DataFrame(), {}
    t = mrr[["scheme", "mrr_ood"]].set_index("scheme").join(pd.DataFrame(parts), how="inner").reset_index()
    rho = {c: rho_interval(t.mrr_ood, t[c]) for c in parts if t[c].notna().sum() >= 3}
    return t, rho


REPS = 1000  # bootstrap replicates of the arms, seed 0, like the MRR's


def rho_interval(mrr: pd.Series, gap: pd.Series, reps: int = REPS, seed: int = 0) -> dict:
    """Spearman's rho of ``mrr`` with ``gap`` over the arms where both have a value, and its 95 %
    percentile bootstrap interval (Efron and Tibshirani 1993, §13.3) drawing the arms with
    replacement; a replicate whose draw leaves either column constant has no rho and is left out."""
    keep = mrr.notna() & gap.notna()
    x, y = mrr[keep].to_numpy(float), gap[keep].to_numpy(float)
    point = float(pd.Series(x).corr(pd.Series(y), method="spearman"))
    i = np.random.default_rng(seed).integers(0, len(x), (reps, len(x)))
    rx, ry = (rankdata(v[i], axis=1) for v in (x, y))  # average ranks of ties, as Spearman's rho takes
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    norm = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = np.where(norm > 0, (rx * ry).sum(axis=1) / norm, np.nan)
    low, high = percentile_interval(draws)
    return {"rho": point, "low": float(low), "high": float(high), "arms": int(len(x)), "reads": reads_recency(low, high)}


def reads_recency(low: float, high: float) -> str:
    """The answer an interval of rho gives: do the arms that generalize best read recency more?"""
    if low != low:
        return "not decided"
    return "yes" if low > 0 else "the opposite" if high < 0 else "not decided at 95 %"


def logit_curves(df: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``scheme, lag, value``: each arm's trained last-layer attention logit at each distance, heads
    averaged (``head=mean``), mean over seeds and families; empty without ``logit_profile`` rows."""
    d = diagnostics(df, "logit_profile")
    if d.empty:
        return d
    d = d[(d["at"] == "trained") & (d.layer == d.layer.max()) & (d["head"].astype(str) == "mean")].copy()
    d["scheme"] = d.run_id.map(rows.drop_duplicates("run_id").set_index("run_id").scheme)
    d["lag"] = d["lag"].astype(int)
    return d.dropna(subset=["scheme"]).groupby(["scheme", "lag"], as_index=False).value.mean()


def plot_logits(curves: pd.DataFrame, order: list[str], styles: dict) -> Plot:
    """Attention logit against distance (log axis; distance 0, the token itself, at 1/2), one line
    per arm in board order, in its board style."""
    arms = [a for a in order if a in set(curves.scheme)]
    fig, ax = plt.subplots(figsize=(6.4, height_for(len(arms))), dpi=100)
    for arm in arms:
        c = curves[curves.scheme == arm].sort_values("lag")
        look = styles.get(arm)
        ax.plot(c.lag.clip(lower=0.5), c.value, label=arm, lw=1.3, ms=3,
                color=None if look is None else look.color, marker=None if look is None else look.marker)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("distance (tokens; 0 drawn at 1/2)")
    ax.set_ylabel("mean attention logit")
    ax.set_title("last layer, trained: attention logit against distance")
    ax.grid(alpha=0.3)
    legend_beside(fig, ax)
    return png(fig)


def _best_text(what: str, best: dict) -> str:
    sep = ", ".join(best["separated"]) or "none"
    fams = ", ".join(best["families"]) or "none"
    return (f"{what}: {best['scheme']} ({best['place']} of {best['arms']} arms), OOD MRR {best['mrr']:.2f} "
            f"[{best['low']:.2f}, {best['high']:.2f}]; separated at 95 % from: {sep}. Best or not separated from the "
            f"best on {len(best['families'])} of {len(best['tasks'])} families: {fams}.")


def _signed(v: float) -> str:
    return "n/a" if v != v else f"{v:+.3f}"


class Patterns(Section):
    name, order = "patterns", 11
    csv_names = ("patterns.csv", "mechanism.csv")

    def build(self, ctx):
        table = against_parents(ctx.rows)
        if table.empty:
            return None
        mech, rho = mechanism(ctx.df, ctx.rows, ctx.mrr)
        best = best_beyond_l(ctx.mrr, ctx.rows)
        best_pattern = best_beyond_l(ctx.mrr, ctx.rows, among=set(table.pattern))
        return {"table": table, "best": best, "best_pattern": best_pattern, "mechanism": mech, "rho": rho,
                "logits": logit_curves(ctx.df, ctx.rows)}

    def blocks(self, built, ctx):
        out = [Heading("Layer patterns against their uniform parents")]
        best, pattern = built["best"], built.get("best_pattern")
        if best is not None:
            out.append(Strong(_best_text("Best beyond L", best)))
        if pattern is not None and best is not None and pattern["scheme"] != best["scheme"]:
            out.append(Strong(_best_text("Best layer pattern beyond L", pattern)))
        t = built["table"]
        out += [Paragraph(VERDICTS), Table(verdicts(t), index=False)]
        out += [Paragraph(TEXT), Table(wide(t), index=False)]
        if not built["mechanism"].empty:
            m = built["mechanism"]
            rho = "; ".join(f"Spearman's rho of the OOD MRR with the {c}: {_signed(r['rho'])} [{_signed(r['low'])}, "
                            f"{_signed(r['high'])}] across {r['arms']} arms (do the arms that generalize best read "
                            f"recency more? {r['reads']})" for c, r in built["rho"].items())
            out += [Paragraph(MECHANISM + (f" {rho}." if rho else "") + " " + RHO),
                    Table(m.round(3).astype(object).where(m.notna(), "-"), index=False)]
        if not built["logits"].empty:
            out.append(Image("pattern_logits", "each arm's last-layer attention logit against distance"))
        return out

    def plots(self, built, ctx):
        if built["logits"].empty:
            return {}
        return {"pattern_logits": plot_logits(built["logits"], list(ctx.mrr.scheme), ctx.styles)}

    def csvs(self, built, ctx):
        files = {"patterns.csv": built["table"].to_csv(index=False)}
        if not built["mechanism"].empty:
            files["mechanism.csv"] = built["mechanism"].to_csv(index=False)
        return files


VERDICT_KINDS = ("better", "worse", "not separated")  # a verdict's kinds, in the order the table gives them


def verdicts(t: pd.DataFrame) -> pd.DataFrame:
    """One row per pattern (``against_parents``' order): its parent, then for each verdict kind
    ('better', 'worse', 'not separated', and any other that occurs) the families it holds, 'none'
    where it holds none, and how many families were compared."""
    kinds = list(VERDICT_KINDS) + [v for v in dict.fromkeys(t.verdict) if v not in VERDICT_KINDS]
    out = []
    for name, g in t.groupby("pattern", sort=False):
        row = {"pattern": name, "parent": g.parent.iloc[0]}
        for kind in kinds:
            fams = sorted(g.task[g.verdict == kind])
            row[f"{kind} on"] = ", ".join(fams) or "none"
        out.append({**row, "families": len(g)})
    return pd.DataFrame(out)


def wide(t: pd.DataFrame) -> pd.DataFrame:
    """Pattern x family: 'diff [low, high] verdict'."""
    text = t.assign(cell=[f"{_signed(d)} [{_signed(lo)}, {_signed(hi)}] {v}" for d, lo, hi, v in
                          zip(t["diff"], t.low, t.high, t.verdict)])
    w = text.pivot(index=["pattern", "parent"], columns="task", values="cell").reset_index()
    w.columns.name = None
    return w
