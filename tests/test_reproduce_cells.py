"""``suite.reproduce`` judged statistically: one rerun against the prediction interval of one new
draw from its published cell, and the cell mode (every seed of K cells rerun, means compared by
Welch's interval).

The published sweep is real (two schemes x three seeds of a quick recipe); its headline values
are then set by hand, and the rerun is replaced by one that writes a result file with chosen
values, so each verdict follows from numbers the test states. Mutation checks are named in each
test's docstring.
"""
import gzip
import json
import math

import pytest
from scipy import stats as scipy_stats

from suite import reproduce
from suite.files import result_path, write_json_atomic
from suite.report import boards, reproduction, stats
from suite.results import shipped, store
from suite.run import execute
from tests.conftest import make_spec
from tests.test_run import QUICK

SCHEMES = ("alibi", "rope")
SEEDS = (0, 1, 2)
LENGTHS = (16, 32)  # QUICK: L = 16, eval.multiples=[1,2]
HEADLINE = "token_accuracy"  # copy's


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A real shipped sweep 'c': alibi and rope on copy, seeds 0-2 (cells alibi/copy, rope/copy)."""
    root = tmp_path_factory.mktemp("cells")
    for scheme in SCHEMES:
        for seed in SEEDS:
            execute(make_spec(*QUICK, f"position={scheme}", "sweep_name=c", f"seed={seed}"),
                    results_dir=root / "results", progress=False)
    shipped.pack(root / "results" / "c", store.shipped_path("c", root / "published"))
    lines = [json.loads(x) for x in gzip.decompress(store.shipped_path("c", root / "published").read_bytes())
             .decode().splitlines()]
    return root, lines


def _with_values(payload: dict, value) -> dict:
    """``payload`` with its headline rows' values set by ``value(positions, seed, eval_len)``."""
    run = payload["run"]
    rows = [{**r, "value": value(run["positions"], run["seed"], r["eval_len"])}
            if r["metric"] == HEADLINE and r["slice"] == "all" else r for r in payload["rows"]]
    return {**payload, "rows": rows}


def publish(runs, tmp_path, value) -> list[str]:
    """The sweep shipped under ``tmp_path/pub`` with headline values ``value(...)``; the args
    that name it."""
    _, lines = runs
    folder = tmp_path / "pub"
    folder.mkdir(exist_ok=True)
    (folder / "c.jsonl.gz").write_bytes(store.encode_shipped([_with_values(p, value) for p in lines]))
    return ["c", "--published", str(folder), "--results", str(tmp_path / "reruns")]


@pytest.fixture
def fake_rerun(monkeypatch):
    """Replace the rerun by one that writes the published run's result file with the headline
    values ``fake_rerun.value(positions, seed, eval_len)``; ``fake_rerun.calls``: the runs rerun."""
    def rerun(payload, results_dir, sweep, outcome=None):
        fake.calls.append(payload["run"]["run_id"])
        new = _with_values(payload, fake.value)
        path = result_path(results_dir, sweep, payload["run"]["run_id"])
        write_json_atomic(path, {"schema": store.SCHEMA, "run": new["run"], "rows": new["rows"]})
        if outcome is not None:
            outcome["trained"] = True
        return path

    class Fake:
        calls: list[str] = []
        value = None

    fake = Fake()
    fake.calls = []
    monkeypatch.setattr(reproduce, "rerun", rerun)
    return fake


def test_one_rerun_is_judged_by_the_prediction_interval_of_one_new_draw():
    """0.91 against seeds 0.80, 0.82, 0.84: outside the interval of their mean, inside the
    prediction interval of one new draw, mean ± t_{0.975,2} · s · √(1 + 1/3).
    Mutation check: judging the rerun against the mean's interval (``stats.t_interval(values)``
    in ``rerun_verdict``) makes this fail."""
    seeds = [0.80, 0.82, 0.84]
    mean_low, mean_high = stats.t_interval(seeds)
    assert not mean_low <= 0.91 <= mean_high  # the mean's interval would call it outside
    half = scipy_stats.t.ppf(0.975, 2) * 0.02 * math.sqrt(1 + 1 / 3)
    low, high, _, _ = reproduction.prediction_interval(seeds, 0.91)
    assert (low, high) == pytest.approx((0.82 - half, 0.82 + half))
    assert reproduction.rerun_verdict(0.80, 0.91, seeds) == "inside prediction interval"
    assert reproduction.rerun_verdict(0.80, 0.82 + half + 0.001, seeds) == "outside prediction interval"
    assert reproduction.rerun_verdict(0.80, 0.82 - half + 0.001, seeds) == "inside prediction interval"
    assert reproduction.rerun_verdict(0.80, 0.80, seeds) == "identical"
    assert reproduction.rerun_verdict(0.80, float("nan"), seeds) == "outside prediction interval"
    assert reproduction.rerun_verdict(float("nan"), 0.80, seeds) == "no published score"
    assert reproduction.rerun_verdict(0.80, 0.81, [0.80]) == "too few seeds"


def test_a_rerun_of_one_run_reads_its_cell_seeds_prediction_interval(runs, tmp_path, fake_rerun, capsys):
    """Through the command: alibi seeds published at 0.80, 0.82, 0.84; a rerun of seed 0 at 0.91
    is inside the prediction interval at both lengths (exit 0), at 0.95 outside (exit 1).
    Mutation check: ``compare`` passing only the published run's own value as the cell's seeds
    (``values = [before]``) gives 'too few seeds' and makes this fail; so does judging against the
    mean's interval."""
    args = publish(runs, tmp_path, lambda scheme, seed, n: {0: 0.80, 1: 0.82, 2: 0.84}[seed])
    target = next(p["run"]["run_id"] for p in runs[1] if p["run"]["positions"] == "alibi" and p["run"]["seed"] == 0)
    fake_rerun.value = lambda scheme, seed, n: 0.91
    assert reproduce.main([*args, "--run", target]) == 0
    out = capsys.readouterr().out
    assert fake_rerun.calls == [target]
    assert "identical: 0; inside prediction interval: 2; outside prediction interval: 0" in out
    half = scipy_stats.t.ppf(0.975, 2) * 0.02 * math.sqrt(4 / 3)
    assert f"{0.82 - half:.4f}" in out and f"{0.82 + half:.4f}" in out  # the interval is printed
    fake_rerun.value = lambda scheme, seed, n: 0.95
    assert reproduce.main([*args, "--run", target]) == 1
    assert "inside prediction interval: 0; outside prediction interval: 2" in capsys.readouterr().out


def test_cell_mode_reruns_every_seed_of_the_chosen_cells(runs, tmp_path, fake_rerun, capsys):
    """``--cells 1`` reruns all three seeds of the cell ``--seed`` draws; ``--cell`` names cells.
    Mutation check: rerunning one seed per cell (``cells[cell][:1]`` in ``cells_main``) makes
    this fail."""
    args = publish(runs, tmp_path, lambda scheme, seed, n: 0.5)
    fake_rerun.value = lambda scheme, seed, n: 0.5
    names = reproduction.cell_runs(boards.primary(store.load(store.shipped_path("c", tmp_path / "pub"))))
    assert list(names) == ["alibi/copy", "rope/copy"] and all(len(ids) == 3 for ids in names.values())
    for seed in (0, 1, 2, 3):
        fake_rerun.calls.clear()
        drawn = reproduce.choose(list(names), 1, seed)
        assert reproduce.main([*args, "--cells", "1", "--seed", str(seed)]) == 0
        assert sorted(fake_rerun.calls) == names[drawn[0]]
        assert f"cells: {drawn[0]}\n" in capsys.readouterr().out
    fake_rerun.calls.clear()
    assert reproduce.main([*args, "--cell", "rope/copy", "--cell", "alibi/copy"]) == 0
    assert sorted(fake_rerun.calls) == sorted(names["alibi/copy"] + names["rope/copy"])
    out = capsys.readouterr().out
    assert "reproducing 2 of 2 cells" in out and "(6 runs, every seed)" in out
    assert "cells: 2; cell x length comparisons: 4; same: 4; not separated: 0; better: 0; worse: 0" in out


def test_cell_mode_verdicts_follow_welch(runs, tmp_path, fake_rerun, capsys):
    """Published: every cell at 0.50, 0.52, 0.54. Reruns: alibi the same at 16 tokens (same), far
    below at 32 (worse); rope far above at 16 (better), close at 32 (not separated). Each
    difference and interval equals scipy's Welch test of rerun against published, and a separated
    cell makes the exit status 1; a cell that is only 'same' gives 0.
    Mutation check: swapping the sides (``welch_interval(before, after)`` and ``verdict(before,
    after, ...)`` in ``cell_table``) makes this fail; so does returning 0 whatever
    ``separated`` counts."""
    published = {0: 0.50, 1: 0.52, 2: 0.54}
    reruns = {("alibi", 16): published, ("alibi", 32): {0: 0.20, 1: 0.22, 2: 0.25},
              ("rope", 16): {0: 0.80, 1: 0.82, 2: 0.85}, ("rope", 32): {0: 0.49, 1: 0.55, 2: 0.53}}
    args = publish(runs, tmp_path, lambda scheme, seed, n: published[seed])
    fake_rerun.value = lambda scheme, seed, n: reruns[(scheme, n)][seed]
    assert reproduce.main([*args, "--cells", "2"]) == 1
    out = capsys.readouterr().out
    assert "cells: 2; cell x length comparisons: 4; same: 1; not separated: 1; better: 1; worse: 1" in out
    table = reproduction.cell_table(store.load(store.shipped_path("c", tmp_path / "pub")),
                                    reproduce.as_published(store.load(tmp_path / "reruns" / "c"),
                                                           {r: r for r in fake_rerun.calls}),
                                    ["alibi/copy", "rope/copy"])
    assert list(zip(table.cell, table.eval_len, table.verdict)) == [
        ("alibi/copy", 16, "same"), ("alibi/copy", 32, "worse"), ("rope/copy", 16, "better"),
        ("rope/copy", 32, "not separated")]
    before = list(published.values())
    for (scheme, n), after in reruns.items():
        row = table[(table.cell == f"{scheme}/copy") & (table.eval_len == n)].iloc[0]
        assert (row.published_mean, row.rerun_mean) == pytest.approx((0.52, sum(after.values()) / 3))
        assert (row.n_published, row.n_rerun) == (3, 3)
        if after == published:
            continue
        welch = scipy_stats.ttest_ind(list(after.values()), before, equal_var=False).confidence_interval(0.95)
        assert (row["diff"], row.diff_low, row.diff_high) == pytest.approx(
            (sum(after.values()) / 3 - 0.52, welch.low, welch.high))
        assert f"{row.diff_low:.4f}" in out
    assert reproduce.main([*args, "--cell", "alibi/copy"]) == 1  # worse at 32 tokens
    capsys.readouterr()
    fake_rerun.value = lambda scheme, seed, n: published[seed]
    assert reproduce.main([*args, "--cell", "alibi/copy"]) == 0
    assert "same: 2; not separated: 0; better: 0; worse: 0" in capsys.readouterr().out


def test_cell_mode_with_no_rerun_to_compare_exits_1(runs, tmp_path, monkeypatch, capsys):
    """A cell whose reruns are all held by another process (``rerun`` returns None) has nothing
    to compare: verdict 'no value', n_rerun 0, exit 1, never a silent 0.
    Mutation check: ``cells_main`` returning 1 only for separated cells makes this fail."""
    args = publish(runs, tmp_path, lambda scheme, seed, n: 0.5)
    monkeypatch.setattr(reproduce, "rerun", lambda payload, results_dir, sweep, outcome=None: None)
    assert reproduce.main([*args, "--cell", "rope/copy"]) == 1
    captured = capsys.readouterr()
    assert "a rerun is being trained by another process now; it is left out" in captured.err
    assert "same: 0; not separated: 0; better: 0; worse: 0; no value: 2" in captured.out


def test_bad_cell_names_and_mixed_modes_are_refused(runs, tmp_path, fake_rerun, capsys):
    """A cell that is not SCHEME/TASK of the sweep is refused (exit 2) with the valid names,
    before any rerun; so are ``--cells 0`` and cells mixed with single runs.
    Mutation check: dropping the ``unknown`` test in ``choose_cells`` (a KeyError, or a draw in
    place of the named cell) makes this fail."""
    args = publish(runs, tmp_path, lambda scheme, seed, n: 0.5)
    for bad in ("rop/copy", "copy", "rope", "rope/copy/x"):
        assert reproduce.main([*args, "--cell", bad]) == 2
        err = capsys.readouterr().err
        assert f"--cell {bad!r} is not a cell of" in err and "valid: alibi/copy, rope/copy" in err
    assert reproduce.main([*args, "--cell", "alibi/copy", "--cell", "nope/copy"]) == 2
    assert fake_rerun.calls == []
    for mixed in (["--cells", "0"], ["--cells", "1", "-k", "2"], ["--cell", "rope/copy", "--run", "x"],
                  ["--cells", "1", "--boards", "a", "b"]):
        with pytest.raises(SystemExit) as exit_info:
            reproduce.main([*args, *mixed])
        assert exit_info.value.code == 2, mixed
    assert fake_rerun.calls == []


def test_help_names_both_modes_and_how_a_cell_is_named(capsys):
    """--help says what each verdict is judged against and how a cell is named.
    Mutation check: the parser built from the first paragraph only (``parser(prog, __doc__)``)
    drops the cell mode's text and makes this fail."""
    with pytest.raises(SystemExit):
        reproduce.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "prediction interval of ONE new draw" in out
    assert "A cell is named SCHEME/TASK" in out and "Welch's two-sample 95 % interval" in out
    assert "--cells K" in out and "--cell SCHEME/TASK" in out


def test_cell_mode_writes_its_table_to_out_and_refuses_out_for_single_runs(runs, tmp_path, fake_rerun, capsys):
    """``--out`` with the cell mode writes the command, both machines' numeric signatures, the
    cells and the table with its summary as Markdown, so a README figure has a file to be read from;
    with single reruns ``--out`` is refused before anything is rerun.
    Mutation check: dropping the ``write_atomic`` in ``cells_main`` makes this fail."""
    args = publish(runs, tmp_path, lambda scheme, seed, n: 0.5)
    fake_rerun.value = lambda scheme, seed, n: 0.5
    page = tmp_path / "cells" / "c.md"
    assert reproduce.main([*args, "--cell", "rope/copy", "--out", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Cells of `c` rerun\n\n`python -m suite.reproduce ") and "--cell rope/copy" in text
    assert "Rerun on: torch " in text and "Cells: rope/copy." in text
    assert "cells: 1; cell x length comparisons: 2; same: 2; not separated: 0; better: 0; worse: 0" in text
    rows = [line for line in text.splitlines() if line.startswith("| rope/copy")]
    assert len(rows) == 2 and all(line.rstrip(" |").endswith("same") for line in rows)  # one row per eval length
    fake_rerun.calls.clear()
    with pytest.raises(SystemExit) as e:
        reproduce.main([*args, "-k", "1", "--out", str(tmp_path / "x.md")])
    assert e.value.code == 2 and "--out is for --boards and the cell mode" in capsys.readouterr().err
    assert fake_rerun.calls == [] and not (tmp_path / "x.md").exists()
