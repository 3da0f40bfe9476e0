"""A scheme's look is its own: fixed by its name, the same beside any other schemes and in any
process, and the legend's labels short (at most ``labels.LABEL_MAX`` characters, never two alike).

Mutation checks: in suite/report/styles.py, ``colour_of`` hashing every name (the classic six not
pinned) makes test_the_classic_six_keep_their_colours_and_no_other_scheme_takes_them fail;
``style_map`` numbering the sorted names as before (``COLOURS[i]`` of the i-th) makes
test_a_scheme_keeps_its_look_on_a_board_with_other_schemes fail; ``_digest`` reading Python's
``hash(name)`` makes test_looks_are_the_same_in_every_process fail; ``_free`` returning the pair it
is asked for (no clash moved) makes test_a_clash_moves_the_later_names_marker_and_never_a_colour
fail. In suite/report/labels.py, ``_fitted`` leaving out an option whatever the others read
(no ``_distinct`` check) makes test_the_scale_boards_labels_fit_and_read_apart fail;
``short_labels`` keeping the shared options makes test_shared_options_are_said_once_in_the_title
fail; ``_bounded`` cutting without the digest makes test_two_long_labels_cut_alike_still_read_apart
fail.
"""
import json
import os
import subprocess
import sys

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.report import labels, plots, styles

CLASSIC = ["nope", "sinusoidal", "learned", "rope", "alibi", "t5"]
ZOO = ["alibi", "cope", "dape", "dape base=kerple", "fire", "fope", "fox", "fox decay_time_max=256 decay_time_min=2",
       "kerple", "kerple_power", "learned", "nope", "path", "pope", "randomized", "randomized eval_positions=random",
       "rope", "rope drop_low=0.25", "rope>drope@0.8", "sinusoidal", "stickbreaking", "t5", "xpos"]
# the scale board's labels as published/scale.jsonl.gz names them (boards.primary's ``scheme``)
SCALE = [f"{s} d_ff={ff} d_model={d} n_heads={h} name={name} train_len={L}{extra} batch_size={bs} seq_len={L}"
         for s in ("alibi", "learned", "nope", "rope", "sinusoidal", "t5")
         for ff, d, h, name, L, bs in ((192, 64, 4, "tiny", 32, 32), (288, 96, 3, "mini", 32, 32),
                                       (192, 64, 4, "tiny", 64, 16), (192, 64, 4, "tiny", 128, 8))
         for extra in ([f" max_positions={8 * L}"] if s == "learned" else [""])]


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots draw, instead of their PNG bytes."""
    drawn = []
    monkeypatch.setattr(plots, "png", lambda fig: drawn.append(fig) or plots.Plot(b"", []))
    yield drawn
    for fig in drawn:
        plt.close(fig)


def board(schemes, task="copy"):
    """A one-task board: each scheme at 32 and 64, scores spread so the legend order is the given one."""
    cells = [(s, e, 0.9 - 0.01 * k) for k, s in enumerate(schemes) for e in (32, 64)]
    b = pd.DataFrame(cells, columns=["scheme", "eval_len", "mean"])
    return b.assign(ci_low=b["mean"] - 0.05, ci_high=b["mean"] + 0.05, task=task, n=3, std=0.0,
                    metric="token_accuracy", train_len=32, status="ok", not_learned=0, runs=3)


def drawn_looks(fig) -> dict[str, tuple[str, str]]:
    """{legend label: (colour, marker)} of every axes' lines of a figure."""
    return {line["label"]: (line["color"], line["marker"]) for line in styles.drawn(fig)}


def test_the_classic_six_keep_their_colours_and_no_other_scheme_takes_them():
    """The flagship's six in the looks every report drew them in (the i-th colour and marker of
    their sorted names); every other zoo scheme in another colour."""
    looks = styles.style_map(ZOO)
    assert [looks[s] for s in sorted(CLASSIC)] == [styles.Style(styles.COLOURS[i], styles.MARKERS[i]) for i in range(6)]
    assert not {looks[s].color for s in ZOO if s not in CLASSIC} & {looks[s].color for s in CLASSIC}


def test_a_scheme_keeps_its_look_on_a_board_with_other_schemes(figures):
    """Two boards, the flagship's six and the zoo's 23 (13 of them alone on a third): each scheme
    both draw is drawn in one colour and one marker, and no two lines of a figure look alike."""
    plots.plot_task(board(CLASSIC), "copy")
    plots.plot_task(board(ZOO), "copy")
    plots.plot_task(board(ZOO[:13]), "copy")
    classic, zoo, part = (drawn_looks(f) for f in figures)
    assert len(zoo) == 23 and all(classic[s] == zoo[s] for s in CLASSIC)
    assert all(part[s] == zoo[s] for s in part if s in zoo) and len(part) >= 10
    assert styles.clashes(styles.drawn(figures[1])) == []
    assert len(set(styles.style_map(ZOO).values())) == 23


def test_looks_are_the_same_in_every_process():
    """The looks of the zoo's schemes computed in two other processes, each with its own string
    hashing salt, are this process's."""
    code = "import json; from suite.report import styles; print(json.dumps(styles.style_map(json.loads(input()))))"
    here = {k: list(v) for k, v in styles.style_map(ZOO).items()}
    for salt in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(ZOO), capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": salt}, cwd=os.getcwd())
        assert json.loads(out.stdout) == here


def test_a_clash_moves_the_later_names_marker_and_never_a_colour():
    """Two names that hash to one colour and one marker: the first by name keeps its look, the
    other keeps its colour and takes the colour's next free marker."""
    names = [f"scheme{i}" for i in range(400)]
    asked = {}
    for name in names:
        asked.setdefault((styles.colour_of(name), styles.marker_of(name)), []).append(name)
    first, second = next(v for v in asked.values() if len(v) > 1)[:2]
    looks = styles.style_map([second, first])
    c, m = styles.colour_of(first), styles.marker_of(first)
    assert looks[first] == styles.Style(styles.COLOURS[c], styles.MARKERS[m])
    assert looks[second] == styles.Style(styles.COLOURS[c], styles.MARKERS[(m + 1) % len(styles.MARKERS)])
    assert styles.style_map([second]) == {second: looks[first]}  # alone, it keeps the look it asks for


def test_a_plots_own_groups_differ_by_colour_before_marker():
    names = [f"group {i:02d}" for i in range(20)]
    looks = styles.distinct_map(reversed(names))
    first = [looks[n] for n in names[:len(styles.COLOURS)]]
    assert len({look.color for look in first}) == len(styles.COLOURS)  # the first sixteen: sixteen colours
    assert len(set(looks.values())) == 20 and looks["group 16"].marker != looks["group 00"].marker


def test_the_scale_boards_labels_fit_and_read_apart():
    """The scale board's 24 labels (up to 95 characters) on one legend: each at most 32 characters,
    no two alike, the setting that tells them apart kept (train_len, abbreviated t_len), the same on
    every call; 'fox decay_time_max=256 decay_time_min=2' keeps both options, abbreviated."""
    assert max(len(s) for s in SCALE) > 90 and len(SCALE) == 24
    short = labels.short_labels(SCALE)
    assert all(len(v) <= labels.LABEL_MAX for v in short.values()) and len(set(short.values())) == len(SCALE)
    assert short == labels.short_labels(list(reversed(SCALE)))
    mini = "rope d_ff=288 d_model=96 n_heads=3 name=mini train_len=32 batch_size=32 seq_len=32"
    tiny = "rope d_ff=192 d_model=64 n_heads=4 name=tiny train_len=32 batch_size=32 seq_len=32"
    assert short[mini].startswith("rope ") and "t_len=32" in short[mini] and short[mini] != short[tiny]
    assert labels.short_labels(["fox", "fox decay_time_max=256 decay_time_min=2"]) == {
        "fox": "fox", "fox decay_time_max=256 decay_time_min=2": "fox dt_max=256 dt_min=2"}
    assert labels.short_labels(["rope", "alibi swa w=16"]) == {"rope": "rope", "alibi swa w=16": "alibi swa w=16"}


def test_shared_options_are_said_once_in_the_title(figures):
    """The scale board's six schemes at L = 32 on one axes: every line shares train_len=32,
    batch_size=32 and seq_len=32, which the title says once and no legend entry repeats; two
    short labels sharing w=16 read 'rope' and 'alibi swa'."""
    at32 = [s for s in SCALE if "train_len=32 " in s]
    assert labels.shared_options(at32) == ["train_len=32", "batch_size=32", "seq_len=32"]
    plots.plot_task(board(at32), "copy")
    ax = figures[0].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 12 and not any("len=" in label or "size=" in label for label in legend)
    assert all(len(label) <= labels.LABEL_MAX for label in legend) and len(set(legend)) == 12
    assert ax.get_title() == "copy (every line: train_len=32 batch_size=32 seq_len=32)"
    assert labels.short_labels(["rope w=16", "alibi swa w=16"]) == {"rope w=16": "rope", "alibi swa w=16": "alibi swa"}


def test_two_long_labels_cut_alike_still_read_apart():
    """Two labels alike in their first 40 characters, each too long with nothing to leave out:
    each cut to 32 characters, ending in a digest of the whole, so the two differ."""
    a, b = "x" * 40 + " a", "x" * 40 + " b"
    short = labels.short_labels([a, b])
    assert all(len(v) == labels.LABEL_MAX for v in short.values()) and short[a] != short[b]
    assert short[a].startswith("x" * 20) and "~" in short[a]


def test_no_two_schemes_of_a_zoo_panel_share_a_colour():
    """Each family panel of the zoo's plots (``families.split``) draws every scheme in a colour of
    its own, so a reader tells them apart by colour before marker.

    Mutation check: in suite/report/styles.py, ``SALT = ""`` makes this fail."""
    from suite.report import families

    looks = styles.style_map(ZOO)
    for title, members in families.split(ZOO):
        assert len({looks[s].color for s in members}) == len(members), title


def test_the_summary_heatmap_labels_its_rows_short(monkeypatch):
    """The summary heatmap of the scale board's 24 labels: each row's label at most 32 characters,
    no two alike, in the order given.

    Mutation check: in suite/report/sections/summary.py ``plot_summary`` labelling its rows by
    ``schemes`` (the whole labels) makes this fail."""
    from suite.report.sections import summary

    drawn = []
    monkeypatch.setattr(summary, "png", lambda fig: drawn.append(fig) or plots.Plot(b"", []))
    b = board(SCALE).assign(train_len=16)  # every cell beyond training
    summary.plot_summary(b, SCALE)
    rows = [t.get_text() for t in drawn[0].axes[0].get_yticklabels()]
    plt.close(drawn[0])
    assert len(rows) == 24 and len(set(rows)) == 24 and max(map(len, rows)) <= labels.LABEL_MAX
    assert rows == [labels.short_labels(SCALE)[s] for s in SCALE]
