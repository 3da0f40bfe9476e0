"""Write a sweep's report: index.md, a self-contained index.html (plots embedded), tidy CSVs.

The numbers come from ``tables`` (leaderboard cells with 95 % intervals, MRR with bootstrap
intervals, power), ``references`` (published results beside ours) and ``stats`` (the intervals).
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

from suite.report import references, settings, steps, tables, verdict
from suite.report.plots import Plot, plot_profiles, plot_recency, plot_summary, plot_task
from suite.report.styles import style_map
from suite.files import write_atomic

BOARD_CSV = ["scheme", "task", "eval_len", "metric", "mean", "ci_low", "ci_high", "std", "n_seeds", "status", "not_learned"]
MRR_CSV = ["scheme", "mrr_ood", "mrr_ood_low", "mrr_ood_high", "mrr_all", "mrr_all_low", "mrr_all_high",
           "cells_ood", "cells_all", "mrr_ood_every_run", "mrr_ood_every_run_low", "mrr_ood_every_run_high",
           "mrr_all_every_run", "mrr_all_every_run_low", "mrr_all_every_run_high"]


def _checkout_code(df: pd.DataFrame) -> str:
    """How many runs this checkout's code would compute as they are (``tables.code_status``)."""
    status = tables.code_status(df)
    current = int((status == "current").sum())
    verdict = ("the runs were computed by this code" if current == len(status)
               else "rerun the sweep to refresh the others")
    return f"{current} of {len(status)} runs ({verdict})"


def _training(df: pd.DataFrame) -> str:
    """How the sweep's models were trained: one per task, or on a mixture of tasks."""
    per_run = df.groupby("run_id").task.nunique()
    steps = ", ".join(str(int(x)) for x in sorted(df.steps.dropna().unique()))
    lengths = ", ".join(str(int(x)) for x in sorted(df.train_len.dropna().unique()))
    kind = "one model per task" if per_run.max() == 1 else f"each model on a mixture of {per_run.max()} tasks"
    return f"{kind}; {steps} steps; training length {lengths} tokens"


def _numeric(runs: pd.DataFrame) -> str:
    """Each numeric signature the runs computed under, with its run count: floats are bit-identical
    only between runs of one signature (``suite.results.numerics``)."""
    if "numeric" not in runs or runs.numeric.isna().all():
        return "not recorded"
    counts = runs.numeric.fillna("not recorded").value_counts()
    return "; ".join(f"{label} ({n})" for label, n in sorted(counts.items()))


def provenance(df: pd.DataFrame, source: str | None = None) -> dict:
    """Where the report's numbers come from. Nothing in it depends on when or where the report is
    built, so the same rows always give the same files."""
    runs = df.drop_duplicates("run_id")
    stamps = pd.to_datetime(runs.timestamp, errors="coerce", utc=True)
    return {
        "git commit": ", ".join(sorted(str(s) for s in runs.git_sha.dropna().unique())),
        "code digests": f"{runs.code_digest.nunique()} (each covers the shared code and the scheme, span and "
                        "task files its run uses)",
        "runs whose digest this checkout's code gives": _checkout_code(df),
        "runs": int(runs.run_id.nunique()),
        "training": _training(df),
        "seeds": ", ".join(str(int(s)) for s in sorted(runs.seed.dropna().unique())),
        "run wall time (sum)": f"{runs.wall_s.sum():.0f} s",
        "first / last run finished": (f"{stamps.min():%Y-%m-%d %H:%M} / {stamps.max():%Y-%m-%d %H:%M} UTC"
                                      if stamps.notna().any() else "not recorded"),
        "numeric signature (runs)": _numeric(runs),
        "rows read from": source or "not recorded",
    }


def build(df: pd.DataFrame, sweep: str, tie: str = "min", threshold: float = tables.EFFECTIVE_AT,
          metric: str | None = None, source: str | None = None) -> dict:
    """Every table of the report, each computed once from the headline rows and the board built
    from them. ``metric``: score every task by this metric instead of the task's own headline metric.
    The board's tables hold every run; the MRR, its verdict and its order are over the learned runs
    (``tables.mrr_learned``), with the MRR over every run beside it."""
    rows = tables.primary(df, metric)
    board = tables.board_of(rows)
    splits = tables.split_boards(df, metric, rows)
    mrr = tables.mrr_learned(board, rows, tie)
    power = tables.power(board)
    half = tables.first_ood_half_widths(board)
    runs = board.drop_duplicates(["scheme", "task"])
    ref = references.load(sweep)
    return {
        "sweep": sweep, "board": board, "mrr": mrr, "tie": tie, "threshold": threshold, "metric": metric,
        "verdict": _verdict(mrr, runs), "setup": verdict.setup(df, rows),
        "metrics": tables.headline_metrics(df, metric),
        "tasks": sorted(board.task.unique()), "effective": tables.effective_length(board, threshold),
        "styles": style_map([*board.scheme, *(s for b in splits.values() for s in b.scheme)]),
        "summary_plot": plot_summary(board, list(mrr.scheme)),
        "power": power, "tied_share": tables.tied_share(power),
        "half_median": half.median() if len(half) else float("nan"), "half_max": half.max() if len(half) else float("nan"),
        "not_learned": int(runs.not_learned.sum()), "runs": int(runs.runs.sum()),
        "steps": steps.steps_table(df, rows),
        "mrr_marks": _mrr_marks(board),
        "breakdowns": {c: tables.breakdown(df, c, metric) for c in tables.varied(df)},
        "settings": settings.build(df, metric, tie),
        "splits": splits,
        "recency": tables.recency_table(df), "recency_plot": plot_recency(df), "profile_plot": plot_profiles(df),
        "provenance": provenance(df, source), "code_groups": tables.code_groups(df), "warning": tables.stale_code_warning(df),
        "reference": ref,
        "ref_paper": references.paper_scores(ref) if ref else None,
        "ref_ours": references.our_scores(ref, board) if ref else None,
        "ref_agreement": references.agreement(ref, board) if ref else None,
    }


def _verdict(mrr: pd.DataFrame, runs: pd.DataFrame) -> str:
    """``verdict.verdict`` of the learned runs' MRR, saying how many runs it leaves out."""
    left_out = _left_out(runs)
    if left_out and mrr[["mrr_ood", "mrr_all"]].isna().all().all():
        return "No two schemes have learned runs in a cell they share: nothing is ranked over learned runs." + left_out
    return verdict.verdict(mrr) + verdict.partial_leader(mrr) + left_out


def _left_out(runs: pd.DataFrame) -> str:
    """' The MRR ranks learned runs only: 6 of 120 runs have not learned their task ...', or '' when
    every run has. ``runs``: the board's rows, one per scheme and task."""
    k, n = int(runs.not_learned.sum()), int(runs.runs.sum())
    if not k:
        return ""
    return (f" The MRR ranks learned runs only: {k} of {n} runs have not learned their task and are left out of it "
            f"(the MRR over every run stands beside it).")


RECENCY_TEXT = ("Mean cosine similarity of hidden states (block outputs) at lag 1 minus at the far lag L "
                "(the largest grid lag at most half the training length), by layer, at initialization and "
                "after training; mean over seeds. Rows: pattern and window (0: no window); a sweep with chunked "
                "layers adds their chunk size (0: none), which is not a window.")

TIE_TEXT = {"min": (f"two means closer than {tables.TIED_BELOW} are tied, the rule the power section uses: a scheme's "
                    f"rank is 1 plus the number of schemes whose mean beats its own by at least {tables.TIED_BELOW}, "
                    f"so tied schemes share the best rank (1, 1, 3)"),
            "average": (f"two means closer than {tables.TIED_BELOW} are tied, the rule the power section uses: a "
                        f"scheme's rank is 1 plus the number of schemes that beat it by at least "
                        f"{tables.TIED_BELOW}, plus half the number tied with it (1.5, 1.5, 3)")}


SETTINGS_TITLE = "Does the ranking hold?"


def breakdown_text(column: str) -> str:
    """What a breakdown table holds."""
    return (f"Each task's headline metric (column metric) per scheme and {column}, mean over seeds of every run, "
            f"learned or not, at each multiple of the training length: one task, one metric and one scheme per "
            f"row, so no value averages two metrics or two schemes. Schemes are named within each value of {column}, "
            f"so a scheme's rows at its different values sit together.")


SPLIT_TEXT = ("The task's evaluation set mixes splits drawn from different distributions, not all of which it "
              "is trained on (flipflop: in_dist is its training distribution); each table below scores the "
              "examples of one split alone, cells as above. splits.csv holds them.")


def _splits_of(r: dict, task: str) -> list[tuple[str, pd.DataFrame]]:
    return [(split, board) for (t, split), board in r["splits"].items() if t == task]


def split_plot(task: str, split: str) -> str:
    """The name of a split's plot: plots/<task>.<split>.png ('flipflop.in_dist')."""
    return f"{task}.{re.sub(r'[^A-Za-z0-9_-]', '_', split)}"


def _plots(r: dict) -> dict[str, Plot]:
    """Every plot of the report by name: the summary, each task's and each split's (every scheme in
    the report's style), the recency diagnostics."""
    named = {"summary": r["summary_plot"], "recency": r["recency_plot"], "profiles": r["profile_plot"]}
    out = {name: plot for name, plot in named.items() if plot is not None}
    out |= {task: plot_task(r["board"], task, r["styles"]) for task in r["tasks"]}
    for (task, split), board in r["splits"].items():
        out[split_plot(task, split)] = plot_task(board, task, r["styles"], title=f"{task}, split {split}")
    return out


def _intro(r: dict) -> str:
    scored = (f"every task is scored by {r['metric']}" if r["metric"]
              else "each task is scored by the headline metric it declares (table below)")
    return (f"Scores: {scored}. A cell is one configuration (runs identical except for the seed, same "
            f"config_hash) at one eval length; a scheme label that covers several configurations on one task "
            f"names each by the settings in which they differ ('alibi steps=80'; 'code=…' for runs from "
            f"different code). n counts seeds. Cells show the mean over seeds with a 95 % interval [low, high]: "
            f"a Student-t interval over seeds (mean ± t(0.975, n-1) · sd / √n) when two or more seeds have a "
            f"value; with one seed, a Wilson score interval over that run's examples where the metric is a "
            f"share of examples (none otherwise). Intervals are clipped to the metric's range ([0, 1] for a "
            f"share, [0, inf) for a loss). A cell without a score reads '-' where the scheme cannot represent "
            f"the length (unsupported), else why (diverged). Rows: best mean score first, lowest first for a "
            f"metric where lower is better (loss); the MRR ranks the same way. Effective length (metrics "
            f"where higher is better): the longest eval length up to which the mean stays at or above "
            f"{r['threshold']:.2f} ('-': never).")


LEARNED_TEXT = (f"A run has learned its task when its headline score at the training length reaches "
                f"{tables.LEARNED_AT} of the metric's best value: on its check set (drawn apart from the eval set) at the step it stopped, "
                f"for a run trained to criterion; on the eval set, for a run without checks. A task scored by a "
                f"metric with no such line (bits per byte) counts as learned.")


def _mrr_text(r: dict) -> str:
    return (f"Mean Reciprocal Rank (Kazemnejad et al. 2023) over (task × eval length) cells: in each cell "
            f"schemes are ranked by their mean score over seeds; {TIE_TEXT[r['tie']]}; an empty cell ranks "
            f"last. OOD: cells beyond the training length (eval_len > train_len), the headline; all: every "
            f"cell. Intervals: 95 % percentile bootstrap, {tables.BOOTSTRAP_REPS} replicates (seed "
            f"{tables.BOOTSTRAP_SEED}), each resampling every (scheme, task)'s seeds with replacement and "
            f"recomputing cell means, ranks and MRR; the point is the MRR of the cell means shown, and an interval "
            f"whose replicates all fall to one side of it is widened to contain it (an MRR near 1 can only lose "
            f"ranks under resampling). A scheme is ranked only in cells another scheme is in too, so no scheme "
            f"gains rank 1 on a task it alone was run on. {LEARNED_TEXT} 'MRR (OOD)' and 'MRR (all)' are over the "
            f"learned runs only: the rows of each run and task it has not learned are left out before the cells and "
            f"ranks are built, so a ranking beyond the training length neither rewards a seed for failing to train "
            f"nor ranks chance-level runs, and a cell with no learned run is absent; 'MRR (OOD), every run' is the "
            f"OOD MRR over every run, learned or not, with its interval (equal to 'MRR (OOD)' where every run has "
            f"learned; mrr.csv holds both MRRs over every run, columns ending _every_run). The tables of each task "
            f"hold every run; the mark '(k of n not learned)' beside a scheme, in this table and in each task's, says "
            f"where a cell mixes not having learned with not generalizing. Sorted by the learned runs' OOD MRR; "
            f"'overlaps next' says whether a scheme's OOD interval overlaps the next-ranked scheme's: overlapping "
            f"neighbours are not separated by this sweep, and their order may be noise.")


def _power_text(r: dict) -> str:
    return (f"Spread: best minus worst scheme mean at the first eval length beyond training (smallest "
            f"len_ratio > 1). Tied cells: eval lengths where best minus worst scheme mean is below "
            f"{tables.TIED_BELOW}, the MRR's tie margin, so every scheme there shares rank 1 (cells with at "
            f"least two scheme means). Overall, "
            f"{'no' if pd.isna(r['tied_share']) else format(r['tied_share'], '.0%')} of cells are tied "
            f"across all schemes. Half-width: half the width of a cell's 95 % interval at the first eval length "
            f"beyond training; over every such cell, the median is {_fmt_or_none(r['half_median'])} and the "
            f"largest {_fmt_or_none(r['half_max'])}. Not learned: runs whose headline score at the training "
            f"length stays below {tables.LEARNED_AT} (on the check set for a run trained to criterion; "
            f"{r['not_learned']} of {r['runs']} runs).")


def _fmt_or_none(x) -> str:
    return "none" if pd.isna(x) else f"{x:.3f}"


def effective_display(t: pd.DataFrame) -> pd.DataFrame:
    """Effective lengths in tokens, '-' for never (not even the shortest length reaches the threshold)."""
    return t.apply(lambda col: col.map(lambda v: f"{int(v)} tokens" if pd.notna(v) and v > 0 else tables.EMPTY))


def effective_note(r: dict) -> str:
    """What the effective-length table leaves out: the tasks scored by a metric where lower is
    better (bits per byte, loss), which no threshold on a rising score fits; '' when none."""
    lower = sorted(t for t in r["tasks"] if t not in r["effective"].columns)
    if not lower:
        return ""
    which = ", ".join(lower)
    if len(lower) == len(r["tasks"]):
        return (f"Not applicable: effective length reads a threshold on a score where higher is better, and every "
                f"task of this board ({which}) is scored by one where lower is better.")
    return f"Not applicable to {which}: scored by a metric where lower is better."


def _has_effective(r: dict) -> bool:
    """Whether any task of the board has an effective length (a metric where higher is better)."""
    return any(t in r["effective"].columns for t in r["tasks"])


def _mrr_marks(board: pd.DataFrame) -> dict[str, str]:
    """{scheme: 'copy 1 of 5, vt 2 of 5'}: the tasks on which some of a scheme's runs did not learn."""
    rows = board.drop_duplicates(["scheme", "task"])
    rows = rows[rows.not_learned > 0].sort_values("task")
    return {s: ", ".join(f"{t} {k} of {n}" for t, k, n in zip(g.task, g.not_learned, g.runs))
            for s, g in rows.groupby("scheme")}


def mrr_display(m: pd.DataFrame, marks: dict[str, str] | None = None) -> pd.DataFrame:
    def cell(name):
        return [f"{a:.2f} [{lo:.2f}, {hi:.2f}]" if pd.notna(a) else tables.EMPTY
                for a, lo, hi in zip(m[name], m[f"{name}_low"], m[f"{name}_high"])]

    out = pd.DataFrame({"scheme": m.scheme, "MRR (OOD)": cell("mrr_ood"), "MRR (all)": cell("mrr_all")})
    if "mrr_ood_every_run" in m:
        out["MRR (OOD), every run"] = cell("mrr_ood_every_run")
    out = out.assign(**{"cells OOD": m.cells_ood, "cells all": m.cells_all, "overlaps next": m.overlaps_next})
    if marks is not None:
        out["not learned"] = [marks.get(s, "") for s in m.scheme]
    if "ranked_on" in m and m.ranked_on.nunique() > 1:  # schemes ranked on different tasks say which
        out["ranked on"] = m.ranked_on
    return out


def _ref_display(t: pd.DataFrame, whose: str) -> pd.DataFrame:
    """Scores to 3 decimals; 'no score' for a scheme we ran without a value, '—' for one we did not run."""
    shown = t.map(lambda v: "—" if pd.isna(v) else "no score" if v == references.EMPTY else f"{v:.3f}")
    return shown.rename_axis(whose)


def _ref_texts(r: dict) -> list[str]:
    ref = r["reference"]
    return [f"Source: {ref['source']}", f"Their setup: {ref['context']}",
            f"Published: {ref['metric']}; then ours under their scheme names, at their test lengths (beyond "
            f"training, up to {ref.get('max_ratio', 'the longest')} x the training length): the mean over those "
            f"lengths of our headline metric, and the MRR over those cells. The metrics differ, so compare orderings: "
            f"Kendall's tau between the published and our order of the schemes both report, and the pairs "
            f"ordered oppositely (a tie on either side is no disagreement)."]


def _md(t: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """One header row: a named index becomes the first column."""
    t = t.reset_index() if t.index.name or isinstance(t.index, pd.MultiIndex) else t
    return t.to_markdown(index=False, floatfmt=floatfmt, disable_numparse=False)


def markdown(r: dict) -> str:
    out = [f"# PosBench leaderboard: `{r['sweep']}`", ""]
    if r.get("coverage"):
        out += [f"> **{r['coverage']}**", ""]
    if r["warning"]:
        out += [f"> **Warning: {r['warning']}**", ""]
    out += [f"**{r['verdict']}**", "", r["setup"], ""]
    if r["summary_plot"] is not None:
        out += ["![summary: every scheme on every task at the first length beyond training](plots/summary.png)", ""]
    out += ["## Mean Reciprocal Rank", "", _mrr_text(r), "", mrr_display(r["mrr"], r["mrr_marks"]).to_markdown(index=False), "",
            "## How to read the tables", "", _intro(r), "", r["metrics"].to_markdown(index=False), ""]
    for task in r["tasks"]:
        out += [f"## {task}", "", _md(tables.pivot(r["board"], task)), "",
                f"![{task}](plots/{task}.png)", ""]
        for i, (split, board) in enumerate(_splits_of(r, task)):
            out += [f"### {task}, split {split}", ""] + ([SPLIT_TEXT, ""] if i == 0 else [])
            out += [_md(tables.pivot(board, task)), "",
                    f"![{task}, split {split}](plots/{split_plot(task, split)}.png)", ""]
    if len(r["steps"]):
        out += ["## Steps to learn", "", steps.text(), "", steps.display(r["steps"]).to_markdown(index=False), ""]
    if r.get("settings"):
        s = r["settings"]
        out += [f"## {SETTINGS_TITLE}", "", f"**{s['finding']}**", "", settings.text(s), "",
                _md(settings.ranking_display(s)), "", settings.tau_display(s).to_markdown(index=False), ""]
        if len(s["moves"]):
            out += [settings.moves_display(s).to_markdown(index=False), ""]
    out += ["## Power", "", _power_text(r), "", r["power"].to_markdown(index=False, floatfmt=".2f"), ""]
    if r["reference"]:
        texts = _ref_texts(r)
        out += ["## Published results", "", texts[0], "", texts[1], "", texts[2], "",
                _ref_display(r["ref_paper"], "published").to_markdown(disable_numparse=True), "",
                _ref_display(r["ref_ours"], "ours").to_markdown(disable_numparse=True), "",
                r["ref_agreement"].to_markdown(index=False, floatfmt=".2f"), ""]
    note = effective_note(r)
    out += ["## Effective length", ""] + ([note, ""] if note else [])
    if _has_effective(r):
        out += [_md(effective_display(r["effective"])), ""]
    if not r["recency"].empty:
        out += ["## Recency gap (diagnostics)", "", RECENCY_TEXT, "", _md(r["recency"]), "",
                "![recency](plots/recency.png)", "", "![profiles](plots/profiles.png)", ""]
    for column, t in r["breakdowns"].items():
        out += [f"## By {column}", "", breakdown_text(column), "", _md(t), ""]
    out += ["## Provenance", ""] + [f"- {k}: {v}" for k, v in r["provenance"].items()]
    out += ["", r["code_groups"].to_markdown(index=False), ""]
    return "\n".join(out)


def _table_html(t: pd.DataFrame, index: bool = True, floatfmt: str = "{:.3f}") -> str:
    """One header row: a shown index becomes the first column; empty cells read '-'."""
    if index:
        t = t.reset_index() if t.index.name or isinstance(t.index, pd.MultiIndex) else t.rename_axis("").reset_index()
    return t.to_html(index=False, escape=True, float_format=floatfmt.format, na_rep=tables.EMPTY, border=0)


def _img(alt: str, plot: Plot, attrs: str = "") -> str:
    """The plot's PNG embedded in the page."""
    return f'<img{attrs} alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(plot.png).decode()}">'


def html_page(r: dict, plots: dict[str, Plot]) -> str:
    esc = html.escape
    parts = [f"<h1>PosBench leaderboard: <code>{esc(r['sweep'])}</code></h1>"]
    if r.get("coverage"):
        parts += [f"<p class='warn'>{esc(r['coverage'])}</p>"]
    if r["warning"]:
        parts += [f"<p class='warn'>Warning: {esc(r['warning'])}</p>"]
    parts += [f"<p id='verdict'><strong>{esc(r['verdict'])}</strong></p>", f"<p id='setup'>{esc(r['setup'])}</p>"]
    if r["summary_plot"] is not None:
        parts += [_img("summary: every scheme on every task at the first length beyond training", r["summary_plot"],
                       ' id="summary"')]
    parts += ["<h2>Mean Reciprocal Rank</h2>", f"<p>{esc(_mrr_text(r))}</p>",
              _table_html(mrr_display(r["mrr"], r["mrr_marks"]), index=False).replace("<table", '<table id="mrr"', 1),
              "<h2>How to read the tables</h2>", f"<p>{esc(_intro(r))}</p>", _table_html(r["metrics"], index=False)]
    for task in r["tasks"]:
        parts += [f"<h2>{esc(task)}</h2>", _table_html(tables.pivot(r["board"], task)),
                  _img(task, plots[task])]
        for i, (split, board) in enumerate(_splits_of(r, task)):
            parts += [f"<h3>{esc(task)}, split {esc(split)}</h3>"] + ([f"<p>{esc(SPLIT_TEXT)}</p>"] if i == 0 else [])
            parts += [_table_html(tables.pivot(board, task)),
                      _img(f"{task}, split {split}", plots[split_plot(task, split)])]
    if len(r["steps"]):
        parts += ["<h2>Steps to learn</h2>", f"<p>{esc(steps.text())}</p>",
                  _table_html(steps.display(r["steps"]), index=False).replace("<table", '<table id="steps"', 1)]
    if r.get("settings"):
        s = r["settings"]
        parts += [f"<h2>{esc(SETTINGS_TITLE)}</h2>", f"<p id='ranking-holds'><strong>{esc(s['finding'])}</strong></p>",
                  f"<p>{esc(settings.text(s))}</p>",
                  _table_html(settings.ranking_display(s)).replace("<table", '<table id="ranking-by-setting"', 1),
                  _table_html(settings.tau_display(s), index=False).replace("<table", '<table id="kendall-tau"', 1)]
        if len(s["moves"]):
            parts.append(_table_html(settings.moves_display(s), index=False))
    parts += ["<h2>Power</h2>", f"<p>{esc(_power_text(r))}</p>",
              _table_html(r["power"], index=False, floatfmt="{:.2f}")]
    if r["reference"]:
        parts += ["<h2>Published results</h2>"] + [f"<p>{esc(t)}</p>" for t in _ref_texts(r)]
        parts += [_table_html(_ref_display(r["ref_paper"], "published")),
                  _table_html(_ref_display(r["ref_ours"], "ours")),
                  _table_html(r["ref_agreement"], index=False, floatfmt="{:.2f}")]
    note = effective_note(r)
    parts += ["<h2>Effective length</h2>"] + ([f"<p>{esc(note)}</p>"] if note else [])
    if _has_effective(r):
        parts.append(_table_html(effective_display(r["effective"])))
    if not r["recency"].empty:
        parts += ["<h2>Recency gap (diagnostics)</h2>", f"<p>{esc(RECENCY_TEXT)}</p>", _table_html(r["recency"], index=False),
                  _img("recency", r["recency_plot"]), _img("profiles", r["profile_plot"])]
    for column, t in r["breakdowns"].items():
        parts += [f"<h2>By {esc(column)}</h2>", f"<p>{esc(breakdown_text(column))}</p>", _table_html(t)]
    parts += ["<h2>Provenance</h2><ul>"] + [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in r["provenance"].items()]
    parts += ["</ul>", _table_html(r["code_groups"], index=False)]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
             "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}.warn{background:#fde2e1;border:1px solid #d33;padding:.5em;"
             "font-weight:bold}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>PosBench: {esc(r['sweep'])}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def save(r: dict, out_dir: Path) -> Path:
    """Write a built report ``r`` as index.md, index.html, leaderboard.csv, mrr.csv, power.csv,
    splits.csv (when a task has evaluation splits), steps_to_learn.csv (when a run made checks),
    ranking_by_setting.csv and kendall_tau.csv (when the runs vary the training length or the model) and
    plots/ (one per task and per split) under ``out_dir``; CSV numbers rounded to 4 decimals."""
    out_dir = Path(out_dir)
    plots = _plots(r)
    files = {}
    for name, plot in plots.items():  # each PNG with the record of the styles its lines were drawn in
        files[f"plots/{name}.png"], files[f"plots/{name}.styles.json"] = plot.png, plot.record()
    board = r["board"].rename(columns={"n": "n_seeds"})[BOARD_CSV]
    files["leaderboard.csv"] = board.round(4).to_csv(index=False)
    files["mrr.csv"] = r["mrr"][MRR_CSV].round(4).to_csv(index=False)
    files["power.csv"] = r["power"].round(4).to_csv(index=False)
    if len(r["steps"]):
        files["steps_to_learn.csv"] = r["steps"][steps.COLUMNS].round(4).to_csv(index=False)
    if r.get("settings"):
        files |= settings.csvs(r["settings"])
    if r["splits"]:
        splits = pd.concat([b.rename(columns={"n": "n_seeds"})[BOARD_CSV].assign(split=split)
                            for (_, split), b in r["splits"].items()])
        files["splits.csv"] = splits[BOARD_CSV[:3] + ["split"] + BOARD_CSV[3:]].round(4).to_csv(index=False)
    files["index.md"] = markdown(r)
    files["index.html"] = html_page(r, plots)
    for name, data in files.items():  # everything is built before the first file is replaced
        write_atomic(out_dir / name, data)
    if not r["splits"] and (out_dir / "splits.csv").exists():  # nor a split table of a sweep without splits
        (out_dir / "splits.csv").unlink()
    if not len(r["steps"]) and (out_dir / "steps_to_learn.csv").exists():  # nor steps of a board without checks
        (out_dir / "steps_to_learn.csv").unlink()
    for name in settings.CSV_NAMES:  # nor the orders by setting of a board that no longer varies one
        if name not in files and (out_dir / name).exists():
            (out_dir / name).unlink()
    for old in [*(out_dir / "plots").glob("*.png"), *(out_dir / "plots").glob("*.styles.json")]:
        # a plot of a task the sweep no longer has must not linger
        if f"plots/{old.name}" not in files:
            old.unlink()
    return out_dir


def write(df: pd.DataFrame, sweep: str, out_dir: Path, tie: str = "min", threshold: float = tables.EFFECTIVE_AT,
          metric: str | None = None) -> Path:
    """Build the report of ``df`` and ``save`` it under ``out_dir``."""
    return save(build(df, sweep, tie, threshold, metric), out_dir)
