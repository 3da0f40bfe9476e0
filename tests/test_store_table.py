"""``python -m suite.results.store <folder>`` keeps configurations apart and says what each row holds.

Mutation checks: dropping ``"spans", *KINDS`` from ``SUMMARY_INDEX`` in suite/results/store.py
pools full attention with a window of 16 and makes
test_full_attention_and_a_window_are_two_rows_with_their_run_counts fail; counting
``runs.learned.eq(True)`` as not learned in ``store.summary`` makes
test_the_not_learned_count_is_the_boards_own fail; leaving ``config_hash`` out of the index when
two configurations share a row makes test_two_step_counts_of_one_label_are_two_rows fail."""
import pandas as pd
import pytest

from suite.results import store
from suite.report import tables
from tests.conftest import spec_for
from tests.test_report import _row, frame


def _runs():
    """alibi with full attention (seed 1 has not learned copy: token accuracy 0.4 at L) and alibi
    with a sliding window of 16, two seeds each."""
    rows = []
    for seed, acc, em32, em64 in ((0, 1.0, 0.8, 0.1), (1, 0.4, 0.2, 0.3)):
        rid = f"alibi-full-s{seed}"
        rows += [_row(rid, "alibi", seed, "copy", 32, acc, config="full"),
                 _row(rid, "alibi", seed, "copy", 32, em32, metric="exact_match", config="full"),
                 _row(rid, "alibi", seed, "copy", 64, em64, metric="exact_match", config="full")]
    for seed in (0, 1):
        rid = f"alibi-swa-s{seed}"
        rows += [{**_row(rid, "alibi", seed, "copy", 32, v, metric=m, config="swa"), "spans": "swa", "window": 16}
                 for m, v in (("token_accuracy", 0.95), ("exact_match", 0.6))]
    return rows


def test_full_attention_and_a_window_are_two_rows_with_their_run_counts():
    table = store.summary(frame(_runs())).reset_index()
    assert list(zip(table.spans, table.window, table.chunk)) == [("full", "-", "-"), ("swa", "16", "-")]
    assert table[32].tolist() == pytest.approx([0.5, 0.6])  # each its own mean over two seeds
    assert table[64].iloc[0] == pytest.approx(0.2) and pd.isna(table[64].iloc[1])
    assert table.runs.tolist() == ["n=2", "n=2"]


def test_the_not_learned_count_is_the_boards_own():
    df = frame(_runs())
    table = store.summary(df).reset_index()
    assert table["not learned"].tolist() == ["1", ""]
    board = tables.leaderboard(df).drop_duplicates("scheme")
    assert board.not_learned.tolist() == [1, 0] and board.scheme.tolist()[1].startswith("alibi swa w=16")  # the report marks the same run


def test_two_step_counts_of_one_label_are_two_rows():
    rows = [_row(f"alibi-{steps}", "alibi", 0, "copy", 32, v, metric="exact_match", config=f"steps{steps}", steps=steps)
            for steps, v in ((10, 0.1), (20, 0.9))]
    table = store.summary(frame(rows)).reset_index()
    assert table.config_hash.tolist() == ["steps10", "steps20"] and table[32].tolist() == pytest.approx([0.1, 0.9])


def test_the_command_prints_the_counts_and_the_span(tmp_path, capsys):
    rows = _runs()
    for rid in dict.fromkeys(r["run_id"] for r in rows):
        mine = [r for r in rows if r["run_id"] == rid]
        store.write_run(tmp_path, "fx", rid, {"run_id": rid, "sweep": "fx", "spec": spec_for(mine)}, mine)
    assert store.main([str(tmp_path / "fx")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "4 runs" in lines[0] and "not learned" in lines[0]
    assert [line.split() for line in lines[3:]] == [["copy", "uniform", "alibi", "full", "-", "-", "0.5", "0.2", "n=2", "1"],
                                                    ["swa", "16", "-", "0.6", "NaN", "n=2"]]
