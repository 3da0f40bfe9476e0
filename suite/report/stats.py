"""Interval estimates for the leaderboard, each a textbook formula.

* ``t_interval``: the 95 % Student-t interval of a mean over seeds, mean ± t_{0.975, n-1} · s / √n
  (Student 1908; any statistics text, e.g. Wasserman, "All of Statistics", 2004, §6.3.2).
* ``wilson_interval``: the 95 % Wilson score interval of a proportion over n examples (Wilson 1927,
  "Probable inference, the law of succession, and statistical inference"; recommended over the
  Wald interval by Brown, Cai and DasGupta 2001, "Interval Estimation for a Binomial Proportion").
* ``percentile_interval``: the percentile bootstrap interval (Efron and Tibshirani 1993, "An
  Introduction to the Bootstrap", §13.3).
* ``distinct`` and ``interval_text``: how many distinct values bootstrap replicates take, and an
  interval written so that a discrete bootstrap reads as one: a rank statistic over few schemes
  takes few values, and a percentile interval of replicates that nearly all agree, '[0.87, 0.87]',
  would read as a precise estimate; it is written '0.87; 3 distinct values over 1000 replicates,
  979 at 0.87' instead.
* ``containing``: an interval widened, where needed, to contain its point estimate. The report's
  MRR intervals are percentile intervals made to contain the MRR of the board's own means: MRR
  is a rank statistic with a ceiling, whose replicates can all fall to one side of the point
  (a scheme that wins nearly every cell can only lose ranks when seeds are resampled).

Intervals are clipped to the metric's range (``suite.data.metrics``): [0, 1] for a share,
[0, inf) for a loss; ``bounds`` gives it, [0, 1] by default.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

LEVEL = 0.95


SHARE = (0.0, 1.0)


def _clip(x: float, bounds: tuple[float, float] = SHARE) -> float:
    return min(bounds[1], max(bounds[0], x))


def t_interval(values, level: float = LEVEL, bounds: tuple[float, float] = SHARE) -> tuple[float, float]:
    """(low, high) of mean ± t_{(1+level)/2, n-1} · sd / √n over the non-NaN ``values``, clipped
    to ``bounds``; NaN for fewer than two values (no spread to estimate)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) < 2:
        return math.nan, math.nan
    mean, sd = v.mean(), v.std(ddof=1)
    half = stats.t.ppf((1 + level) / 2, len(v) - 1) * sd / math.sqrt(len(v))
    return _clip(mean - half, bounds), _clip(mean + half, bounds)


def wilson_interval(p: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """(low, high) of the Wilson score interval for a share ``p`` observed over ``n`` examples:
    (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n), z the (1+level)/2 normal quantile."""
    if n is None or not n > 0 or math.isnan(p):
        return math.nan, math.nan
    z = stats.norm.ppf((1 + level) / 2)
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denom = 1 + z * z / n
    return _clip((centre - half) / denom), _clip((centre + half) / denom)


def percentile_interval(samples, level: float = LEVEL, axis: int = 0):
    """(low, high) percentiles (1-level)/2 and (1+level)/2 of bootstrap ``samples`` along ``axis``,
    NaN replicates left out (a replicate that drew none of a scheme's tasks has no MRR for it);
    NaN where every replicate is NaN."""
    tail = 100 * (1 - level) / 2
    samples = np.asarray(samples, dtype=float)
    if samples.size == 0:  # no scheme, or no replicate: nothing to take a percentile of
        empty = np.full(np.delete(samples.shape, axis), np.nan)
        return empty, empty.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: NaN, said by the caller
        low, high = np.nanpercentile(samples, [tail, 100 - tail], axis=axis)
    return low, high


DISCRETE_BELOW = 10  # replicates taking fewer distinct values than this are reported as discrete
_SAME = 12  # decimals below which two replicate values are one (sums of reciprocal ranks summed apart)


def distinct(samples) -> tuple[np.ndarray, np.ndarray]:
    """(distinct, modal) per column of (reps, k) bootstrap ``samples``: how many distinct values the
    non-NaN replicates take (rounded to 12 decimals), and how many replicates take the commonest."""
    x = np.round(np.asarray(samples, dtype=float).reshape(len(samples), -1), _SAME)
    counts = [np.unique(col[~np.isnan(col)], return_counts=True)[1] for col in x.T]
    return (np.array([len(c) for c in counts], dtype=int),
            np.array([c.max() if len(c) else 0 for c in counts], dtype=int))


def interval_text(point: float, low: float, high: float, n_distinct: int, modal: int, reps: int,
                  digits: int = 2) -> str:
    """'0.62 [0.55, 0.70]'; with '; 6 distinct values over 1000 replicates' where the replicates
    take fewer than ``DISCRETE_BELOW`` values; and for an interval of zero width, no interval but
    '0.87; 3 distinct values over 1000 replicates, 979 at 0.87': a bootstrap that nearly always
    gives one value is no precise interval. '-' for no point; '0.62 (no interval)' for none."""
    if point is None or math.isnan(point):
        return "-"
    p = f"{point:.{digits}f}"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{p} (no interval)"
    n_distinct, modal, reps = int(n_distinct), int(modal), int(reps)  # counts read from a float column (NaN beside them)
    values = f"{n_distinct} distinct value{'s' if n_distinct != 1 else ''} over {reps} replicates"
    if high - low <= 0:
        return f"{p}; {values}, {modal} at {low:.{digits}f}"
    if n_distinct < DISCRETE_BELOW:
        return f"{p} [{low:.{digits}f}, {high:.{digits}f}]; {values}"
    return f"{p} [{low:.{digits}f}, {high:.{digits}f}]"


def containing(point, low, high):
    """(low, high) widened to contain ``point``: (min(low, point), max(high, point)), elementwise;
    NaN where the point or the interval is NaN."""
    point, low, high = (np.asarray(x, dtype=float) for x in (point, low, high))
    return np.minimum(low, point), np.maximum(high, point)
