"""Mean Reciprocal Rank across (task x eval length) cells, the ranking of Kazemnejad et al. 2023
("The Impact of Positional Encoding on Length Generalization in Transformers"), over
out-of-distribution cells (their headline) and over all cells.

* ``tie_ranks``: the one notion of a tie: two means closer than their metric's tie margin
  (``suite.data.metrics.Metric.tie_margin``) are tied, here as in the power section.
* ``mrr``: the MRR of a board's cell means. A cell is (setting, task, eval length): on a board
  that runs a task under several training lengths or models (``boards.setting_labels``) each
  setting's schemes are ranked among themselves, never against another setting's.
* ``mrr_intervals``: with a percentile bootstrap interval (``mrr_replicates``): each replicate
  draws the board's tasks with replacement, then the runs (seeds) of every (scheme, task) with
  replacement, so the interval covers which tasks the board holds as well as seed noise
  (``TASKS``; ``SEEDS``: the seeds alone, the protocol before the fair one (docs/protocol.md)). Each interval says how
  many distinct values its replicates take (``_distinct``, ``_modal``), so a discrete bootstrap is
  reported as one (``stats.interval_text``).
* ``mrr_every``: the headline MRR table, over every run, learned or not (failing to learn is a
  result), with the MRR over the learned runs (``learned_rows``) beside it and how many runs learned.
* ``in_order``: a board's cells in the headline MRR's order (leaderboard.csv, ``posbench summary``).

Each cell is ranked by the metric its rows declare (``boards.metric_of``): ``Metric.sign`` makes a
better score larger (a loss counts negated).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from suite.report import boards, stats
from suite.report.choices import TIE_RULES
from suite.data.metrics import TIED_BELOW

BOOTSTRAP_REPS = 1000
BOOTSTRAP_SEED = 0
TASKS, SEEDS = "tasks and seeds", "seeds"  # what a bootstrap replicate resamples
LEARNED = "_learned"  # the suffix of the MRR columns computed over the learned runs only
_CHUNK = 256  # replicates ranked at once: bounds the (replicates, schemes, schemes, cells) arrays of tie_ranks


@dataclass(frozen=True)
class Layout:
    """A board as arrays over (scheme, cell), a cell (setting, task, eval length): mean scores,
    presence, the out-of-distribution mask, and per cell the sign that makes a better score larger
    (``Metric.sign``: -1 for a loss) and the margin below which two means tie (``Metric.tie_margin``)."""

    schemes: list
    cells: list
    scores: np.ndarray
    present: np.ndarray
    ood: np.ndarray
    signs: np.ndarray
    margins: np.ndarray


def _arrays(board: pd.DataFrame, margin: float | None = None) -> Layout:
    """The ``Layout`` of ``board``: each cell's sign and tie margin those of the metric its rows
    declare (a board without a declaration holds scores where higher is better); ``margin``: one tie
    margin for every cell instead (the protocol before the fair one (docs/protocol.md), ``suite.report.orderings``)."""
    schemes = sorted(board.scheme.unique())
    settings = board.setting if "setting" in board else pd.Series("", index=board.index)
    cells = sorted(set(zip(settings, board.task, board.eval_len)))
    si = {s: i for i, s in enumerate(schemes)}
    ci = {c: i for i, c in enumerate(cells)}
    scores = np.full((len(schemes), len(cells)), np.nan)
    present = np.zeros(scores.shape, bool)
    ood = np.zeros(scores.shape, bool)
    signs, margins = np.ones(len(cells)), np.full(len(cells), TIED_BELOW)
    for setting, r in zip(settings, board.itertuples(index=False)):
        i, j = si[r.scheme], ci[(setting, r.task, r.eval_len)]
        scores[i, j], present[i, j], ood[i, j] = r.mean, True, r.eval_len > r.train_len
        if hasattr(r, "higher_is_better"):
            metric = boards.metric_of(r)
            signs[j], margins[j] = metric.sign, metric.tie_margin
    if margin is not None:
        margins[:] = margin
    return Layout(schemes, cells, scores, present, ood, signs, margins)


def tie_ranks(s: np.ndarray, tie: str = "min", margin: np.ndarray | float = TIED_BELOW) -> np.ndarray:
    """Ranks along axis 1 (schemes) of signed scores ``s`` (larger is better; -inf: absent), under
    the report's one notion of a tie: two means closer than ``margin`` are tied, the same rule by
    which ``power`` calls a cell tied. A scheme's rank is 1 plus the number of schemes that beat it
    by at least ``margin`` (``tie="min"``: tied schemes share the best rank); ``tie="average"``
    adds half of the schemes tied with it. No rank counts a difference below the margin, and with
    ``margin=0`` these are the usual min and average ranks. ``margin``: one for every cell, or (C,)
    one per cell (its metric's ``tie_margin``)."""
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


def _reciprocal_ranks(scores: np.ndarray, present: np.ndarray, tie: str, signs: np.ndarray,
                      margins: np.ndarray | float = TIED_BELOW) -> np.ndarray:
    """(R, S, C) 1 / rank of each scheme in each cell (``tie_ranks``). ``scores``: (R, S, C) cell means
    (NaN: empty cell, ranks below every scheme with a score); ``present``: (S, C), an absent scheme
    takes no rank; ``signs``: (C,), +1 where higher is better, -1 where lower is; ``margins``: (C,)."""
    s = np.where(present, np.nan_to_num(scores * signs, nan=_EMPTY_SCORE), -np.inf)
    return 1.0 / tie_ranks(s, tie, margins)


def _mrr(scores: np.ndarray, present: np.ndarray, ood: np.ndarray, tie: str, signs: np.ndarray,
         margins: np.ndarray | float = TIED_BELOW, settings=None):
    """Per replicate and scheme, MRR over OOD cells and over all cells, of (R, S, C) ``scores``
    (``_reciprocal_ranks``). Absent schemes neither take a rank nor count in a mean, and a cell only
    one scheme is in is no contest (``ranked``, ``settings``: each cell's): it counts for none,
    unless that scheme is the only one of its setting. Returns two (R, S) arrays, NaN where a
    scheme has no such cell."""
    rr = _reciprocal_ranks(scores, present, tie, signs, margins)
    counted = ranked(present, settings)

    def mean_over(mask):
        cnt = mask.sum(axis=1)
        total = np.where(mask, rr, 0.0).sum(axis=2)
        return np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan)

    return mean_over(counted & ood), mean_over(counted)


def ranked(present: np.ndarray, settings=None) -> np.ndarray:
    """(S, C): the cells each scheme is ranked in, those of its cells at least one other scheme
    is in too. A cell no other scheme has (a task only one configuration ran) ranks nothing: a
    rank of 1 there would lift a scheme's MRR for the tasks it alone was run on. A scheme that is
    the only one of its setting (``settings``: each cell's; None: the board is one setting), as on
    a board of one scheme, is ranked in every cell it has: first, with no neighbour, so the board
    has an MRR of 1 rather than none."""
    counted = present & (present.sum(axis=0) >= 2)
    settings = np.zeros(present.shape[1]) if settings is None else np.asarray(settings)
    for setting in np.unique(settings):
        cols = settings == setting
        if present[:, cols].any(axis=1).sum() == 1:  # one scheme in the whole setting
            counted[:, cols] |= present[:, cols]
    return counted


def _cell_settings(lay: Layout) -> list:
    """The setting of each of ``lay``'s cells, as ``ranked`` takes them."""
    return [setting for setting, _, _ in lay.cells]


def _check_tie(tie: str) -> None:
    if tie not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie!r}; valid: {', '.join(TIE_RULES)}")


def _sorted(out: pd.DataFrame) -> pd.DataFrame:
    """Setting by setting (in their order), best OOD MRR first, then all-cells MRR, then name."""
    out = out.assign(_at=out.setting_at if "setting_at" in out else 0)
    return out.sort_values(["_at", "mrr_ood", "mrr_all", "scheme"], ascending=[True, False, False, True],
                           na_position="last").drop(columns="_at").reset_index(drop=True)


def _settings(board: pd.DataFrame, schemes: list) -> pd.DataFrame:
    """``setting, setting_at, name`` of each scheme: where it is ranked and its name there (a
    board without settings: '', 0 and the scheme)."""
    if "setting" not in board:
        return pd.DataFrame({"setting": "", "setting_at": 0, "name": schemes}, index=schemes)
    first = board.groupby("scheme")[["setting", "setting_at", "name"]].first()
    return first.loc[schemes]


def mrr(board: pd.DataFrame, tie: str = "min", margin: float | None = None) -> pd.DataFrame:
    """Per scheme: mean over its (setting, task, eval length) cells of 1 / rank of its mean score
    there, over out-of-distribution cells (eval_len > train_len) and over all cells (Kazemnejad et
    al. 2023). Schemes of different settings never meet in a cell (``boards.setting_labels``).

    ``tie="min"``: tied schemes share the best rank of their group (1, 1, 3); ``tie="average"``:
    they share the mean of the ranks they span (1.5, 1.5, 3). An empty cell (unsupported,
    diverged, failed) ranks below every scheme with a score. A scheme is ranked only in cells
    another scheme is in too (``ranked``), so each MRR compares schemes over the same tasks; the
    one scheme of a board (or of a setting) is ranked first in every cell it has: MRR 1.
    ``margin``: one tie margin for every cell (default: each cell's metric's).
    Columns ``scheme, mrr_ood, mrr_all, cells_ood, cells_all`` (the cells counted), ``ranked_on``
    (the tasks of those cells) and ``setting, setting_at, name``, sorted by setting, then OOD MRR.
    """
    _check_tie(tie)
    lay = _arrays(board, margin)
    m_ood, m_all = _mrr(lay.scores[None], lay.present, lay.ood, tie, lay.signs, lay.margins, _cell_settings(lay))
    counted = ranked(lay.present, _cell_settings(lay))
    tasks = [", ".join(sorted({task for (_, task, _), on in zip(lay.cells, row) if on})) for row in counted]
    out = pd.DataFrame({"scheme": lay.schemes, "mrr_ood": m_ood[0], "mrr_all": m_all[0],
                        "cells_ood": (counted & lay.ood).sum(1), "cells_all": counted.sum(1), "ranked_on": tasks})
    return _sorted(out.join(_settings(board, lay.schemes).reset_index(drop=True)))


def in_order(board: pd.DataFrame, tie: str = "min") -> pd.DataFrame:
    """The board's cells, schemes in the order of the headline MRR (``mrr`` over every run, setting
    by setting, best first), then by task and eval length: the order of leaderboard.csv and of
    ``posbench summary``."""
    if board.empty:
        return board
    at = {scheme: i for i, scheme in enumerate(mrr(board, tie).scheme)}
    return board.sort_values(["scheme", "task", "eval_len"], key=lambda c: c.map(at) if c.name == "scheme" else c,
                             kind="stable", ignore_index=True)


def _mean_of_resampled(v: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, eval lengths): the mean over runs of ``n`` resamples, with replacement, of the runs
    (rows of ``v``, (runs, eval lengths)), a run's eval lengths kept together."""
    x = v[rng.integers(0, len(v), size=(n, len(v)))]
    cnt = (~np.isnan(x)).sum(axis=1)
    return np.where(cnt > 0, np.nansum(x, axis=1) / np.maximum(cnt, 1), np.nan)


def _runs(rows: pd.DataFrame, lay: Layout) -> list[tuple[int, str, np.ndarray, list[int]]]:
    """(scheme index, task, its runs' values (runs, eval lengths), the cell of each eval length)
    for every (scheme, task) of ``rows``, in sorted order (so a seeded bootstrap draws alike)."""
    si = {s: i for i, s in enumerate(lay.schemes)}
    ci = {c: i for i, c in enumerate(lay.cells)}
    out = []
    for (scheme, task), g in rows.groupby(["scheme", "task"], sort=True):
        runs = g.groupby(["run_id", "eval_len"]).value.mean().unstack()  # (runs, eval lengths)
        setting = g.setting.iloc[0] if "setting" in g else ""
        out.append((si[scheme], task, runs.to_numpy(float), [ci[(setting, task, e)] for e in runs.columns]))
    return out


def _seeds_bootstrap(runs: list, lay: Layout, tie: str, reps: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two (reps, S) MRR replicates, each resampling every (scheme, task)'s runs, the tasks fixed."""
    samples = np.full((reps, *lay.scores.shape), np.nan)
    for i, _, v, cols in runs:
        samples[:, i, cols] = _mean_of_resampled(v, reps, rng)
    return _mrr(samples, lay.present, lay.ood, tie, lay.signs, lay.margins, _cell_settings(lay))


def _tasks_bootstrap(runs: list, lay: Layout, tie: str, reps: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two (reps, S) MRR replicates, each drawing the board's T tasks with replacement (T slots),
    then in every slot the runs of each (scheme, task) anew: a replicate's MRR is the mean of a
    scheme's reciprocal ranks over the cells of every slot (a task drawn twice counts twice)."""
    tasks = sorted({task for _, task, _ in lay.cells})
    draws = rng.integers(0, len(tasks), size=(reps, len(tasks)))
    counted = ranked(lay.present, _cell_settings(lay))
    totals = np.zeros((2, reps, len(lay.schemes)))
    counts = np.zeros((2, reps, len(lay.schemes)))
    for t, task in enumerate(tasks):
        slots = np.nonzero(draws == t)[0]  # the replicate of each slot that drew this task
        cols = [j for j, (_, tk, _) in enumerate(lay.cells) if tk == task]
        who = np.nonzero(lay.present[:, cols].any(axis=1))[0]
        samples = np.full((len(slots), len(lay.schemes), len(cols)), np.nan)
        for i, tk, v, where in runs:
            if tk == task:
                samples[:, i, [cols.index(j) for j in where]] = _mean_of_resampled(v, len(slots), rng)
        present = lay.present[np.ix_(who, cols)]
        masks = ((counted & lay.ood)[np.ix_(who, cols)], counted[np.ix_(who, cols)])
        for start in range(0, len(slots), _CHUNK):
            part = slice(start, start + _CHUNK)
            rr = _reciprocal_ranks(samples[part][:, who], present, tie, lay.signs[cols], lay.margins[cols])
            for k, mask in enumerate(masks):
                np.add.at(totals[k], (slots[part][:, None], who[None, :]), np.where(mask, rr, 0.0).sum(axis=2))
                np.add.at(counts[k], (slots[part][:, None], who[None, :]), np.broadcast_to(mask.sum(axis=1), rr.shape[:2]))
    with np.errstate(invalid="ignore"):
        mean = np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
    return mean[0], mean[1]


def mrr_replicates(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min", reps: int = BOOTSTRAP_REPS,
                   seed=BOOTSTRAP_SEED, resample: str = TASKS, margin: float | None = None
                   ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(schemes, OOD MRRs, all-cells MRRs): the MRR of each scheme of ``board`` (``board_of(rows)``)
    in each of ``reps`` bootstrap replicates, two (reps, schemes) arrays, NaN where a scheme has no
    such cell in a replicate. ``resample``: ``TASKS`` draws the tasks with replacement, then every
    (scheme, task)'s runs in ``rows`` (``_tasks_bootstrap``); ``SEEDS`` the runs alone
    (``_seeds_bootstrap``). ``seed``: anything ``np.random.default_rng`` takes; the draws run in a
    fixed order, so a rebuild gives the same replicates. ``margin``: as in ``mrr``."""
    _check_tie(tie)
    if resample not in (TASKS, SEEDS):
        raise ValueError(f"unknown resampling {resample!r}; valid: {TASKS!r}, {SEEDS!r}")
    lay = _arrays(board, margin)
    rng = np.random.default_rng(seed)
    runs = _runs(rows[rows.scheme.isin(lay.schemes)], lay)
    b_ood, b_all = (_tasks_bootstrap if resample == TASKS else _seeds_bootstrap)(runs, lay, tie, reps, rng)
    return lay.schemes, b_ood, b_all


def mrr_intervals(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min", reps: int = BOOTSTRAP_REPS,
                  seed: int = BOOTSTRAP_SEED, resample: str = TASKS, margin: float | None = None) -> pd.DataFrame:
    """``mrr`` of ``board`` (``board_of(rows)``, built once by the caller) with 95 % percentile
    bootstrap intervals (Efron and Tibshirani 1993) of ``mrr_replicates``: each of ``reps``
    replicates resamples the tasks and then every (scheme, task)'s runs in ``rows`` (``resample``),
    recomputes cell means, ranks and both MRRs; a fixed ``seed`` makes it reproducible. The point
    is the MRR of the board's own means (``mrr``), and each interval is widened to contain it where
    the replicates fall to one side of it (``stats.containing``): an MRR near its ceiling (a scheme
    that wins nearly every cell) can only lose ranks under resampling, so the percentile interval
    alone may miss its own point. ``_distinct`` and ``_modal``: how many distinct values the
    replicates take, and how many replicates take the commonest (``stats.distinct``).

    Columns ``scheme, mrr_ood, mrr_ood_low, mrr_ood_high, mrr_ood_distinct, mrr_ood_modal`` and the
    same of ``mrr_all``, then ``cells_ood, cells_all, overlaps_next, ranked_on`` and ``setting,
    setting_at, name``, sorted by setting, then OOD MRR; ``overlaps_next`` says whether a scheme's
    OOD interval overlaps the next-ranked scheme's of its setting ("yes"/"no", "" for the last).
    """
    schemes, b_ood, b_all = mrr_replicates(board, rows, tie, reps, seed, resample, margin)
    out = mrr(board, tie, margin).set_index("scheme").loc[schemes]
    for name, b in (("mrr_ood", b_ood), ("mrr_all", b_all)):
        out[f"{name}_low"], out[f"{name}_high"] = stats.containing(out[name].to_numpy(), *stats.percentile_interval(b))
        out[f"{name}_distinct"], out[f"{name}_modal"] = stats.distinct(b)
    out = _sorted(out.reset_index())
    out["overlaps_next"] = _overlaps_next(out)
    ends = ("", "_low", "_high", "_distinct", "_modal")
    return out[["scheme", *(f"mrr_ood{e}" for e in ends), *(f"mrr_all{e}" for e in ends), "cells_ood", "cells_all",
                "overlaps_next", "ranked_on", "setting", "setting_at", "name"]]


def _overlaps_next(out: pd.DataFrame) -> list[str]:
    """Per row of a sorted MRR table: whether its OOD interval overlaps the next row's of the same
    setting ("yes"/"no"; "" for the last of a setting or where either has no interval)."""
    lo, hi, at = out.mrr_ood_low.to_numpy(), out.mrr_ood_high.to_numpy(), out.setting_at.to_numpy()
    return [("yes" if lo[i] <= hi[i + 1] and lo[i + 1] <= hi[i] else "no")
            if i + 1 < len(out) and at[i] == at[i + 1] and not np.isnan([lo[i], hi[i], lo[i + 1], hi[i + 1]]).any()
            else "" for i in range(len(out))]


def learned_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``primary`` rows of the run/task pairs that have learned their task (``learned``)."""
    return rows[rows.learned.astype(bool)] if "learned" in rows else rows


def learned_counts(board: pd.DataFrame) -> pd.Series:
    """Per scheme, 'k of n': how many of its runs (counted per task) have learned their task."""
    per_task = board.drop_duplicates(["scheme", "task"]).groupby("scheme")[["runs", "not_learned"]].sum()
    return (per_task.runs - per_task.not_learned).astype(int).astype(str) + " of " + per_task.runs.astype(str)


def mrr_every(board: pd.DataFrame, rows: pd.DataFrame, tie: str = "min", reps: int = BOOTSTRAP_REPS,
              seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """The headline MRR table: ``mrr_intervals`` over every run, learned or not: a run that has not
    learned its task is scored as it scored, because failing to learn is a result, and ranking the
    learned runs only would select survivors (a scheme with no learned run would vanish from a
    cell instead of ranking last there). Beside it, the same over the learned runs only (the rows
    of every run/task pair that has not learned dropped before the board is built: columns ending
    ``_learned``; NaN for a scheme with none), and ``learned``: 'k of n' runs learned."""
    every = mrr_intervals(board, rows, tie, reps, seed)
    kept = learned_rows(rows)
    if len(kept) == len(rows):
        learned_only = every
    elif kept.empty:
        learned_only = every[["scheme"]]
    else:
        learned_only = mrr_intervals(boards.board_of(kept), kept, tie, reps, seed)
    ends = ("", "_low", "_high", "_distinct", "_modal")
    named = {f"{m}{e}": f"{m}{LEARNED}{e}" for m in ("mrr_ood", "mrr_all") for e in ends}
    beside = learned_only[["scheme", *(c for c in named if c in learned_only)]].rename(columns=named)
    out = every.merge(beside, on="scheme", how="left").reindex(columns=[*every.columns, *named.values()])
    if "not_learned" in board:
        out["learned"] = out.scheme.map(learned_counts(board))
    return out
