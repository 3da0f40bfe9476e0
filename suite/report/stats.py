"""Interval estimates for the leaderboard, each a textbook formula.

* ``t_interval``: the 95 % Student-t interval of a mean over seeds, mean ± t_{0.975, n-1} · s / √n
  (Student 1908; any statistics text, e.g. Wasserman, "All of Statistics", 2004, §6.3.2).
* ``wilson_interval``: the 95 % Wilson score interval of a proportion over n examples (Wilson 1927,
  "Probable inference, the law of succession, and statistical inference"; recommended over the
  Wald interval by Brown, Cai and DasGupta 2001, "Interval Estimation for a Binomial Proportion").
* ``percentile_interval``: the percentile bootstrap interval (Efron and Tibshirani 1993, "An
  Introduction to the Bootstrap", §13.3).
* ``containing``: an interval widened, where needed, to contain its point estimate. The report's
  MRR intervals are percentile intervals made to contain the MRR of the board's own means: MRR
  is a rank statistic with a ceiling, whose replicates can all fall to one side of the point
  (a scheme that wins nearly every cell can only lose ranks when seeds are resampled).

Intervals are clipped to the metric's range (``suite.data.metrics``): [0, 1] for a share,
[0, inf) for a loss; ``bounds`` gives it, [0, 1] by default.
"""
from __future__ import annotations

import math

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
    """(low, high) percentiles (1-level)/2 and (1+level)/2 of bootstrap ``samples`` along ``axis``."""
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], axis=axis)
    return low, high


def containing(point, low, high):
    """(low, high) widened to contain ``point``: (min(low, point), max(high, point)), elementwise;
    NaN where the point or the interval is NaN."""
    point, low, high = (np.asarray(x, dtype=float) for x in (point, low, high))
    return np.minimum(low, point), np.maximum(high, point)
