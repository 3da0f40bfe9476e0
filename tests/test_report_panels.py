"""Boards with many lines drawn as small multiples: a panel per setting on a board ranked setting by
setting, a panel per scheme family on the zoo's; the score axis says which way is better; the
ranks by setting as a bump chart in "Does the ranking hold?".

Mutation checks: in suite/report/plots.py, ``panels`` without its setting branch makes
test_a_board_of_four_settings_draws_one_panel_per_setting fail; ``MANY_LINES = 30`` makes
test_the_zoo_board_draws_a_panel_per_family fail; ``direction`` saying 'lower' where higher is
better makes test_the_score_axis_says_which_way_is_better fail. In suite/report/families.py,
``families_of`` without its bare-name condition for the classic six (every rope variant among
them) makes test_every_position_scheme_has_a_family_and_variants_go_with_their_scheme fail. In
suite/report/rank_plot.py, ``plot_ranks`` drawing ``mrr_ood`` in place of ``rank``, or leaving
the rank axis upright (rank 6 on top), makes test_the_bump_chart_draws_each_schemes_rank_in_each_setting
fail; ``Settings.blocks`` without its Image makes test_the_ranking_section_shows_its_bump_chart fail.
"""
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.report import families, plots, rank_plot, render
from tests.test_ranking_holds import _rows
from tests.test_report import frame
from tests.test_report_looks import ZOO

SETTINGS = ["L=32 · tiny · d_model 64 · 4 heads", "L=32 · mini · d_model 96 · 3 heads",
            "L=64 · tiny · d_model 64 · 4 heads", "L=128 · tiny · d_model 64 · 4 heads"]


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots draw, instead of their PNG bytes."""
    drawn = []
    monkeypatch.setattr(plots, "png", lambda fig: drawn.append(fig) or plots.Plot(b"", []))
    monkeypatch.setattr(rank_plot, "png", lambda fig: drawn.append(fig) or plots.Plot(b"", []))
    yield drawn
    for fig in drawn:
        plt.close(fig)


def cells(schemes, metric="token_accuracy", higher=True, train_len=32, **more):
    """A board's cells: each scheme at L and 2L, scores spread so its order is the given one."""
    rows = [{"scheme": s, "eval_len": e, "mean": 0.9 - 0.05 * k, "train_len": train_len, **more}
            for k, s in enumerate(schemes) for e in (train_len, 2 * train_len)]
    b = pd.DataFrame(rows)
    return b.assign(ci_low=b["mean"] - 0.02, ci_high=b["mean"] + 0.02, task="copy", n=3, std=0.0, metric=metric,
                    higher_is_better=higher, low=0.0, high=1.0, share=False, status="ok", not_learned=0, runs=3)


def scale_like() -> pd.DataFrame:
    """The scale board's shape: six schemes in each of four settings, each row its scheme's long
    label, its setting, the setting's place and the scheme's name within it."""
    six = ["alibi", "t5", "nope", "rope", "sinusoidal", "learned"]
    parts = [cells(six if at % 2 == 0 else six[::-1], train_len=int(setting.split(" ")[0][2:]),
                   setting=setting, setting_at=at).assign(name=lambda b: b.scheme)
             for at, setting in enumerate(SETTINGS)]
    b = pd.concat(parts, ignore_index=True)
    return b.assign(scheme=b["name"] + " train_len=" + b.train_len.astype(str) + " at=" + b.setting_at.astype(str))


def legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_board_of_four_settings_draws_one_panel_per_setting(figures):
    """One axes per setting, titled by it, in the settings' order, under the task's title; each
    holds that setting's six lines, named by scheme alone, best first; all on one y range."""
    plots.plot_task(scale_like(), "copy")
    fig = figures[0]
    assert [ax.get_title() for ax in fig.axes] == SETTINGS and fig._suptitle.get_text() == "copy"
    assert legend(fig.axes[0]) == ["alibi", "t5", "nope", "rope", "sinusoidal", "learned"]
    assert legend(fig.axes[1]) == ["learned", "sinusoidal", "rope", "nope", "t5", "alibi"]
    assert len({ax.get_ylim() for ax in fig.axes}) == 1
    assert [t.get_text() for t in fig.axes[3].texts] == ["trained at 128"]
    looks = {(line["label"], line["color"], line["marker"]) for line in plots.drawn(fig)}
    assert len(looks) == 6  # a scheme in one look in every setting


def test_the_zoo_board_draws_a_panel_per_family(figures):
    """The zoo's 23 schemes: the classic six, rotary variants, additive biases and data-dependent
    schemes, each its own panel holding its family's labels (short: 'fox dt_max=256 dt_min=2')."""
    plots.plot_task(cells(ZOO), "copy")
    fig = figures[0]
    assert [ax.get_title() for ax in fig.axes] == ["classic six", "rotary variants", "additive biases", "data-dependent"]
    by_title = {ax.get_title(): set(legend(ax)) for ax in fig.axes}
    assert by_title["classic six"] == {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"}
    assert by_title["rotary variants"] == {"rope", "rope drop_low=0.25", "xpos", "randomized", "pope", "fope",
                                           "randomized eval_positions=random", "rope>drope@0.8"}
    assert by_title["additive biases"] == {"alibi", "t5", "kerple", "kerple_power", "fire", "dape", "dape base=kerple"}
    assert by_title["data-dependent"] == {"fox", "fox dt_max=256 dt_min=2", "stickbreaking", "path", "cope"}
    plots.plot_task(cells(ZOO[:12]), "copy")
    assert len(figures[1].axes) == 1  # up to MANY_LINES: one axes


def test_every_zoo_scheme_has_a_family_and_variants_go_with_their_scheme():
    """Every position scheme on the zoo board falls in a family, and every family names
    registered schemes; the classic six's panel holds them only at their defaults; a schedule
    ('rope>drope@0.8') goes with the scheme it ends on; a pattern or a scheme no family holds
    ('llama4 c=16', one added after the list) stands in the last panel, so adding a scheme needs
    no entry here (tests/test_add_a_scheme.py)."""
    import gzip
    import json

    from suite.model.position import SCHEMES
    from suite.results import store

    with gzip.open(store.shipped_path("zoo"), "rt") as shipped:  # each line one run: its record and rows
        zoo = {layer["position"] for line in shipped for layer in json.loads(line)["run"]["spec"]["model"]["layers"]}
    assert len(zoo) >= 15 and all(families.families_of(name) for name in zoo), sorted(zoo)
    assert {name for members in families.FAMILIES.values() for name in members} <= set(SCHEMES)
    assert families.split(["my_scheme"]) == [(families.OTHER, ["my_scheme"])]
    assert families.families_of("rope") == [families.CLASSIC, "rotary variants"]
    assert families.families_of("rope drop_low=0.25") == ["rotary variants"]
    assert families.scheme_of("rope>drope@0.8") == "drope"
    assert families.split(["llama4 c=16", "alibi swa w=16"]) == [("additive biases", ["alibi swa w=16"]),
                                                                 (families.OTHER, ["llama4 c=16"])]


def test_the_score_axis_says_which_way_is_better(figures):
    """Token accuracy (higher is better) and bits per byte (lower is better), as each metric's
    stored declaration says; a lower-is-better board's legend still lists the best (lowest) first."""
    assert plots.score_label(cells(["rope"])) == "token accuracy (higher is better)"
    plots.plot_task(cells(["rope", "alibi"], metric="bits_per_byte", higher=False), "copy")
    ax = figures[0].axes[0]
    assert ax.get_ylabel() == "bits per byte (lower is better)" and legend(ax) == ["alibi", "rope"]
    assert plots.score_label(cells(["rope"], metric="loss", higher=None)) == "loss"
    from suite.data.metrics import METRICS
    assert plots.direction(METRICS["bits_per_byte"].higher_is_better) == " (lower is better)"


def test_the_bump_chart_draws_each_schemes_rank_in_each_setting(figures):
    """x: the settings in order; y: each scheme's rank there (rank 1 on top), a gap where a scheme
    is not ranked; the legend by mean rank."""
    table = pd.DataFrame({"setting": ["L=32"] * 3 + ["L=64"] * 2, "scheme": ["a", "b", "c", "b", "a"],
                          "rank": [1, 2, 3, 1, 2], "mrr_ood": [1.0, 0.5, 0.3, 1.0, 0.5]})
    rank_plot.plot_ranks(table, ["L=32", "L=64"])
    ax = figures[0].axes[0]
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert lines["a"] == [1, 2] and lines["b"] == [2, 1] and lines["c"][0] == 3 and pd.isna(lines["c"][1])
    assert [list(line.get_xdata()) for line in ax.get_lines()][0] == [0, 1]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["L=32", "L=64"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1] and list(ax.get_yticks()) == [1, 2, 3]
    assert legend(ax) == ["a", "b", "c"]


def test_the_ranking_section_shows_its_bump_chart(tmp_path):
    """A board of two training lengths: plots/ranking_by_setting.png beside the section's table,
    linked from the page; a board of one setting draws none."""
    out = render.write(frame(_rows({32: list("abc"), 64: list("cba")})), "fx", tmp_path / "two")
    assert (out / "plots" / "ranking_by_setting.png").stat().st_size > 1000
    md = (out / "index.md").read_text().split("## Does the ranking hold?")[1]
    assert md.index("| a ") < md.index("![rank of each scheme in each setting](plots/ranking_by_setting.png)")
    one = render.write(frame(_rows({32: list("abc")})), "fx", tmp_path / "one")
    assert not (one / "plots" / "ranking_by_setting.png").exists()
