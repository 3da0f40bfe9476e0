"""Leaderboard tables against hand-computed values, and a report built from a fixture store.

Mutation checks: in suite/report/ranking.py _arrays, OOD eval_len > train_len -> eval_len >= train_len
makes test_mrr_with_ties_by_hand fail; KINDS (suite/model/span_kinds.py) chunk "c" -> "w", or "chunk" left out of
BREAKDOWN_COLUMNS (suite/report/sections/breakdowns.py), makes
test_a_chunk_is_labelled_c_and_broken_down_apart_from_windows fail; split_boards (suite/report/boards.py)
reading the split rows without relabelling them "all" makes
test_evaluation_splits_are_scored_apart_and_other_slices_are_not_boards fail; in ranking.tie_ranks, a win by
diff >= margin -> diff > margin, or in sections/power.py power, gaps < margin -> gaps <= margin, makes
test_two_means_exactly_the_margin_apart_are_not_tied_and_just_under_it_are fail; ``cell_text`` in
suite/report/boards.py without its NaN check ('0.90 [nan, nan]' for one seed) makes
test_report_tables_from_a_fixture_store fail."""
import math
import re

import pandas as pd
import pytest

from suite.config.codedigest import spec_digest
from tests.conftest import spec_for

from suite.results import store
from suite.report import boards, plots, ranking, render
from suite.report.sections import effective_length
from suite.report.sections import breakdowns
from suite.report.sections.mrr import MRR_CSV
from suite.report.sections.power import power


def _board(rows, train_len=32):
    b = pd.DataFrame(rows, columns=["scheme", "task", "eval_len", "mean", "std", "n"])
    return b.assign(train_len=train_len)


def test_mrr_with_ties_by_hand():
    # cell (copy, 32): a=0.9, b=0.9, c=0.5 -> min ranks 1, 1, 3; average ranks 1.5, 1.5, 3
    # cell (copy, 64): a=0.1, b=0.4, c=nan (unsupported, ranks last) -> ranks 2, 1, 3; 64 > train_len: OOD
    board = _board([
        ("a", "copy", 32, 0.9, 0, 2), ("b", "copy", 32, 0.9, 0, 2), ("c", "copy", 32, 0.5, 0, 2),
        ("a", "copy", 64, 0.1, 0, 2), ("b", "copy", 64, 0.4, 0, 2), ("c", "copy", 64, math.nan, 0, 0),
    ])
    got = ranking.mrr(board, tie="min").set_index("scheme")
    assert got.loc["b", "mrr_all"] == pytest.approx((1 + 1) / 2)
    assert got.loc["a", "mrr_all"] == pytest.approx((1 + 1 / 2) / 2)
    assert got.loc["c", "mrr_all"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert got.mrr_ood.to_dict() == pytest.approx({"b": 1, "a": 1 / 2, "c": 1 / 3})
    assert list(got.index) == ["b", "a", "c"] and set(got.cells_all) == {2} and set(got.cells_ood) == {1}
    avg = ranking.mrr(board, tie="average").set_index("scheme")
    assert avg.loc["a", "mrr_all"] == pytest.approx((1 / 1.5 + 1 / 2) / 2)
    assert avg.loc["b", "mrr_all"] == pytest.approx((1 / 1.5 + 1) / 2)
    with pytest.raises(ValueError, match="unknown tie rule 'dense'; valid: min, average"):
        ranking.mrr(board, tie="dense")


def test_means_closer_than_the_margin_share_a_rank_in_the_mrr_as_in_the_power_table():
    # one cell, margin 0.01: a 0.900, b 0.895, c 0.889, d 0.5. Beaten by at least 0.01: a by none,
    # b by none (0.005), c by a only (0.011; b is 0.006 ahead), d by all three.
    # min ranks 1, 1, 2, 4; average adds half the schemes tied with each: a (b) 1.5, b (a, c) 2,
    # c (b) 2.5, d 4
    board = _board([("a", "copy", 64, 0.900, 0, 2), ("b", "copy", 64, 0.895, 0, 2), ("c", "copy", 64, 0.889, 0, 2),
                    ("d", "copy", 64, 0.5, 0, 2)])
    got = ranking.mrr(board, tie="min").set_index("scheme").mrr_all
    assert got.to_dict() == pytest.approx({"a": 1, "b": 1, "c": 1 / 2, "d": 1 / 4})
    avg = ranking.mrr(board, tie="average").set_index("scheme").mrr_all
    assert avg.to_dict() == pytest.approx({"a": 1 / 1.5, "b": 1 / 2, "c": 1 / 2.5, "d": 1 / 4})
    # a cell the power table calls tied (best minus worst below the margin) gives every scheme rank 1
    tied = _board([("a", "copy", 64, 0.402, 0, 2), ("b", "copy", 64, 0.398, 0, 2), ("c", "copy", 64, 0.395, 0, 2)])
    assert power(tied.assign(metric="token_accuracy")).tied_cells.tolist() == [1]
    assert set(ranking.mrr(tied).mrr_all) == {1.0}


def test_two_means_exactly_the_margin_apart_are_not_tied_and_just_under_it_are():
    # 0.02 - 0.01 is exactly TIED_BELOW in binary floating point (0.02 is 0.01 doubled); one ulp more
    # on the lower mean leaves the gap just under it
    import numpy as np

    assert 0.02 - 0.01 == ranking.TIED_BELOW == 0.01
    under = float(np.nextafter(0.01, 1.0))
    assert 0.02 - under < ranking.TIED_BELOW
    for low, ranks, tied in ((0.01, {"a": 1, "b": 2}, 0), (under, {"a": 1, "b": 1}, 1)):
        board = _board([("a", "copy", 64, 0.02, 0, 2), ("b", "copy", 64, low, 0, 2)]).assign(metric="token_accuracy")
        got = ranking.mrr(board, tie="min").set_index("scheme").mrr_all
        assert got.to_dict() == {s: 1 / r for s, r in ranks.items()}, low
        assert power(board).tied_cells.tolist() == [tied], low  # the same rule in the power table
    average = ranking.mrr(_board([("a", "copy", 64, 0.02, 0, 2), ("b", "copy", 64, under, 0, 2)]), tie="average")
    assert average.set_index("scheme").mrr_all.to_dict() == {"a": 1 / 1.5, "b": 1 / 1.5}



def test_the_tie_margin_is_the_metrics_own(monkeypatch):
    """A metric that declares a wider tie margin (``Metric.tie_margin``) ties wider gaps, in the MRR
    and in the power table alike; with today's declaration the same two means are apart.

    Mutation check: ``_arrays`` in suite/report/ranking.py keeping TIED_BELOW for every cell (not the
    cell's metric's ``tie_margin``), or ``power`` in suite/report/sections/power.py comparing the gaps
    with TIED_BELOW, makes this fail."""
    from dataclasses import replace

    from suite.data import metrics

    board = _board([("a", "copy", 64, 0.60, 0, 2), ("b", "copy", 64, 0.55, 0, 2)]).assign(
        metric="token_accuracy", higher_is_better=True, low=0.0, high=1.0, share=False)
    assert ranking.mrr(board).set_index("scheme").mrr_all.to_dict() == {"a": 1.0, "b": 0.5}
    assert power(board).tied_cells.tolist() == [0]
    monkeypatch.setitem(metrics.METRICS, "token_accuracy", replace(metrics.METRICS["token_accuracy"], tie_margin=0.1))
    assert ranking.mrr(board).set_index("scheme").mrr_all.to_dict() == {"a": 1.0, "b": 1.0}
    assert power(board).tied_cells.tolist() == [1]

def _row(run, scheme, seed, task, eval_len, value, status="ok", pattern="uniform", metric="token_accuracy",
         config=None, digest="d1", steps=10, n=10, train_len=32):
    return {"run_id": run, "sweep": "fx", "spec_hash": run, "config_hash": config or f"cfg-{scheme}",
            "code_digest": digest, "git_sha": "abc", "seed": seed, "model": "tiny",
            "n_layers": 4, "d_model": 64, "n_heads": 4, "pattern": pattern, "positions": scheme, "spans": "full",
            "window": None, "train_len": train_len, "steps": steps, "task": task, "eval_len": eval_len,
            "len_ratio": eval_len / train_len, "slice": "all", "metric": metric, "value": value, "n": n,
            "status": status, "wall_s": 5.0, "timestamp": "2026-01-01T00:00:00+00:00", "eval_set": "h"}


def frame(rows) -> pd.DataFrame:
    """Rows as the store loads them (every column, in order; the metric declarations and headline
    filled as for rows stored without them)."""
    return pd.DataFrame(store.described(rows), columns=store.COLUMNS)


def write_fixture(tmp_path, metric: str = "token_accuracy", sweep: str = "fx"):
    """Four copy runs of ``sweep``, scored at 32 and 64 by ``metric`` and at 32 by exact match, and a junk file."""
    runs = {
        "rope-0": [("rope", 0, 32, 1.0), ("rope", 0, 64, 0.2)],
        "rope-1": [("rope", 1, 32, 0.8), ("rope", 1, 64, 0.4)],
        "alibi-0": [("alibi", 0, 32, 0.9), ("alibi", 0, 64, 0.7)],
        "learned-0": [("learned", 0, 32, 0.95), ("learned", 0, 64, math.nan, "unsupported")],
    }
    for run, cells in runs.items():
        rows = [_row(run, c[0], c[1], "copy", c[2], c[3], *(c[4:] or ["ok"]), metric=metric) for c in cells]
        # exact match is not copy's headline metric: only --metric exact_match reads it
        rows.append(_row(run, cells[0][0], cells[0][1], "copy", 32, 0.5, metric="exact_match"))
        spec = spec_for(rows, model={"layers": [{"position": cells[0][0], "span": "full"}]})
        digest = spec_digest(spec)  # computed by this checkout's code
        rows = [{**r, "code_digest": digest, "sweep": sweep} for r in rows]
        store.write_run(tmp_path, sweep, run, {"run_id": run, "sweep": sweep, "spec": spec}, rows)
    (tmp_path / sweep / "junk.json").write_text("{not json")
    return tmp_path


@pytest.fixture
def fixture_store(tmp_path):
    return write_fixture(tmp_path)


def test_report_tables_from_a_fixture_store(fixture_store, tmp_path):
    with pytest.warns(UserWarning, match="junk.json"):
        df = store.load(fixture_store / "fx")
    board = boards.leaderboard(df).set_index(["scheme", "eval_len"])
    assert set(board.metric) == {"token_accuracy"}
    assert board.loc[("rope", 32), "mean"] == pytest.approx(0.9)
    assert board.loc[("rope", 32), "std"] == pytest.approx(pd.Series([1.0, 0.8]).std())
    assert board.loc[("rope", 64), "n"] == 2 and board.loc[("alibi", 64), "n"] == 1
    assert board.loc[("learned", 64), "n"] == 0 and board.loc[("learned", 64), "status"] == "unsupported"
    # two seeds: Student-t, 0.9 ± 12.706 * 0.1414 / sqrt(2), clipped to [0, 1]; one seed of token accuracy
    # (answer tokens pooled over examples, not a share of examples): no interval
    assert (board.loc[("rope", 32), "ci_low"], board.loc[("rope", 32), "ci_high"]) == (0.0, 1.0)
    assert math.isnan(board.loc[("alibi", 32), "ci_low"]) and math.isnan(board.loc[("alibi", 32), "ci_high"])
    exact = boards.leaderboard(df, metric="exact_match").set_index(["scheme", "eval_len"])
    assert exact.loc[("rope", 32), "mean"] == pytest.approx(0.5)
    # one seed of exact match (a share of examples): Wilson over its 10 examples,
    # (0.5 + 1.92/10 ± 1.96 * sqrt(0.025 + 3.8415/400)) / (1 + 3.8415/10)
    assert (exact.loc[("alibi", 32), "ci_low"], exact.loc[("alibi", 32), "ci_high"]) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    mrr = ranking.mrr(boards.leaderboard(df)).set_index("scheme")
    # 32: rope 0.9, alibi 0.9 (tie, rank 2), learned 0.95 (rank 1) -> learned 1, rope 1/2, alibi 1/2
    # 64 (OOD): alibi 0.7 (1), rope 0.3 (2), learned unsupported (3)
    assert mrr.loc["alibi", "mrr_all"] == pytest.approx((1 / 2 + 1) / 2)
    assert mrr.loc["rope", "mrr_all"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert mrr.loc["learned", "mrr_all"] == pytest.approx((1 + 1 / 3) / 2)
    assert mrr.mrr_ood.to_dict() == pytest.approx({"alibi": 1, "rope": 1 / 2, "learned": 1 / 3})
    eff = effective_length.effective_length(boards.leaderboard(df), threshold=0.8)
    assert eff.loc["learned", "copy"] == 32 and eff.loc["rope", "copy"] == 32 and eff.loc["alibi", "copy"] == 32
    assert effective_length.effective_length(boards.leaderboard(df), threshold=0.6).loc["alibi", "copy"] == 64

    (tmp_path / "reports" / "fx" / "plots").mkdir(parents=True)
    (tmp_path / "reports" / "fx" / "plots" / "mqar.png").write_bytes(b"a task this sweep does not have")
    (tmp_path / "reports" / "fx" / "plots" / "mqar.styles.json").write_text("{}")
    out = render.write(df, "fx", tmp_path / "reports" / "fx")
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "copy.png", "copy.styles.json", "summary.png", "summary.styles.json"]
    text = (out / "leaderboard.csv").read_text()
    assert not re.search(r"\d\.\d{5,}", text)  # rounded to 4 decimals
    csv = pd.read_csv(out / "leaderboard.csv")
    assert list(csv.columns) == boards.BOARD_CSV and len(csv) == 6
    assert math.isnan(csv.set_index(["scheme", "eval_len"]).loc[("alibi", 32), "ci_low"])
    m = pd.read_csv(out / "mrr.csv")
    assert list(m.columns) == MRR_CSV and m.scheme.iloc[0] == "alibi"
    md = (out / "index.md").read_text()
    assert "tied schemes share the best rank" in md and "closer than their metric's tie margin" in md
    assert "unsupported" in md and "0.90 [0.00, 1.00]" in md
    # one seed of token accuracy: the mean and its seed count, never '[nan, nan]'
    assert re.search(r"\| alibi +\| 0\.90 \(n=1\) +\| 0\.70 \(n=1\) +\|", md) and "[nan" not in md
    assert re.search(r"\| copy +\| token_accuracy +\| +0\.01 \|", md) and "Student-t" in md and "Wilson" in md
    assert "## Power" in md and "overlaps next" in md and "Warning" not in md
    assert "- training: one model per task; 10 steps; training length 32 tokens" in md
    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page and (out / "plots" / "copy.png").stat().st_size > 1000


def test_a_run_below_the_learning_bar_at_l_is_marked_in_every_table(fixture_store, tmp_path):
    # at L = 32: rope seed 0 scores 1.0, seed 1 0.8 (< 0.9: not learned); alibi 0.9 (exactly the bar: learned);
    # learned 0.95. The mark is the run's, on every length of its scheme's row.
    with pytest.warns(UserWarning, match="junk.json"):
        df = store.load(fixture_store / "fx")
    board = boards.leaderboard(df)
    marks = board.drop_duplicates("scheme").set_index("scheme")
    assert marks.not_learned.to_dict() == {"alibi": 0, "learned": 0, "rope": 1}
    assert marks.runs.to_dict() == {"alibi": 1, "learned": 1, "rope": 2}
    assert list(boards.pivot(board, "copy").index) == ["alibi", "rope (1 of 2 not learned)", "learned"]
    out = render.write(df, "fx", tmp_path / "rep")
    md = (out / "index.md").read_text()
    assert "| rope (1 of 2 not learned) |" in md and "| copy 1 of 2 " in md  # task table, MRR's column
    assert "over the learned runs only (the others left out" in md and "1 of 4 runs)" in md
    csv = pd.read_csv(out / "leaderboard.csv").set_index(["scheme", "eval_len"])
    assert csv.loc[("rope", 64), "not_learned"] == 1 and csv.loc[("alibi", 64), "not_learned"] == 0
    power = pd.read_csv(out / "power.csv").set_index("task")
    assert (power.loc["copy", "not_learned"], power.loc["copy", "runs"]) == (1, 4)


def test_power_reports_the_interval_half_widths_at_the_first_length_beyond_l(tmp_path):
    # the fixture scored by a share of examples. At 64 (the first length beyond 32): rope's two seeds
    # 0.2, 0.4 give a t interval clipped to [0, 1] (half-width 0.5); alibi's one seed 0.7 over 10
    # examples a Wilson interval [0.3968, 0.8922] (0.2477); learned has no score there. Median
    # (0.5 + 0.2477) / 2, largest 0.5.
    with pytest.warns(UserWarning, match="junk.json"):
        df = store.load(write_fixture(tmp_path, "string_match_part") / "fx")
    table = power(boards.leaderboard(df, "string_match_part")).set_index("task")
    assert table.loc["copy", "max_half_width"] == pytest.approx(0.5)
    assert table.loc["copy", "median_half_width"] == pytest.approx((0.5 + 0.2477) / 2, abs=1e-4)
    r = render.build(df, "fx", metric="string_match_part")
    assert r["power"]["half_median"] == pytest.approx((0.5 + 0.2477) / 2, abs=1e-4)
    assert r["power"]["half_max"] == pytest.approx(0.5)
    assert "the median is 0.374 and the largest 0.500" in render.markdown(r)


def test_cli_takes_a_metric_for_every_task(fixture_store, tmp_path, capsys):
    from suite.report.__main__ import main

    assert main(["fx", "--results", str(fixture_store), "--out", str(tmp_path / "rep"), "--metric", "exact_match"]) == 0
    csv = pd.read_csv(tmp_path / "rep" / "fx" / "leaderboard.csv")
    assert set(csv.metric) == {"exact_match"} and set(csv.eval_len) == {32} and set(csv["mean"]) == {0.5}
    assert "every task is scored by exact_match" in (tmp_path / "rep" / "fx" / "index.md").read_text()
    assert "MRR (OOD)" in capsys.readouterr().out


def test_html_report_escapes_run_supplied_strings(fixture_store, tmp_path):
    with pytest.warns(UserWarning, match="junk.json"):
        df = store.load(fixture_store / "fx")
    df.loc[df.positions == "rope", "positions"] = "<script>alert(1)</script>"
    page = render.html_page(render.build(df, "<b>sweep</b>"), {"copy": plots.Plot(b"png", []), "summary": plots.Plot(b"png", [])})
    assert "<script>" not in page and "&lt;script&gt;" in page and "<b>sweep</b>" not in page


def _sized(run, pattern, spans, window, chunk, value):
    row = _row(run, "rope", 0, "copy", 32, value, pattern=pattern, config=run)
    return {**row, "spans": spans, "window": window, "chunk": chunk}


def test_a_chunk_is_labelled_c_and_broken_down_apart_from_windows(tmp_path):
    for row in [_sized("llama4", "llama4", "chunked+full", None, 16, 0.2),
                _sized("command_a", "command_a", "swa+full", 16, None, 0.4),
                _sized("rope-chunked", "uniform", "chunked", None, 8, 0.6),
                _sized("rope-swa", "uniform", "swa", 8, None, 0.8)]:
        store.write_run(tmp_path, "fx", row["run_id"], {"run_id": row["run_id"], "sweep": "fx", "spec": spec_for([row])}, [row])
    df = store.load(tmp_path / "fx")
    labels = sorted(df.apply(boards.scheme_label, axis=1))
    assert labels == ["command_a w=16", "llama4 c=16", "rope chunked c=8", "rope swa w=8"]
    assert {"window", "chunk"} <= set(breakdowns.varied(df))
    by_chunk = breakdowns.breakdown(df, "chunk")["1x train length"].droplevel(["task", "metric"])
    assert by_chunk.to_dict() == pytest.approx({("llama4 c=16", "16"): 0.2, ("rope chunked c=8", "8"): 0.6,
                                                ("command_a w=16", "None"): 0.4, ("rope swa w=8", "None"): 0.8})
    by_window = breakdowns.breakdown(df, "window")["1x train length"].droplevel(["task", "metric"])
    assert by_window.to_dict() == pytest.approx({("rope swa w=8", "8"): 0.8, ("command_a w=16", "16"): 0.4,
                                                 ("llama4 c=16", "None"): 0.2, ("rope chunked c=8", "None"): 0.6})


def test_every_span_kind_is_a_results_column_a_setting_and_a_label():
    from suite.model.span import KINDS, SPANS

    assert boards.KINDS is KINDS  # the labels have one home, the span interface
    assert {cls.kind for cls in SPANS.values()} - {None} <= set(KINDS)
    assert all(k in store.COLUMNS and k in breakdowns.BREAKDOWN_COLUMNS and k in boards.CONFIG_COLUMNS for k in KINDS)


def test_evaluation_splits_are_scored_apart_and_other_slices_are_not_boards(tmp_path):
    def rows(run, seed, sparse, dense):
        base = dict(run=run, scheme="rope", seed=seed, task="flipflop", eval_len=32, metric="string_match_all")
        out = [_row(**base, value=(sparse + dense) / 2), _row(**base, value=sparse), _row(**base, value=dense),
               _row(**base, value=0.0), _row(**base, value=0.0)]
        for r, s in zip(out, ["all", "split=sparse", "split=dense", "distance=<8", "split=dense,distance=<8"]):
            r["slice"] = s
        return out

    df = frame(rows("a", 0, 0.6, 1.0) + rows("b", 1, 0.8, 0.9))
    split = boards.split_boards(df)
    assert sorted(split) == [("flipflop", "dense"), ("flipflop", "sparse")]
    assert split[("flipflop", "sparse")].set_index("scheme").loc["rope", "mean"] == pytest.approx(0.7)
    assert split[("flipflop", "dense")].set_index("scheme").loc["rope", "mean"] == pytest.approx(0.95)
    out = render.write(df, "fx", tmp_path / "rep")
    md = (out / "index.md").read_text()
    # both runs score below 0.9 on the whole task at L (0.8, 0.85): the split tables carry the task's mark
    assert "### flipflop, split sparse" in md
    assert "| rope (2 of 2 not learned) | 0.70 [" in md and "| rope (2 of 2 not learned) | 0.95 [" in md
    csv = pd.read_csv(out / "splits.csv").set_index("split")
    assert list(csv.columns[:3]) == ["scheme", "task", "eval_len"] and csv.loc["sparse", "mean"] == 0.7
    render.write(df[df.slice == "all"], "fx", tmp_path / "rep")  # a sweep without splits leaves no old table
    assert not (out / "splits.csv").exists()


def test_a_run_trained_on_a_mixture_is_judged_on_each_of_its_tasks():
    """One model per seed on copy and vt: seed 0 learns vt (1.0 at L) but not copy (0.5), seed 1
    learns both. Copy's row reads 1 of 2 not learned, vt's none: a task the run did learn does not
    vouch for one it did not."""
    rows = [_row(f"mix-{seed}", "rope", seed, task, length, value, metric=metric)
            for seed, copy_at_l in ((0, 0.5), (1, 0.95))
            for task, metric, at_l in (("copy", "token_accuracy", copy_at_l), ("vt", "string_match_all", 1.0))
            for length, value in ((32, at_l), (64, at_l / 2))]
    board = boards.leaderboard(frame(rows))
    marks = board.drop_duplicates(["scheme", "task"]).set_index("task")
    assert (marks.loc["copy", "not_learned"], marks.loc["copy", "runs"]) == (1, 2)
    assert (marks.loc["vt", "not_learned"], marks.loc["vt", "runs"]) == (0, 2)


def test_a_breakdown_lists_a_schemes_settings_in_numeric_order():
    """Mutation check: sorting a breakdown's rows by the setting's text ('128' before '16') makes this fail."""
    lengths = [16, 4, 128, 8]
    df = frame([_row(f"L{n}", "rope", 0, "copy", n, 1.0, config=f"c{n}", train_len=n) for n in lengths])
    assert list(breakdowns.breakdown(df, "train_len").index.get_level_values("train_len")) == ["4", "8", "16", "128"]
    assert set(breakdowns.breakdown(df, "train_len").index.get_level_values("scheme")) == {"rope"}
    assert sorted(["None", "16", "4"], key=breakdowns._numeric_first) == ["4", "16", "None"]  # no window: last
