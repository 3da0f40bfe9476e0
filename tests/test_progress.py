"""Progress off a terminal: a plain line about ten times a run, on logged steps (step, loss,
tokens/s, time left),
and one line per finished run (run id, status, wall time, each task's headline score).

Mutation check: in suite/progress.py StepLog.eta, steps left total - 1 - step -> total - step makes
test_step_lines_show_step_loss_speed_and_the_time_left_at_the_measured_pace fail."""
import json
import logging
import os
import re
import sys
from pathlib import Path

from tests import forked_cli
from suite import files
from suite.results import store
from suite.progress import StepLog, calls_per_line, duration, finished_line
from suite.run import execute, run_id
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
QUICK = ["train.steps=12", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
         "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=32", "logger=none"]
STEP_LINE = re.compile(r"(\S+) step (\d+)/(\d+) \(\d+%\) loss (\d+\.\d{4}) tok/s ([\d,]+) ETA (\S+)")


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
    assert [int(m.group(2)) for m in steps] == [1, 6, 11, 12]  # steps 0, 5, 10 and the last one
    assert all(m.group(1) == run_id(spec) and m.group(3) == "12" for m in steps)
    assert steps[0].group(6) == "-" and all(re.fullmatch(r"\d+s", m.group(6)) for m in steps[1:])
    final = store.read_run(files.result_path(tmp_path, "pl", run_id(spec)))["run"]["final_loss"]
    assert steps[-1].group(4) == f"{final:.4f}"  # the loss of the last step, as stored


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
    value = next(r["value"] for r in record["rows"] if r["metric"] == "token_accuracy" and r["eval_len"] == 16
                 and r["slice"] == "all")  # copy's headline metric at the training length
    line = _done_line(caplog, run_id(spec))
    assert line.startswith(f"done {run_id(spec)}: ok in {record['run']['wall_s']:.1f}s | "
                           f"copy token_accuracy@16 {value:.4f} -> ")


def test_a_task_set_run_prints_each_tasks_headline_score(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="posbench")
    spec = make_spec(*[q for q in QUICK if not q.startswith("train.seq_len")], "train.seq_len=64", "eval.multiples=[1]",
                     "taskset=core", "sweep_name=ts")
    rows = store.read_run(execute(spec, results_dir=tmp_path, progress=False))["rows"]
    line = _done_line(caplog, run_id(spec))
    headline = {"copy": "token_accuracy", "mqar": "string_match_all", "niah_single": "exact_match", "vt": "string_match_all"}
    scores = dict(re.findall(r"(\w+) \w+@64 (\d\.\d{4})", line))
    assert set(scores) == set(headline)
    for task, metric in headline.items():
        assert f"{task} {metric}@64" in line
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
    assert re.match(rf"done {re.escape(run_id(spec))}: diverged at step 3 in \d+\.\ds \| copy token_accuracy@16 - -> ", line)


def test_finished_line_reads_the_headline_at_the_training_length_only():
    spec = make_spec(*QUICK, "position=nope")
    tasks = [(t, t.build()) for t in spec.tasks]
    rows = [{"task": "copy", "eval_len": 16, "slice": "all", "metric": "exact_match", "value": 0.125},
            {"task": "copy", "eval_len": 16, "slice": "all", "metric": "token_accuracy", "value": 0.75},
            {"task": "copy", "eval_len": 16, "slice": "depth=0", "metric": "token_accuracy", "value": 0.5},
            {"task": "copy", "eval_len": 32, "slice": "all", "metric": "token_accuracy", "value": 0.25}]
    assert finished_line("r", "ok", 1.26, rows, tasks, 16) == "done r: ok in 1.3s | copy token_accuracy@16 0.7500"
    assert finished_line("r", "ok", 1.0, rows[:1], tasks, 16).endswith("copy token_accuracy@16 -")


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
        steps = [int(m.group(2)) for m in STEP_LINE.finditer(text) if m.group(1) == rid]
        assert steps == [1, 5, 9, 12]
        assert len(re.findall(rf"done {re.escape(rid)}: ok in \d+\.\ds \| copy token_accuracy@16 \d\.\d{{4}}", text)) == 1
    df = store.load(tmp_path / "sw")  # one stored file per scheme
    assert sorted(df.positions.unique()) == ["alibi", "nope"] and df.run_id.nunique() == 2
    log = [json.loads(line) for line in (tmp_path / "sw" / "_sweeps.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["jobs"] == 2 and log[0]["parallel"] == 2 and log[0]["wall_s"] > 0
