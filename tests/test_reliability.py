"""Faults: killed runs, bad checkpoints, divergence, W&B failures.

Mutation check: in suite/training/loop.py train, a diverged run's steps done step -> step + 1 makes
test_a_non_finite_loss_stops_the_run_as_diverged_and_the_leaderboard_says_so fail."""
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests import forked_cli
from suite import files
from suite.results import store
from suite.model.lm import PosBenchLM
from suite.report import boards
from suite.run import execute, run_id
from suite.training.checkpoint import save_checkpoint
from suite.training.loop import train
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
SMALL = ["train.batch_size=8", "train.seq_len=16", "eval.n_examples=6", "eval.batch_size=3", "eval.multiples=[1,2]",
         "model.n_layers=2", "model.d_model=32", "logger=none", "position=alibi"]


def _values(path):
    return {(r["task"], r["eval_len"], r["metric"], r["slice"]): r["value"] for r in store.read_run(path)["rows"]}


@pytest.mark.exhaustive  # make test: the killed sweep below kills a run the same way mid-training and resumes it
def test_sigkill_mid_run_then_rerun_resumes_and_matches_an_uninterrupted_run(tmp_path):
    args = [*SMALL, "train.steps=200", "train.cap=1", "ckpt_every=10", "sweep_name=k"]  # checks, no extension
    spec = make_spec(*args)
    ckpt = files.work_dir(tmp_path / "a", "k", run_id(spec)) / "ckpt.pt"
    proc = subprocess.Popen([sys.executable, "-m", "suite.run", *args, f"results_dir={tmp_path / 'a'}",
                             f"hydra.run.dir={tmp_path}/h1", "threads=1"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    step = torch.load(ckpt, weights_only=True)["step"]
    assert 0 < step < 200 and not list((tmp_path / "a" / "k").glob("*.json"))  # killed: no result file
    resumed = execute(spec, results_dir=tmp_path / "a", progress=False, ckpt_every=10, threads=1)  # as the killed run
    assert store.read_run(resumed)["run"]["resumed_from"] >= step
    straight = execute(spec, results_dir=tmp_path / "b", progress=False, ckpt_every=10, threads=1)
    assert _values(resumed) == _values(straight)  # bit for bit on the CPU
    assert len(list((tmp_path / "a" / "k").glob("*.json"))) == 1


def test_unreadable_checkpoint_is_reported_and_the_run_restarts_from_scratch(tmp_path):
    spec = make_spec(*SMALL, "train.steps=10")
    task = spec.tasks[0].build()
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"not a checkpoint")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    with pytest.warns(UserWarning, match="(?s)could not be loaded.*from scratch"):
        result = train(model, spec, task, ckpt_path=ckpt, ckpt_every=0, progress=False)
    torch.manual_seed(0)
    clean = PosBenchLM(spec.model)
    train(clean, spec, task, progress=False)
    assert result.resumed_from == 0 and result.status == "ok"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), clean.state_dict().values()))


@pytest.mark.parametrize("case,why", [
    ("another run", r"belongs to run 'someone-else'"),
    ("step past the end", r"its step 1000 is not one a run of 10 steps saves"),
    ("negative step", r"its step -50 is not one a run of 10 steps saves"),
])
def test_a_checkpoint_of_another_run_or_step_is_refused_and_the_run_trains_from_scratch(tmp_path, case, why):
    spec = make_spec(*SMALL, "train.steps=10")
    task = spec.tasks[0].build()
    ckpt = tmp_path / "ckpt.pt"
    torch.manual_seed(0)
    donor = PosBenchLM(spec.model)
    owner = "someone-else" if case == "another run" else spec.run_id
    step = {"another run": 5, "step past the end": 1000, "negative step": -50}[case]
    save_checkpoint(ckpt, donor, torch.optim.AdamW(donor.parameters()), step, owner)
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    with pytest.warns(UserWarning, match=rf"(?s)checkpoint .* could not be loaded .*{why}.*from scratch"):
        result = train(model, spec, task, ckpt_path=ckpt, ckpt_every=0, progress=False)
    assert result.resumed_from == 0 and result.status == "ok" and not ckpt.exists()


def test_another_runs_model_is_not_evaluated_as_this_runs(tmp_path):
    """A finished training whose model.pt was replaced (another run's weights) trains again."""
    first = make_spec(*SMALL, "train.steps=4", "sweep_name=mp")
    other = make_spec(*SMALL, "train.steps=4", "sweep_name=mp", "seed=1")
    paths = [execute(s, results_dir=tmp_path, progress=False) for s in (first, other)]
    work = [files.work_dir(tmp_path, "mp", run_id(s)) for s in (first, other)]
    shutil.copy(work[1] / "model.pt", work[0] / "model.pt")
    paths[0].unlink()  # the result is gone: the run evaluates its finished training again
    with pytest.warns(UserWarning, match=r"finished training in .* could not be loaded .*model\.pt is not the file"):
        again = execute(first, results_dir=tmp_path, progress=False)
    assert _values(again) == _values(execute(first, results_dir=tmp_path / "clean", progress=False))


def test_a_non_finite_loss_stops_the_run_as_diverged_and_the_leaderboard_says_so(tmp_path, monkeypatch):
    import suite.training.step as step_mod

    real = step_mod.next_token_loss
    calls = {"n": 0}

    def exploding(*args, **kwargs):
        loss = real(*args, **kwargs)
        calls["n"] += 1
        return loss * float("nan") if calls["n"] == 4 else loss

    monkeypatch.setattr(step_mod, "next_token_loss", exploding)
    path = execute(make_spec(*SMALL, "train.steps=10", "sweep_name=dv"), results_dir=tmp_path, progress=False)
    rows = store.read_run(path)["rows"]
    assert {r["status"] for r in rows} == {"diverged"}
    by_metric = {r["metric"]: r["value"] for r in rows}
    assert math.isnan(by_metric["exact_match"]) and by_metric["diverged_at_step"] == 3
    board = boards.leaderboard(store.load(tmp_path / "dv"))
    assert board.status.tolist() == ["diverged"] and "diverged" in boards.pivot(board, "copy").to_string()


def test_wandb_failures_warn_once_and_results_are_still_written(tmp_path, monkeypatch):
    import wandb

    def broken(*args, **kwargs):
        raise RuntimeError("wandb is down")

    monkeypatch.setattr(wandb, "init", broken)
    with pytest.warns(UserWarning, match="W&B logging disabled.*wandb is down") as caught:
        path = execute(make_spec(*SMALL, "train.steps=5", "logger=wandb"), results_dir=tmp_path, progress=False,
                       logger_cfg={"name": "wandb", "mode": "offline"})
    assert len([w for w in caught if "W&B" in str(w.message)]) == 1
    assert path.exists() and store.read_run(path)["rows"]


def test_wandb_log_errors_mid_run_are_not_fatal(tmp_path, monkeypatch):
    from suite.tracking import Tracker

    class Run:
        def log(self, *a, **k):
            raise OSError("disk full")

        def finish(self):
            pass

    tracker = Tracker({"name": "none"}, name="x", group="g", config={}, tags=[])
    tracker.run = Run()
    with pytest.warns(UserWarning, match="disk full"):
        tracker.log({"a": 1}, 0)
    tracker.log({"a": 2}, 1)  # disabled after the first failure: no second warning, no error
    assert tracker.run is None


def test_killed_sweep_skips_finished_runs_resumes_the_interrupted_one_and_matches(tmp_path):
    base = [*[a for a in SMALL if not a.startswith("position=")], "train.steps=40", "train.cap=1", "ckpt_every=10", "sweep_name=ks"]
    # one job after another in the sweep's own process, so the kill lands in the second run while
    # the first is stored
    multirun = [sys.executable, "-m", "suite.run", "-m", *base, "position=nope,alibi,t5", "launcher=basic"]
    specs = [make_spec(*base, f"position={p}") for p in ("nope", "alibi", "t5")]
    second_ckpt = files.work_dir(tmp_path / "a", "ks", run_id(specs[1])) / "ckpt.pt"
    proc = subprocess.Popen([*multirun, f"results_dir={tmp_path / 'a'}", f"hydra.sweep.dir={tmp_path}/h1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not second_ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)  # mid-way through the second run
    proc.wait()
    first = files.result_path(tmp_path / "a", "ks", run_id(specs[0]))
    assert first.exists() and not files.result_path(tmp_path / "a", "ks", run_id(specs[1])).exists()
    killed_at = torch.load(second_ckpt, weights_only=True)["step"]
    mtime = first.stat().st_mtime_ns

    again = forked_cli.run([*multirun, f"results_dir={tmp_path / 'a'}", f"hydra.sweep.dir={tmp_path}/h2"], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert first.stat().st_mtime_ns == mtime  # the finished run was skipped, not retrained
    resumed = store.read_run(files.result_path(tmp_path / "a", "ks", run_id(specs[1])))
    assert resumed["run"]["resumed_from"] == killed_at > 0
    stored = sorted(p.name for p in (tmp_path / "a" / "ks").glob("*.json"))
    assert stored == sorted(f"{run_id(s)}.json" for s in specs)  # exactly one file per run

    # the resumed run's metrics equal, bit for bit, an uninterrupted run's (the other two never stopped)
    straight = execute(specs[1], results_dir=tmp_path / "b", progress=False, ckpt_every=10, threads=1)
    assert _values(files.result_path(tmp_path / "a", "ks", run_id(specs[1]))) == _values(straight)
    print(f"killed at step {killed_at} of run 2/3; resumed; metrics equal")


def test_a_bad_job_anywhere_in_a_sweep_stops_it_before_any_training(tmp_path):
    out = forked_cli.run([sys.executable, "-m", "suite.run", "-m", *SMALL, "train.steps=2", "span=swa",
                          "span.window=4,8,0", f"results_dir={tmp_path}", f"hydra.sweep.dir={tmp_path}/h"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 2 and "span.window=0" in text and "window=0: must be a positive" in text
    assert not list(tmp_path.rglob("*.json"))  # the two good jobs never trained


def test_a_failure_after_training_keeps_the_trained_model_and_the_rerun_does_not_retrain(tmp_path, monkeypatch):
    import suite.lifecycle as run_mod

    spec = make_spec(*SMALL, "train.steps=30", "sweep_name=ev")
    reference = _values(execute(spec, results_dir=tmp_path / "whole", progress=False))
    real_evaluate = run_mod.evaluate

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_mod, "evaluate", failing)
    with pytest.raises(OSError, match="No space left"):
        execute(spec, results_dir=tmp_path, progress=False)
    work = files.work_dir(tmp_path, "ev", run_id(spec))
    assert (work / "model.pt").exists() and (work / "trained.json").exists()
    assert not files.result_path(tmp_path, "ev", run_id(spec)).exists() and not list(work.glob("*.tmp"))

    def no_training(*args, **kwargs):
        raise AssertionError("the finished training was trained again")

    monkeypatch.setattr(run_mod, "evaluate", real_evaluate)
    monkeypatch.setattr(run_mod, "train", no_training)
    path = execute(spec, results_dir=tmp_path, progress=False)
    assert _values(path) == reference  # the stored model scores as the uninterrupted run's did
    assert store.read_run(path)["run"]["final_loss"] == store.read_run(
        files.result_path(tmp_path / "whole", "ev", run_id(spec)))["run"]["final_loss"]


@pytest.mark.exhaustive  # a sweep of two jobs in a process of its own
def test_a_job_that_fails_in_a_sweep_says_so_when_it_fails(tmp_path):
    """A sweep of many runs reports a failed job when it fails (one line naming the run and the
    error), not only when the whole sweep ends; the other jobs still run and Hydra's exit says it
    failed. Mutation check: dropping the ``except Exception`` of suite/run.py's main makes it fail."""
    prelude = ("import suite.lifecycle as l\n_real = l.RunLifecycle.setup\n"
               "def setup(self):\n"
               "    if self.spec.seed == 1:\n        raise TypeError('a planted failure')\n"
               "    return _real(self)\n"
               "l.RunLifecycle.setup = setup\n")
    out = forked_cli.run([sys.executable, "-m", "suite.run", "-m", *SMALL, "train.steps=2", "seed=0,1",
                          "launcher=basic", f"results_dir={tmp_path}", f"hydra.sweep.dir={tmp_path}/h"],
                         cwd=ROOT, timeout=300, prelude=prelude, env={**os.environ, "HYDRA_FULL_ERROR": "0"})
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "failed: TypeError: a planted failure" in text
    failed_at = text.index("failed: TypeError")
    assert "seed 1" in text[text.rfind("\n", 0, failed_at):failed_at]  # the line names the run
    assert len(list((tmp_path / "dev").glob("*.json"))) == 1  # seed 0 ran and was stored
