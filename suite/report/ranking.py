"""Mean Reciprocal Rank across (task x eval length) cells, the ranking of Kazemnejad et al. 2023
("The Impact of Positional Encoding on Length Generalization in Transformers"), over
out-of-distribution cells (their headline) and over all cells.

* ``tie_ranks``: the one notion of a tie: two means closer than their metric's tie margin
  (``suite.data.metrics.Metric.tie_margin``) are tied, here as in the power section.
* ``mrr``: the MRR of a board's cell means; ``mrr_intervals``: with a percentile bootstrap
  interval that resamples each (scheme, task)'s seeds (``mrr_replicates``).
* ``mrr_learned``: the headline MRR table, over the runs that have learned their task
  (``suite.results.has_learned``), with the MRR over every run beside it.

Each cell is ranked by the metric its rows declare (``boards.metric_of``): ``Metric.sign`` makes a
better score larger (a loss counts negated).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from suite.report import boards, stats
from suite.report.choices import TIE_RULES
from suite.data.metrics import TIED_BELOW

BOOTSTRAP_REPS = 1000
BOOTSTRAP_SEED = 0
EVERY_RUN = "_every_run"  # the suffix of the MRR columns computed over every run, learned or not


def _arrays(board: pd.DataFrame):
    """Board as arrays over (scheme, cell): mean scores, presence, out-of-distribution mask, and
    per cell the sign that makes a better score larger (``Metric.sign``: -1 for a loss) and the
    margin below which two means tie (``Metric.tie_margin``), of the metric the cell's rows
    declare; a board without a declaration holds scores where higher is better."""
    schemes = sorted(board.scheme.unique())
    cells = sorted(set(zip(board.task, board.eval_len)))
    si = {s: i for i, s in enumerate(schemes)}
    ci = {c: i for i, c in enumerate(cells)}
    scores = np.full((len(schemes), len(cells)), np.nan)
    present = np.zeros(scores.shape, bool)
    ood = np.zeros(scores.shape, bool)
    signs, margins = np.ones(len(cells)), np.full(len(cells), TIED_BELOW)
    for r in board.itertuples(index=False):
        i, j = si[r.scheme], ci[(r.task, r.eval_len)]
        scores[i, j], present[i, j], ood[i, j] = r.mean, True, r.eval_len > r.train_len
        if hasattr(r, "higher_is_better"):
            metric = boards.metric_of(r)
            signs[j], margins[j] = metric.sign, metric.tie_margin
    return schemes, cells, scores, present, ood, signs, margins


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


def _mrr(scores: np.ndarray, present: np.ndarray, ood: np.ndarray, tie: str, signs: np.ndarray,
         margins: np.ndarray | float = TIED_BELOW):
    """Per replicate and scheme, MRR over OOD cells and over all cells.

    ``scores``: (R, S, C) cell means (NaN: empty cell, ranks below every scheme with a score);
    ``present``/``ood``: (S, C); ``signs``: (C,), +1 where higher is better, -1 where lower is;
    ``margins``: (C,), each cell's tie margin (``tie_ranks``).
    Absent schemes neither take a rank nor count in a mean, and a cell only one scheme is in is
    no contest (``ranked``): it counts for none. Returns two (R, S) arrays, NaN where a scheme has
    no such cell.
    """
    s = np.where(present, np.nan_to_num(scores * signs, nan=_EMPTY_SCORE), -np.inf)
    rr = 1.0 / tie_ranks(s, tie, margins)
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
    schemes, cells, scores, present, ood, signs, margins = _arrays(board)
    m_ood, m_all = _mrr(scores[None], present, ood, tie, signs, margins)
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
    schemes, cells, _, present, ood, signs, margins = _arrays(board)
    samples = _bootstrap_scores(rows, schemes, cells, reps, seed)
    b_ood, b_all = _mrr(samples, present, ood, tie, signs, margins)
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
        learned_only = mrr_intervals(boards.board_of(kept), kept, tie, reps, seed)
    named = {f"{m}{end}": f"{m}{EVERY_RUN}{end}" for m in ("mrr_ood", "mrr_all") for end in ("", "_low", "_high")}
    out = every[["scheme", *named]].rename(columns=named).merge(learned_only, on="scheme", how="left")
    out = out.reindex(columns=[*every.columns, *named.values()])
    out[["cells_ood", "cells_all"]] = out[["cells_ood", "cells_all"]].fillna(0).astype(int)
    out[["overlaps_next", "ranked_on"]] = out[["overlaps_next", "ranked_on"]].astype(object).fillna("")
    # schemes that no learned run ranks come last, in the order of their MRR over every run
    order = ["mrr_ood", "mrr_all", "mrr_ood_every_run", "mrr_all_every_run"]
    return out.sort_values([*order, "scheme"], ascending=[False] * len(order) + [True],
                           na_position="last").reset_index(drop=True)
