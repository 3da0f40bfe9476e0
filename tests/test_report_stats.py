"""Report statistics against hand-computed numbers: intervals, MRR over OOD and all cells, the MRR
bootstrap, and the power table.

Mutation checks: in suite/report/stats.py t_interval, n - 1 degrees of freedom -> n makes
test_t_interval_by_hand fail; percentile_interval's tail 100 * (1 - level) / 2 -> 100 * (1 - level)
(a 90 % interval) makes test_percentile_interval_by_hand fail; in suite/report/ranking.py _arrays, a
sign of 1.0 for every cell (a loss ranked highest first) makes
test_a_loss_ranks_lowest_first_and_its_intervals_are_not_clipped_to_one fail."""
import math

import numpy as np
import pytest

from suite.report import boards, ranking, stats
from suite.report.sections.power import power, tied_share
from tests.test_report import _board, _row, frame


def test_t_interval_by_hand():
    # mean 0.7, sd 0.1, t(0.975, 2) = 4.302653: half width 4.302653 * 0.1 / sqrt(3) = 0.248414
    assert stats.t_interval([0.6, 0.7, 0.8]) == pytest.approx((0.451586, 0.948414), abs=1e-6)
    assert stats.t_interval([0.6, 0.7, 0.8, math.nan]) == pytest.approx((0.451586, 0.948414), abs=1e-6)
    # 0.9 ± 12.7062 * 0.141421 / sqrt(2) = 0.9 ± 1.2706: clipped to [0, 1]
    assert stats.t_interval([1.0, 0.8]) == (0.0, 1.0)
    assert stats.t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert all(math.isnan(x) for x in stats.t_interval([0.5]))


def test_wilson_interval_by_hand():
    # 8 of 10: (0.8 + 1.92/10 ± 1.96 * sqrt(0.016 + 3.8415/400)) / (1 + 3.8415/10)
    assert stats.wilson_interval(0.8, 10) == pytest.approx((0.490162, 0.943318), abs=1e-6)
    # 0 of 10: low 0, high z^2/n / (1 + z^2/n) = 0.384146 / 1.384146
    assert stats.wilson_interval(0.0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    assert all(math.isnan(x) for x in stats.wilson_interval(0.5, 0))


def test_mrr_out_of_distribution_and_all_cells_by_hand():
    # train_len 32.  32: c .95 (1), a .9 (2), b .5 (3); 64: b (1), a (2), c (3); 128: b (1), a (2), c empty (3)
    board = _board([
        ("a", "copy", 32, 0.9, 0, 3), ("b", "copy", 32, 0.5, 0, 3), ("c", "copy", 32, 0.95, 0, 3),
        ("a", "copy", 64, 0.2, 0, 3), ("b", "copy", 64, 0.6, 0, 3), ("c", "copy", 64, 0.1, 0, 3),
        ("a", "copy", 128, 0.1, 0, 3), ("b", "copy", 128, 0.3, 0, 3), ("c", "copy", 128, math.nan, 0, 0),
    ])
    got = ranking.mrr(board).set_index("scheme")
    assert got.mrr_ood.to_dict() == pytest.approx({"a": 1 / 2, "b": 1, "c": 1 / 3})
    assert got.mrr_all.to_dict() == pytest.approx({"a": 1 / 2, "b": (1 / 3 + 1 + 1) / 3, "c": (1 + 1 / 3 + 1 / 3) / 3})
    assert list(got.index) == ["b", "a", "c"]  # by OOD MRR; by all cells c (5/9) would precede a (1/2)
    assert set(got.cells_ood) == {2} and set(got.cells_all) == {3}


def _seeded(values):
    """Runs from {scheme: [(value at 32, value at 64, value at 128) per seed]}, copy, train_len 32."""
    rows = []
    for scheme, seeds in values.items():
        for seed, vals in enumerate(seeds):
            rows += [_row(f"{scheme}-{seed}", scheme, seed, "copy", e, v) for e, v in zip((32, 64, 128), vals)]
    return frame(rows)


def test_percentile_interval_by_hand():
    samples = np.arange(1001.0)  # the q-th percentile of 0 .. 1000 is 10 q
    assert stats.LEVEL == 0.95
    assert stats.percentile_interval(samples) == pytest.approx((25.0, 975.0))
    assert stats.percentile_interval(samples, level=0.5) == pytest.approx((250.0, 750.0))
    low, high = stats.percentile_interval(np.stack([samples, 2 * samples], axis=1))  # per column
    assert list(low) == pytest.approx([25.0, 50.0]) and list(high) == pytest.approx([975.0, 1950.0])


def test_the_mrr_bootstrap_interval_is_the_95_percent_percentile_interval_of_its_replicates(monkeypatch):
    df = _seeded({"a": [(0.9, 0.5, 0.2), (0.8, 0.7, 0.4), (1.0, 0.3, 0.1)],
                  "b": [(0.7, 0.6, 0.3), (0.9, 0.4, 0.3), (0.8, 0.5, 0.2)]})
    seen = []
    real = stats.percentile_interval

    def spy(samples, *args, **kwargs):
        seen.append(np.asarray(samples))
        return real(samples, *args, **kwargs)

    monkeypatch.setattr(stats, "percentile_interval", spy)
    got = ranking.mrr_intervals(boards.leaderboard(df), boards.primary(df), reps=400).set_index("scheme")
    replicates = seen[0]  # OOD MRR, (reps, schemes) in the board's scheme order
    order = sorted(got.index)
    for i, scheme in enumerate(order):
        assert got.loc[scheme, "mrr_ood_low"] == pytest.approx(np.percentile(replicates[:, i], 2.5))
        assert got.loc[scheme, "mrr_ood_high"] == pytest.approx(np.percentile(replicates[:, i], 97.5))


def test_bootstrap_interval_contains_the_estimate_and_is_reproducible():
    df = _seeded({"a": [(0.9, 0.5, 0.2), (0.8, 0.7, 0.4), (1.0, 0.3, 0.1)],
                  "b": [(0.7, 0.6, 0.3), (0.9, 0.4, 0.3), (0.8, 0.5, 0.2)],
                  "c": [(0.6, 0.1, 0.0), (0.5, 0.2, 0.0), (0.7, 0.0, 0.0)]})
    got = ranking.mrr_intervals(boards.leaderboard(df), boards.primary(df), reps=300)
    for name in ("mrr_ood", "mrr_all"):
        assert (got[f"{name}_low"] <= got[name]).all() and (got[name] <= got[f"{name}_high"]).all()
    assert (got.mrr_ood_low < got.mrr_ood_high).any()  # the seeds disagree: some interval has width
    assert got.equals(ranking.mrr_intervals(boards.leaderboard(df), boards.primary(df), reps=300))
    point = ranking.mrr(boards.leaderboard(df))
    assert got[["scheme", "mrr_ood", "mrr_all"]].equals(point[["scheme", "mrr_ood", "mrr_all"]])
    # c is last in every replicate (below a and b at every length in every seed): OOD MRR exactly 1/3
    c = got.set_index("scheme").loc["c"]
    assert c.mrr_ood_low == c.mrr_ood_high == pytest.approx(1 / 3)
    # the last row has no next
    assert got.overlaps_next.iloc[-1] == "" and set(got.overlaps_next.iloc[:-1]) <= {"yes", "no"}


def test_bootstrap_is_degenerate_when_every_seed_agrees():
    df = _seeded({"a": [(0.9, 0.5, 0.2)] * 3, "b": [(0.8, 0.6, 0.3)] * 3, "c": [(0.5, 0.1, 0.0)] * 2})
    got = ranking.mrr_intervals(boards.leaderboard(df), boards.primary(df), reps=200)
    assert (got.mrr_ood_low == got.mrr_ood).all() and (got.mrr_ood_high == got.mrr_ood).all()
    assert (got.mrr_all_low == got.mrr_all).all() and (got.mrr_all_high == got.mrr_all).all()
    assert got.set_index("scheme").mrr_ood.to_dict() == pytest.approx({"a": 1 / 2, "b": 1, "c": 1 / 3})
    assert list(got.overlaps_next) == ["no", "no", ""]


def test_bootstrap_keeps_a_runs_eval_lengths_together():
    # a's seed 0 wins both OOD lengths, seed 1 loses both: a resample never mixes them
    df = _seeded({"a": [(0.5, 1.0, 1.0), (0.5, 0.0, 0.0)], "b": [(0.5, 0.5, 0.5)] * 2})
    lay = ranking._arrays(boards.leaderboard(df))
    runs = {lay.schemes[i]: (v, cols) for i, _, v, cols in ranking._runs(boards.primary(df), lay)}
    v, cols = runs["a"]
    x = ranking._mean_of_resampled(v, 200, np.random.default_rng(0))  # (reps, eval lengths)
    c64, c128 = cols.index(lay.cells.index(("", "copy", 64))), cols.index(lay.cells.index(("", "copy", 128)))
    assert np.array_equal(x[:, c64], x[:, c128]) and len(set(x[:, c64])) == 3


def test_power_by_hand():
    board = _board([
        # copy: 32 tied (.905 - .9 < .01); 64 spread .6 - .1 = .5; 128 .3 - .1, not tied
        ("a", "copy", 32, 0.9, 0, 3), ("b", "copy", 32, 0.905, 0, 3), ("c", "copy", 32, 0.9, 0, 3),
        ("a", "copy", 64, 0.2, 0, 3), ("b", "copy", 64, 0.6, 0, 3), ("c", "copy", 64, 0.1, 0, 3),
        ("a", "copy", 128, 0.1, 0, 3), ("b", "copy", 128, 0.3, 0, 3), ("c", "copy", 128, math.nan, 0, 0),
        # rank: 32 and 64 tied; 128 has one scheme with a value: no cell
        ("a", "rank", 32, 0.5, 0, 3), ("b", "rank", 32, 0.5, 0, 3), ("a", "rank", 64, 0.5, 0, 3),
        ("b", "rank", 64, 0.5, 0, 3), ("a", "rank", 128, 0.4, 0, 3), ("b", "rank", 128, math.nan, 0, 0),
    ]).assign(metric="m")
    p = power(board).set_index("task")
    assert p.loc["copy", "first_ood_len"] == 64 and p.loc["copy", "spread"] == pytest.approx(0.5)
    assert (p.loc["copy", "tied_cells"], p.loc["copy", "cells"]) == (1, 3)
    assert p.loc["copy", "tied_share"] == pytest.approx(1 / 3)
    assert p.loc["rank", "spread"] == 0 and (p.loc["rank", "tied_cells"], p.loc["rank", "cells"]) == (2, 2)
    assert tied_share(power(board)) == pytest.approx(3 / 5)


def test_a_loss_ranks_lowest_first_and_its_intervals_are_not_clipped_to_one():
    # two seeds each, at L = 32 and 2L: low is better. alibi: 5.0, 5.4 (mean 5.2, sd 0.282843);
    # t(0.975, 1) = 12.706205: half width 12.706205 * 0.282843 / sqrt(2) = 2.541241
    rows = [_row(f"{s}-{seed}", s, seed, "copy", e, v + (1.0 if e == 64 else 0.0), metric="loss")
            for s, values in (("alibi", (5.0, 5.4)), ("rope", (2.0, 2.2))) for seed, v in enumerate(values)
            for e in (32, 64)]
    df = frame(rows)
    board = boards.leaderboard(df, "loss")
    cell = board[(board.scheme == "alibi") & (board.eval_len == 32)].iloc[0]
    assert cell["mean"] == pytest.approx(5.2) and (cell.ci_low, cell.ci_high) == pytest.approx((2.658759, 7.741241), abs=1e-6)
    wide = board[(board.scheme == "rope") & (board.eval_len == 32)].iloc[0]  # 2.1 - 1.270620 > 0: not clipped at 0
    assert (wide.ci_low, wide.ci_high) == pytest.approx((0.829380, 3.370620), abs=1e-6)
    m = ranking.mrr(board)
    assert list(m.scheme) == ["rope", "alibi"] and list(m.mrr_ood) == [1.0, 0.5] and list(m.mrr_all) == [1.0, 0.5]
    assert boards.scheme_order(board) == ["rope", "alibi"]
    assert list(ranking.mrr_intervals(boards.leaderboard(df, "loss"), boards.primary(df, "loss")).scheme) == ["rope", "alibi"]
    # a share still ranks highest first on the same board code
    shares = boards.leaderboard(frame([{**r, "metric": "token_accuracy", "value": r["value"] / 10} for r in rows]))
    assert list(ranking.mrr(shares).scheme) == ["alibi", "rope"]
