"""The statistics of a reproduction (``python -m suite.reproduce``): a rerun judged against the
published cell it belongs to, by run or by whole cell. Both use the intervals of
``suite.report.difference``, whose formulas this module does not restate.

* One rerun of one published run (``rerun_verdict``): on another machine a rerun is another draw
  of the cell, so it is judged against the 95 % prediction interval of ONE new draw from the
  published cell's seeds (``difference.welch_interval`` with one value on one side: the cell's
  mean ± t_{0.975, n-1} · s · √(1 + 1/n)), not against the interval of the cell's mean, which a
  single honest run can leave. Verdicts: ``identical`` (the published number, bit for bit),
  ``inside prediction interval``, ``outside prediction interval`` (or no rerun score),
  ``too few seeds`` (a cell of one seed has no spread to predict from), ``no published score``.
* A rerun cell (``cell_table``): every seed of a published cell rerun, and per eval length the
  reruns' mean against the published mean with Welch's two-sample 95 % interval of their
  difference (rerun minus published; ``difference.welch_interval``) and its verdict
  (``difference.verdict``: same, not separated, better, worse, read with the metric's direction).

A cell is named ``SCHEME/TASK``: the leaderboard's row label of the configuration (``rope``,
``alibi swa w=16``, ``alibi steps=100``: ``boards.primary``'s ``scheme``) and the task, e.g.
``t5/flipflop`` (``cell_runs`` lists them).
"""
from __future__ import annotations

import math

import pandas as pd

from suite.report import boards, difference

RERUN_VERDICTS = ("identical", "inside prediction interval", "outside prediction interval", "too few seeds",
                  "no published score")
SEPARATED = ("better", "worse", "higher", "lower")  # difference.verdict's words for an interval without 0


def cell_name(scheme: str, task: str) -> str:
    """How a cell is named on the command line: ``SCHEME/TASK``."""
    return f"{scheme}/{task}"


def prediction_interval(values, rerun: float) -> tuple[float, float, float, float]:
    """(low, high) of the prediction interval of one new draw from ``values`` (a cell's seeds),
    and (diff_low, diff_high), the interval of ``rerun`` minus the cell's mean that
    ``difference.welch_interval`` gives for one value against ``values``; NaN with fewer than two
    finite values."""
    diff, low, high = difference.welch_interval([rerun], values)
    if math.isnan(low):
        return math.nan, math.nan, math.nan, math.nan
    return rerun - high, rerun - low, low, high


def rerun_verdict(published: float, rerun: float, values) -> str:
    """Where one rerun's score lands (``RERUN_VERDICTS``): against the published run's own score
    (``identical``), else against the prediction interval from ``values``, its cell's seeds."""
    if pd.isna(published):
        return "no published score"
    if pd.isna(rerun):
        return "outside prediction interval"
    if rerun == published:
        return "identical"
    _, _, low, high = prediction_interval(values, rerun)
    if math.isnan(low):
        return "too few seeds"
    return "inside prediction interval" if low <= 0 <= high else "outside prediction interval"


def cell_runs(rows: pd.DataFrame) -> dict[str, list[str]]:
    """``{SCHEME/TASK: run ids}``: every cell of a sweep's ``boards.primary`` rows, with every run
    (seed) it holds, sorted."""
    if rows.empty:
        return {}
    runs = rows.groupby(["scheme", "task"]).run_id.agg(lambda r: sorted(set(r)))
    return {cell_name(scheme, task): ids for (scheme, task), ids in sorted(runs.items())}


def cell_table(published: pd.DataFrame, reruns: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    """One row per chosen cell x eval length: ``cell, eval_len, metric``, the published cell's
    ``published_mean`` over ``n_published`` seeds, the reruns' ``rerun_mean`` over ``n_rerun``,
    ``diff`` (rerun minus published) with Welch's interval ``diff_low``, ``diff_high``, and
    ``verdict``. ``published``: the sweep's stored rows; ``reruns``: the reruns' rows under the ids
    of the published runs they rerun (each joins its published run's cell)."""
    pub = boards.primary(published)
    pub = pub.assign(cell=[cell_name(s, t) for s, t in zip(pub.scheme, pub.task)])
    pub = pub[pub.cell.isin(cells)]
    of_run = pub.drop_duplicates(["run_id", "task"]).set_index(["run_id", "task"]).cell
    new = boards.primary(reruns) if not reruns.empty else pub.iloc[:0]
    new = new.join(of_run.rename("of_cell"), on=["run_id", "task"]).dropna(subset=["of_cell"])
    rows = []
    for (cell, eval_len), g in pub.groupby(["cell", "eval_len"], sort=True):
        before = g.value.dropna().tolist()
        after = new[(new.of_cell == cell) & (new.eval_len == eval_len)].value.dropna().tolist()
        diff, low, high = difference.welch_interval(after, before)
        direction = g.higher_is_better.iloc[0]
        rows.append({"cell": cell, "eval_len": int(eval_len), "metric": g.metric.iloc[0],
                     "published_mean": sum(before) / len(before) if before else math.nan, "n_published": len(before),
                     "rerun_mean": sum(after) / len(after) if after else math.nan, "n_rerun": len(after),
                     "diff": diff, "diff_low": low, "diff_high": high,
                     "verdict": difference.verdict(after, before, None if pd.isna(direction) else bool(direction))})
    columns = ["cell", "eval_len", "metric", "published_mean", "n_published", "rerun_mean", "n_rerun", "diff",
               "diff_low", "diff_high", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def summary(table: pd.DataFrame) -> str:
    """One line: how many cells and cell x length comparisons, the count of each verdict (same,
    not separated, better, worse, and any other ``difference.verdict`` that occurs) and how many
    are separated."""
    counts = table.verdict.value_counts()
    shown = ["same", "not separated", "better", "worse"]
    shown += [v for v in difference.VERDICTS if v not in shown and counts.get(v, 0)]
    return (f"cells: {table.cell.nunique()}; cell x length comparisons: {len(table)}; "
            + "; ".join(f"{v}: {counts.get(v, 0)}" for v in shown)
            + f"; separated (Welch's 95 % interval of the difference excludes 0): {separated(table)}")


def separated(table: pd.DataFrame) -> int:
    """How many comparisons Welch's interval separates (better, worse, or higher / lower)."""
    return int(table.verdict.isin(SEPARATED).sum())
