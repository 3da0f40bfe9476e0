"""Integrity a user cannot bypass by recomputing a hash.

- Every reader of a trained ``model.pt`` (lm-eval ``--run``, diagnose ``--stored``, a run
  restoring its finished training) checks its SHA-256 against the one ``trained.json`` records
  for this run (``checkpoint.trained_record``); another run's weights of the same shapes are
  refused in one line naming both files and both digests.
- An eval-set cache is trusted only when regenerating it from its seed gives the same examples:
  edited examples with a recomputed ``content`` hash are named, set aside and regenerated, and the
  run is scored on the honest examples.
"""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from suite import files
from suite.commands import diagnose
from suite.evaluation import evalcache
from suite.evaluation.evalsets import generate
from suite.results import store
from suite.run import execute, run_id
from tests.conftest import make_spec, stored_seeds

TINY = ["model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.steps=3",
        "train.batch_size=4", "train.seq_len=12", "eval.n_examples=3", "eval.batch_size=3", "eval.multiples=[1]",
        "logger=none", "sweep_name=in", "task=copy", "position=alibi"]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A results folder with two tiny stored runs of the same shapes (seeds 0 and 1)."""
    return stored_seeds(tmp_path_factory.mktemp("integrity"), TINY)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _swapped(two_runs, tmp_path, *names):
    """(results copy, seed 0's result file, its work folder) with ``names`` copied from seed 1's work folder."""
    results = tmp_path / "results"
    shutil.copytree(two_runs, results)
    mine, other = (files.work_dir(results, "in", run_id(make_spec(*TINY, f"seed={s}"))) for s in (0, 1))
    for name in names:
        shutil.copyfile(other / name, mine / name)
    return results, files.result_path(results, "in", mine.name), mine


def _mismatch_line(work, own_sha: str) -> str:
    model, marker = work / "model.pt", work / "trained.json"
    return (f"refused {model}: model.pt is not the file this training wrote: {model} has SHA-256 {_sha(model)}, "
            f"{marker} records {own_sha}")


def test_lmeval_refuses_another_runs_weights_of_the_same_shapes(two_runs, tmp_path, capsys):
    """Mutation check: ``load_run`` without ``trained_record`` makes this fail (it would score them)."""
    from suite.lmeval.__main__ import main

    own_sha = json.loads((files.work_dir(two_runs, "in", run_id(make_spec(*TINY, "seed=0"))) / "trained.json")
                         .read_text())["model_sha256"]
    results, path, work = _swapped(two_runs, tmp_path, "model.pt")
    assert _sha(work / "model.pt") != own_sha
    with pytest.raises(SystemExit) as stop:
        main(["--run", str(path), "--tasks", "posbench_copy", "--limit", "1"])
    assert stop.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == f"python -m suite.lmeval: error: --run {path}: {_mismatch_line(work, own_sha)}"


def test_lmeval_refuses_weights_and_record_copied_from_another_run(two_runs, tmp_path):
    """Both files of another run: its record names that run, not this one."""
    from suite.lmeval.model import WeightsRefused, load_run

    results, path, work = _swapped(two_runs, tmp_path, "model.pt", "trained.json")
    spec = make_spec(*TINY, "seed=0")
    other = make_spec(*TINY, "seed=1").run_id
    with pytest.raises(WeightsRefused, match=rf"refused {work / 'model.pt'}: it records run '{other}', not '{spec.run_id}' "
                                             rf"\({work / 'trained.json'}\)"):
        load_run(str(path))


def test_diagnose_stored_refuses_another_runs_weights(two_runs, tmp_path, capsys):
    """Mutation check: ``diagnose.stored_weights`` without ``trained_record`` makes this fail."""
    own_sha = json.loads((files.work_dir(two_runs, "in", run_id(make_spec(*TINY, "seed=0"))) / "trained.json")
                         .read_text())["model_sha256"]
    results, _, work = _swapped(two_runs, tmp_path, "model.pt")
    capsys.readouterr()
    assert diagnose.main([*TINY, "seed=0", f"results_dir={results}", "--stored"]) == 1
    assert capsys.readouterr().err.strip() == _mismatch_line(work, own_sha)


def test_weights_without_their_record_cannot_be_checked_and_are_refused(two_runs, tmp_path, capsys):
    results, _, work = _swapped(two_runs, tmp_path)
    (work / "trained.json").unlink()
    assert diagnose.main([*TINY, "seed=0", f"results_dir={results}", "--stored"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"refused {work / 'model.pt'}: {work / 'model.pt'} cannot be checked: {work / 'trained.json'}, "
                          "which records its SHA-256, cannot be read ("), err


# ---------------------------------------------------------------------------------------------
# eval-set caches


def _tamper(path) -> bytes:
    """Edit every example's tokens after the first two (the same length), and recompute the file's
    ``content`` hash as a plain sha256 of the examples, as an attacker would; returns the new bytes."""
    payload = json.loads(path.read_text())
    for ex in payload["examples"]:
        ex["tokens"] = ex["tokens"][:2] + [ex["tokens"][1]] * (len(ex["tokens"]) - 2)
    payload["content"] = evalcache.content_hash(payload["examples"])
    path.write_text(json.dumps(payload))
    return path.read_bytes()


def _copy_set(tmp_path, n=5, length=24):
    task = make_spec("task=copy").tasks[0].build()
    examples, digest = evalcache.eval_set("copy", {}, task, length, 7, n, tmp_path)
    return task, examples, digest, next(tmp_path.glob(f"copy-{length}-{digest}.json"))


@pytest.mark.parametrize("new_process", [True, False], ids=["first use in a process", "later use in the process"])
def test_a_tampered_cache_with_a_recomputed_content_hash_is_set_aside_and_regenerated(tmp_path, monkeypatch, new_process):
    """Mutation check: ``eval_set`` returning the cached examples once their own content hash
    matches (``if content == _HONEST[digest]: return (fresh[0] if fresh else cached), digest`` ->
    ``if True: return cached, digest``) makes both cases fail."""
    task, honest, digest, path = _copy_set(tmp_path)
    honest_bytes = path.read_bytes()
    tampered = _tamper(path)
    if new_process:
        monkeypatch.setattr(evalcache, "_HONEST", {})
    with pytest.warns(UserWarning) as caught:
        got, same = evalcache.eval_set("copy", {}, task, 24, 7, 5, tmp_path)
    moved = tmp_path / "_set_aside" / f"{path.name}.damaged-1"
    (said,) = [str(w.message) for w in caught]
    bad = evalcache.content_hash(json.loads(tampered)["examples"])
    honest_hash = evalcache.content_hash(json.loads(honest_bytes)["examples"])
    assert said == (f"eval-set cache file {path} does not hold the examples its seed generates (content {bad}, "
                    f"regenerated {honest_hash}): set aside as {moved}; regenerating it")
    assert same == digest and [e.tokens for e in got] == [e.tokens for e in honest]
    assert moved.read_bytes() == tampered and path.read_bytes() == honest_bytes


def test_a_set_is_regenerated_once_per_process(tmp_path, monkeypatch):
    """The first use in a process regenerates the set to check the cache; later uses compare with
    the remembered hash and generate nothing.
    Mutation check: ``eval_set`` regenerating at every read (``if digest not in _HONEST`` ->
    ``if True``) makes this fail."""
    calls = []
    real = evalcache.generate
    monkeypatch.setattr(evalcache, "generate", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(evalcache, "_HONEST", {})
    task, honest, _, _ = _copy_set(tmp_path)  # generated and cached: 1
    assert len(calls) == 1
    for _ in range(3):
        again, _ = evalcache.eval_set("copy", {}, task, 24, 7, 5, tmp_path)
        assert [e.tokens for e in again] == [e.tokens for e in honest]
    assert len(calls) == 1
    monkeypatch.setattr(evalcache, "_HONEST", {})  # a new process: checks the cache by regenerating once
    evalcache.eval_set("copy", {}, task, 24, 7, 5, tmp_path)
    assert len(calls) == 2 and calls[-1][1:] == (24, 7, 5)


def test_a_run_scored_after_its_cache_was_tampered_with_has_the_honest_rows(two_runs, tmp_path, monkeypatch):
    """The rerun of a run whose eval set was edited (content hash recomputed) warns naming the
    cache, and its rows equal those scored on the honest examples, eval-set id and all.
    Mutation check: trusting a cache whose own content hash matches (as in the test above) makes
    this fail, also without the warning check: the loss moves (5.741 to 5.782) while the rows
    keep the honest eval_set id."""
    results = tmp_path / "results"
    shutil.copytree(two_runs, results)
    spec = make_spec(*TINY, "seed=0")
    path = files.result_path(results, "in", run_id(spec))
    before = store.read_run(path)["rows"]
    (cache,) = (results / "_evalsets").glob("copy-12-*.json")
    tampered = _tamper(cache)
    path.unlink()
    monkeypatch.setattr(evalcache, "_HONEST", {})  # as a new process would start
    with pytest.warns(UserWarning, match=rf"eval-set cache file {cache} does not hold the examples its seed generates"):
        again = execute(spec, results_dir=results, progress=False)
    key = lambda r: (r["task"], r["eval_len"], r["metric"], r["slice"], r["eval_set"])  # noqa: E731
    assert {key(r): r["value"] for r in store.read_run(again)["rows"]} == {key(r): r["value"] for r in before}
    assert (results / "_evalsets" / "_set_aside" / f"{cache.name}.damaged-1").read_bytes() == tampered
    honest = generate(spec.tasks[0].build(), 12, spec.eval.seed, spec.eval.n_examples)
    assert [ex["tokens"] for ex in json.loads(cache.read_text())["examples"]] == [list(e.tokens) for e in honest]
