"""Real faults, table-driven: a full disk under every writer, a run killed during evaluation, and
FIFOs where a results folder holds files.

- A write that fails leaves as an ``OSError`` naming the file (``suite.files.writing``), on a real
  full filesystem (a small tmpfs, mounted when this machine allows it, else ``/dev/full``) and
  for each wording torch gives the failure.
- A run resumed from its finished training, or from a checkpoint of its training, stores the
  run's time, not the resumed process's.
- A FIFO named like a run file, or where a run keeps its lock, checkpoint, model or marker
  (``_work``), where an eval set is cached (``_evalsets``), or where a sweep logs its multiruns
  (``_sweeps.jsonl``) or its jobs' plan and ledger, is named and skipped or refused by every
  reader, never waited on.
- A checkpoint of garbage (bytes, an empty or cut file, a list, another run's, a step the run
  never saves, no or NaN weights, weights of other shapes, a time that is not one, a folder or a
  FIFO) is named in one warning and the run trains from scratch, loading nothing of it.
- A finish time past the reader's clock is named once per board read and decides nothing: the
  run counts as stored whenever it is read, and no reader picks between files by time.

Mutation checks: ``checkpoint._save`` converting only messages containing "write" (as it did)
makes test_torch_save_failure_is_named_whatever_torch_says[basic_ios] and the full-disk cases
fail with a RuntimeError; ``write_atomic`` without ``writing`` makes
test_a_full_disk_under_each_writer_names_the_file[write_atomic] fail (no file name); storing
``time.perf_counter() - self.t0`` as the run's wall time again makes
test_a_run_killed_during_evaluation_stores_the_runs_time fail; ``store.read_run`` opening the
file with ``open`` again makes every FIFO case time out; the FIFO, garbage-checkpoint and
finish-time tests name their own.
"""
from __future__ import annotations

import contextlib
import shutil
import errno
import json
import os
import stat
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from suite import files
from suite.report import summary
from suite.report import __main__ as report
from suite.report import compare
from suite.results import shipped, store
from suite.training import checkpoint
from tests import forked_cli
from tests.conftest import fast_or_exhaustive
from tests.test_compare import _sweep


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A folder on a filesystem with no room: a 256 KiB tmpfs filled to the last byte when this
    machine lets the tests mount one (as root), else None (the cases then write to /dev/full)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        yield None
        return
    try:
        with contextlib.suppress(OSError), open(folder / "filler", "wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)  # lazy: a file still open keeps it busy


@pytest.mark.parametrize("writer", ["torch_save", "write_atomic"])
def test_a_full_disk_under_each_writer_names_the_file(full_disk, tmp_path, monkeypatch, writer):
    """On a real full filesystem each writer raises an OSError naming the file it wrote and
    "No space left on device", and leaves no temporary file. Without a mount, the kernel's
    /dev/full gives the same ENOSPC on write: torch.save writes to it, and write_atomic's
    temporary file is opened on it."""
    folder = full_disk if full_disk is not None else tmp_path
    target = folder / ("model.pt.tmp" if writer == "torch_save" else "x.json")
    if writer == "torch_save":
        write = lambda: checkpoint._save({"w": torch.zeros(50_000)}, target if full_disk is not None else Path("/dev/full"))
    else:
        if full_disk is None:
            real = os.fdopen
            monkeypatch.setattr(files.os, "fdopen", lambda fd, *a, **k: (os.close(fd), real(os.open("/dev/full", os.O_WRONLY), "wb"))[1])
        write = lambda: files.write_atomic(target, b"\0" * 300_000)
    with pytest.raises(OSError) as err:
        write()
    assert err.value.filename in (str(target), "/dev/full"), err.value
    if full_disk is not None or writer == "write_atomic":
        assert err.value.errno == errno.ENOSPC and err.value.strerror == "No space left on device", err.value
        assert err.value.filename == str(target)
    left = sorted(p.name for p in folder.iterdir() if p.name != "full")
    assert left == (["filler"] if full_disk is not None else []) + (["model.pt.tmp"] if writer == "torch_save" and full_disk is not None else [])


TORCH_SAYS = {
    "basic_ios": "basic_ios::clear: iostream error",
    "file_write_failed": "[enforce fail at inline_container.cc:664] . unexpected pos 320 vs 256: "
                         "PytorchStreamWriter failed writing file data/0: file write failed",
    "unexpected_pos": "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
}


@pytest.mark.parametrize("case", sorted(TORCH_SAYS))
def test_torch_save_failure_is_named_whatever_torch_says(tmp_path, monkeypatch, case):
    """Any RuntimeError of torch.save is a write failure naming the file, with torch's first line
    (the disk here has room, so it is not called a full disk)."""
    def fail(obj, path, *a, **k):
        raise RuntimeError(TORCH_SAYS[case] + "\nframe 1\nframe 2")

    monkeypatch.setattr(torch, "save", fail)
    path = tmp_path / "ckpt.tmp"
    with pytest.raises(OSError) as err:
        checkpoint._save({}, path)
    assert err.value.filename == str(path) and err.value.errno == errno.EIO
    assert err.value.strerror == f"RuntimeError: {TORCH_SAYS[case]}"


def test_a_full_disk_during_a_run_is_one_line_and_exit_1(tmp_path, full_disk):
    """``suite.run`` with its results folder on a full disk: exit 1, one error line naming the
    file and the full disk, no traceback (a 2 MiB tmpfs used to give torch's RuntimeError)."""
    results = full_disk if full_disk is not None else tmp_path / "results"
    prelude = "" if full_disk is not None else (
        "import torch\n_save = torch.save\n"
        "torch.save = lambda obj, f, *a, **k: _save(obj, '/dev/full') if str(f).endswith('model.pt.tmp') else _save(obj, f, *a, **k)\n")
    out = _run(["task=copy", "train.steps=2", "eval.n_examples=4", "logger=none", f"results_dir={results}",
                f"hydra.run.dir={tmp_path / 'h'}"], prelude=prelude)
    text = out.stderr + out.stdout
    said = "No space left on device" if full_disk is not None else r"RuntimeError: .*unexpected pos"
    assert out.returncode == 1, text[-3000:]
    assert re.search(rf"could not write \S*model\.pt\.tmp: {said}", text), text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def _run(args, prelude: str = "", timeout: float = 300):
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled"}
    return forked_cli.run([sys.executable, "-m", "suite.run", *args], env=env, timeout=timeout, prelude=prelude)


SLOW_TRAINING_THEN_DEATH_IN_EVALUATION = (
    "import os, time, suite.lifecycle as lc, suite.training.loop as loop\n"
    "_step = loop.train_step\n"
    "def slow(*a, **k):  # each of the 2 steps takes 1.5 s more\n"
    "    time.sleep(1.5)\n"
    "    return _step(*a, **k)\n"
    "loop.train_step = slow\n"
    "def die(*a, **k):\n"
    "    os._exit(137)  # no cleanup, as under kill -9\n"
    "lc.evaluate = die\n"
)


@pytest.mark.exhaustive  # the kill during training runs in make test
def test_a_run_killed_during_evaluation_stores_the_runs_time(tmp_path):
    """The first process trains (3 s and more) and dies evaluating; the rerun restores the
    training and stores wall_s and timing that hold the first process's work, not only its own."""
    args = ["task=copy", "train.steps=2", "eval.n_examples=4", "logger=none", f"results_dir={tmp_path / 'r'}",
            "sweep_name=t", f"hydra.run.dir={tmp_path / 'h'}"]
    killed = _run(args, prelude=SLOW_TRAINING_THEN_DEATH_IN_EVALUATION)
    assert killed.returncode == 137, (killed.stderr + killed.stdout)[-3000:]
    trained = json.loads(next((tmp_path / "r" / "t" / "_work").glob("*/trained.json")).read_text())
    before = trained["worked"]
    assert before["wall_s"] >= 3.0 and before["train_s"] >= 3.0
    again = _run(args)
    assert again.returncode == 0 and "training finished earlier" in again.stderr + again.stdout
    run = json.loads(next((tmp_path / "r" / "t").glob("*.json")).read_text())
    assert run["run"]["wall_s"] >= round(before["wall_s"], 2), (run["run"]["wall_s"], before)
    assert run["run"]["timing"]["train_s"] == round(before["train_s"], 3)
    assert run["run"]["timing"]["eval_s"] > 0 and all(row["wall_s"] == run["run"]["wall_s"] for row in run["rows"])


SLOW_TRAINING_THEN_DEATH_AFTER_A_CHECKPOINT = (
    "import os, time, suite.training.loop as loop\n"
    "_step, _save = loop.train_step, loop.save_checkpoint\n"
    "def slow(*a, **k):  # each step before the kill takes 1.5 s more\n"
    "    time.sleep(1.5)\n"
    "    return _step(*a, **k)\n"
    "loop.train_step = slow\n"
    "def save_then_die(*a, **k):\n"
    "    _save(*a, **k)\n"
    "    os._exit(137)  # no cleanup, as under kill -9\n"
    "loop.save_checkpoint = save_then_die\n"
)


def test_a_run_killed_during_training_stores_the_runs_time(tmp_path):
    """The first process trains 2 of 4 steps (3 s and more), writes its checkpoint and dies; the
    rerun resumes from the checkpoint and stores a wall_s and train_s that hold the first
    process's training, which the checkpoint recorded.

    Mutation check: ``Meter.spent`` without ``self.before["wall_s"]`` (the resumed process's
    training time only) makes this fail."""
    args = ["task=copy", "train.steps=4", "ckpt_every=2", "eval.n_examples=4", "logger=none",
            f"results_dir={tmp_path / 'r'}", "sweep_name=t", f"hydra.run.dir={tmp_path / 'h'}"]
    killed = _run(args, prelude=SLOW_TRAINING_THEN_DEATH_AFTER_A_CHECKPOINT)
    assert killed.returncode == 137, (killed.stderr + killed.stdout)[-3000:]
    ckpt = torch.load(next((tmp_path / "r" / "t" / "_work").glob("*/ckpt.pt")), weights_only=True)
    assert ckpt["step"] == 2 and ckpt["spent"]["wall_s"] >= 3.0, ckpt["spent"]
    again = _run(args)
    assert again.returncode == 0, (again.stderr + again.stdout)[-3000:]
    run = json.loads(next((tmp_path / "r" / "t").glob("*.json")).read_text())
    assert run["run"]["wall_s"] >= round(ckpt["spent"]["wall_s"], 2), (run["run"]["wall_s"], ckpt["spent"])
    assert run["run"]["timing"]["train_s"] >= ckpt["spent"]["wall_s"] - ckpt["spent"]["batch_s"] - 1e-3


# --------------------------------------------------------------------------------------------
# FIFOs in a results folder


class NoAnswer(BaseException):
    """Raised by the alarm; not an OSError, so no reader's ``except OSError`` can swallow it."""


@contextlib.contextmanager
def answers_within(seconds: int):
    """Fail (``NoAnswer``) instead of hanging when the block waits on a FIFO."""
    def ring(*_):
        raise NoAnswer(f"no answer within {seconds} s: a FIFO was opened for reading")

    before = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _fifo_sweep(tmp_path) -> tuple[Path, Path]:
    """A sweep ``s`` of two runs and a FIFO ``x.json`` beside them; (folder, fifo)."""
    folder = _sweep(tmp_path / "results", "s", {("rope", 0): (1.0, 0.2), ("alibi", 0): (0.9, 0.7)})
    fifo = folder / "x.json"
    os.mkfifo(fifo)
    return folder, fifo


def _load(tmp_path, folder, fifo):
    assert store.load(folder).run_id.nunique() == 2


def _summary(tmp_path, folder, fifo):
    assert summary.main([str(folder)]) == 0


def _compare(tmp_path, folder, fifo):
    assert compare.main([str(folder), str(folder), "--out", str(tmp_path / "cmp")]) == 0


def _report(tmp_path, folder, fifo):
    assert report.main(["s", "--results", str(folder.parent), "--out", str(tmp_path / "reports")]) == 0


def _pack(tmp_path, folder, fifo):
    assert shipped.pack(folder, tmp_path / "s.jsonl.gz") == 2


def _unpack_onto_a_fifo(tmp_path, folder, fifo):
    shipped.pack(folder, tmp_path / "s.jsonl.gz")
    os.unlink(fifo)
    (folder / "rope-0.json").unlink()
    os.mkfifo(folder / "rope-0.json")  # where unpack would write a run: named, set aside unread, the run written
    (folder / "alibi-0.json").unlink()
    assert shipped.unpack(tmp_path / "s.jsonl.gz", folder.parent, "s") == (2, 0)
    assert stat.S_ISFIFO(os.stat(folder / "_set_aside" / "rope-0.json.damaged-1").st_mode)
    assert store.verified_run(folder / "rope-0.json")["run"]["run_id"] == "rope-0"
    return folder / "rope-0.json"


def _copy_from_sibling(tmp_path, folder, fifo):
    os.unlink(fifo)
    other = folder.parent / "a-first"  # searched before s
    other.mkdir()
    os.mkfifo(other / "rope-0.json")
    assert store.copy_from_sibling(folder.parent, "t", "rope-0") == folder.parent / "t" / "rope-0.json"
    return None


def _trained_marker(tmp_path, folder, fifo):
    work = folder / "_work" / "r"
    work.mkdir(parents=True)
    os.mkfifo(work / "trained.json")
    assert checkpoint.load_trained(work, torch.nn.Linear(1, 1), "r") is None
    return work


def _in_work(folder, fifo, name: str) -> Path:
    """A FIFO at ``_work/r/<name>`` in place of the results folder's ``x.json`` one."""
    os.unlink(fifo)
    work = folder / "_work" / "r"
    work.mkdir(parents=True, exist_ok=True)
    os.mkfifo(work / name)
    return work / name


def _work_lock(tmp_path, folder, fifo):
    lock = _in_work(folder, fifo, "lock")
    with pytest.raises(OSError, match="not a regular file but a FIFO") as err, files.run_lock(folder.parent, "s", "r"):
        pass
    print(err.value, file=sys.stderr)
    return lock


def _work_checkpoint(tmp_path, folder, fifo):
    ckpt = _in_work(folder, fifo, "ckpt.pt")
    model = torch.nn.Linear(1, 1)
    _, start, *_ = checkpoint.resume(ckpt, model, lambda: torch.optim.SGD(model.parameters(), lr=0.1), "r", 10)
    assert start == 0 and not os.path.lexists(ckpt)
    return ckpt


def _work_model(tmp_path, folder, fifo):
    model_pt = _in_work(folder, fifo, "model.pt")
    (model_pt.parent / "trained.json").write_text(json.dumps({"run": "r", "model_sha256": "0" * 64}))
    assert checkpoint.load_trained(model_pt.parent, torch.nn.Linear(1, 1), "r") is None
    return model_pt


def _evalset(tmp_path, folder, fifo):
    from suite.config.codedigest import generator_digest
    from suite.evaluation import evalcache
    from suite.evaluation.evalsets import eval_set_hash
    from tasks import build_task

    os.unlink(fifo)
    cache, task = folder.parent / "_evalsets", build_task("copy")
    cache.mkdir()
    path = cache / f"copy-16-{eval_set_hash('copy', {}, 16, 0, 3, generator_digest(type(task).name))}.json"
    os.mkfifo(path)
    examples, _ = evalcache.eval_set("copy", {}, task, 16, 0, 3, cache_dir=cache)
    assert len(examples) == 3 and path.is_file()  # regenerated and cached in its place
    return path


def _sweeps_log(tmp_path, folder, fifo):
    from suite.config import validate

    os.unlink(fifo)
    log = validate.sweep_log_path(folder.parent, "s")
    os.mkfifo(log)
    print(validate.append_sweep_log(log, {"sweep": "s"}), file=sys.stderr)
    with pytest.raises(OSError, match="not a regular file but a FIFO"):
        validate.read_sweep_log(log)
    return log


def _sweep_plan(tmp_path, folder, fifo):
    from suite.progress import SweepProgress

    assert SweepProgress.of_plan(fifo, 0) is None
    return fifo


def _sweep_ledger(tmp_path, folder, fifo):
    from suite.progress import SweepProgress

    job = SweepProgress(1, 2, 1, ledger=fifo)
    assert job.finish(True, 1.0) == "run 1 of 2 finished | 0 of 2 done, time left known after the first trained run"
    return fifo


READERS = {f.__name__[1:]: f for f in (_load, _summary, _compare, _report, _pack, _unpack_onto_a_fifo,
                                       _copy_from_sibling, _trained_marker, _work_lock, _work_checkpoint, _work_model,
                                       _evalset, _sweeps_log, _sweep_plan, _sweep_ledger)}
NAMED_OTHERWISE = {"unpack_onto_a_fifo": "set aside", "trained_marker": "no trained weights",
                   "work_model": "no trained weights"}  # readers that name the FIFO by what they do with it


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_in_a_results_folder_is_named_and_skipped(tmp_path, capsys, reader):
    """A FIFO where a reader looks for a run file, a checkpoint, a finished model or its marker, a
    lock, a cached eval set, the sweep log, or a sweep's plan or ledger: named (by what it is, or by
    what the reader does with it), skipped or refused, never opened to wait for a writer.
    Mutation checks: ``run_lock`` opening its lock with ``open(path, "a")`` makes work_lock time
    out; ``checkpoint._torch_load`` calling ``torch.load(path)`` makes work_checkpoint time out;
    ``evalcache._read`` reading with ``path.read_text()`` makes evalset time out;
    ``append_sweep_log`` writing with ``open(path, "a")`` makes sweeps_log time out;
    ``SweepProgress.of_plan`` reading with ``read_text`` makes sweep_plan time out."""
    folder, fifo = _fifo_sweep(tmp_path)
    with answers_within(20), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named = READERS[reader](tmp_path, folder, fifo)
    said = capsys.readouterr().err + "\n".join(str(w.message) for w in caught)
    if reader == "copy_from_sibling":
        return  # the FIFO holds no run: the valid sibling is copied, and nothing had to be said
    assert str(named or fifo) in said, said
    assert NAMED_OTHERWISE.get(reader, "not a regular file but a FIFO") in said, said
    assert "Traceback" not in said


def test_read_regular_refuses_each_kind_of_non_regular_file_without_waiting(tmp_path):
    """A FIFO, a socket and a folder are each named by what they are; a regular file is read."""
    import socket

    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_bytes(b"abc")
    with answers_within(10):
        for name, kind in (("fifo", "a FIFO"), ("sock", "a socket"), ("dir", "a folder")):
            with pytest.raises(OSError, match=f"not a regular file but {kind}") as err:
                files.read_regular(tmp_path / name)
            assert err.value.filename == str(tmp_path / name)
        assert files.read_regular(tmp_path / "file") == b"abc"
    sock.close()


# --------------------------------------------------------------------------------------------
# a corrupted checkpoint: the run starts over, saying so, and never loads what it holds


def _model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    return model, lambda: torch.optim.AdamW(model.parameters(), lr=0.1)


def _saved(path, **change):
    """A checkpoint of run 'r' at step 5, its state changed by ``change`` (a key set to a value)."""
    model, make = _model_and_optimizer()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # weights that differ from the fresh model's
    checkpoint.save_checkpoint(path, model, make(), 5, "r", spent={"wall_s": 3.0, "batch_s": 1.0})
    if change:
        state = torch.load(path, weights_only=True)
        torch.save({**state, **change}, path)


def _nan_weights(path):
    model, make = _model_and_optimizer()
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    checkpoint.save_checkpoint(path, model, make(), 5, "r")


GARBAGE = {  # how ckpt.pt is damaged -> what the warning says it is
    "bytes": (lambda p: p.write_bytes(b"\x00garbage" * 100), r"UnpicklingError|RuntimeError|EOFError|ValueError"),
    "empty": (lambda p: p.write_bytes(b""), r"EOFError|RuntimeError|UnpicklingError"),
    "truncated": (lambda p: (_saved(p), p.write_bytes(p.read_bytes()[:200])), r"RuntimeError|EOFError|UnpicklingError"),
    "a-list": (lambda p: torch.save([1, 2, 3], p), r"it holds a list, not a checkpoint"),
    "another-run": (lambda p: _saved(p, run="someone-else"), r"it belongs to run 'someone-else'"),
    "step-past-the-end": (lambda p: _saved(p, step=10), r"its step 10 is not one a run of 10 steps saves"),
    "step-a-float": (lambda p: _saved(p, step=5.0), r"its step 5\.0 is not one"),
    "no-weights": (lambda p: _saved(p, model=[1]), r"it holds no model weights"),
    "nan-weights": (_nan_weights, r"its model weights hold NaN or inf"),
    "wrong-shapes": (lambda p: _saved(p, model={"0.weight": torch.zeros(3, 3)}), r"RuntimeError: Error\(s\) in loading state_dict"),
    "negative-time": (lambda p: _saved(p, spent={"wall_s": -7.0}), r"its time spent wall_s -7\.0 is not a time"),
    "time-a-word": (lambda p: _saved(p, spent={"wall_s": "long"}), r"its time spent wall_s 'long' is not a time"),
    "a-folder": (lambda p: p.mkdir(), r"not a regular file but a folder"),
    "a-fifo": (lambda p: os.mkfifo(p), r"not a regular file but a FIFO"),
}


@pytest.mark.parametrize("damage", fast_or_exhaustive(sorted(GARBAGE), {"bytes", "nan-weights", "negative-time", "a-fifo"}))
def test_a_garbage_checkpoint_is_named_and_the_run_trains_from_scratch(tmp_path, damage):
    """``ckpt.pt`` damaged in each way: one warning naming it and why, the run at step 0 with its
    fresh weights (nothing of the file loaded), and the file out of the run's way.
    Mutation checks: ``_garbage`` without its finite-weights check makes nan-weights load the NaN;
    without its time check makes negative-time and time-a-word resume with a negative or no time;
    ``resume`` calling ``path.unlink`` on a folder (no ``_discard``) makes a-folder raise."""
    ckpt = tmp_path / "ckpt.pt"
    make, why = GARBAGE[damage]
    make(ckpt)
    model, optimizer = _model_and_optimizer()
    fresh = {k: v.clone() for k, v in model.state_dict().items()}
    with answers_within(20), pytest.warns(UserWarning) as caught:
        _, start, spent, history, checks = checkpoint.resume(ckpt, model, optimizer, "r", 10)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(f"checkpoint {ckpt} could not be loaded ("), said
    assert re.search(why, said[0]) and said[0].endswith("training this run from scratch"), said[0]
    assert (start, spent, history, checks) == (0, {"wall_s": 0.0, "batch_s": 0.0}, [], [])
    assert all(torch.equal(v, fresh[k]) for k, v in model.state_dict().items())
    assert not ckpt.exists() or damage == "a-folder" and not ckpt.is_dir()


def test_an_intact_checkpoint_resumes(tmp_path):
    """The control: the same checkpoint undamaged resumes at its step with its time."""
    _saved(tmp_path / "ckpt.pt")
    model, optimizer = _model_and_optimizer()
    _, start, spent, _, _ = checkpoint.resume(tmp_path / "ckpt.pt", model, optimizer, "r", 10)
    assert start == 5 and spent == {"wall_s": 3.0, "batch_s": 1.0}


# --------------------------------------------------------------------------------------------
# a finish time in the future: named, decides nothing


def _future(folder, stamp="2099-01-01T00:00:00+00:00"):
    """rope-0's finish time moved to ``stamp``, in its record and every row."""
    path = folder / "rope-0.json"
    payload = json.loads(path.read_text())
    payload["run"]["timestamp"] = stamp
    payload["rows"] = [{**r, "timestamp": stamp} for r in payload["rows"]]
    path.write_text(json.dumps(payload))
    return path


def _future_reads(folder, path, tmp_path, capsys):
    """Each reader's verdict on the folder holding rope-0 finished in 2099: (runs kept, what it said)."""
    published = tmp_path / "published"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.verified_run(path)
        kept = {"load": set(store.load(folder).run_id)}
        codes = [shipped.main([a, "s", "--results", str(r), "--published", str(published)])
                 for a, r in (("pack", folder.parent), ("check", folder.parent), ("unpack", tmp_path / "fresh"))]
    kept["unpack"] = {p.stem for p in (tmp_path / "fresh" / "s").glob("*.json")}
    return kept, codes, capsys.readouterr().err + "\n".join(str(w.message) for w in caught)


def test_a_finish_time_past_the_clock_is_named_and_decides_nothing(tmp_path, capsys, monkeypatch):
    """The rule: a run's finish time never decides whether it counts as stored (a verdict does not
    depend on when it is read), and no reader orders runs by it; a time later than this machine's
    clock (past ``FUTURE_SKEW``) is named, once per board read, and the run read as stored.
    Mutation check: ``read_board`` without ``_future_notes`` makes this fail (nothing named);
    ``_time_problem`` refusing a time past the clock makes every reader leave rope-0 out."""
    folder, fifo = _fifo_sweep(tmp_path)
    os.unlink(fifo)
    path = _future(folder)
    kept, codes, said = _future_reads(folder, path, tmp_path, capsys)
    assert kept == {"load": {"rope-0", "alibi-0"}, "unpack": {"rope-0", "alibi-0"}} and codes == [0, 0, 0], (kept, codes, said)
    note = f"1 run(s) under {folder} finished later than this machine's clock says it is now ("
    assert note in said and f"{path} at 2099-01-01T00:00:00+00:00" in said, said
    assert said.count("finished later than this machine's clock") == 4, said  # load, pack, check, unpack: once each
    # in 2100 the same file is read the same way, and nothing is said
    later = store.datetime(2100, 6, 1, tzinfo=store.timezone.utc)
    monkeypatch.setattr(store, "datetime", type("Clock", (store.datetime,), {"now": classmethod(lambda cls, tz=None: later)}))
    shutil.rmtree(tmp_path / "fresh")
    (tmp_path / "published" / "s.jsonl.gz").unlink()
    kept2, codes2, said2 = _future_reads(folder, path, tmp_path, capsys)
    assert (kept2, codes2) == (kept, codes) and "finished later" not in said2, said2


def test_a_later_finish_time_does_not_pick_between_two_claims(tmp_path):
    """Two files claim rope-0 with different numbers, one finished in 2099: neither is used (a
    finish time is not trusted to say which is newer)."""
    folder, fifo = _fifo_sweep(tmp_path)
    os.unlink(fifo)
    other = folder / "older" / "rope-0.json"
    other.parent.mkdir()
    payload = json.loads((folder / "rope-0.json").read_text())
    payload["rows"][0]["value"] = 0.5
    other.write_text(json.dumps(payload))
    _future(folder)
    with pytest.warns(UserWarning, match="skipping run rope-0: 2 files claim it with different contents"):
        assert set(store.load(folder).run_id) == {"alibi-0"}
