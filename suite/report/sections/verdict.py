"""The top of a board, computed from its data: the title, a one-sentence verdict (which scheme
ranks first by MRR, and whether its interval separates it from the second; how many runs the MRR
over learned runs leaves out), the setup a reader needs before the tables (model, training steps
and the protocol, training length L, eval lengths, seeds, runs) and the summary heatmap. A board
with fewer runs than its sweep declares, or with runs of other code, says so first.

The protocol: runs trained to criterion (a ``check_score`` row, or a stored spec with
``train.until_learned`` on a task with a learned line) train their recipe's steps and then on, up
to their cap of round(cap x steps) steps, until the check passes; the setup says so with the cap.
Any other run (rows stored before the protocol, natural text's fixed budget) trains exactly its
steps, and a board of such runs only keeps the plain 'N steps'."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from suite.report.blocks import Alert, Heading, Image, Paragraph, Strong
from suite.report.boards import first_ood
from suite.report.plots import Plot, plt, png
from suite.report.sections.base import Section
from suite.report.sections.steps import cap_steps
from suite.results.has_learned import check_rows

SUMMARY = "summary: every scheme on every task at the first length beyond training"


class Verdict(Section):
    name, order = "verdict", 10

    def build(self, ctx):
        return {"verdict": headline(ctx.mrr, ctx.not_learned, ctx.runs), "setup": setup(ctx.df, ctx.rows),
                "summary": not first_ood(ctx.board).empty}

    def blocks(self, built, ctx):
        out = [Heading("PosBench leaderboard: ", 1, code=ctx.sweep)]
        out += [Alert(ctx.coverage)] if ctx.coverage else []
        out += [Alert(f"Warning: {ctx.warning}")] if ctx.warning else []
        out += [Strong(built["verdict"], id="verdict"), Paragraph(built["setup"], id="setup")]
        return out + ([Image("summary", SUMMARY, id="summary")] if built["summary"] else [])

    def plots(self, built, ctx):
        return {"summary": plot_summary(ctx.board, list(ctx.mrr.scheme))} if built["summary"] else {}


def headline(mrr: pd.DataFrame, not_learned: int, runs: int) -> str:
    """``verdict`` of the learned runs' MRR (``ranking.mrr_learned``), saying how many of the
    board's ``runs`` it leaves out (``not_learned``: those that have not learned their task)."""
    left_out = _left_out(not_learned, runs)
    if left_out and mrr[["mrr_ood", "mrr_all"]].isna().all().all():
        return "No two schemes have learned runs in a cell they share: nothing is ranked over learned runs." + left_out
    return verdict(mrr) + partial_leader(mrr) + left_out


def _left_out(k: int, n: int) -> str:
    """' The MRR ranks learned runs only: 6 of 120 runs have not learned their task ...', or '' when
    every run has."""
    if not k:
        return ""
    return (f" The MRR ranks learned runs only: {k} of {n} runs have not learned their task and are left out of it "
            f"(the MRR over every run stands beside it).")


def _interval(row: pd.Series, name: str, digits: int = 2) -> str:
    return f"{row[name]:.{digits}f} [{row[f'{name}_low']:.{digits}f}, {row[f'{name}_high']:.{digits}f}]"


def verdict(mrr: pd.DataFrame) -> str:
    """'alibi ranks first by MRR beyond the training length (0.93 [0.88, 0.93]), ahead of t5 (0.73
    [0.72, 0.75]); separated from the second at the 95 % level: yes (the two intervals do not
    overlap).' ``mrr``: ``ranking.mrr_intervals``. The MRR over cells beyond the training length
    (the headline) where the board has such cells, else the MRR over all cells; two schemes whose
    bootstrap intervals overlap are 'not separated', and equal MRRs share the first place."""
    if mrr.empty:
        return "No scheme has a score: nothing is ranked."
    name, where = ("mrr_ood", "beyond the training length") if mrr.mrr_ood.notna().any() else ("mrr_all", "over all cells")
    ranked = mrr[mrr[name].notna()].sort_values(name, ascending=False, kind="stable")
    if ranked.empty:  # a scheme is ranked only in cells another scheme is in too
        return "No two schemes share a cell: nothing is ranked."
    top = ranked.iloc[0]
    if len(ranked) == 1:
        return f"{top.scheme} is the only scheme ranked by MRR {where} ({_interval(top, name)}): nothing to compare."
    second = ranked.iloc[1]
    ends = [top[f"{name}_low"], top[f"{name}_high"], second[f"{name}_low"], second[f"{name}_high"]]
    if np.isnan(np.asarray(ends, dtype=float)).any():
        separated = "not known (no interval)"
    elif top[f"{name}_low"] <= second[f"{name}_high"] and second[f"{name}_low"] <= top[f"{name}_high"]:
        separated = "no (the two intervals overlap: their order may be noise)"
    else:
        separated = "yes (the two intervals do not overlap)"
    if top[name] == second[name]:
        return (f"{top.scheme} and {second.scheme} share the first place by MRR {where} ({_interval(top, name)} and "
                f"{_interval(second, name)}); separated from each other at the 95 % level: {separated}.")
    digits = 2 if f"{top[name]:.2f}" != f"{second[name]:.2f}" else 3  # two MRRs that read alike at 2 decimals
    return (f"{top.scheme} ranks first by MRR {where} ({_interval(top, name, digits)}), ahead of {second.scheme} "
            f"({_interval(second, name, digits)}); separated from the second at the 95 % level: {separated}.")


def partial_leader(mrr: pd.DataFrame) -> str:
    """' stickbreaking is ranked on copy, flipflop, niah_multivalue only: it has no learned run of vt, and
    the MRR over learned runs leaves that task out for it; over every run, path ranks first (0.61 [0.55,
    0.67]), stickbreaking 0.57 [0.56, 0.58].' when the first scheme by the learned runs' OOD MRR is
    ranked on fewer tasks than the board ranks (``ranked_on``, against the union over schemes), else
    ''. A scheme with no learned run of a task drops that task from its own MRR, so its first place
    may come from the tasks it avoided; the MRR over every run (``mrr_ood_every_run``) says who leads
    when nothing is left out.
    ``mrr``: ``ranking.mrr_learned``."""
    every = "mrr_ood_every_run"
    if mrr.empty or "ranked_on" not in mrr or every not in mrr or mrr.mrr_ood.isna().all():
        return ""
    ranked = mrr[mrr.mrr_ood.notna()].sort_values("mrr_ood", ascending=False, kind="stable")
    top = ranked.iloc[0]
    on = lambda r: {t for t in str(r).split(", ") if t}  # noqa: E731
    board, its = set().union(*map(on, ranked.ranked_on)), on(top.ranked_on)
    missing = sorted(board - its)
    if not missing or not its:
        return ""
    leader = mrr[mrr[every].notna()].sort_values(every, ascending=False, kind="stable")
    if leader.empty:
        return ""
    lead = leader.iloc[0]
    who = (f"it still ranks first ({_interval(lead, every)})" if lead.scheme == top.scheme
           else f"{lead.scheme} ranks first ({_interval(lead, every)}), {top.scheme} {_interval(top, every)}")
    task = "that task" if len(missing) == 1 else "those tasks"
    return (f" {top.scheme} is ranked on {', '.join(sorted(its))} only: it has no learned run of {', '.join(missing)}, "
            f"and the MRR over learned runs leaves {task} out for it; over every run, {who}.")


def _values(series: pd.Series) -> str:
    """The distinct values, sorted, as plain numbers: '32', '32, 64'."""
    return ", ".join(f"{x:g}" for x in sorted(pd.to_numeric(series, errors="coerce").dropna().unique())) or "not recorded"


def _until_learned(spec) -> bool:
    """Whether a stored run spec (JSON) says ``train.until_learned``; False when it does not say."""
    try:
        return json.loads(spec)["train"].get("until_learned") is True
    except (TypeError, ValueError, KeyError, AttributeError):
        return False


def criterion_runs(df: pd.DataFrame) -> set:
    """The ids of the runs in the store's rows ``df`` trained to criterion: those with a check row,
    and those whose spec says ``train.until_learned`` and whose headline metric has a learned line
    (bounded, higher is better: a run that diverged before its first check included)."""
    checked = set(check_rows(df).run_id)
    if "spec" not in df.columns:
        return checked
    judged = (df.higher_is_better == True) & np.isfinite(df.high.astype(float))  # == True: None is not True
    head = df[(df.metric == df.headline) & judged].drop_duplicates("run_id")
    return checked | set(head.run_id[head.spec.map(_until_learned)])


def protocol(df: pd.DataFrame, runs: pd.DataFrame) -> str:
    """'1750 steps' for runs that train exactly their steps; '1750 steps, trained on to at most 7000
    steps until the check passes' where runs were trained to criterion (with '(k of n runs; the
    others a fixed budget)' where only some were). ``runs``: one row per run of ``df``."""
    steps = f"{_values(runs.steps)} steps"
    trained_on = criterion_runs(df) & set(runs.run_id)
    if not trained_on:
        return steps
    specs = runs[runs.run_id.isin(trained_on)].spec if "spec" in runs.columns else pd.Series(dtype=object)
    caps = sorted({int(c) for c in specs.map(cap_steps).dropna()})
    cap = f"at most {', '.join(map(str, caps))} steps" if caps else "a cap"
    some = f" ({len(trained_on)} of {runs.run_id.nunique()} runs; the others a fixed budget)" \
        if len(trained_on) < runs.run_id.nunique() else ""
    return f"{steps}, trained on to {cap} until the check passes{some}"


def setup(df: pd.DataFrame, rows: pd.DataFrame | None = None) -> str:
    """'Setup: model tiny (4 layers, d_model 64, 4 heads); 1750 steps; trained at L = 32 tokens;
    evaluated at 32, 64, 128 tokens; seeds 0, 1, 2; 36 runs.' from the store's rows ``df``; the eval
    lengths are those of the board's headline rows ``rows`` (``boards.primary``) when given. Runs
    trained to criterion say so after the steps (``protocol``): '1750 steps, trained on to at most
    7000 steps until the check passes'."""
    runs = df.drop_duplicates("run_id")
    models = runs[["model", "n_layers", "d_model", "n_heads"]].drop_duplicates().dropna(subset=["n_layers"])
    model = "; ".join(f"{m.model} ({m.n_layers:g} layers, d_model {m.d_model:g}, {m.n_heads:g} heads)"
                      for m in models.sort_values(["n_layers", "d_model", "n_heads"]).itertuples()) or "not recorded"
    lengths = (rows if rows is not None and len(rows) else df).eval_len
    return (f"Setup: model {model}; {protocol(df, runs)}; trained at L = {_values(runs.train_len)} tokens; "
            f"evaluated at {_values(lengths)} tokens; seeds {_values(runs.seed)}; {runs.run_id.nunique()} runs.")


def plot_summary(board: pd.DataFrame, order: list[str]) -> Plot | None:
    """Heatmap of schemes (rows, in ``order``: best MRR first) x tasks at each task's first eval
    length beyond training, coloured by the headline metric's mean over seeds, each cell annotated
    with the mean and its 95 % interval (or why it is empty)."""
    first = first_ood(board)
    if first.empty:
        return None
    tasks = sorted(first.task.unique())
    schemes = [s for s in order if s in set(first.scheme)] + sorted(set(first.scheme) - set(order))
    grid = np.full((len(schemes), len(tasks)), np.nan)
    fig, ax = plt.subplots(figsize=(1.9 * len(tasks) + 2.6, 0.45 * len(schemes) + 1.4), dpi=100)
    for _, r in first.iterrows():
        i, j = schemes.index(r.scheme), tasks.index(r.task)
        grid[i, j] = r["mean"]
        text = (f"{r['mean']:.2f}\n[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r["n"] else "-" if r.status == "unsupported"
                else str(r.status))
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="white" if r["n"] and r["mean"] < 0.55 else "black")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tasks)), [f"{t}\n{int(first[first.task == t].eval_len.iloc[0])} tokens" for t in tasks], fontsize=8)
    ax.set_yticks(range(len(schemes)), schemes, fontsize=8)
    ax.set_title("first length beyond training: mean over seeds [95 % interval]", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="headline metric")
    return png(fig)
