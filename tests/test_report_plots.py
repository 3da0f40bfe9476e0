"""Plots people read: a look per scheme, kept across a report's plots.

Mutation checks: in suite/report/sections/task_boards.py, ``plots`` leaving out the split boards (or
``blocks`` not linking their plots) makes test_each_split_table_has_its_plot_beside_it fail; in suite/report/plots.py
plot_task, ax.set_ylim(-0.03, 1.03) instead of fitted(b)
makes test_the_y_axis_fits_the_data_and_clips_no_interval fail; drawing at g.eval_len (no dodge) makes
test_error_bars_at_one_length_stand_side_by_side fail; looping over b.groupby("scheme") (by name)
makes test_the_legend_lists_schemes_in_the_order_of_the_table fail; in _length_axis, dropping the set_xticks line or the axvline
makes test_x_ticks_are_the_evaluated_lengths_and_the_training_length_is_marked fail; in
suite/report/plots.py, ``panels`` without its family split (one axes past MANY_LINES) makes
test_thirteen_schemes_are_drawn_in_family_panels_each_in_its_own_look fail; ``TaskBoards.plots`` drawing each
task plot without the report's ``styles`` makes test_a_scheme_keeps_its_look_in_every_plot_of_a_report fail.
"""
import math

import matplotlib.colors
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.report import boards, labels, plots, render, styles
from suite.results import store
from tests.test_report import _row, frame

ZOO = ["alibi", "cope", "fire", "kerple", "learned", "nope", "p-rope", "randomized", "rope", "sinusoidal", "t5",
       "xpos", "forgetting"]


def board(cells, task="copy", train_len=32, metric="token_accuracy"):
    """A leaderboard from (scheme, eval_len, mean, ci_low, ci_high) cells, n=5 each."""
    b = pd.DataFrame(cells, columns=["scheme", "eval_len", "mean", "ci_low", "ci_high"])
    return b.assign(task=task, n=5, std=0.0, metric=metric, train_len=train_len, status="ok", not_learned=0, runs=5)


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots draw, instead of their PNG bytes."""
    drawn = []
    monkeypatch.setattr(plots, "png", lambda fig: drawn.append(fig) or plots.Plot(b"", []))
    yield drawn
    for fig in drawn:
        plt.close(fig)


def looks(fig) -> dict[str, tuple[str, str]]:
    """{legend label: (colour, marker)} of the scheme lines of the figure's first axes."""
    handles, labels = fig.axes[0].get_legend_handles_labels()
    return {label: (matplotlib.colors.to_hex(h.lines[0].get_color()), h.lines[0].get_marker())
            for h, label in zip(handles, labels) if hasattr(h, "lines")}


def test_thirteen_schemes_are_drawn_in_family_panels_each_in_its_own_look(figures):
    """Thirteen schemes (past ``plots.MANY_LINES``) on one task: a panel per family, every scheme
    drawn (rope in the classic six's and the rotary panel, in one look), no two schemes alike, the
    classic six in colours no other scheme takes, alibi and sinusoidal apart (both tab10 blue once)."""
    plots.plot_task(board([(s, 64, 0.5, 0.4, 0.6) for s in ZOO]), "copy")
    fig = figures[0]
    assert [ax.get_title() for ax in fig.axes] == ["classic six", "rotary variants", "additive biases",
                                                   "data-dependent", "other schemes"]
    seen = {}
    for line in styles.drawn(fig):
        seen.setdefault(line["label"], set()).add((line["color"], line["marker"]))
    assert sorted(seen) == sorted(ZOO) and all(len(v) == 1 for v in seen.values())
    got = {label: next(iter(v)) for label, v in seen.items()}
    assert len(set(got.values())) == 13 and got["alibi"][0] != got["sinusoidal"][0]
    classic = ("alibi", "learned", "nope", "rope", "sinusoidal", "t5")
    assert not {got[s][0] for s in classic} & {got[s][0] for s in ZOO if s not in classic}


def test_a_scheme_keeps_its_look_in_every_plot_of_a_report(figures, tmp_path):
    # alibi only on copy: with a style per plot, rope and t5 would shift colour between copy and vt
    rows = [_row(f"{s}-{t}", s, 0, t, 32, 0.9, metric=store.task_headlines()[t]) for t in ("copy", "vt")
            for s in ("rope", "t5")]
    rows += [_row("alibi-copy", "alibi", 0, "copy", 32, 0.9, metric=store.task_headlines()["copy"])]
    render.save(render.build(frame(rows), "fx"), tmp_path / "fx")
    by_title = {f.axes[0].get_title(): looks(f) for f in figures if f.axes and f.axes[0].get_title() in ("copy", "vt")}
    assert set(by_title["copy"]) == {"alibi", "rope", "t5"} and set(by_title["vt"]) == {"rope", "t5"}
    assert all(by_title["vt"][s] == by_title["copy"][s] for s in ("rope", "t5"))


def test_x_ticks_are_the_evaluated_lengths_and_the_training_length_is_marked(figures):
    lengths = [32, 40, 48, 64, 128, 256]
    plots.plot_task(board([(s, x, 0.5, 0.4, 0.6) for s in ("rope", "alibi") for x in lengths], train_len=64), "copy")
    ax = figures[0].axes[0]
    figures[0].canvas.draw()
    assert list(ax.get_xticks()) == lengths
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32", "40", "48", "64", "128", "256"]
    assert len(ax.xaxis.get_minorticklocs()) == 0
    dashed = [line for line in ax.get_lines() if list(line.get_xdata()) == [64, 64] and line.get_linestyle() == "--"]
    assert len(dashed) == 1 and any(t.get_text() == "trained at 64" for t in ax.texts)
    left = ax.get_xlim()[0]
    spans = [p for p in ax.patches if p.get_x() == pytest.approx(left) and p.get_x() + p.get_width() == pytest.approx(64)]
    assert len(spans) == 1 and left < 32  # shaded: every length up to the training length


def test_the_legend_lists_schemes_in_the_order_of_the_table(figures):
    b = board([("rope", 64, 0.9, 0.8, 1.0), ("alibi", 64, 0.5, 0.4, 0.6), ("t5", 64, 0.7, 0.6, 0.8),
               ("nope", 64, 0.8, 0.7, 0.9)])
    plots.plot_task(b, "copy")
    labels = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert labels == ["rope", "nope", "t5", "alibi"] == list(boards.pivot(b, "copy").index)


def test_error_bars_at_one_length_stand_side_by_side(figures):
    lengths, schemes = [32, 40, 48, 64, 128, 256], ["alibi", "t5", "nope", "rope", "sinusoidal", "learned"]
    plots.plot_task(board([(s, x, 0.8, 0.7, 0.9) for s in schemes for x in lengths]), "copy")
    fig = figures[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    width = max(c.lines[2][0].get_linewidth()[0] for c in ax.containers) * fig.dpi / 72  # a bar's width, px
    for i, length in enumerate(lengths):
        xs = sorted(float(c.lines[0].get_xdata()[i]) for c in ax.containers)
        px = [ax.transData.transform((x, 0.8))[0] for x in xs]
        assert min(b - a for a, b in zip(px, px[1:])) > width  # no two bars at one length overlap
        assert max(abs(math.log2(x / length)) for x in xs) < math.log2(40 / 32) / 2  # each still by its tick
    assert plots.dodge(1, lengths) == [1.0]


def test_the_y_axis_fits_the_data_and_clips_no_interval(figures):
    # flip-flop-like: every score between 0.6 and 1; an unsupported cell has no value to fit
    b = board([("alibi", 32, 1.0, 1.0, 1.0), ("alibi", 256, 0.91, 0.90, 0.92), ("rope", 32, 1.0, 0.99, 1.0),
               ("rope", 256, 0.64, 0.61, 0.68), ("learned", 256, math.nan, math.nan, math.nan)], task="flipflop")
    b.loc[b.scheme == "learned", "n"] = 0
    b.loc[b.scheme == "learned", "status"] = "unsupported"
    plots.plot_task(b, "flipflop")
    low, high = figures[0].axes[0].get_ylim()
    assert 0.55 < low < 0.61 and 1.0 < high < 1.05  # 0.61 to 1 and a margin, not 0 to 1
    assert plots.fitted(b) == pytest.approx((0.61 - 0.06 * 0.39, 1.0 + 0.06 * 0.39))
    assert plots.fitted(board([("rope", 32, 1.0, 1.0, 1.0)])) == pytest.approx((0.98, 1.02))  # one value: 0.02 aside


def _split_rows(run, scheme, seed, sparse, dense):
    """A flip-flop run at 32 and 64 tokens: the whole set and its sparse and dense splits."""
    out = []
    for eval_len in (32, 64):
        for part, value in (("all", (sparse + dense) / 2), ("split=sparse", sparse), ("split=dense", dense)):
            out.append({**_row(run, scheme, seed, "flipflop", eval_len, value, metric="string_match_all"),
                        "slice": part})
    return out


def test_each_split_table_has_its_plot_beside_it(figures, tmp_path):
    df = frame(_split_rows("r0", "rope", 0, 0.6, 1.0) + _split_rows("r1", "rope", 1, 0.8, 0.9)
               + _split_rows("a0", "alibi", 0, 0.9, 0.7))
    out = render.save(render.build(df, "fx"), tmp_path / "fx")
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == [
        "flipflop.dense.png", "flipflop.png", "flipflop.sparse.png", "summary.png"]
    drawn = {f.axes[0].get_title(): f.axes[0] for f in figures if f.axes}
    sparse = {label: list(h.lines[0].get_ydata()) for h, label in zip(*drawn["flipflop, split sparse"]
                                                                      .get_legend_handles_labels())}
    assert sparse["rope"] == pytest.approx([0.7, 0.7]) and sparse["alibi"] == pytest.approx([0.9, 0.9])
    md = (out / "index.md").read_text()
    for split in ("dense", "sparse"):  # the plot follows its own table, before the next heading
        section = md.split(f"### flipflop, split {split}")[1].split("#")[0]
        assert section.count("| rope") == 1 and f"![flipflop, split {split}](plots/flipflop.{split}.png)" in section
        page = (out / "index.html").read_text().split(f"<h3>flipflop, split {split}</h3>")[1].split("<h")[0]
        assert page.index("</table>") < page.index(f'<img alt="flipflop, split {split}" src="data:image/png')


def test_a_report_rebuilt_from_the_same_runs_is_the_same_bytes(tmp_path):
    df = frame(_split_rows("r0", "rope", 0, 0.6, 1.0) + _split_rows("a0", "alibi", 0, 0.9, 0.7))
    first, second = (render.write(df, "fx", tmp_path / name) for name in ("one", "two"))
    names = sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file())
    assert "plots/flipflop.sparse.png" in names and "plots/flipflop.sparse.styles.json" in names
    assert names == sorted(str(p.relative_to(second)) for p in second.rglob("*") if p.is_file())
    assert all((first / n).read_bytes() == (second / n).read_bytes() for n in names)


# no family holds these (``suite.report.families``), so all 24 stand on one axes; two labels longer than a legend shows
TWENTY_FOUR = [f"scheme{i:02d}" for i in range(22)] + ["hybrid decay_time_max=256 decay_time_min=2",
                                                       "pattern eval_positions=identity train_len=32"]


def test_twenty_four_lines_have_no_clash_and_the_legend_takes_at_most_a_quarter_of_the_width(figures):
    """The zoo's worst case and beyond: 24 schemes, two with long labels, on one plot. No two lines
    share colour and marker (as drawn, and as the report's style record says), the legend measured by
    matplotlib's renderer is at most 25 % of the figure's width, and the figure is taller than a
    four-line one.

    Mutation checks: in suite/report/styles.py ``_free`` returning the pair it is asked for (two
    hashed names share a pair) makes this fail; in suite/report/plots.py legend_beside without its
    set_size_inches (the figure stays 6.4 in wide) makes this fail; plot_task at a fixed height of
    3.6 in makes this fail."""
    plots.plot_task(board([(s, x, 0.5, 0.4, 0.6) for s in TWENTY_FOUR for x in (32, 64, 128)]), "copy")
    plots.plot_task(board([(s, x, 0.5, 0.4, 0.6) for s in ("rope", "alibi", "t5", "nope") for x in (32, 64)]), "copy")
    fig, small = figures
    got = looks(fig)
    assert len(fig.axes) == 1 and sorted(got) == sorted(labels.short_labels(TWENTY_FOUR).values())
    assert len(set(got.values())) == 24 and max(map(len, got)) <= labels.LABEL_MAX
    assert styles.clashes(styles.drawn(fig)) == [] and len(styles.drawn(fig)) == 24
    for f in (fig, small):
        f.tight_layout()
        renderer = f.canvas.get_renderer()
        legend = f.axes[0].get_legend().get_window_extent(renderer)
        assert legend.width <= 0.25 * f.bbox.width, (legend.width, f.bbox.width)
        assert legend.x0 >= f.axes[0].get_window_extent(renderer).x1  # beside the data, not over it
        assert 0 <= legend.y0 and legend.y1 <= f.bbox.height  # the whole legend inside the figure
    assert fig.get_figheight() > small.get_figheight() == 3.6
    assert small.get_figwidth() == 6.4  # short labels: the usual width


def test_the_report_checks_style_record_finds_a_clash_in_a_twenty_four_line_plot(tmp_path):
    """The style record written beside a drawn plot passes the report check; the same record with
    two lines made alike fails it, naming both.

    Mutation check: in suite/report/styles.py ``_free`` returning the pair it is asked for makes this fail."""
    from suite.report import page_check
    plot = plots.plot_task(board([(s, x, 0.5, 0.4, 0.6) for s in TWENTY_FOUR for x in (32, 64)]), "copy")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "copy.png").write_bytes(plot.png)
    (tmp_path / "plots" / "copy.styles.json").write_text(plot.record())
    assert page_check.style_problems(tmp_path) == []
    lines = plot.lines
    lines[5] = {**lines[5], "color": lines[20]["color"], "marker": lines[20]["marker"]}
    (tmp_path / "plots" / "copy.styles.json").write_text(plots.Plot(b"", lines).record())
    problems = page_check.style_problems(tmp_path)
    assert len(problems) == 1 and lines[5]["label"] in problems[0] and lines[20]["label"] in problems[0]
