""""Stored" means verified: a result file counts as stored only when ``store.verified_run`` accepts
it (a regular file that parses, passes the store's checks and names this run and spec hash).
Anything else at a run's name is set aside with its bytes (``files.set_aside``), named in one
line, and the run is done again; every other reader (the report's ``store.load``, lm-eval,
diagnose --stored, reproduce, a sibling sweep's copy) refuses or skips it, naming it.

Each damage kind below is one the issue text does not list, or one it lists reached another way.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import sys
from pathlib import Path

import pytest

from suite import files
from suite.commands import diagnose
from suite.reproduce import stored_reruns
from suite.results import store
from suite.run import execute, run_id
from tests import forked_cli
from tests.conftest import fast_or_exhaustive, make_spec, stored_seeds

ROOT = Path(__file__).resolve().parent.parent
TINY = ["model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.steps=3",
        "train.batch_size=4", "train.seq_len=12", "eval.n_examples=3", "eval.batch_size=3", "eval.multiples=[1]",
        "logger=none", "sweep_name=st", "task=copy", "position=alibi"]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def no_hang():
    """A reader that opens a FIFO waits forever: fail after 120 s instead."""
    def stop(*_):
        raise TimeoutError("a reader blocked (a FIFO opened for reading?)")
    before = signal.signal(signal.SIGALRM, stop)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, before)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A results folder with two tiny stored runs of sweep 'st' (seeds 0 and 1)."""
    return stored_seeds(tmp_path_factory.mktemp("stored"), TINY)


def _values(payload):
    return {(r["task"], r["eval_len"], r["metric"], r["slice"]): r["value"] for r in payload["rows"]}


def _truncated(path, other):
    path.write_bytes(path.read_bytes()[:300])


def _another_runs_file(path, other):
    shutil.copyfile(other, path)


def _a_folder(path, other):
    path.unlink()
    path.mkdir()
    (path / "notes.txt").write_text("a folder where the result file was")


def _a_fifo(path, other):
    path.unlink()
    os.mkfifo(path)


def _invalid_json(path, other):
    path.write_text('{"schema": "posbench.run/1", "run": {,}')


def _other_schema(path, other):
    payload = json.loads(path.read_text())
    path.write_text(json.dumps({**payload, "schema": "posbench.run/0"}))


def _other_spec_hash(path, other):
    """The run id kept, the spec hash changed in the record and every row alike."""
    payload = json.loads(path.read_text())
    payload["run"]["spec_hash"] = "000000000000"
    payload["rows"] = [{**r, "spec_hash": "000000000000"} for r in payload["rows"]]
    path.write_text(json.dumps(payload))


def _impossible_row(path, other):
    payload = json.loads(path.read_text())
    next(r for r in payload["rows"] if r["metric"] == "exact_match")["value"] = 3.0
    path.write_text(json.dumps(payload))


def _rows_of_another_run(path, other):
    """The record is this run's, the rows another run's."""
    payload = json.loads(path.read_text())
    payload["rows"] = json.loads(other.read_text())["rows"]
    path.write_text(json.dumps(payload))


def _a_row_of_another_configuration(path, other):
    """One row's config hash changed: the row disagrees with its own record."""
    payload = json.loads(path.read_text())
    payload["rows"][-1]["config_hash"] = "0123456789ab"
    path.write_text(json.dumps(payload))


def _another_sweeps_run(path, other):
    """The run relabelled by hand for sweep 'other' (record, spec and rows), left in st's folder."""
    payload = json.loads(path.read_text())
    payload["run"] = {**payload["run"], "sweep": "other", "spec": {**payload["run"]["spec"], "sweep": "other"}}
    payload["rows"] = [{**r, "sweep": "other"} for r in payload["rows"]]
    path.write_text(json.dumps(payload))


def _a_negative_wall_time(path, other):
    payload = json.loads(path.read_text())
    payload["run"]["wall_s"] = -1.0
    path.write_text(json.dumps(payload))


# damage -> what the one-line reason says after "<file> does not count as stored: "
DAMAGE = {
    "truncated": (_truncated, r"(Expecting|Unterminated) .* \(char \d+\)"),
    "another run's file": (_another_runs_file, r"it holds run '.*-s1-[0-9a-f]{12}', not '.*-s0-[0-9a-f]{12}'"),
    "a folder": (_a_folder, r"it cannot be read \(not a regular file but a folder\)"),
    "a FIFO": (_a_fifo, r"it cannot be read \(not a regular file but a FIFO\)"),
    "invalid JSON": (_invalid_json, r"Expecting property name"),
    "another schema": (_other_schema, r"is not a PosBench run \(schema posbench\.run/1\)"),
    "another spec hash": (_other_spec_hash, r"its spec hash is '000000000000', not the run's '[0-9a-f]{12}'"),
    "an impossible row": (_impossible_row, r"row \d+: exact_match = 3\.0 is outside \[0, 1\]"),
    "rows of another run": (_rows_of_another_run, r"row 0: run '.*-s1-[0-9a-f]{12}', not the file's '.*-s0-[0-9a-f]{12}'"),
    "a row of another configuration": (_a_row_of_another_configuration,
                                       r"row \d+: config_hash '0123456789ab', not the '[0-9a-f]{12}' its record states"),
    "another sweep's run": (_another_sweeps_run, r"it is a run of sweep 'other', and no folder on its path is named so"),
    "a negative wall time": (_a_negative_wall_time, r"its record's wall_s -1\.0 is not a time"),
}
# make test: every damage the issue text names; the record-agreement kinds run one there, all in make test-exhaustive
FAST_DAMAGE = [k for k in DAMAGE if k not in ("a row of another configuration", "a negative wall time")]


def _damaged(two_runs, tmp_path, kind):
    """(results copy, spec of seed 0, its result file now damaged by ``kind``, the damaged bytes or None)."""
    results = tmp_path / "results"
    shutil.copytree(two_runs, results)
    spec = make_spec(*TINY, "seed=0")
    path = files.result_path(results, "st", run_id(spec))
    other = files.result_path(results, "st", run_id(make_spec(*TINY, "seed=1")))
    DAMAGE[kind][0](path, other)
    return results, spec, path, (path.read_bytes() if path.is_file() and not path.is_symlink() else None)


def _same_thing(moved: Path, kind: str, damaged: bytes | None) -> bool:
    if kind == "a folder":
        return moved.is_dir() and (moved / "notes.txt").read_text() == "a folder where the result file was"
    if kind == "a FIFO":
        return stat.S_ISFIFO(os.lstat(moved).st_mode)
    return moved.read_bytes() == damaged


@pytest.mark.parametrize("kind", fast_or_exhaustive(list(DAMAGE), FAST_DAMAGE))
def test_a_rerun_sets_the_damaged_file_aside_and_redoes_the_run(two_runs, tmp_path, kind):
    """The rerun names the file and where it went in one line, keeps it byte for byte under
    ``_set_aside/``, and ends with a result file that counts as stored and holds the run's numbers.
    Mutation checks: ``run.stored`` returning True whenever something is at the path (the old
    ``out.exists()``) makes every case fail; ``verified_run`` without ``identity_problem`` makes
    "another run's file", "another spec hash" and "rows of another run" fail; without
    ``record_problem`` "a row of another configuration" and "a negative wall time" fail; ``checked``
    without ``foreign_sweep`` makes "another sweep's run" fail; ``files.set_aside`` deleting
    instead of renaming makes every case fail."""
    results, spec, path, damaged = _damaged(two_runs, tmp_path, kind)
    moved = path.parent / "_set_aside" / f"{path.name}.damaged-1"
    with pytest.warns(UserWarning) as caught:
        again = execute(spec, results_dir=results, progress=False)
    said = [str(w.message) for w in caught if "does not count as stored" in str(w.message)]
    assert len(said) == 1 and "\n" not in said[0], said
    head, _, tail = said[0].partition(" does not count as stored: ")
    assert head == str(path) and re.match(DAMAGE[kind][1], tail), said[0]
    assert tail.endswith(f"; set aside as {moved}, and the run is done again"), said[0]
    assert again == path
    payload = store.verified_run(path, run_id(spec), spec.run_id)
    assert _values(payload) == _values(store.read_run(files.result_path(two_runs, "st", run_id(spec))))
    assert _same_thing(moved, kind, damaged)
    assert sorted(p.name for p in (path.parent / "_set_aside").iterdir()) == [moved.name]


@pytest.mark.parametrize("kind", fast_or_exhaustive(list(DAMAGE), FAST_DAMAGE))
def test_every_other_reader_refuses_or_skips_the_damaged_file_naming_it(two_runs, tmp_path, kind, capsys):
    """The report's ``load`` skips it (the other run loads), lm-eval and diagnose --stored refuse
    it, reproduce leaves it out, and another sweep does not copy it; each names the file, and the
    file is left where it is.
    Mutation check: ``load_run`` reading the file with ``read_run`` instead of ``verified_run``
    makes the identity cases fail; diagnose not asking ``verified_run`` makes every case fail."""
    from suite.lmeval.model import load_run

    results, spec, path, damaged = _damaged(two_runs, tmp_path, kind)
    rid = run_id(spec)
    with pytest.warns(UserWarning) as caught:
        df = store.load(results / "st")
    assert any(str(path) in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert set(df.run_id) == {run_id(make_spec(*TINY, "seed=1"))}
    with pytest.raises(ValueError, match=f"{path} does not count as stored: "):
        load_run(rid, results)
    capsys.readouterr()
    assert diagnose.main([*TINY, "seed=0", f"results_dir={results}", "--stored"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{path} does not count as stored: ") and len(err.splitlines()) == 1, err
    with pytest.warns(UserWarning, match=f"{path} does not count as stored: .*left out of the comparison"):
        assert stored_reruns([path]) == []
    assert store.copy_from_sibling(results, "other", rid, spec.run_id) is None
    assert not (results / "other").exists()
    assert path.is_dir() if kind == "a folder" else _same_thing(path, kind, damaged)  # left where it is


def test_a_sweep_redoes_the_damaged_run_and_skips_the_stored_one(two_runs, tmp_path):
    """``python -m suite.run -m seed=0,1`` (one job after another: the job code is the joblib
    launcher's too): seed 0's file is a folder, so it is set aside and run again; seed 1 is skipped
    as stored.
    Mutation check: the skip before the run's lock testing ``out.exists()`` makes this fail."""
    results, spec, path, _ = _damaged(two_runs, tmp_path, "a folder")
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled"}
    out = forked_cli.run([sys.executable, "-m", "suite.run", "-m", *[o for o in TINY], "seed=0,1", "launcher=basic",
                          f"results_dir={results}", f"hydra.sweep.dir={tmp_path / 'hm'}"], cwd=ROOT, env=env, timeout=600)
    text = out.stderr + out.stdout
    assert out.returncode == 0, text[-3000:]
    assert f"{path} does not count as stored: it cannot be read (not a regular file but a folder); set aside as " in text, text[-3000:]
    assert f"skip {run_id(make_spec(*TINY, 'seed=1'))}: already stored" in text, text[-3000:]
    store.verified_run(path, run_id(spec), spec.run_id)
    assert (path.parent / "_set_aside" / f"{path.name}.damaged-1" / "notes.txt").is_file()
