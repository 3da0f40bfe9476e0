"""The difference of two cells that ``posbench compare`` prints (suite/report/difference.py):
Welch's t interval of the difference of means over seeds, and the verdict read with the metric's
direction.

Mutation checks are named in each test's docstring."""
import math

import pytest
from scipy import stats

from suite.report.difference import same_values, verdict, welch_interval


def test_the_welch_interval_equals_the_hand_computation():
    """a = (0.9, 0.8, 1.0), b = (0.5, 0.7, 0.6, 0.4): d = 0.9 - 0.55 = 0.35; s_a²/n_a = 0.01/3,
    s_b²/n_b = (0.05/3)/4; se² = 0.0075; ν = 0.0075² / ((0.01/3)²/2 + (0.05/12)²/3) = 4.9592;
    half = t_{0.975, ν} · se = 2.5770 · 0.0866 = 0.2232. The same as scipy's Welch test.

    Mutation check: Student's degrees of freedom (ν = n_a + n_b - 2 = 5) in place of Welch's makes
    this fail; so does the difference taken as mean(b) - mean(a)."""
    a, b = [0.9, 0.8, 1.0], [0.5, 0.7, 0.6, 0.4]
    diff, low, high = welch_interval(a, b)
    va, vb = 0.01 / 3, (0.05 / 3) / 4
    nu = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3)
    assert nu == pytest.approx(4.959183673)
    half = stats.t.ppf(0.975, nu) * math.sqrt(va + vb)
    assert diff == pytest.approx(0.35)
    assert (low, high) == (pytest.approx(0.35 - half), pytest.approx(0.35 + half))
    assert (low, high) == (pytest.approx(0.12683, abs=1e-5), pytest.approx(0.57317, abs=1e-5))
    scipy_ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (low, high) == (pytest.approx(scipy_ci.low), pytest.approx(scipy_ci.high))


def test_one_seed_against_several_is_judged_by_the_prediction_interval_of_one_draw():
    """0.9 against (0.5, 0.7, 0.6): d = 0.3, s = 0.1, n = 3: d ± t_{0.975, 2} · 0.1 · √(1 + 1/3) =
    0.3 ± 4.302653 · 0.1154701 = 0.3 ± 0.4968276; the same with the sides swapped, negated.

    Mutation check: Welch's se with the single seed's variance taken as 0 (s · √(1/n)) makes this
    fail; so does t with n degrees of freedom."""
    half = 4.302653 * 0.1 * math.sqrt(4 / 3)
    diff, low, high = welch_interval([0.9], [0.5, 0.7, 0.6])
    assert (diff, low, high) == (pytest.approx(0.3), pytest.approx(0.3 - half), pytest.approx(0.3 + half))
    assert welch_interval([0.5, 0.7, 0.6], [0.9]) == (pytest.approx(-0.3), pytest.approx(-0.3 - half),
                                                     pytest.approx(-0.3 + half))


def test_no_spread_one_seed_each_and_no_value():
    """Neither side varies: the interval is the difference itself; one seed on each side: no
    interval; no finite value on a side: no difference (NaN is dropped, not averaged).

    Mutation check: dropping the ``se == 0`` case (a NaN ν) makes the first assertion fail;
    dropping the NaN filter in ``_finite`` makes the last fail."""
    assert welch_interval([1.0, 1.0, 1.0], [0.5, 0.5]) == (0.5, 0.5, 0.5)
    diff, low, high = welch_interval([0.7], [0.5])
    assert diff == pytest.approx(0.2) and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(x) for x in welch_interval([math.nan], [0.5, 0.6]))
    assert welch_interval([0.8, math.nan, 0.6], [0.5, 0.5])[0] == pytest.approx(0.2)


@pytest.mark.parametrize("a, b, higher_is_better, expected", [
    ((0.4, 0.2, 0.3), (0.2, 0.3, 0.4), True, "same"),  # the same values in another seed order
    ((0.9, 0.8, 1.0), (0.5, 0.7, 0.6), True, "better"),
    ((0.5, 0.7, 0.6), (0.9, 0.8, 1.0), True, "worse"),
    ((1.10, 1.20, 1.15), (1.60, 1.70, 1.65), False, "better"),  # bits per byte: lower is better
    ((1.60, 1.70, 1.65), (1.10, 1.20, 1.15), False, "worse"),
    ((0.9, 0.95, 1.0), (0.92, 0.97, 0.95), True, "not separated"),
    ((0.9, 0.8, 1.0), (0.5, 0.7, 0.6), None, "higher"),  # a measurement: no better direction
    ((0.9,), (0.7,), True, "too few seeds"),
    ((0.9,), (0.5, 0.7, 0.6), True, "not separated"),  # one rerun within the prediction interval
    ((0.95,), (0.5, 0.52, 0.48), True, "better"),  # one rerun outside it
    ((0.5, 0.52, 0.48), (0.95,), True, "worse"),
    ((0.9,), (0.9,), True, "same"),
    ((math.nan,), (0.5, 0.7), True, "no value"),
])
def test_each_verdict(a, b, higher_is_better, expected):
    """Mutation check: ``verdict`` ignoring ``higher_is_better`` (better whenever a is higher)
    makes the two bits-per-byte cases fail; dropping the ``same_values`` check makes the first
    and the one-seed 'same' case fail ('not separated', 'too few seeds'); deleting the not-separated
    branch makes 'not separated' fail ('better')."""
    assert verdict(a, b, higher_is_better) == expected


def test_same_needs_the_same_number_of_values():
    """Mutation check: comparing the sets of values (not their sorted lists) makes this fail."""
    assert same_values((1.0, 1.0, 0.5), (1.0, 0.5, 1.0))
    assert not same_values((1.0, 1.0, 0.5), (1.0, 0.5))
    assert not same_values((), ())
