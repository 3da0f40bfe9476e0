"""Steps to learn in each report (a section of index.md and index.html, and steps_to_learn.csv),
and the headline MRR over every run with the MRR over the learned runs beside it.

Mutation checks: ``steps_table`` in suite/report/sections/steps.py averaging every stored
``steps_to_learn`` (``g.steps.dropna()``, not only the learned runs') makes
test_steps_to_learn_by_hand_over_the_runs_that_learned fail, and so does its ``t_interval`` without
``bounds=(0.0, math.inf)`` (clipped to [0, 1]); ``Steps.blocks`` without the "Steps to learn"
heading, or ``Steps.csvs`` without steps_to_learn.csv, makes
test_a_report_with_checks_has_the_section_and_one_without_has_none fail, and so does
``render.save`` leaving a stale steps_to_learn.csv behind; ``mrr_every`` in suite/report/ranking.py
building its headline from the learned ``kept`` rows (the protocol before the fair one (docs/protocol.md)), or its
learned-runs column from every row, makes
test_the_headline_mrr_ranks_every_run_with_the_learned_runs_beside_it fail, and so do
``learned_counts`` counting the runs not learned, ``learned_leader`` in
suite/report/sections/verdict.py returning '' and ``mrr_display`` without its "MRR (OOD), learned
runs" column; ``headline`` without its not-learned sentence makes
test_a_board_whose_runs_never_learned_is_ranked_all_the_same fail."""
import math

import pandas as pd
import pytest

from suite.report import boards, render
from suite.report.sections import steps
from suite.report.sections.mrr import mrr_display
from suite.report.__main__ import main as report_main
from suite.results import store
from tests.criterion_runs import criterion_metrics, write_runs  # noqa: F401 (a fixture)
from tests.conftest import PRE_CRITERION

# copy trained at 32 for 200 steps, cap 4 x 200 = 800 steps
STEP_RUNS = [
    ("rope-0", "rope", 0, "copy", {32: 1.0, 64: 0.5}, 0.95, 250),
    ("rope-1", "rope", 1, "copy", {32: 1.0, 64: 0.4}, 0.96, 375),
    ("rope-2", "rope", 2, "copy", {32: 1.0, 64: 0.3}, 0.97, 500),
    ("rope-3", "rope", 3, "copy", {32: 0.9, 64: 0.2}, 0.85, 125),   # passed at 125, then fell below: not learned
    ("nope-0", "nope", 0, "copy", {32: 1.0, 64: 0.1}, 0.91, 125),
    ("nope-1", "nope", 1, "copy", {32: 0.3, 64: 0.1}, 0.40, None),  # never passed within the cap
    ("nope-2", "nope", 2, "copy", {32: 1.0, 64: 0.1}, None, None),  # no checks: a fixed budget, no row
]


def _load(tmp_path, runs, **kw):
    return store.load(write_runs(tmp_path, runs, **kw))


def test_steps_to_learn_by_hand_over_the_runs_that_learned(tmp_path, criterion_metrics):  # noqa: F811
    df = _load(tmp_path, STEP_RUNS, steps=200)
    t = steps.steps_table(df, boards.primary(df)).set_index("scheme")
    # rope: 250, 375, 500 -> mean 375, sd 125, 375 ± t(0.975, 2) 4.3027 * 125 / sqrt(3) = 375 ± 310.517
    assert t.loc["rope", "mean"] == 375 and (t.loc["rope", "n"], t.loc["rope", "never"], t.loc["rope", "runs"]) == (3, 1, 4)
    assert (t.loc["rope", "ci_low"], t.loc["rope", "ci_high"]) == pytest.approx((64.483, 685.517), abs=1e-3)
    # nope: one run learned at 125 (no interval from one run), one never; the run without checks has no place
    assert t.loc["nope", "mean"] == 125 and (t.loc["nope", "n"], t.loc["nope", "never"], t.loc["nope", "runs"]) == (1, 1, 2)
    assert math.isnan(t.loc["nope", "ci_low"]) and set(t.cap_steps) == {"800"}
    assert list(t.index) == ["nope", "rope"]  # fewest steps first
    shown = steps.display(t.reset_index()).set_index("scheme")
    assert shown.loc["rope", "steps to learn [95 % interval]"] == "375 [64, 686]"
    assert shown.loc["nope", "steps to learn [95 % interval]"] == "125 (n=1)"
    assert shown.loc["rope", "never learned"] == "1 of 4 never learned (cap 800 steps)"


def test_a_report_with_checks_has_the_section_and_one_without_has_none(tmp_path, criterion_metrics):  # noqa: F811
    out = tmp_path / "reports" / "cr"
    assert report_main(["cr", "--results", str(write_runs(tmp_path / "r", STEP_RUNS, steps=200).parent),
                        "--out", str(tmp_path / "reports")]) == 0
    md, page = (out / "index.md").read_text(), (out / "index.html").read_text()
    assert "## Steps to learn" in md and "| rope     | copy   | 375 [64, 686]" in md
    assert "1 of 4 never learned (cap 800 steps)" in md and "1 of 2 never learned (cap 800 steps)" in md
    assert "<h2>Steps to learn</h2>" in page and 'id="steps"' in page and "375 [64, 686]" in page
    csv = pd.read_csv(out / "steps_to_learn.csv")
    assert list(csv.columns) == steps.COLUMNS
    assert csv.set_index("scheme").loc["rope", ["mean", "ci_low", "ci_high", "n", "never", "runs"]].tolist() == \
        pytest.approx([375, 64.4828, 685.5172, 3, 1, 4], abs=1e-4)
    # the same folder rebuilt from runs without checks (a fixed budget, or rows shipped before the protocol)
    plain = [(r, s, seed, t, scores, None, None) for r, s, seed, t, scores, _, _ in STEP_RUNS]
    assert report_main(["cr", "--results", str(write_runs(tmp_path / "p", plain, steps=200).parent),
                        "--out", str(tmp_path / "reports")]) == 0
    md, page = (out / "index.md").read_text(), (out / "index.html").read_text()
    assert "Steps to learn" not in md and "Steps to learn" not in page
    assert not (out / "steps_to_learn.csv").exists()  # a stale table does not linger


def test_shipped_rows_build_no_steps_table():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = store.load(PRE_CRITERION)
    r = render.build(df, "default")
    assert "steps" not in r and "Steps to learn" not in render.markdown(r)


# copy at 32 (L) and 64 (OOD), every run with checks: b-1, c-0 and d-0 have not learned (check below 0.9)
MRR_RUNS = [
    ("a-0", "a", 0, "copy", {32: 1.0, 64: 0.5}, 0.95, 125),
    ("a-1", "a", 1, "copy", {32: 1.0, 64: 0.5}, 0.95, 125),
    ("b-0", "b", 0, "copy", {32: 1.0, 64: 0.3}, 0.95, 125),
    ("b-1", "b", 1, "copy", {32: 0.2, 64: 0.9}, 0.30, None),
    ("c-0", "c", 0, "copy", {32: 0.1, 64: 0.95}, 0.10, None),
    ("d-0", "d", 0, "copy", {32: 0.1, 64: 0.99}, 0.10, None),
]


def test_the_headline_mrr_ranks_every_run_with_the_learned_runs_beside_it(tmp_path, criterion_metrics):  # noqa: F811
    df = _load(tmp_path, MRR_RUNS)
    r = render.build(df, "cr")
    m = r["mrr"].set_index("scheme")
    # every run, at 64: d 0.99 (1), c 0.95 (2), b (0.3 + 0.9) / 2 = 0.6 (3), a 0.5 (4)
    assert m.mrr_ood.to_dict() == pytest.approx({"a": 1 / 4, "b": 1 / 3, "c": 1 / 2, "d": 1})
    # learned runs: c's and d's only runs have not learned (their cells are absent); at 64 a 0.5 (1),
    # b 0.3 (2); at 32 a and b both 1.0 (tied, rank 1)
    assert m.mrr_ood_learned.loc[["a", "b"]].tolist() == pytest.approx([1, 1 / 2])
    assert m.mrr_ood_learned[["c", "d"]].isna().all()
    assert m.mrr_all_learned.loc[["a", "b"]].tolist() == pytest.approx([1, (1 + 1 / 2) / 2])
    assert (m.cells_ood["c"], m.cells_all["c"]) == (1, 2)  # c ranks in every cell it has
    assert m.learned.to_dict() == {"a": "2 of 2", "b": "1 of 2", "c": "0 of 1", "d": "0 of 1"}
    assert list(r["mrr"].scheme) == ["d", "c", "b", "a"]  # by the MRR over every run
    said = r["verdict"]["verdict"]
    assert said.startswith("d ranks first by MRR beyond the training length") and "ahead of c" in said
    assert "Over the learned runs only, a would rank first (1.00" in said
    assert "3 of 6 runs have not learned their task; they are ranked as they scored" in said
    shown = mrr_display(r["mrr"]).set_index("scheme")
    assert shown.loc["c", "MRR (OOD), learned runs"] == "-" and shown.loc["c", "MRR (OOD)"].startswith("0.50")
    assert shown.loc["a", "MRR (OOD)"].startswith("0.25") and shown.loc["b", "runs learned"] == "1 of 2"
    # the task's table holds every run, with the mark and the count of runs learned
    table = boards.pivot(r["board"], "copy")
    assert "c (1 of 1 not learned)" in table.index and table.loc["c (1 of 1 not learned)", "runs learned"] == "0 of 1"


def test_where_every_run_has_learned_both_mrrs_agree(tmp_path, criterion_metrics):  # noqa: F811
    learned_all = [(*run[:5], 0.95, 125) for run in MRR_RUNS]
    r = render.build(_load(tmp_path, learned_all), "cr")
    m = r["mrr"]
    for name in ("mrr_ood", "mrr_all"):
        for end in ("", "_low", "_high"):
            assert m[name + end].tolist() == m[f"{name}_learned{end}"].tolist()
    assert "not learned" not in r["verdict"]["verdict"] and "learned runs only" not in r["verdict"]["verdict"]


def test_a_board_whose_runs_never_learned_is_ranked_all_the_same(tmp_path, criterion_metrics):  # noqa: F811
    never = [(*run[:5], 0.1, None) for run in MRR_RUNS]
    r = render.build(_load(tmp_path, never), "cr")
    assert r["verdict"]["verdict"].startswith("d ranks first by MRR beyond the training length")
    assert r["verdict"]["verdict"].endswith(
        " 6 of 6 runs have not learned their task; they are ranked as they scored, since failing to learn is a "
        "result (the MRR over learned runs only stands beside it).")
    assert r["mrr"].mrr_ood_learned.isna().all() and r["mrr"].mrr_ood.notna().all()
    assert list(r["mrr"].scheme) == ["d", "c", "b", "a"]
