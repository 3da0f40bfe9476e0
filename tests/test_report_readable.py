"""The report reads at a glance: a summary first, one header row per table, named axes, '-' for
never or unsupported, best rows first, legends outside the data, plain column names.

Mutation checks: in suite/report/plots.py plot_task, a legend inside the axes (ax.legend()) makes
test_legends_and_colour_bars_sit_outside_the_data[task] fail; in suite/report/boards.py
scheme_order, sorting by name alone makes
test_task_table_has_named_lengths_dashes_for_unsupported_and_best_rows_first fail; in
suite/report/sections/recency.py, size_columns returning ["window"] only, or plot_recency dropping
the chunk from its line labels, makes test_a_chunked_run_is_never_drawn_or_tabled_as_a_window fail.
"""
import math
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from tests.conftest import spec_for

from suite.bench import perf as bench

from suite.results import store
from suite.report import boards, plots, render
from suite.report.sections import breakdowns, effective_length, recency, summary
from tests.test_report import _row, frame


def _df(metric="token_accuracy"):
    cells = [("rope", 32, 0.9), ("rope", 64, 0.2), ("alibi", 32, 0.8), ("alibi", 64, 0.6),
             ("learned", 32, 1.0), ("learned", 64, math.nan, "unsupported"),
             ("t5", 32, math.nan, "diverged"), ("t5", 64, math.nan, "diverged")]
    return frame([_row(f"{c[0]}-0", c[0], 0, "copy", c[1], c[2], *(c[3:] or ["ok"]), metric=metric) for c in cells])


def test_task_table_has_named_lengths_dashes_for_unsupported_and_best_rows_first():
    t = boards.pivot(boards.leaderboard(_df()), "copy")
    assert list(t.columns) == ["32 (1x)", "64 (2x)", "runs learned"] and t.index.name == "scheme"
    # mean over lengths, an empty cell counting 0: alibi 0.7, rope 0.55, learned 0.5; t5 has no score: last
    # alibi scores 0.8 at L and t5 nothing (diverged): neither has learned the task, and their rows say so
    assert list(t.index) == ["alibi (1 of 1 not learned)", "rope", "learned", "t5 (1 of 1 not learned)"]
    assert t.loc["learned", "64 (2x)"] == "-" and t.loc["t5 (1 of 1 not learned)", "32 (1x)"] == "diverged"
    assert t.loc["alibi (1 of 1 not learned)", "64 (2x)"] == "0.60 (n=1)"  # one seed of token accuracy: no interval
    assert t["runs learned"].tolist() == ["0 of 1", "1 of 1", "1 of 1", "0 of 1"]  # every row says how many learned
    shares = boards.pivot(boards.leaderboard(_df("exact_match"), "exact_match"), "copy")
    assert re.fullmatch(r"0\.60 \[0\.\d\d, 0\.\d\d\]", shares.loc["alibi (1 of 1 not learned)", "64 (2x)"])  # Wilson


def test_effective_length_reads_tokens_or_a_dash_for_never():
    board = boards.leaderboard(_df())
    shown = effective_length.effective_display(effective_length.effective_length(board, 0.85))
    assert shown.loc["rope", "copy"] == "32 tokens" and shown.loc["alibi", "copy"] == "-"


def test_breakdown_and_recency_columns_are_named():
    df = _df()
    assert list(breakdowns.breakdown(df, "spans").columns) == ["1x train length", "2x train length"]


def test_every_html_table_has_one_header_row_and_the_summary_comes_first(tmp_path):
    r = render.build(_df(), "fx")
    page = render.html_page(r)
    heads = re.findall(r"<thead>(.*?)</thead>", page, flags=re.S)
    assert heads and all(h.count("<tr") == 1 for h in heads)
    assert page.index('id="summary"') < page.index('id="mrr"') < page.index("<h2>copy</h2>")
    md = render.markdown(r)
    assert md.index("plots/summary.png") < md.index("## Mean Reciprocal Rank") < md.index("## copy")
    assert re.search(r"\| scheme +\| 32 \(1x\)", md)


def test_the_summary_heatmap_holds_the_first_length_beyond_training():
    first = boards.first_ood(boards.leaderboard(_df()))
    assert set(first.eval_len) == {64} and set(first.scheme) == {"rope", "alibi", "learned", "t5"}


@pytest.mark.parametrize("draw", ["task", "summary"])
def test_legends_and_colour_bars_sit_outside_the_data(monkeypatch, draw):
    figures = []
    for module in (plots, summary):
        monkeypatch.setattr(module, "png", lambda fig: figures.append(fig) or b"")
    board = boards.leaderboard(_df())
    plots.plot_task(board, "copy") if draw == "task" else summary.plot_summary(board, ["alibi", "rope"])
    fig = figures[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    box = ax.get_window_extent()
    others = [lg.get_window_extent() for lg in ax.get_children() if isinstance(lg, plt.matplotlib.legend.Legend)]
    others += [a.get_window_extent() for a in fig.axes[1:]]  # colour bars
    assert others and all(not box.overlaps(o) for o in others)
    plt.close(fig)


def _diagnostic_store(tmp_path):
    """A window run, a chunked run and a full-attention run, each with recency rows at init and trained."""
    runs = {"swa": ("rope_in_swa", 8, None), "chunked": ("llama4", None, 8), "full": ("uniform", None, None)}
    for run, (pattern, window, chunk) in runs.items():
        rows = []
        for at, value in (("init", 0.1), ("trained", 0.5)):
            base = {**_row(run, "rope", 0, "copy", 32, value, pattern=pattern), "window": window, "chunk": chunk}
            rows.append({**base, "metric": "recency_gap", "slice": f"at={at},layer=0,site=resid_out,far=16"})
            rows += [{**base, "metric": "recency_cos", "slice": f"at={at},layer=0,site=resid_out,lag={lag}"}
                     for lag in (1, 4, 16)]
        rows = [{**r, "sweep": "dg"} for r in rows]
        store.write_run(tmp_path, "dg", run, {"run_id": run, "sweep": "dg", "spec": spec_for(rows)}, rows)
    return store.load(tmp_path / "dg")


def test_a_chunked_run_is_never_drawn_or_tabled_as_a_window(tmp_path, monkeypatch):
    df = _diagnostic_store(tmp_path)
    t = recency.recency_table(df).set_index("pattern")
    assert t.loc["llama4", ["window", "chunk"]].tolist() == [0, 8]
    assert t.loc["rope_in_swa", ["window", "chunk"]].tolist() == [8, 0]
    figures = []
    monkeypatch.setattr(recency, "png", lambda fig: figures.append(fig) or b"")
    recency.plot_recency(df)
    assert [ax.get_title() for ax in figures[0].axes] == ["at initialization", "trained"]
    lines = {line.get_label(): list(line.get_xdata()) for line in figures[0].axes[1].get_lines()}
    assert lines["llama4 c=8"] == [0] and lines["rope_in_swa"] == [8]
    recency.plot_profiles(df)
    titles = sorted(ax.get_title() for ax in figures[1].axes if ax.get_title())
    assert titles == ["llama4 c=8", "rope_in_swa w=8", "uniform"]
    for fig in figures:
        plt.close(fig)


def test_one_pattern_under_two_schemes_is_two_arms_never_pooled(tmp_path, monkeypatch):
    runs = {"rope": ("rope", "uniform", 0.5), "alibi": ("alibi", "uniform", 0.9), "swa": ("rope", "rope_in_swa", 0.2)}
    for run, (scheme, pattern, value) in runs.items():
        base = {**_row(run, scheme, 0, "copy", 32, value, pattern=pattern), "window": 8 if pattern != "uniform" else None}
        rows = [{**base, "metric": "recency_gap", "slice": "at=trained,layer=0,site=resid_out,far=16", "sweep": "dg"}]
        rows += [{**base, "metric": "recency_cos", "slice": f"at=trained,layer=0,site=resid_out,lag={lag}", "sweep": "dg"}
                 for lag in (1, 4)]
        store.write_run(tmp_path, "dg", run, {"run_id": run, "sweep": "dg", "spec": spec_for(rows)}, rows)
    df = store.load(tmp_path / "dg")
    t = recency.recency_table(df).set_index(["pattern", "positions"])["trained layer 0"]
    assert t.to_dict() == {("rope_in_swa", "rope"): 0.2, ("uniform", "alibi"): 0.9, ("uniform", "rope"): 0.5}
    figures = []
    monkeypatch.setattr(recency, "png", lambda fig: figures.append(fig) or b"")
    recency.plot_recency(df)
    assert [ax.get_title() for ax in figures[0].axes] == ["trained"]  # no init rows: one panel
    drawn = [(line.get_label(), line.get_color(), line.get_marker()) for line in figures[0].axes[0].get_lines()]
    assert {label for label, _, _ in drawn} == {"rope_in_swa rope", "uniform alibi", "uniform rope"}
    assert len({colour for _, colour, _ in drawn}) == 3  # each arm its own colour, not a marker alone
    recency.plot_profiles(df)
    assert sorted(ax.get_title() for ax in figures[1].axes if ax.get_title()) == [
        "rope_in_swa rope w=8", "uniform alibi", "uniform rope"]
    for fig in figures:
        plt.close(fig)


def test_perf_tables_have_plain_headers_whole_lengths_and_dashes():
    t = pd.DataFrame({"length": [1024.0, 4096.0], "span": ["full", "full"], "peak_mb": [19.4, math.nan],
                      "seconds": [0.1, 0.7]}).pivot_table(index="length", columns="span", values=["peak_mb", "seconds"],
                                                          dropna=False)
    text = bench.plain_table(t)
    header = text.splitlines()[0]
    assert "length" in header and "peak MB, full" in header and "('" not in text
    assert "|     1024 |" in text and "1024.00" not in text and "nan" not in text and " - " in text
