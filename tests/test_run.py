"""End to end: Hydra config -> spec -> model -> train -> evaluate -> results store.

Mutation check: in suite/data/metrics.py _reciprocal_rank, counting candidates with ll >= the gold's -> ll <=
makes test_rank_task_reports_reciprocal_rank_from_candidate_logliks fail; dropping "headline" from the rows
RunLifecycle.store writes (suite/lifecycle.py) makes test_execute_writes_one_long_format_file_and_skips_when_rerun fail."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests import forked_cli
from suite import files
from suite.results import store
from suite.report import boards
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES
from suite.run import execute
from suite.training.loop import train
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
QUICK = ["train.steps=12", "train.batch_size=8", "train.seq_len=16", "eval.n_examples=6", "eval.batch_size=3",
         "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=32", "logger=none", "train.check_examples=6"]


def _values(path):
    return {(r["eval_len"], r["metric"], r["slice"]): r["value"] for r in store.read_run(path)["rows"]}


def test_execute_writes_one_long_format_file_and_skips_when_rerun(tmp_path):
    spec = make_spec(*QUICK, "position=alibi", "sweep_name=t")
    path = execute(spec, results_dir=tmp_path, progress=False)
    assert path.parent == tmp_path / "t" and path.name.startswith("alibi-uniform-full-copy-s0-")
    df = store.load(tmp_path / "t")
    assert list(df.columns) == [*store.COLUMNS, "spec", "numeric"]  # each row also carries its run's spec (JSON) and numeric signature
    assert set(df.eval_len) == {16, 32} and set(df.len_ratio) == {1.0, 2.0}
    assert {"exact_match", "token_accuracy", "loss"} <= set(df.metric)
    assert (df.status == "ok").all() and (df.spec_hash == spec.run_id).all() and (df.task == "copy").all()
    assert df.positions.iloc[0] == "alibi" and df.spans.iloc[0] == "full" and df.n.max() == 6
    stored = store.read_run(path)["rows"]  # each row names copy's headline and its metric's declaration
    assert {r["headline"] for r in stored} == {"token_accuracy"} and all(r["share"] is not None for r in stored)
    mtime = path.stat().st_mtime_ns
    assert execute(spec, results_dir=tmp_path, progress=False) == path
    assert path.stat().st_mtime_ns == mtime  # skipped, not retrained
    assert not list((tmp_path / "t").glob("*.tmp")) and not list((tmp_path / "t").glob(".*.tmp"))


def test_a_run_another_sweep_stored_is_copied_under_this_sweep_not_trained(tmp_path, monkeypatch):
    """Sweep ``u`` holds the same spec as sweep ``t`` (a run id leaves the sweep name out): its run
    is copied from ``t``, named for ``u``, with the same numbers, and nothing is trained."""
    import suite.run as run_mod

    first = execute(make_spec(*QUICK, "position=alibi", "sweep_name=t"), results_dir=tmp_path, progress=False)
    monkeypatch.setattr(run_mod, "_train_and_store", lambda *a, **k: pytest.fail("trained a run stored in sweep t"))
    spec = make_spec(*QUICK, "position=alibi", "sweep_name=u")
    copied = execute(spec, results_dir=tmp_path, progress=False)
    assert copied == tmp_path / "u" / first.name
    payload = store.read_run(copied)
    assert payload["run"]["sweep"] == "u" and payload["run"]["spec"]["sweep"] == "u" and payload["run"]["copied_from"] == "t"
    assert {r["sweep"] for r in payload["rows"]} == {"u"} and _values(copied) == _values(first)
    assert set(store.load(tmp_path / "u").sweep) == {"u"}
    other = make_spec(*QUICK, "position=alibi", "sweep_name=u", "seed=1")  # a spec no sibling holds is trained
    with pytest.raises(pytest.fail.Exception, match="trained a run"):
        execute(other, results_dir=tmp_path, progress=False)


def test_same_seed_gives_identical_metrics(tmp_path):
    spec = make_spec(*QUICK, "position=t5", "span=swa", "span.window=4")
    a = execute(spec, results_dir=tmp_path / "a", progress=False)
    b = execute(spec, results_dir=tmp_path / "b", progress=False)
    assert _values(a) == _values(b)
    c = execute(make_spec(*QUICK, "position=t5", "span=swa", "span.window=4", "seed=1"), results_dir=tmp_path / "c",
                progress=False)
    assert _values(a) != _values(c)


def test_learned_positions_past_a_short_table_are_unsupported(tmp_path):
    path = execute(make_spec(*QUICK, "position=learned", "position.max_positions=16"), results_dir=tmp_path, progress=False)
    rows = store.read_run(path)["rows"]
    at_2x = [r for r in rows if r["eval_len"] == 32]
    # every metric copy is scored by, each marked, so every board reads '-' there
    assert sorted(r["metric"] for r in at_2x) == ["exact_match", "loss", "token_accuracy"]
    assert {r["status"] for r in at_2x} == {"unsupported"} and all(math.isnan(r["value"]) for r in at_2x)
    assert all(r["status"] == "ok" for r in rows if r["eval_len"] == 16)
    board = boards.leaderboard(store.load(path.parent))
    assert boards.pivot(board, "copy").iloc[0]["32 (2x)"] == boards.EMPTY  # the last length, before "runs learned"


class Interrupt(Exception):
    pass


def test_checkpoint_resume_gives_the_uninterrupted_weights(tmp_path):
    spec = make_spec(*QUICK, "position=rope", "train.steps=20")
    task = spec.tasks[0].build()
    torch.manual_seed(0)
    straight = PosBenchLM(spec.model)
    train(straight, spec, task, progress=False)

    def crash(record, step):
        if step >= 15:
            raise Interrupt

    ckpt = tmp_path / "ckpt.pt"
    torch.manual_seed(0)
    first = PosBenchLM(spec.model)
    with pytest.raises(Interrupt):
        train(first, spec, task, ckpt_path=ckpt, ckpt_every=5, log=crash, log_every=5, progress=False)
    assert torch.load(ckpt, weights_only=True)["step"] == 15
    torch.manual_seed(123)  # a fresh process would start from different random weights
    resumed = PosBenchLM(spec.model)
    result = train(resumed, spec, task, ckpt_path=ckpt, ckpt_every=5, progress=False)
    assert result.resumed_from == 15 and result.status == "ok"
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_gpu_recipe_refuses_a_machine_without_cuda(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the guard is for CPU-only machines")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU.*train=cpu"):
        execute(make_spec(*QUICK, "train=gpu", "logger=none"), results_dir=tmp_path, progress=False)
    assert not list(tmp_path.rglob("*.json"))


def _cli(*args, env=None):
    return forked_cli.run([sys.executable, "-m", "suite.run", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)


def test_cli_single_run_logs_offline_to_wandb(tmp_path):
    out = _cli(*[q for q in QUICK if q != "logger=none"], "logger=wandb", "position=alibi", "span=swa", "span.window=8",
               f"results_dir={tmp_path}", "sweep_name=cli", f"hydra.run.dir={tmp_path}/hydra",
               env={"WANDB_SILENT": "true"})
    assert out.returncode == 0, out.stderr[-2000:]
    files = list((tmp_path / "cli").glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith("alibi-uniform-swa8-copy")  # the id names the window
    offline = list((tmp_path / "cli" / "wandb").glob("offline-run-*"))  # beside the sweep's results
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))


def test_cli_bad_scheme_fails_before_training_with_the_valid_names(tmp_path):
    out = _cli("position.name=fourier", f"results_dir={tmp_path}", "logger=none", f"hydra.run.dir={tmp_path}/h")
    assert out.returncode != 0
    assert "fourier" in out.stderr + out.stdout and ", ".join(sorted(SCHEMES)) in out.stderr + out.stdout
    assert not (tmp_path / "dev").exists()
    group = _cli("position=fourier", f"results_dir={tmp_path}", "logger=none", f"hydra.run.dir={tmp_path}/h")
    assert group.returncode != 0 and "Available options in 'position'" in group.stderr


def test_store_skips_foreign_and_truncated_files(tmp_path):
    path = execute(make_spec(*QUICK, "position=nope", "sweep_name=s"), results_dir=tmp_path, progress=False)
    (tmp_path / "s" / "foreign.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "s" / "truncated.json").write_text(path.read_text()[:100])
    (tmp_path / "s" / "empty.json").write_text("")
    (tmp_path / "s" / "copy-of-run.json").write_text(path.read_text())  # a run file under a name not its own
    (tmp_path / "s" / "older").mkdir()
    (tmp_path / "s" / "older" / path.name).write_text(path.read_text())  # the same run twice
    with pytest.warns(UserWarning) as caught:
        df = store.load(tmp_path / "s")
    named = " ".join(str(w.message) for w in caught)
    assert all(name in named for name in ("foreign.json", "truncated.json", "empty.json", "duplicate run"))
    assert f"copy-of-run.json: it holds run {path.stem!r}, not 'copy-of-run'" in named
    assert df.run_id.nunique() == 1 and len(df) == len(store.read_run(path)["rows"])  # counted once


def test_taskset_run_scores_each_task_with_slices_ranks_and_eval_set_hashes(tmp_path):
    """Every row names the set it was scored on: one eval set per task and length, and each task's
    check rows (training to criterion) their own check set, apart from the eval sets.

    Mutation check: ``"eval_set": digests.get(name)`` -> ``"eval_set": None`` in
    ``RunLifecycle.check_rows`` (suite/lifecycle.py) makes this fail."""
    quick = [q for q in QUICK if not q.startswith("train.seq_len")]
    execute(make_spec(*quick, "train.seq_len=32", "taskset=core", "position=rope"), results_dir=tmp_path, progress=False)
    df = store.load(tmp_path)
    assert sorted(df.task.unique()) == ["copy", "mqar", "niah_single", "vt"]
    evals = df[~df.metric.isin(["check_score", "steps_to_learn"])]  # check rows name their check set, apart from it
    assert df.eval_set.notna().all() and evals.groupby(["task", "eval_len"]).eval_set.nunique().max() == 1
    checks = df[df.metric == "check_score"]
    assert sorted(checks.task) == ["copy", "mqar", "niah_single", "vt"] and (checks.n == 6).all()
    assert not set(checks.eval_set) & set(evals.eval_set)
    niah = df[(df.task == "niah_single") & (df.metric == "exact_match")]
    assert {"all"} < set(niah.slice) and any(s.startswith("depth=") for s in niah.slice)
    vt = df[(df.task == "vt") & (df.slice == "all")]
    assert {"exact_match", "string_match_all", "string_match_part"} <= set(vt.metric)
    assert (tmp_path / "_evalsets").is_dir() and len(list((tmp_path / "_evalsets").glob("*.json"))) == 8


def test_rank_task_reports_reciprocal_rank_from_candidate_logliks(tmp_path):
    path = execute(make_spec(*QUICK, "task=rank", "position=alibi"), results_dir=tmp_path, progress=False)
    rows = [r for r in store.read_run(path)["rows"] if r["metric"] == "reciprocal_rank" and r["slice"] == "all"]
    assert len(rows) == 2
    # recomputed by hand from the stored weights: each candidate's log-probability at the answer
    # position, the gold's rank counting ties against it, 1 / rank averaged over the examples
    from suite.evaluation.evalsets import generate

    spec = make_spec(*QUICK, "task=rank", "position=alibi")
    model = PosBenchLM(spec.model)
    model.load_state_dict(torch.load(files.work_dir(tmp_path, spec.sweep, path.stem) / "model.pt", weights_only=True))
    model.eval()
    for row in rows:
        examples = generate(spec.tasks[0].build(), row["eval_len"], spec.eval.seed, spec.eval.n_examples)
        rr = []
        for ex in examples:
            with torch.no_grad():
                logprobs = torch.log_softmax(model(torch.tensor([ex.tokens]))[0].float(), dim=-1)
            start = ex.answer_spans[0][0]
            ll = [logprobs[start - 1, c[0]].item() for c in ex.meta["candidates"]]
            gold = ex.meta["gold"]
            rr.append(1 / (1 + sum(v >= ll[gold] for i, v in enumerate(ll) if i != gold)))
        assert row["value"] == pytest.approx(sum(rr) / len(rr), abs=1e-9)


def test_learned_positions_past_the_training_length_are_scored_with_their_initial_rows(tmp_path):
    path = execute(make_spec(*QUICK, "position=learned"), results_dir=tmp_path, progress=False)
    rows = [r for r in store.read_run(path)["rows"] if r["metric"] == "token_accuracy"]
    assert {r["eval_len"] for r in rows} == {16, 32} and all(r["status"] == "ok" for r in rows)


def test_a_run_locked_by_another_process_is_not_trained_twice(tmp_path):
    spec = make_spec(*QUICK, "position=nope", "sweep_name=lk")
    from suite.run import run_id

    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time, pathlib\n"
        f"p = pathlib.Path({str(files.work_dir(tmp_path, 'lk', run_id(spec)))!r}); p.mkdir(parents=True)\n"
        "fh = open(p / 'lock', 'a'); fcntl.flock(fh, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert execute(spec, results_dir=tmp_path, progress=False) is None
        assert not files.result_path(tmp_path, "lk", run_id(spec)).exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died: its lock went with it, and the run trains
    assert execute(spec, results_dir=tmp_path, progress=False).exists()


def test_threads_beyond_the_cores_are_clamped_with_a_warning(monkeypatch):
    import os

    from suite.run import usable_threads

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.warns(UserWarning, match="threads=999 is more than this machine's 2 cores; using 2"):
        assert usable_threads(999) == 2
    assert usable_threads(1) == 1 and usable_threads(0) == 0
