"""Progress off a terminal: a plain line about ten times a run, on logged steps (step, loss,
tokens/s, time left), naming the run (scheme, span, task, seed), one line per finished run (run
id, status, wall time, each task's headline score at every evaluation length), and in a multirun "run k of N" with the
sweep's time left.

Mutation checks: in suite/progress.py StepLog.eta, steps left total - 1 - step -> total - step makes
test_step_lines_show_step_loss_speed_and_the_time_left_at_the_measured_pace fail; headline_scores
keeping the training length only (``lengths = [train_len]``) makes
test_finished_line_shows_the_headline_at_every_eval_length and
test_a_finished_run_prints_one_line_with_status_wall_time_and_headline_score fail, and ``finished_line``
joining the task groups with ', ' makes test_finished_line_shows_the_headline_at_every_eval_length fail."""
import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest

from tests import forked_cli
from suite import files
from suite.results import store
from suite.progress import StepLog, SweepProgress, calls_per_line, duration, finished_line, run_label
from suite.run import execute, run_id
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
QUICK = ["train.steps=12", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
         "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=32", "logger=none",
         "train.until_learned=false"]
STEP_LINE = re.compile(r"(\S+) \(([^)]*)\) step (\d+)/(\d+) \(\d+%\) loss (\d+\.\d{4}) tok/s ([\d,]+) ETA (\S+)")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_step_lines_show_step_loss_speed_and_the_time_left_at_the_measured_pace():
    clock, lines, forwarded = Clock(), [], []
    progress = StepLog("run-a", 101, lines.append, lambda m, s: forwarded.append(s), clock=clock)
    progress({"train/loss": 2.5, "train/tokens_per_s": 12345.6}, 0)
    clock.now += 20.0  # 10 steps in 20 s: 2 s a step
    progress({"train/loss": 1.25, "train/tokens_per_s": 2000.0}, 10)
    clock.now += 20.0
    progress({"train/loss": 1.0, "train/tokens_per_s": 2000.0}, 20)
    assert lines == ["run-a step 1/101 (1%) loss 2.5000 tok/s 12,346 ETA -",
                     "run-a step 11/101 (11%) loss 1.2500 tok/s 2,000 ETA 3m00s",  # 90 steps left x 2 s
                     "run-a step 21/101 (21%) loss 1.0000 tok/s 2,000 ETA 2m40s"]
    assert forwarded == [0, 10, 20]  # the W&B tracker still gets every logged step


def test_a_resumed_run_measures_its_pace_from_where_it_resumed():
    clock, lines = Clock(), []
    progress = StepLog("r", 1000, lines.append, clock=clock)
    progress({"train/loss": 1.0, "train/tokens_per_s": 1.0}, 500)
    clock.now += 10.0
    progress({"train/loss": 1.0, "train/tokens_per_s": 1.0}, 600)  # 0.1 s a step, 399 steps left
    assert lines[0].endswith("ETA -") and lines[1].endswith("ETA 40s")


def test_a_long_run_writes_about_ten_lines_and_always_its_last_step():
    lines, forwarded = [], []
    every = calls_per_line(1750, 10)  # 176 log calls: a line every 17th
    progress = StepLog("r", 1750, lines.append, lambda m, s: forwarded.append(s), clock=Clock(), every=every)
    logged = [*range(0, 1750, 10), 1749]
    for step in logged:
        progress({"train/loss": 1.0, "train/tokens_per_s": 1.0}, step)
    shown = [int(line.split()[2].split("/")[0]) for line in lines]
    assert every == 17 and shown[0] == 1 and shown[-1] == 1750 and 10 <= len(shown) <= 12
    assert shown[1] - shown[0] == 170 and forwarded == logged  # W&B still gets every logged step
    assert calls_per_line(12, 5) == 1  # a short run shows every logged step


def test_durations_read_plainly():
    assert [duration(s) for s in (0, 44.6, 60, 192, 3600, 7500)] == ["0s", "45s", "1m00s", "3m12s", "1h00m", "2h05m"]


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "posbench"]


def test_off_a_terminal_a_run_logs_a_plain_line_every_log_every_steps(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="posbench")
    spec = make_spec(*QUICK, "position=alibi", "sweep_name=pl")
    execute(spec, results_dir=tmp_path, progress=False, log_every=5)
    steps = [STEP_LINE.fullmatch(m) for m in _messages(caplog) if " step " in m]
    assert [int(m.group(3)) for m in steps] == [1, 6, 11, 12]  # steps 0, 5, 10 and the last one
    assert all(m.group(1) == run_id(spec) and m.group(4) == "12" for m in steps)
    assert all(m.group(2) == "alibi full copy seed 0" for m in steps)  # scheme, span, task, seed
    assert steps[0].group(7) == "-" and all(re.fullmatch(r"\d+s", m.group(7)) for m in steps[1:])
    final = store.read_run(files.result_path(tmp_path, "pl", run_id(spec)))["run"]["final_loss"]
    assert steps[-1].group(5) == f"{final:.4f}"  # the loss of the last step, as stored


def test_on_a_terminal_the_bar_stays_and_no_plain_lines_are_written(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="posbench")
    execute(make_spec(*QUICK, "position=alibi", "sweep_name=tty"), results_dir=tmp_path, progress=True, log_every=5)
    assert not [m for m in _messages(caplog) if " step " in m]


def _done_line(caplog, rid):
    done = [m for m in _messages(caplog) if m.startswith(f"done {rid}:")]
    assert len(done) == 1
    return done[0]


def test_a_finished_run_prints_one_line_with_status_wall_time_and_headline_score(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="posbench")
    spec = make_spec(*QUICK, "position=rope", "sweep_name=fl")
    path = execute(spec, results_dir=tmp_path, progress=False)
    record = store.read_run(path)
    value = {r["eval_len"]: r["value"] for r in record["rows"] if r["metric"] == "token_accuracy"
             and r["slice"] == "all"}  # copy's headline metric at the training length and at twice it
    line = _done_line(caplog, run_id(spec))
    assert line.startswith(f"done {run_id(spec)}: ok in {record['run']['wall_s']:.1f}s | "
                           f"copy token_accuracy 16: {value[16]:.4f}  32: {value[32]:.4f} -> ")


def test_a_task_set_run_prints_each_tasks_headline_score(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="posbench")
    spec = make_spec(*[q for q in QUICK if not q.startswith("train.seq_len")], "train.seq_len=64", "eval.multiples=[1]",
                     "taskset=core", "sweep_name=ts")
    rows = store.read_run(execute(spec, results_dir=tmp_path, progress=False))["rows"]
    line = _done_line(caplog, run_id(spec))
    headline = {"copy": "token_accuracy", "mqar": "string_match_all", "niah_single": "exact_match", "vt": "string_match_all"}
    scores = dict(re.findall(r"\| (\w+) \w+ 64: (\d\.\d{4})", line))
    assert set(scores) == set(headline)
    for task, metric in headline.items():
        assert f"| {task} {metric} 64: " in line
        stored = next(r["value"] for r in rows if r["task"] == task and r["metric"] == metric and r["slice"] == "all")
        assert scores[task] == f"{stored:.4f}"


def test_a_diverged_run_says_where_and_shows_no_score(tmp_path, caplog, monkeypatch):
    import suite.training.step as step_mod

    real = step_mod.next_token_loss
    calls = {"n": 0}

    def exploding(*args, **kwargs):
        calls["n"] += 1
        loss = real(*args, **kwargs)
        return loss * float("nan") if calls["n"] == 4 else loss

    monkeypatch.setattr(step_mod, "next_token_loss", exploding)
    caplog.set_level(logging.INFO, logger="posbench")
    spec = make_spec(*QUICK, "position=alibi", "sweep_name=dv")
    execute(spec, results_dir=tmp_path, progress=False)
    line = _done_line(caplog, run_id(spec))
    assert re.match(rf"done {re.escape(run_id(spec))}: diverged at step 3 in \d+\.\ds \| copy token_accuracy 16: -(  \d+: -)* -> ", line)


def test_finished_line_shows_the_headline_at_every_eval_length():
    """The headline metric over all examples at each stored length, in increasing order ('-' for a
    length with no value); the training length is shown even without a row; a task set's groups
    each follow a '|'."""
    spec = make_spec(*QUICK, "position=nope")
    tasks = [(t, t.build()) for t in spec.tasks]
    rows = [{"task": "copy", "eval_len": 32, "slice": "all", "metric": "token_accuracy", "value": 0.25},
            {"task": "copy", "eval_len": 16, "slice": "all", "metric": "exact_match", "value": 0.125},
            {"task": "copy", "eval_len": 16, "slice": "all", "metric": "token_accuracy", "value": 0.75},
            {"task": "copy", "eval_len": 16, "slice": "depth=0", "metric": "token_accuracy", "value": 0.5},
            {"task": "copy", "eval_len": 64, "slice": "all", "metric": "token_accuracy", "value": None}]
    assert (finished_line("r", "ok", 1.26, rows, tasks, 16)
            == "done r: ok in 1.3s | copy token_accuracy 16: 0.7500  32: 0.2500  64: -")
    assert finished_line("r", "ok", 1.0, rows[1:2], tasks, 16).endswith("| copy token_accuracy 16: -")
    two = make_spec(*[q for q in QUICK if not q.startswith("train.seq_len")], "train.seq_len=64", "taskset=core")
    both = [(t, t.build()) for t in two.tasks if t.name in ("copy", "vt")]
    rows = [{"task": "vt", "eval_len": 64, "slice": "all", "metric": "string_match_all", "value": 0.5},
            {"task": "copy", "eval_len": 128, "slice": "all", "metric": "token_accuracy", "value": 0.125}]
    assert finished_line("r", "ok", 2.0, rows, both, 64) == ("done r: ok in 2.0s | copy token_accuracy 64: -  128: 0.1250"
                                                            " | vt string_match_all 64: 0.5000")


@pytest.mark.exhaustive  # a two-worker sweep; the finished line of one run, a task set and a diverged run run in make test
def test_a_sweep_off_a_terminal_shows_steps_and_one_line_per_finished_run(tmp_path):
    # the default launcher, Hydra's joblib one, as `make sweep` runs it: it pickles the task
    # function into two worker processes
    out = forked_cli.run([sys.executable, "-m", "suite.run", "-m", *QUICK, "log_every=4", "position=nope,alibi",
                          f"results_dir={tmp_path}", "sweep_name=sw", f"hydra.sweep.dir={tmp_path}/h"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600, env={**os.environ})
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    for position in ("nope", "alibi"):
        rid = run_id(make_spec(*QUICK, f"position={position}", "sweep_name=sw"))
        steps = [int(m.group(3)) for m in STEP_LINE.finditer(text) if m.group(1) == rid]
        assert steps == [1, 5, 9, 12]
        assert len(re.findall(rf"done {re.escape(rid)}: ok in \d+\.\ds \| copy token_accuracy 16: \d\.\d{{4}}  32: \d\.\d{{4}} -> ", text)) == 1
    df = store.load(tmp_path / "sw")  # one stored file per scheme
    assert sorted(df.positions.unique()) == ["alibi", "nope"] and df.run_id.nunique() == 2
    log = [json.loads(line) for line in (tmp_path / "sw" / "_sweeps.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["jobs"] == 2 and log[0]["parallel"] == 2 and log[0]["wall_s"] > 0


SWEEP_START = re.compile(r"run (\d) of (\d): (.+?) \| (.+)")
SWEEP_END = re.compile(r"run (\d) of (\d) (finished|already stored) \| (.+)")
TINY = ["train.steps=2", *QUICK[1:], "eval.multiples=[1]", "position=nope,alibi"]


def _sweep(tmp_path, name, *extra):
    out = forked_cli.run([sys.executable, "-m", "suite.run", "-m", *TINY, *extra, f"results_dir={tmp_path}/res",
                          "sweep_name=kn", f"hydra.sweep.dir={tmp_path}/{name}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600, env={**os.environ})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = (out.stdout + out.stderr).splitlines()
    starts = sorted(m.groups() for line in lines if (m := SWEEP_START.search(line)))
    ends = [m.groups() for line in lines if (m := SWEEP_END.search(line))]
    return starts, ends


@pytest.mark.exhaustive  # joblib starts two interpreters; make test checks the lines SweepProgress writes in-process
def test_each_job_of_a_joblib_sweep_says_run_k_of_n_its_label_and_the_time_left(tmp_path):
    """Two jobs in two joblib worker processes (the launcher ``make sweep`` uses): each names its
    number in the sweep (Hydra's job number + 1), the sweep's size, and its scheme, span, task and
    seed; the job that ends first estimates the time left from its own wall time, the last one says
    both are done. Run again (one job after another: the stored runs are found by the same job
code, without starting joblib's workers a second time), both runs are found stored: done, but
not in a time estimate.

    Mutation check: in suite/run.py ``sweep_progress``, ``hc.job.num`` -> ``0`` (every job "run 1")
    fails this; in suite/config/validate.py ``write_plan`` given ``len(jobs) + 1`` fails it."""
    starts, ends = _sweep(tmp_path, "h1")
    assert [s[:3] for s in starts] == [("1", "2", "nope full copy seed 0"), ("2", "2", "alibi full copy seed 0")]
    assert [e[:3] for e in sorted(ends)] == [("1", "2", "finished"), ("2", "2", "finished")]
    first, last = sorted(ends, key=lambda e: e[3])  # each counts the ledger up to its own line
    assert re.fullmatch(r"1 of 2 done, about \d+s left at \d+s a run, 2 at a time", first[3])
    assert last[3] == "2 of 2 done"
    assert json.loads((tmp_path / "h1" / "_progress.json").read_text()) == {"jobs": 2, "parallel": 2}

    starts, ends = _sweep(tmp_path, "h2", "launcher=basic")  # the same sweep again: both runs are stored
    assert [s[:3] for s in starts] == [("1", "2", "nope full copy seed 0"), ("2", "2", "alibi full copy seed 0")]
    assert sorted(e[2] for e in ends) == ["already stored", "already stored"]
    assert sorted(e[3] for e in ends) == ["1 of 2 done (1 already stored), time left known after the first trained run",
                                          "2 of 2 done (2 already stored)"]


def test_the_time_left_is_the_mean_trained_run_times_the_runs_left_over_the_parallel_jobs(tmp_path):
    """Mutation check: in suite/progress.py ``SweepProgress.status``, dropping ``/ self.parallel``
    (or counting stored runs in the mean) makes this fail."""
    ledger = tmp_path / "ledger.jsonl"
    first = SweepProgress(3, 10, 2, ledger)
    assert first.start_line("rope swa(w=16) copy seed 1") == \
        "run 3 of 10: rope swa(w=16) copy seed 1 | 0 of 10 done, time left known after the first trained run"
    assert SweepProgress(1, 10, 2, ledger).finish(False, 0.2) == \
        "run 1 of 10 already stored | 1 of 10 done (1 already stored), time left known after the first trained run"
    SweepProgress(2, 10, 2, ledger).finish(True, 60.0)
    line = SweepProgress(4, 10, 2, ledger).finish(True, 120.0)  # 90 s a trained run, 7 runs left, 2 at a time
    assert line == "run 4 of 10 finished | 3 of 10 done (1 already stored), about 5m15s left at 1m30s a run, 2 at a time"
    ledger.write_text(ledger.read_text() + '{"job": 5, "trai')  # a line cut short by a killed job is not counted
    assert first.status().startswith("3 of 10 done")


def test_a_job_the_sweep_leaves_out_counts_as_done_apart_from_stored_runs_and_takes_no_time(tmp_path):
    """Mutation check: counting left-out jobs as stored in ``SweepProgress.status`` makes this fail."""
    ledger = tmp_path / "ledger.jsonl"
    assert SweepProgress(1, 4, 1, ledger).finish(False, 0.0, left_out=True) == \
        "run 1 of 4 left out | 1 of 4 done (1 left out), time left known after the first trained run"
    SweepProgress(2, 4, 1, ledger).finish(False, 0.1)
    assert SweepProgress(3, 4, 1, ledger).finish(True, 30.0) == \
        "run 3 of 4 finished | 3 of 4 done (1 already stored, 1 left out), about 30s left at 30s a run, 1 at a time"


def test_a_run_label_names_scheme_span_size_pattern_task_and_seed():
    """Mutation check: in suite/progress.py ``run_label``, leaving out the span makes this fail."""
    from suite.results.identity import run_columns

    swa = make_spec(*QUICK, "position=rope", "span=swa", "span.window=8", "seed=2")
    assert run_label(run_columns(swa), swa.taskset) == "rope swa(w=8) copy seed 2"
    hybrid = make_spec(*QUICK, "pattern=rnope", "seed=1")
    assert run_label(run_columns(hybrid), hybrid.taskset) == "rope+nope full rnope copy seed 1"


def test_the_training_bar_names_the_run(capsys):
    """Mutation check: the bar's ``desc`` back to ``train {pattern}/{taskset}`` makes this fail."""
    from suite.model.lm import PosBenchLM
    from suite.training.loop import train

    spec = make_spec(*QUICK, "train.steps=2", "position=alibi", "seed=4")
    train(PosBenchLM(spec.model), spec, spec.tasks[0].build(), progress=True, label="alibi full copy seed 4")
    assert "train alibi full copy seed 4:" in capsys.readouterr().err
    train(PosBenchLM(spec.model), spec, spec.tasks[0].build(), progress=True)  # without a label: still the seed
    assert "train uniform/copy seed 4:" in capsys.readouterr().err


def test_a_report_says_what_it_is_doing_with_counts(tmp_path, capsys):
    """One line per phase on stderr: the runs and rows read, the board built, the cells written.

    Mutation check: in suite/report/__main__.py ``main``, counting rows for runs
    (``len(df)`` for ``df.run_id.nunique()``) makes this fail."""
    from suite.report.__main__ import main as report

    assert report(["default", "--from", "published", "--out", str(tmp_path)]) == 0
    phases = [line for line in capsys.readouterr().err.splitlines() if line.startswith("default: ")]
    df = store.load("published/default.jsonl.gz")
    board = (tmp_path / "default" / "leaderboard.csv").read_text().splitlines()
    assert phases[0] == f"default: read {df.run_id.nunique()} runs ({len(df):,} rows) from published/default.jsonl.gz"
    assert phases[1].startswith(f"default: building the board: {df.task.nunique()} task(s)")
    assert phases[2] == f"default: writing the board ({len(board) - 1} cells), its plots and pages under {tmp_path / 'default'}"
