"""Does the ranking hold? The order of the schemes per setting (training length, model width),
Kendall's tau between settings with its bootstrap interval, the schemes whose rank moves, the
one-sentence finding, and breakdowns that never average unlike metrics, from fabricated runs.

Mutation checks: tau_b's numerator negated (discordant minus concordant pairs) in
suite/report/stability.py makes test_the_same_order_in_every_setting_holds and
test_a_reversed_order_gives_tau_minus_one_and_says_so fail; tau_b dividing by every pair (tau-a)
makes test_tau_b_matches_scipy_and_a_hand_count fail; MOVE_LIMIT = 2 makes
test_one_scheme_moving_by_two_breaks_the_ranking_though_tau_agrees fail; boards.setting_labels
ordering by the label's text ('d_model 128' before 'd_model 64'), or boards.model_labels naming the
model without its width (one setting), makes test_a_reversed_order_gives_tau_minus_one_and_says_so
fail; the tau interval without stats.containing, or the bootstrap seeded with None, makes
test_the_bootstrap_interval_contains_its_point_and_rebuilds_byte_identically fail; save keeping an
old board's ranking_by_setting.csv makes test_the_section_appears_only_when_a_setting_varies fail;
breakdown's rows without task and metric (index scheme and setting only), or its schemes labelled
over every setting at once (primary(df) in place of primary of each value's rows), makes
test_breakdowns_never_average_two_metrics_or_two_schemes fail; stability.build ranking every task
of every setting (no shared_tasks filter) makes test_settings_are_compared_on_the_tasks_every_one_holds
fail, and so does shared_tasks reading the learned rows where it reads every row.
"""
import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from suite.report import boards, render, stability
from suite.report.sections import breakdowns, settings
from suite.report.__main__ import main as report_main
from suite.results import store
from tests.conftest import spec_for
from tests.test_report import _row, frame


def _rows(orders: dict, spacing: float = 0.15, offsets=(-0.01, 0.0, 0.01), setting="train_len", task="copy",
          metric="token_accuracy", at_l: float = 1.0) -> list[dict]:
    """Rows of every scheme in ``orders`` ({setting value: schemes best first}) and seed (one per
    offset, so a cell's mean is exactly its base): at L (``at_l``, learned) and at 2L, where the
    k-th scheme scores 0.8 - spacing * k plus the seed's offset. ``setting``: train_len, or
    d_model (the same model name at L=32)."""
    out = []
    for value, order in orders.items():
        length = value if setting == "train_len" else 32
        for k, scheme in enumerate(order):
            for seed, off in enumerate(offsets):
                run = f"{scheme}-{value}-{seed}-{task}"
                for eval_len, v in ((length, at_l), (2 * length, 0.8 - spacing * k + off)):
                    row = _row(run, scheme, seed, task, eval_len, v, metric=metric, config=f"c-{scheme}-{value}",
                               train_len=length)
                    out.append({**row, setting: value})
    return out


def _build(df, **kw):
    """``stability.build`` of a frame's headline rows, as the report's context builds it."""
    return stability.build(boards.primary(df), **kw)


def test_the_same_order_in_every_setting_holds():
    s = _build(frame(_rows({32: list("abcd"), 64: list("abcd"), 128: list("abcd")})))
    assert s["settings"] == ["L=32", "L=64", "L=128"]
    assert s["ranking"].groupby("setting")["rank"].apply(list).to_dict() == {k: [1, 2, 3, 4] for k in s["settings"]}
    assert s["ranking"].set_index(["setting", "scheme"]).mrr_ood[("L=64", "b")] == pytest.approx(0.5)
    taus = s["taus"]
    assert list(zip(taus.setting_a, taus.setting_b)) == [("L=32", "L=64"), ("L=32", "L=128"), ("L=64", "L=128")]
    assert taus.tau.tolist() == [1.0] * 3 and taus.tau_low.tolist() == [1.0] * 3 and taus.tau_high.tolist() == [1.0] * 3
    assert list(taus.agree) == ["yes"] * 3 and s["moves"].empty
    assert s["finding"].startswith("The ranking holds:")
    shown = settings.ranking_display(s)
    assert list(shown.loc["a"]) == ["1 (1.00)"] * 3 and list(shown.index) == ["a", "b", "c", "d"]


def test_a_reversed_order_gives_tau_minus_one_and_says_so():
    """Two widths of one named model, at one training length: the order reverses."""
    s = _build(frame(_rows({128: list("abcd"), 64: list("dcba")}, setting="d_model")))
    assert s["settings"] == ["d_model 64", "d_model 128"]
    assert s["columns"] == ["model"]
    row = s["taus"].iloc[0]
    assert (row.setting_a, row.setting_b, row.schemes) == ("d_model 64", "d_model 128", 4)
    assert (row.tau, row.tau_low, row.tau_high, row.agree) == (-1.0, -1.0, -1.0, "no")
    moves = s["moves"].set_index("scheme")
    assert moves.move.to_dict() == {"a": 3, "d": 3, "b": 1, "c": 1}
    assert (moves.best_in["a"], moves.worst_in["a"]) == ("d_model 128", "d_model 64")
    assert s["finding"] == (
        "The ranking does not hold: these pairs of settings do not order the schemes alike (tau interval not "
        "above 0): d_model 64 vs d_model 128 (tau -1.00; 1 distinct value over 1000 replicates, 1000 at -1.00); and "
        "these schemes' ranks move by more "
        "than 1: a by 3 (1 at d_model 128, 4 at d_model 64); d by 3 (1 at d_model 64, 4 at d_model 128).")


def test_one_scheme_moving_by_two_breaks_the_ranking_though_tau_agrees():
    s = _build(frame(_rows({32: list("abcd"), 64: list("bcad")})))
    ranks = s["ranking"].set_index(["setting", "scheme"])["rank"]
    assert (ranks[("L=32", "a")], ranks[("L=64", "a")]) == (1, 3)
    expected = scipy_stats.kendalltau([4, 3, 2, 1], [2, 4, 3, 1]).statistic  # a, b, c, d: higher MRR is better
    assert s["taus"].tau.iloc[0] == pytest.approx(expected) == pytest.approx(1 / 3)
    assert s["taus"].agree.iloc[0] == "yes"
    assert s["moves"].to_dict("records")[0] == {"scheme": "a", "move": 2, "best_rank": 1, "best_in": "L=32",
                                                "worst_rank": 3, "worst_in": "L=64"}
    assert s["finding"] == ("The ranking does not hold: these schemes' ranks move by more than 1: a by 2 "
                            "(1 at L=32, 3 at L=64).")


def test_tau_b_matches_scipy_and_a_hand_count():
    # by hand: x ties its first two; of the 6 pairs 4 are concordant, 0 discordant, 5 untied in x, 5 in y
    assert stability.tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(4 / 5)
    assert stability.tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx((5 - 1) / 6)
    assert np.isnan(stability.tau_b([1, 1, 1], [1, 2, 3]))  # a complete tie orders nothing
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, size=(50, 7)), rng.integers(0, 4, size=(50, 7))  # many ties
    ours = stability.tau_b(x, y)
    theirs = [scipy_stats.kendalltau(a, b).statistic for a, b in zip(x, y)]
    np.testing.assert_allclose(ours, theirs, equal_nan=True)


def test_the_bootstrap_interval_contains_its_point_and_rebuilds_byte_identically(tmp_path):
    """Six schemes 0.02 apart with seeds 0.1 apart: the point order is the same in both settings
    (tau 1), but resampled seeds reorder them often, so fewer than 2.5 % of replicates reach 1 and
    the percentile interval alone would end below its own point."""
    df = frame(_rows({32: list("abcdef"), 64: list("abcdef")}, spacing=0.02, offsets=(-0.1, 0.0, 0.1)))
    row = _build(df)["taus"].iloc[0]
    assert row.tau == 1.0 and row.tau_high == 1.0 and row.tau_low < 0 <= row.tau_high
    assert row.agree == "no"  # the order agrees, but this board cannot tell it from noise
    one, two = render.write(df, "fx", tmp_path / "one"), render.write(df, "fx", tmp_path / "two")
    for name in ("kendall_tau.csv", "ranking_by_setting.csv", "index.md", "index.html"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    csv = pd.read_csv(one / "kendall_tau.csv")
    assert list(csv.columns) == stability.TAU_COLUMNS and csv.tau_low.iloc[0] == round(row.tau_low, 4)


def _write(folder, rows):
    for run, g in pd.DataFrame(rows).groupby("run_id"):
        run_rows = g.to_dict("records")
        store.write_run(folder, "fx", run, {"run_id": run, "sweep": "fx", "spec": spec_for(run_rows)}, run_rows)
    return folder


def test_the_section_appears_only_when_a_setting_varies(tmp_path, capsys):
    results = _write(tmp_path / "results", _rows({32: list("abc"), 64: list("cba")}))
    assert report_main(["fx", "--results", str(results), "--out", str(tmp_path / "out")]) == 0
    console = capsys.readouterr().out
    assert "Does the ranking hold? The ranking does not hold" in console
    assert "-1.00; 1 distinct value over 1000 replicates, 1000 at -1.00" in console
    out = tmp_path / "out" / "fx"
    md = (out / "index.md").read_text()
    assert "## Does the ranking hold?" in md and "**The ranking does not hold:" in md
    assert "| a        | 1 (1.00) | 3 (0.33) |" in md
    assert 'id="ranking-by-setting"' in (out / "index.html").read_text()
    ranking = pd.read_csv(out / "ranking_by_setting.csv")
    assert ranking.set_index(["setting", "scheme"])["rank"].to_dict() == {
        ("L=32", "a"): 1, ("L=32", "b"): 2, ("L=32", "c"): 3, ("L=64", "c"): 1, ("L=64", "b"): 2, ("L=64", "a"): 3}
    one = frame([r for r in _rows({32: list("abc")})])
    render.write(one, "fx", out)  # a board of one setting: no section, and no old orders left behind
    assert "Does the ranking hold?" not in (out / "index.md").read_text()
    assert not (out / "ranking_by_setting.csv").exists() and not (out / "kendall_tau.csv").exists()
    assert _build(one) is None


def test_breakdowns_never_average_two_metrics_or_two_schemes():
    """Copy (token accuracy, higher is better) and code (bits per byte, lower is better), two
    schemes at two training lengths: each breakdown row is one task, one metric, one scheme at
    one length, the mean over its seeds."""
    rows = (_rows({32: ["rope", "alibi"], 64: ["alibi", "rope"]})
            + _rows({32: ["rope", "alibi"], 64: ["rope", "alibi"]}, task="code", metric="bits_per_byte", at_l=1.5))
    t = breakdowns.breakdown(frame(rows), "train_len")
    assert list(t.index.names) == ["task", "metric", "scheme", "train_len"]
    assert set(zip(t.index.get_level_values("task"), t.index.get_level_values("metric"))) == {
        ("copy", "token_accuracy"), ("code", "bits_per_byte")}
    assert set(t.index.get_level_values("scheme")) == {"rope", "alibi"}  # named without the training length
    assert t.loc[("copy", "token_accuracy", "rope", "64"), "2x train length"] == pytest.approx(0.65)
    assert t.loc[("copy", "token_accuracy", "rope", "32"), "2x train length"] == pytest.approx(0.8)
    assert t.loc[("code", "bits_per_byte", "alibi", "64"), "1x train length"] == pytest.approx(1.5)
    assert len(t) == 8


def test_settings_are_compared_on_the_tasks_every_one_holds():
    """The flagship's way (one task family at 32 tokens, another at 64) is no second setting of any
    task: no section. Where settings share some tasks, only those are ranked and the rest are named.
    A task no run has learned in some setting is compared like any other (every run is ranked);
    the learned-runs protocol before the fair one left it out."""
    reverse = [{**r, "config_hash": r["config_hash"] + "-reverse"} for r in _rows({64: list("cba")}, task="reverse")]
    apart = _rows({32: list("abc")}, task="copy") + reverse
    assert _build(frame(apart)) is None
    mixed = apart + _rows({64: list("abc")}, task="copy")
    s = _build(frame(mixed))
    assert s["tasks"] == ["copy"] and s["left_out"] == ["reverse"]
    assert s["taus"].tau.tolist() == [1.0]  # counted, reverse at 64 (c first) would tie a with c
    assert ("Compared on the tasks every setting holds: copy (reverse left out: absent from some "
            "setting).") in settings.text(s)
    unlearned = [{**r, "config_hash": r["config_hash"] + "-reverse"}
                 for r in _rows({32: list("abc")}, task="reverse", at_l=0.2)]
    s = _build(frame(mixed + unlearned))  # reverse at 32 held, learned by none: compared all the same
    assert s["tasks"] == ["copy", "reverse"] and s["left_out"] == []
    old = _build(frame(mixed + unlearned), runs=stability.LEARNED)
    assert old["tasks"] == ["copy"] and old["left_out"] == ["reverse"] and old["taus"].tau.tolist() == [1.0]
