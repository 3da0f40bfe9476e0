"""``posbench compare``: sweeps side by side, cells matched by the configuration a user means (the
stored spec less seed, code digest and sweep), with the difference, its Welch interval and a
verdict, a table that fits 120 columns and a plot with labelled axes, bands and L.

Toy pair: sweep A stores its runs as a fresh run does (no ``sweep`` in the spec, code ``aaaa``),
sweep B as a shipped board does (``"sweep": "b"`` in the spec, code ``bbbb``, so another
``config_hash``); three seeds each. Mutation checks are named in each test's docstring."""
import dataclasses
import functools

import matplotlib.colors
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.report.compare import compare_table, main
from suite.report.compare_plot import plot
from suite.report.compare_text import render
from suite.report.styles import style_map
from suite.results import shipped, store
from tests.conftest import make_spec, spec_for
from tests.test_report import _row

# the hand computation of Welch's interval for 3 against 3 seeds with s² = 0.01 on each side:
# se = sqrt(2 · 0.01 / 3) = 0.0816497, ν = 4 (equal variances and sizes), t_{0.975, 4} = 2.7764451
HALF = 2.7764451 * 0.0816497


@functools.cache
def spec(*overrides):
    return make_spec(*overrides)


def _store(root, sweep, run_spec, label, values, *, code, shipped_like=False, drop_option=False, model_name=None,
           metric="token_accuracy"):
    """One run per seed of ``run_spec`` with the copy scores ``values`` {eval_len: [per seed]}."""
    for seed in range(len(next(iter(values.values())))):
        run = dataclasses.replace(run_spec, seed=seed, code=code)
        stored = run.to_dict()
        if shipped_like:  # a copied board's spec names its sweep
            stored["sweep"] = sweep
        if drop_option:  # a spec stored before the option ``train.compile`` existed (at its default)
            del stored["train"]["compile"]
        if model_name:  # the same model under another label
            stored["model"]["name"] = model_name
        rid = f"{label.replace(' ', '_')}-s{seed}-{code}"
        rows = [{**_row(rid, label, seed, "copy", n, v[seed], metric=metric, config=run.config_hash,
                        steps=run.train.steps), "sweep": sweep} for n, v in values.items()]
        store.write_run(root, sweep, rid, {"run_id": rid, "sweep": sweep, "spec": stored}, rows)
    return root / sweep


def _sweep(root, sweep, cells, digest=""):
    """A toy sweep folder (also used by the message and fault tests): cells {(scheme, seed): (value
    at 32, value at 64)}; config_hash cfg-<scheme><digest>, specs that name only what the store checks."""
    for (scheme, seed), (v32, v64) in cells.items():
        rid = f"{scheme}-{seed}"
        rows = [{**_row(rid, scheme, seed, "copy", n, v, config=f"cfg-{scheme}{digest}"), "sweep": sweep}
                for n, v in ((32, v32), (64, v64))]
        spec_ = spec_for(rows, model={"layers": [{"position": scheme, "span": "full"}]})
        store.write_run(root, sweep, rid, {"run_id": rid, "sweep": sweep, "spec": spec_}, rows)
    return root / sweep


def _pair(tmp_path, **b_options):
    a, b = tmp_path / "fresh", tmp_path / "shipped"
    _store(a, "a", spec("position=rope"), "rope", {32: [0.9, 0.8, 1.0], 64: [0.2, 0.3, 0.4]}, code="aaaa")
    _store(a, "a", spec("position=alibi"), "alibi", {32: [0.9, 0.95, 1.0], 64: [0.1, 0.15, 0.2]}, code="aaaa")
    _store(b, "b", spec("position=rope"), "rope", {32: [0.5, 0.7, 0.6], 64: [0.4, 0.2, 0.3]}, code="bbbb",
           shipped_like=True, **b_options)
    _store(b, "b", spec("position=alibi"), "alibi", {32: [0.92, 0.97, 0.95], 64: [0.6, 0.7, 0.65]}, code="bbbb",
           shipped_like=True, **b_options)
    return a / "a", b / "b"


def test_cells_match_across_sweep_seed_and_code_digest_with_welchs_difference(tmp_path):
    """rope at 32: A (0.9, 0.8, 1.0) against B (0.5, 0.7, 0.6): 0.3 ± HALF, better; rope at 64: the
    same values in another seed order, same; alibi at 32 not separated; alibi at 64 worse.

    Mutation check: leaving ``code`` out of ``compare.IGNORED`` matches nothing and makes this fail;
    leaving ``seed`` out splits every cell by seed (n_seeds 1). (The sweep is dropped twice on this
    path, by ``RunSpec.to_dict`` and by ``IGNORED``; the next test but one holds ``IGNORED`` to it.)"""
    a, b = _pair(tmp_path)
    table = compare_table({"A": store.load(a), "B": store.load(b)}).set_index(["scheme", "eval_len"])
    assert sorted(table.index) == [("alibi", 32), ("alibi", 64), ("rope", 32), ("rope", 64)]
    assert (table["n_seeds [A]"] == 3).all() and (table["n_seeds [B]"] == 3).all()
    rope = table.loc[("rope", 32)]
    assert rope["mean [A]"] == pytest.approx(0.9) and rope["mean [B]"] == pytest.approx(0.6)
    assert rope["diff [B]"] == pytest.approx(0.3)
    assert (rope["diff_low [B]"], rope["diff_high [B]"]) == (pytest.approx(0.3 - HALF, abs=1e-6),
                                                             pytest.approx(0.3 + HALF, abs=1e-6))
    assert table["verdict [B]"].to_dict() == {("alibi", 32): "not separated", ("alibi", 64): "worse",
                                              ("rope", 32): "better", ("rope", 64): "same"}
    assert table.loc[("rope", 64), "diff [B]"] == pytest.approx(0.0)


def test_both_directions_and_a_shipped_file_as_either_source(tmp_path, capsys):
    """B against A: the difference negated, better and worse swapped, same stays same; the command
    matches a folder and a packed shipped file in either order.

    Mutation check: ``welch_interval(b, a)`` in ``compare_table`` (the other source's mean minus the
    first's) makes this fail."""
    a, b = _pair(tmp_path)
    table = compare_table({"B": store.load(b), "A": store.load(a)}).set_index(["scheme", "eval_len"])
    rope = table.loc[("rope", 32)]
    assert rope["diff [A]"] == pytest.approx(-0.3)
    assert (rope["diff_low [A]"], rope["diff_high [A]"]) == (pytest.approx(-0.3 - HALF, abs=1e-6),
                                                             pytest.approx(-0.3 + HALF, abs=1e-6))
    assert table["verdict [A]"].to_dict() == {("alibi", 32): "not separated", ("alibi", 64): "better",
                                              ("rope", 32): "worse", ("rope", 64): "same"}
    packed = tmp_path / "b.jsonl.gz"
    shipped.pack(b, packed)
    for order in ([a, packed], [packed, a]):
        out = tmp_path / f"cmp-{order[0].name}"
        assert main([*map(str, order), "--out", str(out)]) == 0
        csv = pd.read_csv(out / "compare.csv")
        assert len(csv) == 4 and f"mean [{order[1]}]" in csv and f"verdict [{order[1]}]" in csv
        assert sorted(csv[f"verdict [{order[1]}]"]) == ["better", "not separated", "same", "worse"]
        assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "4 cells: 1 same, 1 better, 1 worse, 1 not separated" in printed


def test_a_spec_stored_before_an_option_existed_matches(tmp_path):
    """B's specs lack ``train.compile`` (an option at its default): the spec rebuilt by this code
    is the same configuration.

    Mutation check: ``configuration`` taking the spec as stored (no ``run_spec_from_dict``) makes
    this fail."""
    a, b = _pair(tmp_path, drop_option=True)
    table = compare_table({"A": store.load(a), "B": store.load(b)})
    assert len(table) == 4


def test_the_models_name_is_a_label_not_the_configuration(tmp_path):
    """'tiny(n_heads=4)' and 'tiny' with equal sizes are one model (today's sweep files name an
    overridden model so, while rows stored by older code say 'tiny').

    Mutation check: keeping ``model.name`` in ``compare.configuration`` makes this fail."""
    a, b = _pair(tmp_path, model_name="tiny(n_heads=4)")
    assert len(compare_table({"A": store.load(a), "B": store.load(b)})) == 4


def test_a_spec_this_code_cannot_rebuild_is_matched_as_stored_less_seed_code_and_sweep(tmp_path):
    """A stored spec that is no whole ``RunSpec`` (written by other code) is compared as stored:
    without its seed, code digest and sweep, and with everything else.

    Mutation check: leaving ``sweep`` out of ``compare.IGNORED`` makes this fail (B names its sweep,
    A does not); leaving ``code`` out does too."""
    for sweep, code, values, named in (("a", "aaaa", (0.9, 0.8), False), ("b", "bbbb", (0.9, 0.8), True)):
        for seed, value in enumerate(values):
            for scheme, steps in (("rope", 100), ("alibi", 100), ("alibi", 50)):
                rid = f"{scheme}{steps}-{seed}-{code}"
                partial = {"train": {"seq_len": 32, "steps": steps}, "eval": {"multiples": [1.0]}, "seed": seed,
                           "tasks": [{"name": "copy", "params": []}], "model": {"position": scheme}, "code": code,
                           **({"sweep": sweep} if named else {})}
                row = {**_row(rid, scheme, seed, "copy", 32, value, config=f"{rid}-cfg", steps=steps), "sweep": sweep}
                store.write_run(tmp_path, sweep, rid, {"run_id": rid, "sweep": sweep, "spec": partial}, [row])
    table = compare_table({"A": store.load(tmp_path / "a"), "B": store.load(tmp_path / "b")})
    assert len(table) == 3 and (table["n_seeds [A]"] == 2).all() and (table["verdict [B]"] == "same").all()
    assert sorted(table.scheme) == ["alibi steps=100", "alibi steps=50", "rope"]


def test_another_configuration_is_not_matched(tmp_path, capsys):
    """rope trained 20 steps, and rope over a sliding window of 16, are not A's rope; alibi still
    matches.

    Mutation check: matching on task, eval length and metric without ``config`` (``compare.KEY``)
    crosses the rope and alibi cells and makes this fail; so does ``IGNORED`` holding ``train``."""
    a = tmp_path / "fresh"
    _store(a, "a", spec("position=rope"), "rope", {32: [0.9, 0.8, 1.0]}, code="aaaa")
    _store(a, "a", spec("position=alibi"), "alibi", {32: [0.9, 0.95, 1.0]}, code="aaaa")
    b = tmp_path / "other"
    _store(b, "b", spec("position=rope", "train.steps=20"), "rope", {32: [0.5, 0.7, 0.6]}, code="bbbb")
    _store(b, "b", spec("position=alibi"), "alibi", {32: [0.92, 0.97, 0.95]}, code="bbbb", shipped_like=True)
    table = compare_table({"A": store.load(a / "a"), "B": store.load(b / "b")})
    assert list(table.scheme) == ["alibi"] and table["verdict [B]"].tolist() == ["not separated"]
    c = tmp_path / "swa"
    _store(c, "c", spec("position=rope", "span=swa", "span.window=16"), "rope", {32: [0.9, 0.8, 1.0]}, code="cccc")
    assert main([str(a / "a"), str(c / "c"), "--out", str(tmp_path / "cmp")]) == 1
    assert "no configuration is in all of" in capsys.readouterr().err


def test_a_lower_is_better_metric_reads_its_direction(tmp_path):
    """Loss: A's lower loss is better, B's higher loss is worse.

    Mutation check: ``verdict`` ignoring ``higher_is_better`` makes this fail."""
    a, b = tmp_path / "a", tmp_path / "b"
    _store(a, "a", spec("position=rope"), "rope", {32: [1.1, 1.2, 1.15]}, code="aaaa", metric="loss")
    _store(b, "b", spec("position=rope"), "rope", {32: [1.6, 1.7, 1.65]}, code="bbbb", metric="loss")
    ab = compare_table({"A": store.load(a / "a"), "B": store.load(b / "b")}, metric="loss")
    ba = compare_table({"B": store.load(b / "b"), "A": store.load(a / "a")}, metric="loss")
    assert ab["diff [B]"].tolist() == [pytest.approx(-0.5)] and ab["verdict [B]"].tolist() == ["better"]
    assert ba["verdict [A]"].tolist() == ["worse"]


def test_the_table_fits_120_columns_and_shows_the_difference(tmp_path):
    """Mutation check: removing the cut of the scheme column in ``compare_text._lines`` makes the
    width assertion fail; printing the difference without its interval, or no not-learned mark
    (``not_learned_marks`` returning ''), makes the row assertion fail."""
    a, b = _pair(tmp_path)
    table = compare_table({"A": store.load(a), "B": store.load(b)})
    text = render(table, ["A", "B"])
    assert "+0.300 [+0.073, +0.527]" in text and "copy: token_accuracy, higher is better, L = 32" in text
    rope = next(line for line in text.splitlines() if line.startswith("rope") and "better" in line)
    # A's seed 1 (0.8) and all of B's seeds score below 0.9 at L: rope is marked for each source
    assert rope.split() == ["rope", "(A:", "1", "of", "3", "not", "learned;", "B:", "3", "of", "3", "not", "learned)",
                            "32", "0.900", "0.600", "3/3", "+0.300", "[+0.073,", "+0.527]", "better"]
    assert not any(line.startswith("alibi (") for line in text.splitlines())  # every alibi run learned
    long = table.assign(scheme="fox " + "decay_time_max=None decay_time_min=None " * 4)
    lines = render(long, ["A", "B"]).splitlines()
    assert max(map(len, lines)) <= 120 and any("…" in line for line in lines)


def test_the_plot_labels_its_axes_shows_intervals_and_marks_l(tmp_path, monkeypatch):
    """Mutation check: deleting the ``fill_between`` band, the ``axvline`` at L or the
    ``set_ylabel`` call in ``compare_plot.plot`` makes this fail."""
    a, b = _pair(tmp_path)
    table = compare_table({"A": store.load(a), "B": store.load(b)})
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot(table, ["A", "B"])
    monkeypatch.undo()
    ax = figures[0].axes[0]
    assert ax.get_xlabel() == "eval length (tokens)" and ax.get_ylabel() == "token_accuracy (higher is better)"
    assert any(list(line.get_xdata()) == [32, 32] for line in ax.get_lines())  # the vertical line at L
    assert len(ax.collections) == 4  # one band per scheme and source: alibi A, alibi B, rope A, rope B
    rope_a = table[table.scheme == "rope"].sort_values("eval_len")
    ys = ax.collections[2].get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(rope_a["ci_low [A]"].min()) and max(ys) == pytest.approx(rope_a["ci_high [A]"].max())
    assert rope_a["ci_high [A]"].iloc[0] > rope_a["ci_low [A]"].iloc[0]  # a band with width
    plt.close(figures[0])


def test_one_source_or_no_shared_configuration_is_an_error(tmp_path, capsys):
    a = _store(tmp_path, "a", spec("position=rope"), "rope", {32: [1.0]}, code="aaaa")
    b = _store(tmp_path, "b", spec("position=t5"), "t5", {32: [0.1]}, code="aaaa")
    with pytest.raises(SystemExit):
        main([str(a)])
    assert "give two or more sources" in capsys.readouterr().err
    assert main([str(a), str(b), "--out", str(tmp_path / "cmp")]) == 1
    assert "no configuration is in all of" in capsys.readouterr().err


def test_the_comparison_plot_gives_each_of_thirteen_schemes_its_own_look(monkeypatch):
    """Thirteen schemes, thirteen looks (colour and marker), each the look its name gives in every
    report (``styles.style_map``: the colour fixed by the name, so two of them may share one and
    be told apart by the marker), the same for both sources.

    Mutation check: plot colouring by f"C{i % 10}" again makes this fail."""
    schemes = [f"scheme{i:02d}" for i in range(13)]
    table = pd.DataFrame({"task": "copy", "scheme": schemes, "eval_len": 64, "train_len": 32, "metric": "exact_match",
                          "higher_is_better": True, **{f"{c} [{s}]": v for s in "AB" for c, v in
                                                       (("mean", 0.5), ("ci_low", 0.4), ("ci_high", 0.6))}})
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot(table, ["A", "B"])
    assert len(figures) == 1
    lines = [line for line in figures[0].axes[0].get_lines() if " [" in line.get_label()]
    looks = {line.get_label(): (matplotlib.colors.to_hex(line.get_color()), line.get_marker()) for line in lines}
    for source in ("A", "B"):  # one look per scheme, the same for both sources (told apart by line style)
        of = [looks[f"{s} [{source}]"] for s in schemes]
        assert len(set(of)) == 13
        assert of == [(matplotlib.colors.to_hex(style_map(schemes)[s].color), style_map(schemes)[s].marker) for s in schemes]
    assert all(looks[f"{s} [A]"] == looks[f"{s} [B]"] for s in schemes)
    monkeypatch.undo()
    plt.close(figures[0])


def test_a_source_given_twice_is_compared_with_itself(tmp_path, capsys):
    """Every cell is the same; the second copy's columns are named '<source> #2'.

    Mutation check: keying the sources by path in ``main`` (``names = list(args.sources)``)
    collapses the two into one and makes this fail."""
    a, _ = _pair(tmp_path)
    assert main([str(a), str(a), "--out", str(tmp_path / "cmp")]) == 0
    csv = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert len(csv) == 4 and (csv[f"verdict [{a} #2]"] == "same").all()
    assert "A against B: 4 cells: 4 same" in capsys.readouterr().out


def test_a_single_fresh_run_is_judged_against_a_shipped_cell(tmp_path, capsys):
    """One seed (0.95) against three (0.5, 0.52, 0.48): 0.45 ± t_{0.975, 2} · 0.02 · √(4/3), better,
    printed with its interval.

    Mutation check: giving one seed no interval (``len(a) < 2 or len(b) < 2`` in the first test of
    ``welch_interval``) makes this fail ('too few seeds')."""
    a = _store(tmp_path / "fresh", "a", spec("position=rope"), "rope", {32: [0.95]}, code="aaaa")
    b = _store(tmp_path / "shipped", "b", spec("position=rope"), "rope", {32: [0.5, 0.52, 0.48]}, code="bbbb",
               shipped_like=True)
    half = 4.302653 * 0.02 * (4 / 3) ** 0.5
    row = compare_table({"A": store.load(a), "B": store.load(b)}).iloc[0]
    assert (row["n_seeds [A]"], row["n_seeds [B]"], row["verdict [B]"]) == (1, 3, "better")
    assert (row["diff_low [B]"], row["diff_high [B]"]) == (pytest.approx(0.45 - half), pytest.approx(0.45 + half))
    assert main([str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    assert "+0.450 [+0.351, +0.549]  better" in capsys.readouterr().out


def test_what_is_not_in_every_source_is_named_with_its_source(tmp_path, capsys):
    """A's rope and B's rope trained 20 steps are different configurations: each is named under its
    source ('rope on copy'), and B's alibi cell at 64, which A never evaluated, is counted; with no
    configuration shared, the refusal names every one left out.

    Mutation checks: ``left_out`` naming nothing (``alone`` taken from the shared configurations)
    makes this fail, and so does ``main`` not printing its text; ``lost`` counting every cell of the
    shared configurations (``key in keys``) makes it fail on the cell count."""
    a = tmp_path / "fresh"
    _store(a, "a", spec("position=rope"), "rope", {32: [0.9, 0.8, 1.0]}, code="aaaa")
    _store(a, "a", spec("position=alibi"), "alibi", {32: [0.9, 0.95, 1.0]}, code="aaaa")
    b = tmp_path / "other"
    _store(b, "b", spec("position=rope", "train.steps=20"), "rope", {32: [0.5, 0.7, 0.6]}, code="bbbb")
    _store(b, "b", spec("position=alibi"), "alibi", {32: [0.92, 0.97, 0.95], 64: [0.5, 0.6, 0.7]}, code="bbbb")
    assert main([str(a / "a"), str(b / "b"), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    lines = out.replace("\n    ", " ").splitlines()  # a source's names wrapped to 120 columns, read as one line
    at = lines.index("left out, not in every source (cells match by the stored spec less seed, code, sweep):")
    assert lines[at + 1:at + 3] == [f"  {a / 'a'}: rope on copy", f"  {b / 'b'}: rope on copy, 1 cell of shared configurations"]
    c = tmp_path / "swa"
    _store(c, "c", spec("position=t5"), "t5", {32: [0.9, 0.8, 1.0]}, code="cccc")
    assert main([str(a / "a"), str(c / "c"), "--out", str(tmp_path / "cmp")]) == 1
    err = capsys.readouterr().err.replace("\n    ", " ")
    assert f"  {a / 'a'}: " in err and "rope on copy" in err and "alibi on copy" in err and f"  {c / 'c'}: t5 on copy" in err
