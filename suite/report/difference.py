"""The difference between two leaderboard cells of one configuration (``posbench compare``), and
its verdict.

* ``welch_interval``: the difference of means over seeds, ``mean(a) - mean(b)``, with Welch's
  two-sample t interval (Welch 1947, "The generalization of 'Student's' problem when several
  different population variances are involved"): d ± t_{(1+level)/2, ν} · se, where
  se² = s_a²/n_a + s_b²/n_b (sample variances, ddof 1) and ν is the Welch-Satterthwaite degrees of
  freedom se⁴ / ((s_a²/n_a)²/(n_a-1) + (s_b²/n_b)²/(n_b-1)). It does not assume equal spread, and a
  seed is not paired with the seed of the same number (two sweeps' seed 0 are independent draws
  once the code differs). Not clipped: a difference may be negative. When neither side varies
  the interval is the difference itself.
* One seed on one side (a single rerun against a cell of n ≥ 2 seeds): the single value is judged
  as one more draw from the other side, with the normal prediction interval of one draw: d ± t_{(1+level)/2,
  n-1} · s · √(1 + 1/n), s and n the other side's (Hahn and Meeker 1991, "Statistical Intervals: A
  Guide for Practitioners"). One seed on both sides: no spread to estimate and no interval (NaN).
* ``verdict``: ``same`` when both cells hold identical values (the same runs, or reruns that
  reproduced every number); else ``better`` or ``worse`` for ``a`` when the interval excludes 0,
  read with the metric's stored direction (``higher_is_better``; bits per byte and losses are lower
  is better); ``higher`` / ``lower`` for a measurement with no better direction; ``not separated``
  when the interval holds 0; ``too few seeds`` when there is no interval (one seed on each side);
  ``no value`` when a side has no score.
"""
from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95
VERDICTS = ("same", "better", "worse", "higher", "lower", "not separated", "too few seeds", "no value")


def _finite(values) -> np.ndarray:
    v = np.asarray(list(values), dtype=float)
    return v[np.isfinite(v)]


def welch_interval(a, b, level: float = LEVEL) -> tuple[float, float, float]:
    """(difference, low, high): mean(a) - mean(b) over the finite values of each, and its Welch
    t interval at ``level`` (a prediction interval when one side has one value); NaN difference
    when a side has no value, NaN bounds when each side has one."""
    from scipy import stats  # imported when a difference is taken, so --help loads no scipy

    a, b = _finite(a), _finite(b)
    if not len(a) or not len(b):
        return math.nan, math.nan, math.nan
    diff = float(a.mean() - b.mean())
    if len(a) < 2 and len(b) < 2:
        return diff, math.nan, math.nan
    if len(a) < 2 or len(b) < 2:  # one draw against the spread of the other side's seeds
        many = b if len(a) < 2 else a
        half = float(stats.t.ppf((1 + level) / 2, len(many) - 1)) * many.std(ddof=1) * math.sqrt(1 + 1 / len(many))
        return diff, diff - half, diff + half
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stats.t.ppf((1 + level) / 2, dof)) * se
    return diff, diff - half, diff + half


def same_values(a, b) -> bool:
    """Whether the two cells hold the same values, seed order aside (and at least one)."""
    a, b = np.sort(_finite(a)), np.sort(_finite(b))
    return len(a) > 0 and len(a) == len(b) and bool(np.array_equal(a, b))


def verdict(a, b, higher_is_better, level: float = LEVEL) -> str:
    """How cell ``a`` does against cell ``b`` (``VERDICTS``; see the module docstring)."""
    if same_values(a, b):
        return "same"
    diff, low, high = welch_interval(a, b, level)
    if math.isnan(diff):
        return "no value"
    if math.isnan(low):
        return "too few seeds"
    if low <= 0 <= high:
        return "not separated"
    above = low > 0  # a scores higher than b
    if higher_is_better is None or (isinstance(higher_is_better, float) and math.isnan(higher_is_better)):
        return "higher" if above else "lower"
    return "better" if above == bool(higher_is_better) else "worse"
