"""Hostile output paths, generated: every command that writes x every kind of bad place to write.

Each case runs the real command (forked from a warm interpreter, ``tests/forked_cli.py``) in a
workspace that holds what the command reads, and asserts: exit 2, one line naming the option,
the path and why (``suite.commandline.output_problem``), no traceback, and nothing written in the
workspace (an empty path used to write into the current folder, which is the workspace) or at
the bad place.

Mutation checks: ``output_problem`` returning None for an empty path makes the ``empty`` cases
fail (suite.run writes ``dev/`` into the workspace, report writes its board there); dropping the
``check_output`` call of any command makes its cases fail with a traceback or a write; probing
with ``os.access`` instead of a probe file makes the ``readonly`` cases pass the check as root
and fail later.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite.commandline import output_problem
from suite.results import shipped, store
from tests import forked_cli
from tests.conftest import fast_or_exhaustive
from tests.test_compare import _sweep

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def readonly_dir(tmp_path_factory) -> Path:
    """A folder no file can be created in, for root too: a read-only tmpfs where mounting works,
    else a folder under /sys (root gets EACCES there); a mode-0500 folder for other users."""
    folder = tmp_path_factory.mktemp("readonly")
    if os.geteuid() != 0:
        os.chmod(folder, 0o500)
        yield folder
        os.chmod(folder, 0o700)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                             capture_output=True).returncode == 0
    yield folder if mounted else Path("/sys/posbench-readonly")
    if mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)  # lazy: a file still open keeps it busy


BAD_KINDS = ("file", "proc", "readonly", "empty")
WHY = {"file": r"cannot write under it: .*is a file, not a folder", "proc": r"cannot write under it: no file can be created in /proc",
       "readonly": r"cannot write under it: no file can be created in ", "empty": r"empty; name a (folder|file)"}


def bad_path(kind: str, ws: Path, readonly: Path, file: bool) -> str:
    """A path of ``kind`` where a command wants a folder (``file`` False) or a file."""
    leaf = "out.md" if file else "out"
    return {"file": str(ws / "afile" / leaf) if file else str(ws / "afile"), "proc": f"/proc/posbench-{leaf}",
            "readonly": str(readonly / leaf), "empty": ""}[kind]


# every command that writes: (name, module, option as the message names it, whether it writes a
# file, the arguments given the bad path P and the workspace W)
WRITERS = [
    ("report-out", "suite.report", "--out", False, lambda p, w: ["s", "--results", str(w / "results"), "--out", p]),
    ("report-wandb-results", "suite.report", "--results", False,
     lambda p, w: ["s", "--from", "published", "--published", str(w / "published"), "--out", str(w / "reports"),
                   "--wandb", "offline", "--results", p]),
    ("compare-out", "suite.report.compare", "--out", False,
     lambda p, w: [str(w / "results" / "s"), str(w / "results" / "s"), "--out", p]),
    ("curve-out", "suite.commands.curve", "--out", True, lambda p, w: [str(w / "results" / "s"), "--out", p]),
    ("fair-page-out", "suite.report.fair_page", "--out", True, lambda p, w: ["--out", p]),
    ("reproduce-boards-out", "suite.reproduce", "--out", True,
     lambda p, w: ["--boards", str(w / "board.csv"), str(w / "board.csv"), "--out", p]),
    ("reproduce-results", "suite.reproduce", "--results", False,
     lambda p, w: ["s", "--published", str(w / "published"), "--results", p]),
    ("pack-published", "suite.results.shipped", "--published", False,
     lambda p, w: ["pack", "s", "--results", str(w / "results"), "--published", p]),
    ("unpack-results", "suite.results.shipped", "--results", False,
     lambda p, w: ["unpack", "s", "--published", str(w / "published"), "--results", p]),
    ("lmeval-output-path", "suite.lmeval", "--output_path", False,
     lambda p, w: ["--model", "hf", "--tasks", "posbench_copy", "--output_path", p]),
    ("export-out", "suite.commands.export", "--out", True,
     lambda p, w: ["s", "--published", str(w / "published"), "--format", "csv", "--out", p]),
    ("rank-out", "suite.commands.rank", "--out", False,
     lambda p, w: ["position=alibi", "--board", "rank_fixture", "--sweep-file", str(ROOT / "tests/data/sweep/rank_fixture.yaml"),
                   "--published", str(ROOT / "tests/data/published"), "--out", p]),
    ("bench-perf-out", "suite.bench.perf", "--out", False, lambda p, w: ["--out", p]),
    ("bench-numerics-out", "suite.bench.numerics", "--out", False, lambda p, w: ["--out", p]),
    ("bench-gpu-out", "suite.bench.gpu", "--out", False, lambda p, w: ["--out", p]),
    ("run-results-dir", "suite.run", "results_dir=", False,
     lambda p, w: ["task=copy", "train.steps=2", "logger=none", f"results_dir={p}", f"hydra.run.dir={w.parent / 'hydra'}"]),
]
CASES = [(writer, kind) for writer in WRITERS for kind in BAD_KINDS]
# make test: each writer once and each kind at least twice; make test-exhaustive: the rest
FAST = [(writer, BAD_KINDS[i % len(BAD_KINDS)]) for i, writer in enumerate(WRITERS)]


def workspace(ws: Path) -> Path:
    """What the writers read: a sweep ``s`` of two runs, its shipped file, a leaderboard.csv, and a
    plain file ``afile``."""
    _sweep(ws / "results", "s", {("rope", 0): (1.0, 0.2), ("alibi", 0): (0.9, 0.7)})
    (ws / "published").mkdir()
    shipped.pack(ws / "results" / "s", store.shipped_path("s", ws / "published"))
    (ws / "board.csv").write_text("scheme,task,eval_len,metric,mean,ci_low,ci_high,n_seeds\n"
                                  "rope,copy,32,token_accuracy,0.9,0.8,1.0,2\n")
    (ws / "afile").write_text("a file where a folder is wanted")
    return ws


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))}


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("writer,kind", fast_or_exhaustive(CASES, FAST), ids=[f"{w[0]}-{k}" for w, k in CASES])
def test_every_writer_refuses_every_bad_output_path_before_any_work(tmp_path, readonly_dir, writer, kind):
    name, module, option, is_file, args = writer
    ws = workspace(tmp_path / "ws")
    path = bad_path(kind, ws, readonly_dir, is_file)
    before, ro_before = snapshot(ws), snapshot(readonly_dir) if readonly_dir.is_dir() else {}
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled"}
    out = forked_cli.run([sys.executable, "-m", module, *args(path, ws)], cwd=ws, env=env, timeout=300)
    text = out.stderr + out.stdout
    said = f"{option}{path!r}" if option.endswith("=") else f"{option} {path!r}"
    assert out.returncode == 2, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert len(lines(text)) == 1, text[-3000:]
    assert re.search(re.escape(said) + r": " + WHY[kind], text), f"{said!r} / {WHY[kind]!r} not in:\n{text}"
    assert snapshot(ws) == before, f"{name} wrote {sorted(set(snapshot(ws)) - set(before))}"
    assert (snapshot(readonly_dir) if readonly_dir.is_dir() else {}) == ro_before
    assert not Path("/proc/posbench-out").exists()


def test_there_is_a_case_for_every_writer_and_every_bad_path():
    assert len(CASES) == len(WRITERS) * len(BAD_KINDS) == 64
    with_out = {".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__")
                for f in (ROOT / "suite").rglob("*.py") if 'add_argument("--out"' in f.read_text()}
    assert with_out <= {w[1] for w in WRITERS}, with_out - {w[1] for w in WRITERS}  # every --out is in the grid
    assert {k for _, k in FAST} == set(BAD_KINDS) and {w[0] for w, _ in FAST} == {w[0] for w in WRITERS}


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_output_problem_names_each_bad_place_and_writes_nothing(tmp_path, readonly_dir, kind):
    """The one rule, in-process, for a folder and for a file; a good place (a folder to be
    created under a writable one) passes and is not created."""
    ws = workspace(tmp_path / "ws")
    before = snapshot(ws)
    for is_file in (False, True):
        problem = output_problem(bad_path(kind, ws, readonly_dir, is_file), "file" if is_file else "folder")
        assert problem is not None and re.search(WHY[kind], problem), (kind, is_file, problem)
    assert output_problem(ws / "new" / "deeper") is None and output_problem(ws / "new" / "x.md", "file") is None
    assert output_problem(ws / "results", "file") == "cannot write it: it is a folder, not a file"
    assert snapshot(ws) == before


def test_a_results_dir_that_is_only_a_shape_problem_is_refused_without_a_probe(tmp_path):
    """describe and diagnose check no machine (``probe=False``): an empty path and a file in the
    way are still refused; a folder only this machine cannot write is left to the run."""
    (tmp_path / "afile").write_text("x")
    assert output_problem("", probe=False).startswith("empty")
    assert "is a file" in output_problem(tmp_path / "afile" / "x", probe=False)
    assert output_problem("/proc/posbench-out", probe=False) is None
    with contextlib.suppress(FileNotFoundError):
        assert not list(Path("/proc").glob(".write-probe.*"))
