"""Real faults, table-driven: a full disk under every writer, a run killed during evaluation, and
FIFOs where a results folder holds files.

- A write that fails leaves as an ``OSError`` naming the file (``suite.files.writing``), on a real
  full filesystem (a small tmpfs, mounted when this machine allows it, else ``/dev/full``) and
  for each wording torch gives the failure.
- A run resumed from its finished training, or from a checkpoint of its training, stores the
  run's time, not the resumed process's.
- A FIFO named like a run file is named and skipped by every reader, never waited on.

Mutation checks: ``checkpoint._save`` converting only messages containing "write" (as it did)
makes test_torch_save_failure_is_named_whatever_torch_says[basic_ios] and the full-disk cases
fail with a RuntimeError; ``write_atomic`` without ``writing`` makes
test_a_full_disk_under_each_writer_names_the_file[write_atomic] fail (no file name); storing
``time.perf_counter() - self.t0`` as the run's wall time again makes
test_a_run_killed_during_evaluation_stores_the_runs_time fail; ``store.read_run`` opening the
file with ``open`` again makes every FIFO case time out.
"""
from __future__ import annotations

import contextlib
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


READERS = {f.__name__[1:]: f for f in (_load, _summary, _compare, _report, _pack, _unpack_onto_a_fifo,
                                       _copy_from_sibling, _trained_marker)}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_in_a_results_folder_is_named_and_skipped(tmp_path, capsys, reader):
    folder, fifo = _fifo_sweep(tmp_path)
    with answers_within(20), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named = READERS[reader](tmp_path, folder, fifo)
    said = capsys.readouterr().err + "\n".join(str(w.message) for w in caught)
    if reader == "copy_from_sibling":
        return  # the FIFO holds no run: the valid sibling is copied, and nothing had to be said
    assert str(named or fifo) in said, said
    if reader not in ("unpack_onto_a_fifo", "trained_marker"):
        assert "not a regular file but a FIFO" in said, said
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
