"""Steps to learn: how many training steps a scheme needs before it has learned a task, a measure
of sample efficiency that runs trained to criterion give.

A run trained to criterion checks its headline score at the training length on a check set every
few steps and stores ``steps_to_learn``: the first check step at which the score reached the line
(``suite.results.has_learned``). Per scheme and task, over the runs that made checks: the mean over
the runs that learned the task of their steps to learn, with its 95 % Student-t interval over those
runs (``stats.t_interval``, clipped to [0, inf)), how many runs it averages, and how many never
learned it within their cap (round(cap x steps) steps, from each run's stored spec). Runs without
checks (rows shipped before the protocol, natural text's fixed budget) have no row here; a board
none of whose runs made checks has no such table.
"""
from __future__ import annotations

import json
import math

import pandas as pd

from suite.report import stats
from suite.report.blocks import Heading, Paragraph, Table
from suite.report.sections.base import Section
from suite.results.has_learned import STEPS_METRIC, check_rows
from suite.data.metrics import LEARNED_AT

COLUMNS = ["scheme", "task", "mean", "ci_low", "ci_high", "n", "never", "runs", "cap_steps"]
CSV = "steps_to_learn.csv"


class Steps(Section):
    name, order = "steps", 50
    csv_names = (CSV,)

    def build(self, ctx):
        t = steps_table(ctx.df, ctx.rows)
        return t if len(t) else None

    def blocks(self, built, ctx):
        return [Heading("Steps to learn"), Paragraph(text()), Table(display(built), index=False, floatfmt="g", id="steps")]

    def csvs(self, built, ctx):
        return {CSV: built[COLUMNS].round(4).to_csv(index=False)}


def cap_steps(spec) -> float:
    """round(cap x steps) of a stored run spec (JSON), the most steps the run could train; NaN when
    the spec does not say."""
    try:
        train = json.loads(spec)["train"]
        return float(round(float(train["cap"]) * int(train["steps"])))
    except (TypeError, ValueError, KeyError):
        return math.nan


def steps_table(df: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``COLUMNS`` per scheme and task, sorted by task then mean (fewest steps first; schemes none
    of whose runs learned last): ``mean``, ``ci_low``, ``ci_high`` of ``steps_to_learn`` over the
    ``n`` runs that learned the task (``primary``'s ``learned``), ``never`` of the ``runs`` that
    made checks did not, and ``cap_steps``, the runs' cap (several joined by ', '). ``df``: the
    store's rows; ``rows``: their ``boards.primary`` rows (the schemes and the judgement). Empty
    when no run made checks."""
    checked = check_rows(df)[["run_id", "task"]].drop_duplicates()
    runs = rows.drop_duplicates(["run_id", "task"])[["run_id", "task", "scheme", "learned"]]
    runs = runs.merge(checked, on=["run_id", "task"])
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    found = df[(df.metric == STEPS_METRIC) & (df.slice == "all") & (df.status == "ok")]
    steps = found.groupby(["run_id", "task"]).value.first().astype(float)
    runs = runs.join(steps.rename("steps"), on=["run_id", "task"])
    caps = df.drop_duplicates("run_id").set_index("run_id").spec.map(cap_steps)
    runs["cap"] = runs.run_id.map(caps)
    out = []
    for (scheme, task), g in runs.groupby(["scheme", "task"], sort=True):
        v = g.steps[g.learned.astype(bool)].dropna()
        low, high = stats.t_interval(v, bounds=(0.0, math.inf))
        known = sorted(int(c) for c in g.cap.dropna().unique())
        out.append({"scheme": scheme, "task": task, "mean": v.mean() if len(v) else math.nan,
                    "ci_low": low, "ci_high": high, "n": len(v), "never": int((~g.learned.astype(bool)).sum()),
                    "runs": len(g), "cap_steps": ", ".join(map(str, known)) or "not recorded"})
    t = pd.DataFrame(out, columns=COLUMNS)
    return t.sort_values(["task", "mean", "scheme"], na_position="last", kind="stable").reset_index(drop=True)


def display(t: pd.DataFrame) -> pd.DataFrame:
    """The table as index.md and index.html show it: 'mean [low, high]' steps ('mean (n=1)' with one
    run, '-' with none), n, and 'k of n never learned (cap C steps)'."""
    def cell(r):
        if r.n == 0:
            return "-"
        if pd.isna(r.ci_low) or pd.isna(r.ci_high):
            return f"{r['mean']:.0f} (n={int(r.n)})"
        return f"{r['mean']:.0f} [{r.ci_low:.0f}, {r.ci_high:.0f}]"

    never = [f"{k} of {n} never learned (cap {c} steps)" if k else "" for k, n, c in zip(t.never, t.runs, t.cap_steps)]
    return pd.DataFrame({"scheme": t.scheme, "task": t.task, "steps to learn [95 % interval]": t.apply(cell, axis=1),
                         "n": t.n, "never learned": never})


def text() -> str:
    """What the section's table says, column by column."""
    return (f"Steps to learn: the first training step at which a run's headline score at the training length, "
            f"on a check set drawn apart from the eval set, reached the learned line ({LEARNED_AT} of the "
            f"metric's best value; checks come every check_every steps, so a count is a multiple of it); the "
            f"mean over the runs that learned the task, with its 95 % Student-t interval over those runs, and n: "
            f"how many runs that is. 'k of n never learned (cap C steps)': runs that had not passed a check by "
            f"their cap, round(cap x steps) training steps, and stopped there; they are left out of the mean here, "
            f"while the headline MRR ranks them as they scored. Runs without checks (a fixed budget: natural text, rows stored before the "
            f"protocol) have no row. steps_to_learn.csv holds the table.")
