"""Whether a stored run has learned its task: the one judgement every board marks.

A run trained to criterion stores, per judged task, a ``check_score`` row: its headline score on a
check set drawn apart from the eval set, at the training length, at the step training stopped.
Such a run has learned the task when that score reaches the metric's learned line
(``suite.data.metrics.Metric.learned_line``, ``LEARNED_AT`` of its best value).
A run without one (rows shipped before the protocol, fixed-budget runs) keeps the older rule: its
headline score on the eval set at the training length reaches the line. Only metrics with a line
(``Metric.judged``: bounded, higher is better; a loss or bits per byte has none) are judged; a run
on another metric counts as learned. Each row's metric is read as the row declares it
(``suite.data.metrics.stored``). It reads stored rows only (each row's metric declaration), so
``posbench summary`` and the report (``suite.report.boards``)
mark the same runs.
"""
from __future__ import annotations

import pandas as pd

from suite.data.metrics import stored

CHECK_METRIC = "check_score"  # the check set's headline score at the last check (a run trained to criterion)
STEPS_METRIC = "steps_to_learn"  # the first check step whose score reached the line (absent: never)


def lines(d: pd.DataFrame) -> pd.Series:
    """Each row's learned line: the ``learned_line`` of its metric as the row declares it (its
    ``metric``, ``higher_is_better``, ``low``, ``high``, ``share``); NaN where the metric has none."""
    facts = ["metric", "higher_is_better", "low", "high", "share"]
    declared = d.reindex(columns=facts).astype(object).where(d.reindex(columns=facts).notna(), None)
    keys = pd.Series(list(map(tuple, declared.to_numpy())), index=d.index)
    line = {k: stored(k[0], k[1], k[2], k[3], k[4]).learned_line for k in set(keys)}
    return keys.map(lambda k: float("nan") if line[k] is None else line[k]).astype(float)


def learned(d: pd.DataFrame, checks: pd.DataFrame | None = None) -> pd.Series:
    """Per run and task (index run_id, task) of headline rows ``d`` (one metric per task, slice
    'all'): whether the run has learned the task. A pair with a row in ``checks``
    (``check_rows``) has learned it when its check score reaches the check metric's line
    (``lines``); any other pair when its score at the training length in ``d`` does (a run
    without a score there has not learned). A run trained on a mixture is judged on each of its
    tasks. Only metrics with a line are judged; other runs count as learned."""
    line = lines(d)
    judged = line.notna()
    at_l = d[judged & (d.eval_len == d.train_len)]
    ok = (at_l.value.astype(float) >= line[at_l.index]).groupby([at_l.run_id, at_l.task]).any()
    pairs = pd.Series(True, index=pd.MultiIndex.from_frame(d[["run_id", "task"]].drop_duplicates()))
    judged_pairs = pd.MultiIndex.from_frame(d.loc[judged, ["run_id", "task"]].drop_duplicates())
    pairs[judged_pairs] = ok.reindex(judged_pairs, fill_value=False).values
    if checks is not None and len(checks):
        # a check score is the headline metric's on the check set: judged by that metric's line
        pair_line = line.groupby([d.run_id, d.task]).first()
        at = pair_line.reindex(pd.MultiIndex.from_arrays([checks.run_id, checks.task])).to_numpy()
        passed = pd.Series(checks.value.astype(float).to_numpy() >= at, index=checks.index)
        passed = passed.groupby([checks.run_id, checks.task]).all()
        on = passed.index.intersection(pairs.index)
        pairs[on] = passed[on].values
    return pairs


def check_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The ``check_score`` rows of runs trained to criterion (overall, with a value, in runs that
    are ok): what ``learned`` judges a run by where it has one."""
    d = df[(df.metric == CHECK_METRIC) & (df.slice == "all") & (df.status == "ok")]
    return d[d.value.astype(float).notna()]


def headline_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The overall rows of each task's stored headline metric, a value only where the run is ok:
    what ``learned`` judges."""
    d = df[(df.slice == "all") & (df.metric == df.headline)].copy()
    d.loc[d.status != "ok", "value"] = float("nan")
    return d


def learned_mark(not_learned_count: int, runs: int) -> str:
    """'' or ' (1 of 5 not learned)': the mark every table puts beside a scheme whose runs include
    one that did not learn its task at the training length."""
    return f" ({int(not_learned_count)} of {int(runs)} not learned)" if not_learned_count else ""
