"""The summary heatmap's colours (suite/report/sections/summary.py ``shade``): bright is good in
every column. A share keeps its mean; bits per byte, where lower is better, runs from the column's
best (1) to its worst (0), so a scheme that breaks on text is dark there, not bright as a raw value
of 5 bits on a 0-1 scale was."""
import pandas as pd
import pytest

from suite.report.sections.summary import shade


def first(rows):
    return pd.DataFrame([{"scheme": s, "task": t, "mean": m, "n": 3, "higher_is_better": hib, "low": 0.0,
                          "high": 1.0 if hib else float("inf")} for s, t, m, hib in rows])


def test_a_share_keeps_its_mean_and_bits_per_byte_run_best_to_worst():
    f = first([("alibi", "copy", 0.84, True), ("rope", "copy", 0.19, True),
               ("alibi", "code", 1.99, False), ("t5", "code", 2.84, False), ("learned", "code", 5.69, False)])
    got = shade(f)
    assert list(got[:2]) == [0.84, 0.19]
    assert list(got[2:]) == pytest.approx([1.0, (5.69 - 2.84) / (5.69 - 1.99), 0.0])


def test_equal_means_are_all_bright_and_an_empty_cell_has_no_colour():
    f = first([("alibi", "code", 2.0, False), ("t5", "code", 2.0, False), ("rope", "copy", 0.5, True)])
    f.loc[2, "n"] = 0
    got = shade(f)
    assert list(got[:2]) == [1.0, 1.0] and pd.isna(got[2])
