"""Learned, under train-to-criterion: a run with a check score is judged by it, a run without one
(shipped rows, fixed-budget runs) by its eval score at the training length, and every board marks
the same runs: the report, the terminal summary, the store's table and compare.

Mutation checks: ``learned`` in suite/results/has_learned.py without its ``checks`` block makes
test_a_check_score_decides_and_a_run_without_one_keeps_the_eval_rule fail; ``primary`` in
suite/report/boards.py judging ``learned(d)`` without ``check_rows(df)`` makes
test_every_board_counts_the_runs_the_check_judges fail (report, summary and compare), and
``summary`` in suite/results/store.py without ``check_rows(df)`` makes it fail too (the store's table)."""
import math

import pytest

from suite.report import boards, compare, render, summary
from suite.results import store
from suite.data.metrics import LEARNED_AT
from suite.results.has_learned import check_rows, headline_rows, learned
from tests.criterion_runs import criterion_metrics, write_runs  # noqa: F401 (a fixture)
from tests.conftest import PRE_CRITERION

# copy, trained at 32: the eval score at L and the check score disagree for every rope run (by the
# eval rule 1 of 3 rope runs has not learned, by the check 2 of 3)
RUNS = [
    ("rope-0", "rope", 0, "copy", {32: 1.00, 64: 0.6}, 0.85, None),   # eval passes, check fails: not learned
    ("rope-1", "rope", 1, "copy", {32: 0.50, 64: 0.3}, 0.95, 375),    # eval fails, check passes: learned
    ("rope-2", "rope", 2, "copy", {32: 0.95, 64: 0.4}, 0.88, None),  # eval passes, check fails: not learned
    ("nope-0", "nope", 0, "copy", {32: 0.80, 64: 0.1}, None, None),   # no checks: eval at L, 0.80 < 0.9
    ("nope-1", "nope", 1, "copy", {32: 0.92, 64: 0.2}, None, None),   # no checks: eval at L passes
]


def test_a_check_score_decides_and_a_run_without_one_keeps_the_eval_rule(tmp_path, criterion_metrics):  # noqa: F811
    df = store.load(write_runs(tmp_path, RUNS))
    got = learned(headline_rows(df), check_rows(df))
    assert got.to_dict() == {("rope-0", "copy"): False, ("rope-1", "copy"): True, ("rope-2", "copy"): False,
                             ("nope-0", "copy"): False, ("nope-1", "copy"): True}
    # without the check rows, today's rule: the eval score at the training length
    assert learned(headline_rows(df)).to_dict()[("rope-0", "copy")] is True
    assert learned(headline_rows(df)).to_dict()[("rope-1", "copy")] is False


def test_the_line_is_learned_at_times_the_stored_best_inclusive(criterion_metrics, tmp_path):  # noqa: F811
    at, under = LEARNED_AT, math.nextafter(LEARNED_AT, 0.0)
    df = store.load(write_runs(tmp_path, [("a", "rope", 0, "copy", {32: 0.1}, at, 125),
                                          ("b", "rope", 1, "copy", {32: 1.0}, under, None)]))
    assert learned(headline_rows(df), check_rows(df)).to_dict() == {("a", "copy"): True, ("b", "copy"): False}


def test_every_board_counts_the_runs_the_check_judges(tmp_path, criterion_metrics):  # noqa: F811
    folder = write_runs(tmp_path, RUNS)
    df = store.load(folder)
    expected = {"rope": (2, 3), "nope": (1, 2)}  # (not learned, runs)
    board = boards.leaderboard(df).drop_duplicates("scheme").set_index("scheme")
    assert {s: (board.not_learned[s], board.runs[s]) for s in expected} == expected
    built = render.build(df, "cr")
    assert (built["not_learned"], built["runs"]) == (3, 5)
    assert built["mrr_marks"] == {"rope": "copy 2 of 3", "nope": "copy 1 of 2"}
    terminal = summary.summary_table(df).drop_duplicates("scheme").set_index("scheme")
    assert {s: (terminal.not_learned[s], terminal.runs[s]) for s in expected} == expected
    cells = compare.cells(df).drop_duplicates("scheme").set_index("scheme")
    assert {s: (cells.not_learned[s], cells.runs[s]) for s in expected} == expected
    # the check score row is no cell of any board: the headline rows alone are ranked
    assert set(boards.primary(df).metric) == {"token_accuracy"}
    assert len(boards.leaderboard(df)) == 4


def test_shipped_rows_without_check_rows_are_judged_as_before():
    """A board shipped before the protocol has no criterion rows: every run is judged by its eval
    score at L, so the not-learned count is the one its report stated (2 of the default's 36)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = store.load(PRE_CRITERION)
    assert check_rows(df).empty
    rows = boards.primary(df)
    assert rows.learned.to_numpy().tolist() == rows.join(
        learned(rows.drop(columns="learned")).rename("again"), on=["run_id", "task"]).again.to_numpy().tolist()
    assert int((~rows.drop_duplicates(["run_id", "task"]).learned).sum()) == 2  # NoPE copy s2, sinusoidal copy s1
