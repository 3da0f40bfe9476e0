"""Leaderboard tables computed from the long-format results store.

Everything ranks from what the rows store (``suite.results.store``): each task's ``headline``
metric and each metric's direction (``higher_is_better``), range (``low``, ``high``) and ``share``
flag, so a board needs neither the task code nor today's metric declarations.

* ``leaderboard``: per scheme x task x eval length, the mean over seeds of the task's headline
  metric with a 95 % interval (Student-t over seeds; Wilson over examples for a single seed).
  A cell holds only runs that share ``config_hash`` (identical except for the seed).
* ``mrr`` / ``mrr_intervals``: Mean Reciprocal Rank across (task x eval length) cells, the ranking
  of Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
  Transformers"), over out-of-distribution cells (their headline) and over all cells, with a
  percentile bootstrap interval that resamples each cell's seeds. ``mrr_learned``: the headline
  MRR table, over the runs that have learned their task (``suite.results.learned``), with the MRR
  over every run beside it.
* ``power``: how much the sweep can tell schemes apart: spread at the first length beyond
  training, share of cells where every scheme ties.
* ``effective_length``: the longest eval length up to which a scheme stays at or above a threshold.
* ``breakdown``: each task's headline metric per scheme by any setting the sweep varies (span,
  window, pattern, model, training length, ...).
* ``code_groups``: runs by commit and by whether this checkout's code gives their digest.
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd

from suite.config.codedigest import spec_digest
from suite.model.span_kinds import KINDS
from suite.report import labels, stats
from suite.evaluation.slices import parse_slice
from suite.results.learned import LEARNED_AT, check_rows, learned, learned_mark  # noqa: F401 (the report's names too)
from suite.results.store import DECLARED
from suite.report.choices import EFFECTIVE_AT, TIE_RULES  # declared where a command's --help reads them

BREAKDOWN_COLUMNS = ("spans", *KINDS, "pattern", "model", "train_len")
# what a run's configuration is made of, for rows written before ``config_hash`` existed
CONFIG_COLUMNS = ("model", "n_layers", "d_model", "n_heads", "pattern", "positions", "spans", *KINDS,
                  "train_len", "steps")
BOOTSTRAP_REPS = 1000
BOOTSTRAP_SEED = 0
TIED_BELOW = 0.01  # the one tie rule: two means closer than this are tied (power and MRR alike)
SPLIT = "split"  # the slice field naming an evaluation split: a distribution the task's eval_generate draws from


def headline_metrics(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """``task, metric``: the metric each task is scored by, ``metric`` when given (one metric for
    every task), else the headline its rows store (several, joined by ', ', if its runs differ)."""
    tasks = sorted(df.task.dropna().unique())
    if metric:
        return pd.DataFrame({"task": tasks, "metric": metric})
    stored = df.dropna(subset=["headline"]).groupby("task").headline.agg(lambda h: ", ".join(sorted(set(h))))
    return pd.DataFrame({"task": tasks, "metric": [stored.get(t, "none stored") for t in tasks]})


def sign(higher_is_better) -> float:
    """+1 where higher is better, -1 where lower is; a measurement (None) is not ranked."""
    if higher_is_better is None or pd.isna(higher_is_better):
        raise ValueError("a measurement with no better direction is not ranked")
    return 1.0 if higher_is_better else -1.0


def size_label(row) -> str:
    """'w=16', 'c=16', 'w=8 c=16' or '': a row's span sizes (its column of each span kind, ``KINDS``)."""
    sizes = [(short, row.get(column)) for column, short in KINDS.items()]  # one size column per span kind
    return " ".join(f"{short}={int(size)}" for short, size in sizes if size is not None and not pd.isna(size))


def scheme_label(row) -> str:
    """'rope', 'alibi swa w=16', 'llama4 c=16': the position scheme of a uniform stack (with its
    span when not full), else the pattern; then the span sizes (``size_label``)."""
    label = row["positions"] if row["pattern"] == "uniform" else row["pattern"]
    if row["pattern"] == "uniform" and row["spans"] != "full":
        label = f"{label} {row['spans']}"
    sizes = size_label(row)
    return f"{label} {sizes}" if sizes else label


def config_key(df: pd.DataFrame) -> pd.Series:
    """Each row's ``config_hash``; for rows without one (older stores), a hash of CONFIG_COLUMNS."""
    fallback = df.reindex(columns=list(CONFIG_COLUMNS)).apply(lambda r: "|".join(map(str, r)), axis=1)
    fallback = fallback.map(lambda s: hashlib.sha1(s.encode()).hexdigest()[:12])
    if "config_hash" not in df:
        return fallback
    return df["config_hash"].where(df["config_hash"].notna(), fallback).astype(str)


def primary(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Overall rows of each task's headline metric (or of ``metric`` for every task), with
    ``config``, ``scheme`` and ``learned`` columns; cells that are not ``ok`` keep their status and
    a NaN value. ``learned``: whether the row's run has learned its task (``learned``, judged by the
    run's check score where ``df`` holds one, else by these rows at the training length).

    Rows with a ``source`` (runs placed beside the sweep's, ``python -m suite.report --beside``) form
    cells of their own, labelled 'rope [path]'. A scheme label that covers more than one configuration on one task is split on every task, each
    configuration named by the settings that differ ("alibi steps=80", ``labels.split_labels``),
    so no cell pools them. One model per task (a config hash per task) is no reason to split a label.
    """
    if df.empty:
        return df.assign(scheme=pd.Series(dtype=str), config=pd.Series(dtype=str))
    want = df.headline if metric is None else metric
    d = df[(df.slice == "all") & (df.metric == want)].copy()
    if d.empty:
        return d.assign(scheme=pd.Series(dtype=str), config=pd.Series(dtype=str))
    d["config"] = config_key(d)
    base = d.apply(scheme_label, axis=1)
    if "source" in d and d.source.notna().any():  # runs placed beside the sweep's own: cells of their own
        other = d.source.notna()
        d.loc[other, "config"] = d.config[other] + "@" + d.source[other].astype(str)
        base = base.where(~other, base + " [" + d.source.astype(str) + "]")
    # a scheme name ('alibi', or the pattern) covering several configurations on a task splits all of
    # them, 'alibi steps=100' and 'alibi swa w=16 steps=1750', not only those sharing a whole label
    family = d.positions.where(d.pattern == "uniform", d.pattern).astype(str)
    if "source" in d:
        family = family.where(d.source.isna(), family + " [" + d.source.astype(str) + "]")
    per_task = d.config.groupby([family, d.task]).transform("nunique")
    split = per_task.groupby(family).transform("max") > 1
    suffix = pd.Series("", index=d.index)
    for name in family[split].unique():
        rows = d[family == name]
        groups = {task: list(g.config.unique()) for task, g in rows.groupby("task")}
        specs = {c: json.loads(s) if isinstance(s, str) else None
                 for c, s in (rows.groupby("config").spec.first().items() if "spec" in rows else [])}
        named = base[rows.index].groupby(rows.config).first().to_dict()
        suffix[rows.index] = rows.config.map(labels.split_labels(groups, specs, named))
    d["scheme"] = base.where(~split | (suffix == ""), base + " " + suffix)
    d.loc[d.status != "ok", "value"] = float("nan")
    return d.join(learned(d, check_rows(df)).rename("learned"), on=["run_id", "task"])


def _cell(g: pd.DataFrame) -> pd.Series:
    """One leaderboard cell from its runs' rows: mean, std, n (seeds with a value), interval
    (clipped to the stored range of the metric; Wilson's over examples only for a share), status,
    and the metric's stored declaration."""
    v = g.value.dropna()
    n = len(v)
    first = g.iloc[0]
    if n >= 2:
        low, high = stats.t_interval(v, bounds=(float(first.low), float(first.high)))
    elif n == 1 and first.share == True:  # noqa: E712 (a stored bool, numpy or not)
        low, high = stats.wilson_interval(float(v.iloc[0]), g.loc[v.index, "n"].iloc[0])
    else:
        low = high = math.nan
    return pd.Series({
        "metric": first.metric, **{key: first[key] for key in DECLARED},
        "train_len": g.train_len.iloc[0], "config": g.config.iloc[0],
        "mean": v.mean() if n else math.nan, "std": v.std() if n > 1 else (0.0 if n else math.nan),
        "n": n, "ci_low": low, "ci_high": high,
        "status": "ok" if (g.status == "ok").any() else g.status.mode().iloc[0],
    })


def leaderboard(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """``board_of`` the ``primary`` rows of ``df``."""
    return board_of(primary(df, metric))


def board_of(d: pd.DataFrame) -> pd.DataFrame:
    """Long table ``scheme, task, eval_len, mean, std, n, ci_low, ci_high, metric``, the metric's
    stored declaration, ``train_len, config, status, not_learned, runs`` from ``primary`` rows: n
    is the number of seeds with a value, the interval is ``stats.t_interval`` over seeds
    (``stats.wilson_interval`` over the run's examples when one seed has a value), status is ``ok``
    or why the cell is empty."""
    cols = ["scheme", "task", "eval_len", "mean", "std", "n", "ci_low", "ci_high", "metric", *DECLARED, "train_len",
            "config", "status", "not_learned", "runs"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(["scheme", "task", "eval_len"], sort=True).apply(_cell, include_groups=False).reset_index()
    out["n"] = out["n"].astype(int)
    counts = not_learned(d)
    out = out.merge(counts, on=["scheme", "task"], how="left")
    out[["not_learned", "runs"]] = out[["not_learned", "runs"]].fillna(0).astype(int)
    return out[cols]


def not_learned(d: pd.DataFrame) -> pd.DataFrame:
    """``scheme, task, not_learned, runs``: how many of each cell row's runs have not learned
    their task (``primary``'s ``learned`` column; ``learned`` of ``d`` for rows without it), out of how many."""
    runs = d.drop_duplicates(["scheme", "task", "run_id"])
    if "learned" not in runs:
        runs = runs.join(learned(d).rename("learned"), on=["run_id", "task"])
    runs = runs.assign(miss=~runs.learned.astype(bool))
    return runs.groupby(["scheme", "task"]).agg(not_learned=("miss", "sum"), runs=("run_id", "size")).reset_index()


def split_boards(df: pd.DataFrame, metric: str | None = None,
                 rows: pd.DataFrame | None = None) -> dict[tuple[str, str], pd.DataFrame]:
    """``{(task, split): leaderboard}`` for every task whose rows carry evaluation splits (slices
    ``split=<name>`` alone, e.g. flip-flop's in_dist, sparse and dense): the headline metric over the
    examples of that split only, a board like ``leaderboard``'s. Splits are scored apart because the
    overall score mixes distributions the model was and was not trained on. ``rows``: the
    ``primary`` rows of ``df``, when already built."""
    if df.empty:
        return {}
    d = df[df.slice.str.startswith(f"{SPLIT}=")]
    d = d[d.slice.map(lambda s: list(parse_slice(s)) == [SPLIT]).astype(bool)]
    if d.empty:
        return {}
    whole = not_learned(primary(df, metric) if rows is None else rows)  # learned: on the whole task, never one split
    out = {}
    for (task, s), g in d.groupby(["task", "slice"], sort=True):
        board = leaderboard(g.assign(slice="all"), metric).drop(columns=["not_learned", "runs"])
        marks = board.merge(whole, on=["scheme", "task"], how="left")
        board[["not_learned", "runs"]] = marks[["not_learned", "runs"]].fillna(0).astype(int).to_numpy()
        out[(task, parse_slice(s)[SPLIT])] = board
    return out


def _arrays(board: pd.DataFrame):
    """Board as arrays over (scheme, cell): mean scores, presence, out-of-distribution mask, and
    per cell the sign that makes a better score larger (``Metric.sign``: -1 for a loss)."""
    schemes = sorted(board.scheme.unique())
    cells = sorted(set(zip(board.task, board.eval_len)))
    si = {s: i for i, s in enumerate(schemes)}
    ci = {c: i for i, c in enumerate(cells)}
    scores = np.full((len(schemes), len(cells)), np.nan)
    present = np.zeros(scores.shape, bool)
    ood = np.zeros(scores.shape, bool)
    signs = np.ones(len(cells))  # a board without a metric column holds scores where higher is better
    for r in board.itertuples(index=False):
        i, j = si[r.scheme], ci[(r.task, r.eval_len)]
        scores[i, j], present[i, j], ood[i, j] = r.mean, True, r.eval_len > r.train_len
        if hasattr(r, "higher_is_better"):
            signs[j] = sign(r.higher_is_better)
    return schemes, cells, scores, present, ood, signs


def tie_ranks(s: np.ndarray, tie: str = "min", margin: float = TIED_BELOW) -> np.ndarray:
    """Ranks along axis 1 (schemes) of signed scores ``s`` (larger is better; -inf: absent), under
    the report's one notion of a tie: two means closer than ``margin`` are tied, the same rule by
    which ``power`` calls a cell tied. A scheme's rank is 1 plus the number of schemes that beat it
    by at least ``margin`` (``tie="min"``: tied schemes share the best rank); ``tie="average"``
    adds half of the schemes tied with it. No rank counts a difference below the margin, and with
    ``margin=0`` these are the usual min and average ranks."""
    ahead_of, behind = s[:, None, :, :], s[:, :, None, :]
    both_absent = np.isneginf(ahead_of) & np.isneginf(behind)  # -inf - -inf: no difference to take, NaN
    diff = np.subtract(ahead_of, behind, out=np.full(np.broadcast_shapes(ahead_of.shape, behind.shape), np.nan),
                       where=~both_absent)  # [r, i, j, c] = s_j - s_i: how far scheme j is ahead of i
    with np.errstate(invalid="ignore"):
        beats = np.nan_to_num(diff, nan=-np.inf) >= margin  # absent schemes (-inf) never beat, never lose
        tied = (np.abs(np.nan_to_num(diff, nan=np.inf)) < margin) | (s[:, None, :, :] == s[:, :, None, :])
    ahead = beats.sum(axis=2)  # per (r, i, c): the schemes that beat i by the margin
    if tie == "min":
        return 1.0 + ahead
    return 1.0 + ahead + (tied.sum(axis=2) - 1) / 2  # minus the scheme itself


# an empty cell's stand-in score: below every real score (of any metric, signed), above an absent scheme
_EMPTY_SCORE = -np.finfo(float).max


def _mrr(scores: np.ndarray, present: np.ndarray, ood: np.ndarray, tie: str, signs: np.ndarray):
    """Per replicate and scheme, MRR over OOD cells and over all cells.

    ``scores``: (R, S, C) cell means (NaN: empty cell, ranks below every scheme with a score);
    ``present``/``ood``: (S, C); ``signs``: (C,), +1 where higher is better, -1 where lower is.
    Absent schemes neither take a rank nor count in a mean, and a cell only one scheme is in is
    no contest (``ranked``): it counts for none. Returns two (R, S) arrays, NaN where a scheme has
    no such cell.
    """
    s = np.where(present, np.nan_to_num(scores * signs, nan=_EMPTY_SCORE), -np.inf)
    rr = 1.0 / tie_ranks(s, tie)
    counted = ranked(present)

    def mean_over(mask):
        cnt = mask.sum(axis=1)
        total = np.where(mask, rr, 0.0).sum(axis=2)
        return np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)

    return mean_over(counted & ood), mean_over(counted)


def ranked(present: np.ndarray) -> np.ndarray:
    """(S, C): the cells each scheme is ranked in, those of its cells at least one other scheme
    is in too. A cell no other scheme has (a task only one configuration ran) ranks nothing: a
    rank of 1 there would lift a scheme's MRR for the tasks it alone was run on."""
    return present & (present.sum(axis=0) >= 2)


def _check_tie(tie: str) -> None:
    if tie not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie!r}; valid: {', '.join(TIE_RULES)}")


def _sorted(out: pd.DataFrame) -> pd.DataFrame:
    return out.sort_values(["mrr_ood", "mrr_all", "scheme"], ascending=[False, False, True],
                           na_position="last").reset_index(drop=True)


def mrr(board: pd.DataFrame, tie: str = "min") -> pd.DataFrame:
    """Per scheme: mean over (task, eval length) cells of 1 / rank of its mean score in that cell,
    over out-of-distribution cells (eval_len > train_len) and over all cells (Kazemnejad et al. 2023).

    ``tie="min"``: tied schemes share the best rank of their group (1, 1, 3); ``tie="average"``:
    they share the mean of the ranks they span (1.5, 1.5, 3). An empty cell (unsupported,
    diverged, failed) ranks below every scheme with a score. A scheme is ranked only in cells
    another scheme is in too (``ranked``), so each MRR compares schemes over the same tasks.
    Columns ``scheme, mrr_ood, mrr_all, cells_ood, cells_all`` (the cells counted) and
    ``ranked_on`` (the tasks of those cells), sorted by OOD MRR.
    """
    _check_tie(tie)
    schemes, cells, scores, present, ood, signs = _arrays(board)
    m_ood, m_all = _mrr(scores[None], present, ood, tie, signs)
    counted = ranked(present)
    tasks = [", ".join(sorted({task for (task, _), on in zip(cells, row) if on})) for row in counted]
    return _sorted(pd.DataFrame({"scheme": schemes, "mrr_ood": m_ood[0], "mrr_all": m_all[0],
                                 "cells_ood": (counted & ood).sum(1), "cells_all": counted.sum(1),
                                 "ranked_on": tasks}))


def _bootstrap_scores(d: pd.DataFrame, schemes, cells, reps: int, seed: int) -> np.ndarray:
    """(reps, S, C) cell means, each replicate resampling with replacement the runs (seeds) of
    every (scheme, task), a run's eval lengths kept together."""
    rng = np.random.default_rng(seed)
    si = {s: i for i, s in enumerate(schemes)}
    ci = {c: i for i, c in enumerate(cells)}
    out = np.full((reps, len(schemes), len(cells)), np.nan)
    for (scheme, task), g in d.groupby(["scheme", "task"], sort=True):
        runs = g.groupby(["run_id", "eval_len"]).value.mean().unstack()  # (runs, eval lengths)
        v = runs.to_numpy(float)
        x = v[rng.integers(0, len(v), size=(reps, len(v)))]  # (reps, runs, eval lengths)
        cnt = (~np.isnan(x)).sum(axis=1)
        means = np.where(cnt > 0, np.nansum(x, axis=1) / np.maximum(cnt, 1), np.nan)
        out[:, si[scheme], [ci[(task, e)] for e in runs.columns]] = means
    return out


def mrr_replicates(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min", reps: int = BOOTSTRAP_REPS,
                   seed=BOOTSTRAP_SEED) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(schemes, OOD MRRs, all-cells MRRs): the MRR of each scheme of ``board`` (``board_of(rows)``)
    in each of ``reps`` bootstrap replicates, each resampling every (scheme, task)'s runs in ``rows``
    with replacement (``_bootstrap_scores``; ``seed``: anything ``np.random.default_rng`` takes), two
    (reps, schemes) arrays, NaN where a scheme has no such cell."""
    _check_tie(tie)
    schemes, cells, _, present, ood, signs = _arrays(board)
    samples = _bootstrap_scores(rows, schemes, cells, reps, seed)
    b_ood, b_all = _mrr(samples, present, ood, tie, signs)
    return schemes, b_ood, b_all


def mrr_intervals(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min",
                  reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """``mrr`` of ``board`` (``board_of(rows)``, built once by the caller) with 95 % percentile
    bootstrap intervals (Efron and Tibshirani 1993): each of ``reps`` replicates resamples every
    (scheme, task)'s runs in ``rows`` (the board's ``primary`` rows) with replacement, recomputes
    cell means, ranks and both MRRs; a fixed ``seed`` makes it reproducible. The point is the MRR
    of the board's own means (``mrr``), and each interval is widened to contain it where the
    replicates fall to one side of it (``stats.containing``): an MRR near its ceiling (a scheme
    that wins nearly every cell) can only lose ranks under resampling, so the percentile interval
    alone may miss its own point.

    Columns ``scheme, mrr_ood, mrr_ood_low, mrr_ood_high, mrr_all, mrr_all_low, mrr_all_high,
    cells_ood, cells_all, overlaps_next, ranked_on`` sorted by OOD MRR; ``overlaps_next`` says whether a
    scheme's OOD interval overlaps the next-ranked scheme's ("yes"/"no", "" for the last).
    """
    schemes, b_ood, b_all = mrr_replicates(board, rows, tie, reps, seed)
    out = mrr(board, tie).set_index("scheme").loc[schemes]
    for name, b in (("mrr_ood", b_ood), ("mrr_all", b_all)):
        out[f"{name}_low"], out[f"{name}_high"] = stats.containing(out[name].to_numpy(), *stats.percentile_interval(b))
    out = _sorted(out.reset_index())
    lo, hi = out.mrr_ood_low.to_numpy(), out.mrr_ood_high.to_numpy()
    out["overlaps_next"] = [("yes" if lo[i] <= hi[i + 1] and lo[i + 1] <= hi[i] else "no")
                            if i + 1 < len(out) and not np.isnan([lo[i], hi[i], lo[i + 1], hi[i + 1]]).any()
                            else "" for i in range(len(out))]
    return out[["scheme", "mrr_ood", "mrr_ood_low", "mrr_ood_high", "mrr_all", "mrr_all_low", "mrr_all_high",
                "cells_ood", "cells_all", "overlaps_next", "ranked_on"]]


EVERY_RUN = "_every_run"  # the suffix of the MRR columns computed over every run, learned or not


def learned_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``primary`` rows of the run/task pairs that have learned their task (``learned``)."""
    return rows[rows.learned.astype(bool)] if "learned" in rows else rows


def mrr_learned(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min", reps: int = BOOTSTRAP_REPS,
                seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """The headline MRR table: ``mrr_intervals`` over the learned runs only (the rows of every
    run/task pair that has not learned its task dropped before the board and the MRR are built, so
    a cell with no learned run is absent), with the same MRRs over every run beside them
    (``mrr_ood_every_run``, ``mrr_all_every_run``, each with ``_low`` and ``_high``). Every
    scheme of ``board`` (``board_of(rows)``) has a row; one with no learned run has no learned-runs
    MRR. Sorted by the learned-runs OOD MRR (then all-cells MRR; schemes without one after, by
    the MRR over every run); where every run has learned, the two agree."""
    every = mrr_intervals(board, rows, tie, reps, seed)
    kept = learned_rows(rows)
    if len(kept) == len(rows):
        learned_only = every
    elif kept.empty:
        learned_only = every[["scheme"]]
    else:
        learned_only = mrr_intervals(board_of(kept), kept, tie, reps, seed)
    named = {f"{m}{end}": f"{m}{EVERY_RUN}{end}" for m in ("mrr_ood", "mrr_all") for end in ("", "_low", "_high")}
    out = every[["scheme", *named]].rename(columns=named).merge(learned_only, on="scheme", how="left")
    out = out.reindex(columns=[*every.columns, *named.values()])
    out[["cells_ood", "cells_all"]] = out[["cells_ood", "cells_all"]].fillna(0).astype(int)
    out[["overlaps_next", "ranked_on"]] = out[["overlaps_next", "ranked_on"]].astype(object).fillna("")
    # schemes that no learned run ranks come last, in the order of their MRR over every run
    order = ["mrr_ood", "mrr_all", "mrr_ood_every_run", "mrr_all_every_run"]
    return out.sort_values([*order, "scheme"], ascending=[False] * len(order) + [True],
                           na_position="last").reset_index(drop=True)


def first_ood(board: pd.DataFrame) -> pd.DataFrame:
    """The board's cells at each task's first eval length beyond training (smallest len_ratio > 1)."""
    b = board.assign(len_ratio=board.eval_len / board.train_len)
    beyond = b[b.len_ratio > 1]
    return beyond[beyond.len_ratio == beyond.groupby("task").len_ratio.transform("min")]


def power(board: pd.DataFrame, tied_below: float = TIED_BELOW) -> pd.DataFrame:
    """Per task: ``spread``, best minus worst scheme mean at the first eval length beyond training
    (smallest len_ratio > 1), and ``tied_cells`` of ``cells``, the eval lengths where best minus
    worst scheme mean is below ``tied_below`` (cells with at least two scheme means count)."""
    rows = []
    b = board.assign(len_ratio=board.eval_len / board.train_len)

    def gap(means):
        return means.max() - means.min() if means.count() >= 2 else math.nan

    firsts = first_ood(board)
    for task, g in b.groupby("task", sort=True):
        first = firsts[firsts.task == task]
        gaps = g.groupby("eval_len")["mean"].agg(gap).dropna()
        tied = int((gaps < tied_below).sum())
        half = half_widths(first)
        per_scheme = g.drop_duplicates("scheme")
        rows.append({"task": task, "metric": g.metric.iloc[0],
                     "first_ood_len": int(first.eval_len.min()) if len(first) else None,
                     "spread": gap(first["mean"]) if len(first) else math.nan,
                     "median_half_width": half.median() if len(half) else math.nan,
                     "max_half_width": half.max() if len(half) else math.nan,
                     "tied_cells": tied, "cells": len(gaps), "tied_share": tied / len(gaps) if len(gaps) else math.nan,
                     "not_learned": int(per_scheme.not_learned.sum()) if "not_learned" in g else 0,
                     "runs": int(per_scheme.runs.sum()) if "runs" in g else 0})
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


POWER_COLUMNS = ["task", "metric", "first_ood_len", "spread", "median_half_width", "max_half_width", "tied_cells",
                 "cells", "tied_share", "not_learned", "runs"]


def half_widths(cells: pd.DataFrame) -> pd.Series:
    """Half the width of each cell's 95 % interval, (ci_high - ci_low) / 2, where it has one."""
    if not {"ci_low", "ci_high"} <= set(cells):
        return pd.Series(dtype=float)
    return ((cells.ci_high - cells.ci_low) / 2).dropna()


def first_ood_half_widths(board: pd.DataFrame) -> pd.Series:
    """Interval half-widths of every cell at its task's first eval length beyond training."""
    return half_widths(first_ood(board))


def tied_share(power_table: pd.DataFrame) -> float:
    """Share of all (task, eval length) cells in which every scheme ties."""
    cells = power_table.cells.sum()
    return power_table.tied_cells.sum() / cells if cells else math.nan


EMPTY = "-"  # a cell with no score because the scheme cannot represent the length, or a length never reached


def cell_text(mean: float, low: float, high: float, n: int, digits: int = 2) -> str:
    """'0.93 [0.88, 0.97]', the mean with its 95 % interval; '5.71 (n=1)' for a cell without an
    interval (one seed of a metric that is not a share: no spread to estimate), never '[nan, nan]'."""
    if pd.isna(low) or pd.isna(high):
        return f"{mean:.{digits}f} (n={int(n)})"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def length_header(eval_len, train_len) -> str:
    """'64 (2x)': an eval length in tokens with its multiple of the training length."""
    return f"{int(eval_len)} ({eval_len / train_len:g}x)"


def ratio_header(ratio: float) -> str:
    return f"{ratio:g}x train length"


def scheme_order(board: pd.DataFrame) -> list[str]:
    """Schemes best first by their mean headline score over the cells shown, signed so that a
    better score is larger (a loss counts negated); an empty cell counts as its metric's worst
    value (0 for a share; for an unbounded loss, the worst score shown); schemes with no score at
    all last; ties by name."""
    stored = board.reindex(columns=["higher_is_better", "low", "high"])  # a board without them: a share
    signs = stored.higher_is_better.astype(object).where(stored.higher_is_better.notna(), True).map(sign)
    signed = board["mean"] * signs
    floor = signs * stored.low.fillna(0.0).where(signs > 0, stored.high.fillna(1.0)).astype(float)
    shown = signed[board.n > 0].min() if (board.n > 0).any() else 0.0
    worst = floor.where(np.isfinite(floor), shown)
    key = board.assign(score=signed.where(board.n > 0, worst)).groupby("scheme").agg(
        score=("score", "mean"), scored=("n", "max"))
    key = key.assign(none=key.scored == 0).reset_index()
    key = key.sort_values(["none", "score", "scheme"], ascending=[True, False, True])
    return list(key.scheme)


def pivot(board: pd.DataFrame, task: str) -> pd.DataFrame:
    """Scheme x eval length for one task, one header row: 'mean [ci_low, ci_high]' ('mean (n=1)'
    for a cell without an interval, ``cell_text``), '-' where the
    scheme cannot represent the length (unsupported), else why the cell is empty (diverged).
    Rows best first (``scheme_order``); columns named '64 (2x)'."""
    b = board[board.task == task]

    def cell(r):
        if r["n"] == 0:
            return EMPTY if r["status"] == "unsupported" else r["status"]
        return cell_text(r["mean"], r["ci_low"], r["ci_high"], r["n"])

    t = b.assign(cell=b.apply(cell, axis=1)).pivot(index="scheme", columns="eval_len", values="cell")
    train_len = b.train_len.iloc[0] if len(b) else 1
    t = t.loc[scheme_order(b)]
    t.columns = [length_header(c, train_len) for c in t.columns]
    if "not_learned" in b:
        marks = b.drop_duplicates("scheme").set_index("scheme")
        t.index = [s + learned_mark(marks.not_learned[s], marks.runs[s]) for s in t.index]
    t.index.name = "scheme"
    return t


def effective_length(board: pd.DataFrame, threshold: float = EFFECTIVE_AT) -> pd.DataFrame:
    """Scheme x task: the longest eval length L such that every eval length up to L scores at least
    ``threshold`` (0 when even the shortest does not: never); best schemes first. Only tasks
    scored by a metric where higher is better have one."""
    rows = []
    if "higher_is_better" in board:
        board = board[board.higher_is_better == True]  # noqa: E712 (None is not True)
    for (scheme, task), g in board.sort_values("eval_len").groupby(["scheme", "task"]):
        best = 0
        for _, r in g.iterrows():
            if r["n"] == 0 or r["mean"] < threshold:
                break
            best = int(r["eval_len"])
        rows.append({"scheme": scheme, "task": task, "effective_length": best})
    if not rows:
        return pd.DataFrame(columns=["scheme"])
    t = pd.DataFrame(rows).pivot(index="scheme", columns="task", values="effective_length")
    t.columns.name = None
    return t.loc[[s for s in scheme_order(board) if s in t.index]]


MODEL_COLUMNS = ("model", "n_layers", "d_model", "n_heads")  # what a model setting is: its name and its size


def model_labels(df: pd.DataFrame) -> pd.Series:
    """Each row's model by name and size, 'tiny, 4 layers, d_model 64, 4 heads', so two widths of
    one named model are two settings; a size the row does not store is left out."""
    d = df.reindex(columns=list(MODEL_COLUMNS))

    out = d["model"].astype(str)
    for column, before, after in (("n_layers", "", " layers"), ("d_model", "d_model ", ""), ("n_heads", "", " heads")):
        size = pd.to_numeric(d[column], errors="coerce")
        out = out.where(size.isna(), out + ", " + before + size.fillna(0).astype(int).astype(str) + after)
    return out


def setting_values(df: pd.DataFrame, column: str) -> pd.Series:
    """Each row's value of the setting ``column`` as text: the model by name and size for "model"
    (``model_labels``), else the column's value ("None": no window)."""
    return model_labels(df) if column == "model" else df[column].map(str)


def breakdown(df: pd.DataFrame, column: str, metric: str | None = None) -> pd.DataFrame:
    """Each task's headline score (or ``metric``) by scheme and ``column``, mean over seeds, one
    column per length ratio: rows ``task, metric, scheme, <column>``, every run. The schemes are
    labelled within each value of ``column`` (``primary`` of that value's rows), so a scheme run
    at two training lengths is one scheme on two rows, not two schemes; no value averages two
    tasks, two metrics or two schemes."""
    values = setting_values(df, column)
    parts = [primary(df[values == v], metric).assign(**{column: v}) for v in values.unique()]
    d = pd.concat([p for p in parts if len(p)]) if any(len(p) for p in parts) else pd.DataFrame()
    if d.empty:
        return pd.DataFrame()
    t = d.pivot_table(index=["task", "metric", "scheme", column], columns="len_ratio", values="value", aggfunc="mean")
    t = t.loc[sorted(t.index, key=lambda k: (k[0], k[1], k[2], _numeric_first(k[3])))]
    t.columns = [ratio_header(c) for c in t.columns]
    return t


def _numeric_first(value: str) -> tuple:
    """Sort key of a breakdown row: numbers in numeric order (4, 8, 16, not '16', '4', '8'), then
    the rest ('None': no window) by name."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def varied(df: pd.DataFrame) -> list[str]:
    """The breakdown columns that take more than one value in this sweep."""
    return [c for c in BREAKDOWN_COLUMNS if c in df and setting_values(df, c).nunique() > 1]


def code_status(df: pd.DataFrame) -> pd.Series:
    """Per run id: ``current`` when its stored code digest is the one this checkout gives its spec
    (``suite.config.codedigest.spec_digest``: the core plus the schemes, spans and tasks it uses),
    ``stale`` when it differs, ``unknown`` for a run stored without its spec."""
    runs = df.drop_duplicates("run_id").set_index("run_id")
    spec = runs["spec"] if "spec" in runs else pd.Series(None, index=runs.index, dtype=object)

    def status(run_id):
        if not isinstance(spec[run_id], str):
            return "unknown"
        return "current" if spec_digest(spec[run_id]) == str(runs.code_digest[run_id]) else "stale"

    return pd.Series({run_id: status(run_id) for run_id in runs.index}, dtype=object, name="code")


def code_groups(df: pd.DataFrame) -> pd.DataFrame:
    """Runs counted by the commit that ran them and whether this checkout's code gives the same
    digest: ``git_sha, code, runs``."""
    runs = df.drop_duplicates("run_id").set_index("run_id")[["git_sha"]].fillna("unknown").astype(str)
    runs["code"] = code_status(df)
    return runs.value_counts().rename("runs").reset_index().sort_values(["git_sha", "code"], ignore_index=True)


def stale_code_warning(df: pd.DataFrame) -> str | None:
    """A warning line when some runs were computed by code that differs from this checkout's, else None."""
    status = code_status(df)
    stale = int((status == "stale").sum())
    if not stale:
        return None
    return (f"{stale} of {len(status)} runs were computed by other code than this checkout holds: "
            "their numbers may not be what this code gives; rerun the sweep")


def size_columns(d: pd.DataFrame) -> list[str]:
    """The span-kind columns (``KINDS``): the first (``window``) always, each other (``chunk``) when
    some row has one, filled in place with 0 for "none" (integers, so the diagnostics group on them)."""
    first, *others = KINDS
    kept = [first, *(k for k in others if k in d and d[k].notna().any())]
    for kind in kept:
        d[kind] = d[kind].fillna(0).astype(int)
    return kept


def diagnostics(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of a diagnostic metric with their slice fields (at, layer, site, lag, segment, far)
    as columns, plus ``scheme``."""
    d = df[(df.metric == metric) & (df.status == "ok")].copy()
    if d.empty:
        return d
    fields = d.slice.map(parse_slice)
    d = d.join(pd.DataFrame(fields.tolist(), index=d.index))
    d["scheme"] = d.apply(scheme_label, axis=1)
    d["layer"] = d["layer"].astype(int)
    return d


def recency_table(df: pd.DataFrame, site: str = "resid_out") -> pd.DataFrame:
    """Recency gap f(1) - f(L) of ``site`` by pattern, window (0: none) and, when a run has chunked
    layers, chunk (0: none) x (stage, layer), mean over seeds."""
    d = diagnostics(df, "recency_gap")
    if d.empty:
        return d
    d = d[d.site == site]
    sizes = size_columns(d)
    t = d.pivot_table(index=["pattern", *sizes], columns=["at", "layer"], values="value", aggfunc="mean")
    t.columns = [f"{at} layer {layer}" for at, layer in t.columns]
    return t.reset_index()
