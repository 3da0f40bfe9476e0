"""Leaderboard tables against hand-computed values, and a report built from a fixture store."""
import math

import pandas as pd
import pytest

from suite import store
from suite.report import render, tables


def _board(rows):
    return pd.DataFrame(rows, columns=["scheme", "task", "eval_len", "mean", "std", "n"])


def test_mrr_with_ties_by_hand():
    # cell (copy, 32): a=0.9, b=0.9, c=0.5 -> min ranks 1, 1, 3; average ranks 1.5, 1.5, 3
    # cell (copy, 64): a=0.1, b=0.4, c=nan (unsupported, ranks last) -> ranks 2, 1, 3
    board = _board([
        ("a", "copy", 32, 0.9, 0, 2), ("b", "copy", 32, 0.9, 0, 2), ("c", "copy", 32, 0.5, 0, 2),
        ("a", "copy", 64, 0.1, 0, 2), ("b", "copy", 64, 0.4, 0, 2), ("c", "copy", 64, math.nan, 0, 0),
    ])
    got = tables.mrr(board, tie="min").set_index("scheme")
    assert got.loc["b", "mrr"] == pytest.approx((1 + 1) / 2)
    assert got.loc["a", "mrr"] == pytest.approx((1 + 1 / 2) / 2)
    assert got.loc["c", "mrr"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert list(got.index) == ["b", "a", "c"] and set(got.cells) == {2}
    avg = tables.mrr(board, tie="average").set_index("scheme")
    assert avg.loc["a", "mrr"] == pytest.approx((1 / 1.5 + 1 / 2) / 2)
    assert avg.loc["b", "mrr"] == pytest.approx((1 / 1.5 + 1) / 2)
    with pytest.raises(ValueError, match="unknown tie rule 'dense'; valid: min, average"):
        tables.mrr(board, tie="dense")


def _row(run, scheme, seed, task, eval_len, value, status="ok", pattern="uniform", metric="exact_match"):
    return {"run_id": run, "sweep": "fx", "spec_hash": run, "git_sha": "abc", "seed": seed, "model": "tiny",
            "n_layers": 4, "d_model": 64, "n_heads": 4, "pattern": pattern, "positions": scheme, "spans": "full",
            "window": None, "train_len": 32, "steps": 10, "task": task, "eval_len": eval_len,
            "len_ratio": eval_len / 32, "slice": "all", "metric": metric, "value": value, "n": 10, "status": status,
            "wall_s": 5.0, "timestamp": "2026-01-01T00:00:00+00:00", "eval_set": "h"}


@pytest.fixture
def fixture_store(tmp_path):
    runs = {
        "rope-0": [("rope", 0, 32, 1.0), ("rope", 0, 64, 0.2)],
        "rope-1": [("rope", 1, 32, 0.8), ("rope", 1, 64, 0.4)],
        "alibi-0": [("alibi", 0, 32, 0.9), ("alibi", 0, 64, 0.7)],
        "learned-0": [("learned", 0, 32, 0.95), ("learned", 0, 64, math.nan, "unsupported")],
    }
    for run, cells in runs.items():
        rows = [_row(run, c[0], c[1], "copy", c[2], c[3], *(c[4:] or ["ok"])) for c in cells]
        rows.append(_row(run, cells[0][0], cells[0][1], "copy", 32, 0.5, metric="token_accuracy"))
        store.write_run(tmp_path, "fx", run, {"run_id": run, "sweep": "fx"}, rows)
    (tmp_path / "fx" / "junk.json").write_text("{not json")
    return tmp_path


def test_report_tables_from_a_fixture_store(fixture_store, tmp_path):
    with pytest.warns(UserWarning, match="junk.json"):
        df = store.load(fixture_store / "fx")
    board = tables.leaderboard(df).set_index(["scheme", "eval_len"])
    assert board.loc[("rope", 32), "mean"] == pytest.approx(0.9)
    assert board.loc[("rope", 32), "std"] == pytest.approx(pd.Series([1.0, 0.8]).std())
    assert board.loc[("rope", 64), "n"] == 2 and board.loc[("alibi", 64), "n"] == 1
    assert board.loc[("learned", 64), "n"] == 0 and board.loc[("learned", 64), "status"] == "unsupported"
    mrr = tables.mrr(tables.leaderboard(df)).set_index("scheme")
    # 32: rope 0.9, alibi 0.9 (tie, rank 1), learned 0.95 (rank 1) -> learned 1, rope 1/2, alibi 1/2
    # 64: alibi 0.7 (1), rope 0.3 (2), learned unsupported (3)
    assert mrr.loc["alibi", "mrr"] == pytest.approx((1 / 2 + 1) / 2)
    assert mrr.loc["rope", "mrr"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert mrr.loc["learned", "mrr"] == pytest.approx((1 + 1 / 3) / 2)
    eff = tables.effective_length(tables.leaderboard(df), threshold=0.8)
    assert eff.loc["learned", "copy"] == 32 and eff.loc["rope", "copy"] == 32 and eff.loc["alibi", "copy"] == 32
    assert tables.effective_length(tables.leaderboard(df), threshold=0.6).loc["alibi", "copy"] == 64

    out = render.write(df, "fx", tmp_path / "reports" / "fx")
    csv = pd.read_csv(out / "leaderboard.csv")
    assert list(csv.columns) == ["scheme", "task", "eval_len", "mean", "std", "n"] and len(csv) == 6
    m = pd.read_csv(out / "mrr.csv")
    assert list(m.columns) == ["scheme", "mrr", "cells"] and m.scheme.iloc[0] == "alibi"
    md = (out / "index.md").read_text()
    assert "ties share the best rank" in md and "unsupported" in md and "0.90 ± 0.14" in md
    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page and (out / "plots" / "copy.png").stat().st_size > 1000


def test_html_report_escapes_run_supplied_strings(fixture_store, tmp_path):
    df = store.load(fixture_store / "fx").dropna(subset=["run_id"])
    df.loc[df.positions == "rope", "positions"] = "<script>alert(1)</script>"
    page = render.html_page(render.build(df, "<b>sweep</b>"), {"copy": b"png"})
    assert "<script>" not in page and "&lt;script&gt;" in page and "<b>sweep</b>" not in page
