"""``posbench curve``: a run's or a cell's training loss against the step, with the band over seeds
from the lowest to the highest loss logged at each step, and the in-distribution score: at the end
for runs without checks, at each check (with the learned line and the steps to learn) for runs
trained to criterion.

Mutation check: in suite/commands/curve.py ``_spread``, ``min(finite)`` -> ``sum(finite) /
len(finite)`` (the band's low end the mean) makes
test_a_cells_curve_is_the_mean_with_a_min_max_band_over_its_seeds fail; grouping by run id in
``curves`` whatever ``by`` says makes test_the_command_draws_a_folder_per_cell_and_prints_the_table
fail; dropping the ``without`` message in ``main`` makes
test_runs_stored_without_a_history_are_named_and_none_is_plotted fail; ``of_tasks`` keeping every
payload makes test_task_keeps_the_runs_of_the_named_tasks_and_refuses_a_task_no_run_has fail."""
import json
import math
import re

import pytest

from suite import files
from suite.cli import COMMANDS
from suite.commands import curve
from suite.results import store
from suite.run import execute, run_id
from tests.conftest import make_spec

TOY = ["train.steps=9", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
       "eval.multiples=[1]", "model.n_layers=2", "model.d_model=32", "logger=none", "sweep_name=toy",
         "train.until_learned=false"]
RUNS = [("alibi", 0), ("alibi", 1), ("alibi", 2), ("nope", 0)]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """Three seeds of ALiBi (one cell) and one NoPE run, each logging every 2nd step and the last."""
    root = tmp_path_factory.mktemp("curves")
    for position, seed in RUNS:
        execute(make_spec(*TOY, f"position={position}", f"seed={seed}"), results_dir=root, progress=False, log_every=2)
    return root


def _payloads(toy):
    return [payload for _, payload in store.payloads(toy / "toy")]


def test_a_cells_curve_is_the_mean_with_a_min_max_band_over_its_seeds(toy):
    found, without = curve.curves(_payloads(toy), by="cell")
    assert without == [] and [c.label for c in found] == ["alibi full copy", "nope full copy"]
    alibi = found[0]
    assert alibi.seeds == [0, 1, 2] and alibi.steps == [0, 2, 4, 6, 8] and alibi.runs_at == [3] * 5
    histories = {p["run"]["seed"]: p["run"]["history"] for p in _payloads(toy) if p["run"]["positions"] == "alibi"}
    for i, step in enumerate(alibi.steps):
        losses = [next(h["train/loss"] for h in histories[s] if h["step"] == step) for s in (0, 1, 2)]
        assert alibi.low[i] == min(losses) and alibi.high[i] == max(losses)
        assert alibi.loss[i] == pytest.approx(sum(losses) / 3, abs=1e-12)
        assert alibi.low[i] < alibi.high[i]  # the seeds differ, so the band is not a line
    scores = [next(r["value"] for r in p["rows"] if r["metric"] == "token_accuracy" and r["eval_len"] == 16
                   and r["slice"] == "all") for p in _payloads(toy) if p["run"]["positions"] == "alibi"]
    metric, mean, low, high = alibi.scores["copy"]
    assert metric == "token_accuracy" and (low, high) == (min(scores), max(scores))
    assert mean == pytest.approx(sum(scores) / 3) and alibi.final_step == 9
    nope = found[1]  # one seed: its band is its own line
    assert nope.seeds == [0] and nope.low == nope.loss == nope.high


def test_the_command_draws_a_folder_per_cell_and_prints_the_table(toy, tmp_path, capsys):
    assert COMMANDS["curve"][0] == "suite.commands.curve"
    out = tmp_path / "toy.png"
    assert curve.main([str(toy / "toy"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and text.rstrip().endswith(f"wrote {out}")
    alibi = curve.curves(_payloads(toy))[0][0]
    line = next(line for line in text.splitlines() if line.startswith("alibi full copy "))
    assert re.split(r"\s{2,}", line)[1:5] == ["0,1,2", "5", "9", f"{alibi.loss[0]:.3f} [{alibi.low[0]:.3f}, {alibi.high[0]:.3f}]"]
    assert "measured once, at the end of training" in text


def test_without_out_the_plot_goes_to_the_git_ignored_local_folder(toy, tmp_path, monkeypatch, capsys):
    """Mutation check: the default back to ``curve-<name>.png`` in the working folder makes this fail."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert curve.main([str(toy / "toy")]) == 0
    assert [p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()] == ["reports-local/curve-toy.png"]


def test_a_run_id_draws_that_run_alone(toy, tmp_path, capsys):
    rid = run_id(make_spec(*TOY, "position=nope", "seed=0"))
    assert curve.main([rid.rsplit("-", 1)[1], "--results", str(toy), "--out", str(tmp_path / "one.png")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("nope full copy seed 0 ")]
    assert len(rows) == 1 and (tmp_path / "one.png").is_file()
    assert curve.main(["no-such-run", "--results", str(toy), "--out", str(tmp_path / "x.png")]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_runs_stored_without_a_history_are_named_and_none_is_plotted(toy, tmp_path, capsys):
    old = tmp_path / "old" / "toy"
    old.mkdir(parents=True)
    for payload in _payloads(toy):
        run = {k: v for k, v in payload["run"].items() if k != "history"}  # as runs were stored before
        files.write_json_atomic(old / f"{run['run_id']}.json", {**payload, "run": run})
    assert curve.main([str(old), "--out", str(tmp_path / "old.png")]) == 1
    err = capsys.readouterr().err
    assert "4 of 4 runs store no training history" in err and "nothing to plot" in err
    assert not (tmp_path / "old.png").exists()
    # one run with a history among them: it is drawn, the others are named
    keep = json.loads(files.read_regular(next(toy.glob("toy/nope-*.json"))))
    files.write_json_atomic(old / f"{keep['run']['run_id']}.json", keep)
    assert curve.main([str(old), "--out", str(tmp_path / "mixed.png")]) == 0
    captured = capsys.readouterr()
    assert "3 of 4 runs store no training history" in captured.err and "nope full copy" in captured.out


def test_shipped_rows_stored_before_the_history_was_kept_get_a_clear_message(toy, tmp_path, capsys):
    old = [{**p, "run": {k: v for k, v in p["run"].items() if k != "history"}} for p in _payloads(toy)]
    shipped = tmp_path / "old.jsonl.gz"
    shipped.write_bytes(store.encode_shipped(old))
    assert curve.main([str(shipped), "--out", str(tmp_path / "p.png")]) == 1
    err = capsys.readouterr().err
    assert "4 of 4 runs store no training history" in err and "rerun them" in err
    assert math.isnan(curve._spread([])[0])


# Three ALiBi seeds trained to criterion (checks every 3 steps, steps 6, cap 12): seed 0 passes at 6,
# seed 1 trains on and passes at 12, seed 2 never passes and stops at the cap.
CHECKS = {0: {3: 0.5, 6: 0.95}, 1: {3: 0.4, 6: 0.7, 9: 0.85, 12: 0.92}, 2: {3: 0.1, 6: 0.2, 9: 0.3, 12: 0.4}}


def _with_checks(payloads):
    """The toy's ALiBi payloads as runs trained to criterion store them: the record's ``criterion``
    with every check, and the check_score / steps_to_learn rows (none for the seed that never passed)."""
    out = []
    for p in payloads:
        run = p["run"]
        if run["positions"] != "alibi":
            out.append(p)
            continue
        checks = [{"step": step, "scores": {"copy": v}} for step, v in CHECKS[run["seed"]].items()]
        criterion = {"line": 0.9, "check_every": 3, "cap_steps": 12, "check_examples": 4, "checks": checks,
                     "steps": checks[-1]["step"]}
        base = {k: v for k, v in p["rows"][0].items() if k not in ("metric", "value", "slice", "n", "eval_len", "len_ratio")}
        base = {**base, "task": "copy", "eval_len": run["train_len"], "len_ratio": 1.0, "slice": "all", "n": 4, "status": "ok"}
        rows = [{**base, "metric": "check_score", "value": checks[-1]["scores"]["copy"]}]
        first = next((c["step"] for c in checks if c["scores"]["copy"] >= 0.9), None)
        rows += [{**base, "metric": "steps_to_learn", "value": float(first)}] if first is not None else []
        out.append({**p, "run": {**run, "criterion": criterion}, "rows": p["rows"] + rows})
    return out


def test_a_cell_trained_to_criterion_draws_its_check_score_against_the_step_with_a_band(toy):
    """A cell trained to criterion: at each check step the mean check score over the seeds that
    checked there with the min-max band, the learned line, and each seed's steps to learn; a run
    without checks keeps none.

    Mutation check: in suite/commands/curve.py ``_criterion``, ``c.low.append(low)`` ->
    ``c.low.append(mean)`` (the band's low end the mean) makes this fail; so does ``learned = []``
    (the stored steps_to_learn rows not read)."""
    found, _ = curve.curves(_with_checks(_payloads(toy)), by="cell")
    alibi, nope = found
    checks = alibi.checks["copy"]
    assert checks.steps == [3, 6, 9, 12] and checks.runs_at == [3, 3, 2, 2]
    assert checks.score == pytest.approx([1.0 / 3, 1.85 / 3, 0.575, 0.66])
    assert checks.low == [0.1, 0.2, 0.3, 0.4] and checks.high == [0.5, 0.95, 0.85, 0.92]
    assert alibi.lines == {"copy": pytest.approx(0.9)}  # LEARNED_AT x token accuracy's best value, 1
    assert alibi.learned == {"copy": ([6.0, 12.0], 3, [12])}
    assert nope.checks == {} and nope.learned == {} and nope.lines == {}


def test_the_score_panel_draws_the_checks_and_the_learned_line_and_a_point_for_runs_without_checks(toy):
    """Mutation check: in suite/commands/curve.py ``figure``, dropping the ``axhline`` of the learned
    line makes this fail; drawing the end point for a task that has checks too (``or task in
    c.checks`` removed) makes it fail."""
    import matplotlib.pyplot as plt

    found, _ = curve.curves(_with_checks(_payloads(toy)), by="cell")
    fig = curve.figure(found, "toy")
    score_ax = fig.axes[1]
    drawn = [(list(line.get_xdata()), list(line.get_ydata())) for line in score_ax.lines]
    alibi = found[0].checks["copy"]
    assert (alibi.steps, alibi.score) in drawn
    assert ([0, 1], [pytest.approx(0.9), pytest.approx(0.9)]) in drawn  # the learned line spans the panel
    points = [c for c in score_ax.containers]  # errorbars: one end point, NoPE's (no checks)
    assert len(points) == 1 and list(points[0].lines[0].get_ydata()) == [found[1].scores["copy"][1]]
    assert "check set at L = 16" in score_ax.get_title() and "points: runs without checks, measured once" in score_ax.get_title()
    assert score_ax.get_legend().get_texts()[0].get_text() == "learned line (0.9 of the best value)"
    assert score_ax.get_xlim()[1] > 12  # the last check (12) is inside the panel
    plt.close(fig)


def test_the_table_gains_the_steps_to_learn_only_where_a_run_made_checks(toy):
    """Mutation check: in suite/commands/curve.py ``learned_text``, ``never = 0`` makes this fail;
    ``criterion = True`` in ``table`` (the column for boards without checks too) makes it fail."""
    found, _ = curve.curves(_with_checks(_payloads(toy)), by="cell")
    text = curve.table(found)
    assert text.splitlines()[0].rstrip().endswith("steps to learn")
    alibi = next(line for line in text.splitlines() if line.startswith("alibi full copy "))
    assert alibi.rstrip().endswith("copy 9 [6, 12] (2 of 3 learned; 1 never, cap 12 steps)")
    nope = next(line for line in text.splitlines() if line.startswith("nope full copy "))
    assert nope.rstrip().endswith(" -")
    assert curve.learned_text("copy", [], 2, [12]) == "copy never learned (0 of 2, cap 12 steps)"
    assert curve.learned_text("copy", [250.0], 1, [7000]) == "copy 250 (1 of 1 learned)"
    plain = curve.table(curve.curves(_payloads(toy))[0])
    assert "steps to learn" not in plain


def test_a_run_trained_to_criterion_is_drawn_from_its_stored_checks(tmp_path, capsys):
    """A real run with checks (it does not learn in 6 steps, so it trains on to its cap of 12):
    the curve is its record's checks, the table names its cap, and the command says what it drew.

    Mutation check: in suite/commands/curve.py ``_criterion``, reading ``run.get("checks")`` instead
    of the record's ``criterion`` makes this fail."""
    spec = make_spec(*[o for o in TOY if not o.startswith("train.until_learned")], "train.steps=6",
                     "train.until_learned=true", "train.check_every=3", "train.cap=2", "train.check_examples=4",
                     "position=alibi", "seed=0")
    execute(spec, results_dir=tmp_path, progress=False, log_every=2)
    payloads = [payload for _, payload in store.payloads(tmp_path / "toy")]
    record = payloads[0]["run"]["criterion"]
    found, _ = curve.curves(payloads, by="run")
    checks = found[0].checks["copy"]
    assert checks.steps == [c["step"] for c in record["checks"]] and checks.steps[0] == 3
    assert checks.score == [c["scores"]["copy"] for c in record["checks"]]
    learned = found[0].learned["copy"]
    assert learned[1:] == (1, [record["cap_steps"]])
    assert curve.main([str(tmp_path / "toy"), "--out", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert "steps to learn" in out and "learned line (0.9 of the metric's best value)" in out
    assert learned[0] == [] and checks.steps[-1] == record["cap_steps"] == 12  # six steps teach it nothing
    assert "copy never learned (0 of 1, cap 12 steps)" in out


def test_task_keeps_the_runs_of_the_named_tasks_and_refuses_a_task_no_run_has(toy, tmp_path, capsys):
    """``--task`` picks runs by task (the README's picture draws the flagship's copy cells alone);
    a name no run has is refused with the tasks there are."""
    payloads = _payloads(toy)
    vt = json.loads(json.dumps(payloads[0]))
    vt["run"]["spec"]["taskset"] = "vt"
    mixed = payloads + [vt]
    assert curve.of_tasks(mixed, "vt", "posbench curve") == [vt]
    assert curve.of_tasks(mixed, "copy, vt", "posbench curve") == mixed
    assert curve.of_tasks(mixed, "copy", "posbench curve") == payloads
    with pytest.raises(curve.Refused, match=r"--task 'cpy': no run of cpy here; the tasks there are: copy, vt"):
        curve.of_tasks(mixed, "cpy", "posbench curve")
    assert curve.main([str(toy / "toy"), "--task", "copy", "--out", str(tmp_path / "c.png")]) == 0
    assert curve.main([str(toy / "toy"), "--task", "vt", "--out", str(tmp_path / "v.png")]) == 2
    assert "the tasks there are: copy" in capsys.readouterr().err and not (tmp_path / "v.png").exists()
