"""The report's loss-by-position section (suite/report/sections/position_loss.py): bits per byte at
each position bin of the text windows, at each task's longest eval length, per scheme.

Mutation checks: ``profile`` averaging over every eval length (``longest`` returning the task's
rows whatever the length) makes test_the_section_shows_the_longest_length_mean_over_seeds fail;
``build`` returning the empty frame instead of None makes test_a_board_without_profile_rows_has_no_section fail."""
import pandas as pd
import pytest

from suite.report import render
from suite.report.sections import position_loss
from tests.test_report import _row, frame


def _profile_rows():
    rows = []
    for scheme, slope in (("alibi", 0.0), ("rope", 1.0)):
        for seed in (0, 1):
            rid = f"{scheme}-{seed}"
            rows.append(_row(rid, scheme, seed, "code", 128, 2.0 + slope + seed * 0.1, metric="bits_per_byte",
                             train_len=64))
            for eval_len in (64, 128):
                for lo, hi in ((1, 63), (64, 127)):
                    if hi >= eval_len:
                        continue
                    value = 3.0 - 0.5 * (lo > 1) + (slope if lo >= 64 else 0.0) + seed * 0.2 + (eval_len == 64)
                    rows.append({**_row(rid, scheme, seed, "code", eval_len, value, metric="bits_per_byte_at",
                                        train_len=64), "slice": f"position={lo}-{hi}"})
    return rows


def test_the_section_shows_the_longest_length_mean_over_seeds():
    t = position_loss.profile(frame(_profile_rows()))
    at = position_loss.longest(t, "code").set_index(["scheme", "lo"]).bits_per_byte
    assert at[("alibi", 64)] == pytest.approx(2.6) and at[("rope", 64)] == pytest.approx(3.6)  # 2.5 + the seeds' 0.1
    assert at[("alibi", 1)] == pytest.approx(3.1)  # not the 4.1 of the 64-token windows
    wide = position_loss.wide(t, "code")
    assert list(wide.index) == ["alibi", "rope"] and list(wide.columns) == ["1-63", "64-127"]


def test_the_section_is_rendered_with_its_plot_and_csv(tmp_path):
    out = render.write(frame(_profile_rows()), "pl", tmp_path / "pl")
    md, html = (out / "index.md").read_text(), (out / "index.html").read_text()
    assert "## Loss by position" in md and "Loss by position</h2>" in html
    assert "plots/position_loss.code.png" in md and (out / "plots" / "position_loss.code.png").exists()
    csv = pd.read_csv(out / "position_loss.csv")
    assert set(csv.eval_len) == {64, 128} and set(csv.scheme) == {"alibi", "rope"}


def test_a_board_without_profile_rows_has_no_section(tmp_path):
    rows = [r for r in _profile_rows() if r["metric"] != "bits_per_byte_at"]
    assert position_loss.PositionLoss().build(type("C", (), {"df": frame(rows)})()) is None
    out = render.write(frame(rows), "pl", tmp_path / "pl")
    assert "Loss by position" not in (out / "index.md").read_text() and not (out / "position_loss.csv").exists()
