"""Hostile input, table-driven: every case runs a real command and asserts its exit code, that the
first lines of its message name the bad key or file, that it prints no traceback, and that
nothing was written (bad configuration) or nothing already stored was lost (damaged state).

The configuration cases run two at a time in a pool started once per session; the stateful
cases each copy one small stored run and damage it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked_cli
from tests.conftest import fast_or_exhaustive

ROOT = Path(__file__).resolve().parent.parent
BAD_CONFIG, COMPOSE, CANNOT_RUN = 2, 1, 2  # exit codes: our validation, Hydra's composition, the machine


def run_cli(module: str, args: list[str], cwd: Path, env_extra: dict | None = None, prelude: str = "") -> tuple[int, str]:
    """(exit code, stderr + stdout) of ``python -m module args``, a process forked from a warm
    interpreter (``tests/forked_cli.py``); ``prelude`` runs first in the same process (to patch a
    writer, say)."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled", **(env_extra or {})}
    out = forked_cli.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, timeout=600, prelude=prelude)
    return out.returncode, out.stderr + out.stdout


def first_lines(text: str, n: int = 4) -> str:
    lines = [line for line in text.splitlines() if line.strip() and "HYDRA_FULL_ERROR" not in line
             and "Warning" not in line.split(":")[0] and not line.startswith("  warnings.warn")]
    return "\n".join(lines[:n])


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else {}


def leftovers(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.name.endswith(".tmp") or ".write-probe." in p.name]


# --------------------------------------------------------------------------------------------
# configuration: refused before anything is written

RUN = "suite.run"
CONFIG_CASES = [
    # (id, overrides, exit code, what the first lines must say)
    ("steps-zero", ["train.steps=0"], BAD_CONFIG, r"train\.steps=0: must be >= 1"),
    ("steps-word", ["train.steps=abc"], COMPOSE, r"train\.steps=abc"),
    ("d-model-zero", ["model.d_model=0"], BAD_CONFIG, r"model\.d_model=0: must be >= 1"),
    ("heads-not-dividing", ["model.n_heads=5"], BAD_CONFIG, r"model\.n_heads=5 does not divide model\.d_model=64"),
    ("layers-zero", ["model.n_layers=0"], BAD_CONFIG, r"model\.n_layers=0: must be >= 1"),
    ("attention-unknown", ["model.attention=triton"], BAD_CONFIG, r"unknown model\.attention 'triton'; valid: auto, reference, sdpa, flex"),
    ("model-typo", ["model.widht=3"], COMPOSE, r"model\.widht"),
    ("model-unknown", ["model=huge"], COMPOSE, r"model/huge"),
    ("examples-zero", ["eval.n_examples=0"], BAD_CONFIG, r"eval\.n_examples=0: must be >= 1"),
    ("eval-batch-zero", ["eval.batch_size=0"], BAD_CONFIG, r"eval\.batch_size=0: must be >= 1"),
    ("eval-seed-negative", ["eval.seed=-5"], BAD_CONFIG, r"eval\.seed=-5: must be >= 0"),
    ("multiples-word", ["eval.multiples=[a]"], COMPOSE, r"eval\.multiples"),
    ("multiples-below-one", ["eval.multiples=[0.5,1]"], BAD_CONFIG, r"eval\.multiples\[0\]=0\.5: must be >= 1"),
    ("multiples-empty", ["eval.multiples=[]"], BAD_CONFIG, r"eval\.multiples=\[\]: must have at least one value"),
    ("diagnostics-every-negative", ["eval.diagnostics_every=-1"], BAD_CONFIG, r"eval\.diagnostics_every=-1: must be >= 0"),
    ("lr-negative", ["train.lr=-1"], BAD_CONFIG, r"train\.lr=-1\.0: must be > 0"),
    ("batch-zero", ["train.batch_size=0"], BAD_CONFIG, r"train\.batch_size=0: must be >= 1"),
    ("warmup-negative", ["train.warmup=-3"], BAD_CONFIG, r"train\.warmup=-3: must be >= 0"),
    ("clip-zero", ["train.grad_clip=0"], BAD_CONFIG, r"train\.grad_clip=0\.0: must be > 0"),
    ("betas-one", ["train.betas=[0.9]"], BAD_CONFIG, r"train\.betas=\[0\.9\]: must have 2 values"),
    ("betas-range", ["train.betas=[0.9,1.5]"], BAD_CONFIG, r"train\.betas\[1\]=1\.5: must be < 1"),
    ("min-lr-ratio", ["train.min_lr_ratio=2"], BAD_CONFIG, r"train\.min_lr_ratio=2\.0: must be <= 1"),
    ("seq-len-short", ["train.seq_len=4"], BAD_CONFIG, r"train\.seq_len=4: must be >= 8"),
    ("min-len-long", ["train.min_len=64"], BAD_CONFIG, r"train\.min_len=64: must be in \[1, train\.seq_len=32\]"),
    ("precision-unknown", ["train.precision=fp8"], BAD_CONFIG, r"unknown train\.precision 'fp8'; valid: fp32, bf16"),
    ("loss-on-unknown", ["train.loss_on=everything"], BAD_CONFIG, r"unknown train\.loss_on 'everything'; valid: answer, all"),
    ("device-unknown", ["train.device=gpu"], BAD_CONFIG, r"unknown train\.device 'gpu'; valid: cpu, cuda"),
    ("recipe-unknown", ["train=tpu"], COMPOSE, r"train/tpu"),
    ("seed-negative", ["seed=-1"], BAD_CONFIG, r"seed=-1: must be >= 0"),
    ("seed-word", ["seed=one"], COMPOSE, r"seed=one"),
    ("log-every-zero", ["log_every=0"], BAD_CONFIG, r"log_every=0: must be >= 1"),
    ("ckpt-every-negative", ["ckpt_every=-1"], BAD_CONFIG, r"ckpt_every=-1: must be >= 0"),
    ("threads-negative", ["threads=-2"], BAD_CONFIG, r"threads=-2: must be >= 0"),
    ("top-level-typo", ["sed=3"], COMPOSE, r"sed"),
    ("logger-mode", ["logger.mode=sometimes"], BAD_CONFIG, r"unknown logger\.mode 'sometimes'; valid: offline, online, disabled"),
    ("logger-unknown", ["logger=tensorboard"], COMPOSE, r"logger/tensorboard"),
    ("sweep-name-escape", ["sweep_name=../../tmp/escape"], BAD_CONFIG, r"sweep_name='\.\./\.\./tmp/escape'"),
    ("sweep-name-hidden", ["sweep_name=_evalsets"], BAD_CONFIG, r"sweep_name='_evalsets'"),
    ("position-unknown", ["position=warp"], COMPOSE, r"position/warp"),
    ("theta-word", ["position.theta=abc"], BAD_CONFIG, r"position\.theta='abc'.*could not be converted to Float"),
    ("theta-one", ["position.theta=1"], BAD_CONFIG, r"rope\.theta=1\.0: must be > 1"),
    ("fraction-two", ["position.fraction=2"], BAD_CONFIG, r"rope\.fraction=2\.0: must be in \[0, 1\]"),
    ("scaling-unknown", ["position.scaling=magic"], BAD_CONFIG, r"unknown rope\.scaling 'magic'; valid: "),
    ("position-extra-key", ["+position.slope=2"], BAD_CONFIG, r"unknown key\(s\) \['position\.slope'\]; valid: "),
    ("log-scale-base", ["position.log_scale_base=1"], BAD_CONFIG, r"log_scale_base=1: must be >= 2"),
    ("learned-too-short", ["position=learned", "position.max_positions=16"], BAD_CONFIG, r"max_positions=16 is shorter than train\.seq_len=32"),
    ("t5-buckets-word", ["position=t5", "position.num_buckets=many"], BAD_CONFIG, r"position\.num_buckets='many'"),
    ("window-fraction", ["span=swa", "span.window=1.5"], BAD_CONFIG, r"span\.window=1\.5.*could not be converted to Integer"),
    ("window-zero", ["span=swa", "span.window=0"], BAD_CONFIG, r"window=0: must be a positive number"),
    ("chunk-negative", ["span=chunked", "span.chunk=-3"], BAD_CONFIG, r"chunk=-3"),
    ("span-unknown", ["span=dilated"], COMPOSE, r"span/dilated"),
    ("pattern-window-overridden", ["pattern=command_a", "span=swa", "pattern.window=8"], BAD_CONFIG,
     r"span=swa sizes no layer: every layer kind of pattern 'command_a' names its span"),
    ("pattern-chunk-overridden", ["pattern=llama4", "span=chunked", "span.chunk=8"], BAD_CONFIG,
     r"span=chunked sizes no layer: every layer kind of pattern 'llama4' names its span, and the pattern sizes them \(pattern\.chunk\)"),
    ("pattern-window-unused", ["pattern=rnope", "span=swa", "pattern.window=8"], BAD_CONFIG,
     r"pattern\.window=8 sizes no layer of pattern 'rnope'"),
    ("pattern-window-fraction", ["pattern=command_a", "pattern.window=2.5"], COMPOSE, r"pattern\.window"),
    ("pattern-layer-scheme", ["pattern.layers=[{position: warp}]"], BAD_CONFIG, r"unknown position scheme 'warp'; valid position schemes: "),
    ("pattern-layer-key", ["pattern.layers=[{spin: up}]"], COMPOSE, r"spin"),
    ("task-unknown", ["task=sorting"], COMPOSE, r"task/sorting"),
    ("task-name-unknown", ["task.name=sorting"], BAD_CONFIG, r"unknown task 'sorting'; valid tasks: "),
    ("mqar-cannot-fit", ["task=mqar", "task.n_queries=100"], BAD_CONFIG,
     r"task mqar cannot fill train\.seq_len=32: mqar needs length >= \d+"),
    ("vt-cannot-fit", ["task=vt", "task.hops=20"], BAD_CONFIG, r"task vt cannot fill train\.seq_len=32"),
    ("hops-word", ["task=vt", "task.hops=abc"], BAD_CONFIG, r"task\.hops='abc'"),
    ("depth-two", ["task=niah_single", "task.depth=2"], BAD_CONFIG, r"niah_single\.depth=2\.0: must be in \[0, 1\]"),
    ("alphabet-one", ["task.alphabet=1"], BAD_CONFIG, r"copy\.alphabet=1: must be in \[2, "),
    ("candidates-one", ["task=rank", "task.n_candidates=1"], BAD_CONFIG, r"rank\.n_candidates=1"),
    ("taskset-param-word", ["taskset=core", "+taskset.params.mqar.n_queries=abc"], BAD_CONFIG, r"taskset\.params\.mqar\.n_queries='abc'"),
    ("taskset-param-other-task", ["taskset=core", "+taskset.params.qa.n_facts=2"], BAD_CONFIG, r"taskset\.params names task\(s\) \['qa'\]"),
    ("taskset-repeated-task", ["taskset=core", "taskset.tasks=[copy,copy]"], BAD_CONFIG, r"must list distinct tasks"),
    ("taskset-cannot-fit", ["taskset=core", "+taskset.params.mqar.n_queries=100"], BAD_CONFIG, r"task mqar cannot fill"),
    ("memory-train", ["train.seq_len=200000", "train.min_len=null", "eval.multiples=[1]", "task=niah_single"], CANNOT_RUN,
     r"training \(train\.batch_size=32 x train\.seq_len=200000\) needs about [\d.]+ GiB, more than the [\d.]+ GiB available"),
    ("memory-eval", ["eval.multiples=[1,2048]", "eval.batch_size=400", "task=niah_single"], CANNOT_RUN,
     r"evaluation \(eval\.batch_size=400 x 65536 tokens.*needs about [\d.]+ GiB"),
    ("no-gpu", ["train=gpu", "model.n_layers=1"], CANNOT_RUN, r"train\.device='cuda' \(recipe 'gpu'\) needs a CUDA GPU"),
    ("multirun-bad-job", ["-m", "train.steps=5,0"], BAD_CONFIG, r"bad configuration in sweep job \[train\.steps=0 .*\]: train\.steps=0: must be >= 1"),
    ("multirun-bad-type", ["-m", "seed=0,x"], BAD_CONFIG, r"bad configuration in sweep job \[seed=x .*\]: Error merging override seed=x"),
    ("multirun-unfit-job", ["-m", "task=mqar", "task.n_queries=6,100"], BAD_CONFIG,
     r"sweep job \[task=mqar task\.n_queries=100 .*\]: task mqar cannot fill train\.seq_len=32"),
    # checked before anything expensive: a length whose one example would not fit is refused by the
    # memory estimate, not generated (it used to hang at several GB)
    ("seq-len-huge", ["train.seq_len=1000000", "eval.multiples=[1]"], CANNOT_RUN,
     r"training \(train\.batch_size=32 x train\.seq_len=1000000\) needs about [\d.]+ GiB"),
    ("model-too-big", ["model.d_model=65536", "model.n_heads=1", "model.n_layers=64"], CANNOT_RUN,
     r"the model \(64 layers, model\.d_model=65536, model\.d_ff=192\) needs at least [\d.]+ GiB for its weights.*choose a smaller model"),
    ("plus-key-typo", ["+train.stpes=5"], BAD_CONFIG, r"unknown key\(s\) \['train\.stpes'\]; valid: .*train\.name, .*train\.steps"),
    ("plus-key-top", ["+colour=red"], BAD_CONFIG, r"unknown key\(s\) \['colour'\]; valid: ckpt_every, eval, .*model, "),
    ("multiples-repeated", ["eval.multiples=[1,1]"], BAD_CONFIG,
     r"eval\.multiples=\[1\.0, 1\.0\]: 1 and 1 x train\.seq_len=32 both give the eval length 32"),
    ("lr-infinite", ["train.lr=inf"], BAD_CONFIG, r"train\.lr=inf"),
    ("flex-on-cpu", ["model.attention=flex"], CANNOT_RUN, r"model\.attention=flex trains only on CUDA"),
    ("sweep-name-long", ["sweep_name=" + "a" * 300], BAD_CONFIG, r"sweep_name='a{20}'\.\.\. \(300 characters\): at most 100"),
    ("run-dir-unwritable", ["hydra.run.dir=/proc/posbench-run"], CANNOT_RUN,
     r"hydra\.run\.dir='/proc/posbench-run': cannot write there"),
    ("sweep-dir-unwritable", ["-m", "seed=0,1", "hydra.sweep.dir=/proc/posbench-sweep"], CANNOT_RUN,
     r"hydra\.sweep\.dir='/proc/posbench-sweep': cannot write there"),
]


@pytest.fixture(scope="session")
def config_outcomes(tmp_path_factory, request):
    """Every selected configuration case, each a real ``python -m suite.run`` process writing into
    its own results folder, forked two at a time from one interpreter that imported the suite once
    (``tests/forked_cli.py``). Run once per session: the first test process to get here runs the
    table, the others (pytest-xdist workers) wait for it and read its outcomes."""
    root = tmp_path_factory.getbasetemp()  # an xdist worker's is popen-gwN inside the session's folder
    shared = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    base, done = shared / "hostile-config", shared / "hostile-config.json"
    with open(shared / "hostile-config.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            done.write_text(json.dumps(_run_config_cases(base, request)))
        outcomes = json.loads(done.read_text())
    return {name: (rc, text, base / name / "results") for name, (rc, text) in outcomes.items()}


def _run_config_cases(base: Path, request) -> dict:
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.originalname == "test_bad_configuration_is_refused_by_name_before_anything_is_written"}
    cases = [case for case in CONFIG_CASES if case[0] in selected]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled"}
    jobs = []
    for name, overrides, _, _ in cases:
        quiet = [] if any(o.startswith("logger") for o in overrides) else ["logger=none"]
        dirs = [f"{key}={base / name / sub}" for key, sub in (("hydra.run.dir", "h"), ("hydra.sweep.dir", "hm"))
                if not any(o.startswith(key + "=") for o in overrides)]  # a case may point them elsewhere
        args = [*overrides, f"results_dir={base / name / 'results'}", *dirs, *quiet]
        jobs.append({"module": RUN, "args": args, "cwd": str(ROOT), "env": env})
    out = subprocess.run([sys.executable, "-m", "tests.forked_cli"], input=json.dumps(jobs), capture_output=True,
                         text=True, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return {name: outcome for (name, *_), outcome in zip(cases, json.loads(out.stdout))}


def test_there_are_at_least_sixty_hostile_cases():
    assert len(CONFIG_CASES) + len(STATE_CASES) >= 60
    assert len({c[0] for c in CONFIG_CASES}) == len(CONFIG_CASES)


# The range rules of the schema and Hydra's own key and type errors each take one code path
# (tests/test_schema.py checks every range in-process): make test runs a few of each through the
# CLI, make test-exhaustive the rest; every other case is its own path and runs in both.
RANGE_CASES = {"lr-infinite", "plus-key-top",
               "d-model-zero", "layers-zero", "examples-zero", "eval-batch-zero", "eval-seed-negative",
               "multiples-below-one", "diagnostics-every-negative", "batch-zero", "warmup-negative", "clip-zero",
               "betas-range", "min-lr-ratio", "seq-len-short", "seed-negative", "log-every-zero", "ckpt-every-negative",
               "threads-negative"}
COMPOSE_CASES = {"model-typo", "model-unknown", "multiples-word", "recipe-unknown", "seed-word", "logger-unknown",
                 "position-unknown", "span-unknown", "pattern-window-fraction", "task-unknown"}
# A second case of a rule make test already runs through the CLI (a choice, a range, a type, an unknown
# key, a pattern's span, a task that cannot fit, the memory estimate, a bad sweep job): the rule is the
# same code whichever option breaks it, and each such case still runs in make test-exhaustive.
SECOND_OF_A_KIND = {"precision-unknown", "loss-on-unknown", "device-unknown", "logger-mode", "scaling-unknown",
                    "lr-negative", "multiples-empty", "betas-one", "fraction-two", "log-scale-base", "chunk-negative",
                    "alphabet-one", "candidates-one", "t5-buckets-word", "window-fraction", "taskset-param-word",
                    "sweep-name-hidden", "sweep-name-long", "pattern-chunk-overridden", "pattern-layer-key",
                    "vt-cannot-fit", "taskset-repeated-task", "memory-eval", "multirun-bad-type", "seq-len-huge",
                    "taskset-cannot-fit", "multirun-unfit-job", "sweep-dir-unwritable"}
FAST_CONFIG = [case for case in CONFIG_CASES if case[0] not in RANGE_CASES | COMPOSE_CASES | SECOND_OF_A_KIND]


@pytest.mark.parametrize("name,overrides,code,message", fast_or_exhaustive(CONFIG_CASES, FAST_CONFIG),
                         ids=[c[0] for c in CONFIG_CASES])
def test_bad_configuration_is_refused_by_name_before_anything_is_written(config_outcomes, name, overrides, code, message):
    rc, text, results = config_outcomes[name]
    assert rc == code, text[-3000:]
    assert re.search(message, first_lines(text)), f"first lines do not match {message!r}:\n{first_lines(text)}\n---\n{text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    assert snapshot(results) == {}, f"{name} wrote {sorted(snapshot(results))}"


# --------------------------------------------------------------------------------------------
# damaged state: stored results, caches, checkpoints, paths, a full disk, lm-eval


@pytest.fixture(scope="session")
def stored_run(tmp_path_factory) -> Path:
    """One small finished run (copy, 3 steps, scored at 1x and 2x) in sweep 'h'."""
    results = tmp_path_factory.mktemp("hostile-state") / "results"
    rc, text = run_cli(RUN, ["task=copy", "train.steps=3", "eval.n_examples=4", "eval.multiples=[1,2]", "logger=none",
                             f"results_dir={results}", "sweep_name=h", f"hydra.run.dir={results.parent / 'h'}"], cwd=results.parent)
    assert rc == 0, text
    return results


def _result_file(results: Path) -> Path:
    return next((results / "h").glob("*.json"))


def _work(results: Path) -> Path:
    return next((results / "h" / "_work").iterdir())


def _edit_result(results: Path, change) -> Path:
    """A second, damaged result file beside the good one."""
    good = _result_file(results)
    payload = json.loads(good.read_text())
    payload["run"]["run_id"] += "-copy"
    change(payload)
    bad = results / "h" / "damaged.json"
    bad.write_text(json.dumps(payload))
    return bad


def _set_row(key, value):
    def change(payload):
        payload["rows"][0][key] = value
    return change


def _rerun(results: Path, *extra: str, prelude: str = ""):
    """The stored run's own command (``prelude`` first in its process, to patch a writer, say)."""
    return lambda: run_cli(RUN, ["task=copy", "train.steps=3", "eval.n_examples=4", "eval.multiples=[1,2]", "logger=none",
                         f"results_dir={results}", "sweep_name=h", f"hydra.run.dir={results.parent / 'h2'}", *extra],
                   cwd=results.parent, prelude=prelude)


def _report(results: Path, *extra: str):
    return lambda: run_cli("suite.report", ["h", "--results", str(results), "--out", str(results.parent / "reports"), *extra],
                   cwd=results.parent)


def _full_disk(target: str) -> str:
    """A prelude that makes every write to a file whose name contains ``target`` fail with ENOSPC."""
    return (
        "import builtins, errno, os, torch\n"
        "def _full(name):\n"
        f"    if {target!r} in str(name): raise OSError(errno.ENOSPC, 'No space left on device', str(name))\n"
        "_open, _save, _mkstemp = builtins.open, torch.save, __import__('tempfile').mkstemp\n"
        "def open_(f, mode='r', *a, **k):\n"
        "    ('w' in mode or 'a' in mode) and _full(f)\n"
        "    return _open(f, mode, *a, **k)\n"
        "def save_(obj, f, *a, **k):\n"
        "    _full(f); return _save(obj, f, *a, **k)\n"
        "def mkstemp_(*a, **k):\n"
        "    _full(os.path.join(str(k.get('dir', '')), k.get('prefix', ''))); return _mkstemp(*a, **k)\n"
        "builtins.open, torch.save = open_, save_\n"
        "__import__('tempfile').mkstemp = mkstemp_\n"
    )


def case_result_value_word(results):
    bad = _edit_result(results, _set_row("value", "high"))
    return _report(results), 0, rf"skipping results file {re.escape(str(bad))}: row 0: exact_match value .high. is not a number"


def case_result_no_run(results):
    bad = _edit_result(results, lambda p: p.pop("run"))
    return _report(results), 0, rf"{re.escape(str(bad))}"


def case_result_truncated(results):
    bad = results / "h" / "truncated.json"
    bad.write_text(_result_file(results).read_text()[:200])
    return _report(results), 0, rf"skipping unreadable results file {re.escape(str(bad))}"


def case_result_empty(results):
    bad = results / "h" / "empty.json"
    bad.write_text("")
    return _report(results), 0, rf"skipping unreadable results file {re.escape(str(bad))}"


def case_result_out_of_range(results):
    bad = _edit_result(results, _set_row("value", 1.7))
    return _report(results), 0, rf"skipping results file {re.escape(str(bad))}: row 0: .* = 1\.7 is outside \[0, 1\]"


def case_result_nan_ok(results):
    bad = _edit_result(results, _set_row("value", float("nan")))
    return _report(results), 0, rf"skipping results file {re.escape(str(bad))}: row 0: .*NaN in a run that is ok"


def case_result_unknown_status(results):
    bad = _edit_result(results, _set_row("status", "great"))
    return _report(results), 0, rf"skipping results file {re.escape(str(bad))}: row 0: .*status"


def case_result_foreign_json(results):
    bad = results / "h" / "notes.json"
    bad.write_text(json.dumps({"hello": "world"}))
    return _report(results), 0, rf"{re.escape(str(bad))}"


def case_report_unknown_sweep(results):
    return lambda: run_cli("suite.report", ["nosuch", "--results", str(results), "--out", str(results.parent / "r")], cwd=results.parent), 1, \
        r"no results under .*nosuch"


def case_report_unknown_metric(results):
    return _report(results, "--metric", "accuracy"), 2, r"--metric 'accuracy'.*valid"


def case_cache_truncated(results):
    cache = next((results / "_evalsets").glob("copy-32-*.json"))
    payload = json.loads(cache.read_text())
    payload["examples"] = payload["examples"][:1]
    cache.write_text(json.dumps(payload))
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"eval-set cache file {re.escape(str(cache))} is damaged", {cache.name}


def case_cache_garbage(results):
    cache = next((results / "_evalsets").glob("copy-64-*.json"))
    cache.write_text("{not json")
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"eval-set cache file {re.escape(str(cache))} is damaged", {cache.name}


def case_cache_not_writable(results):
    shutil.rmtree(results / "_evalsets")
    (results / "_evalsets").write_text("a file where the cache folder should be")
    (_result_file(results)).unlink()
    return _rerun(results), 0, r"eval-set cache .*_evalsets is not writable"


def case_checkpoint_garbage(results):
    work = _work(results)
    (work / "trained.json").unlink()
    (work / "ckpt.pt").write_bytes(b"not a checkpoint")
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"checkpoint {re.escape(str(work / 'ckpt.pt'))} could not be loaded", {"ckpt.pt", "model.pt"}


def case_trained_model_garbage(results):
    work = _work(results)
    (work / "model.pt").write_bytes(b"\x00" * 10)
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"finished training in {re.escape(str(work))} could not be loaded", {"model.pt", "trained.json"}


def case_trained_record_garbage(results):
    work = _work(results)
    (work / "trained.json").write_text("[")
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"finished training in {re.escape(str(work))} could not be loaded", {"model.pt", "trained.json"}


def case_results_dir_is_a_file(results):
    target = results.parent / "afile"
    target.write_text("x")
    return lambda: run_cli(RUN, ["task=copy", "train.steps=3", "logger=none", f"results_dir={target}",
                                 f"hydra.run.dir={results.parent / 'h3'}"], cwd=results.parent), CANNOT_RUN, rf"results_dir='{re.escape(str(target))}': cannot write under"


def case_results_dir_not_writable(results):
    target = "/proc/posbench-results" if os.geteuid() == 0 else str(results.parent / "ro")
    if os.geteuid() != 0:
        Path(target).mkdir()
        os.chmod(target, 0o500)
    return lambda: run_cli(RUN, ["task=copy", "train.steps=3", "logger=none", f"results_dir={target}",
                                 f"hydra.run.dir={results.parent / 'h4'}"], cwd=results.parent), CANNOT_RUN, rf"results_dir='{re.escape(target)}': cannot write under"


def case_disk_full_result(results):
    """The result file cannot be written: the finished training stays, and the same command
    then stores the result without training again."""
    shutil.rmtree(results / "h")

    def after(results):
        assert (_work(results) / "model.pt").is_file() and (_work(results) / "trained.json").is_file()
        rc, text = _rerun(results)()
        assert rc == 0 and "training finished earlier" in text, text[-2000:]
        assert _result_file(results).is_file()

    return (_rerun(results, prelude=_full_disk("/.rope-")),
            1, r"could not write .*/h/\.rope-uniform-full-copy-.*: No space left on device", set(), after)


def case_disk_full_model(results):
    shutil.rmtree(results / "h")
    return (_rerun(results, prelude=_full_disk("model.pt")),
            1, r"could not write .*model\.pt\.tmp: No space left on device", set(),
            lambda results: not (_work(results) / "trained.json").exists() or pytest.fail("a marker without its model"))


def case_disk_full_checkpoint(results):
    shutil.rmtree(results / "h")
    return (_rerun(results, "ckpt_every=1", prelude=_full_disk("ckpt")),
            1, r"could not write .*ckpt\.tmp: No space left on device")


def case_lmeval_not_torch(results):
    """Weights that are not the ones the run's training wrote: refused by their SHA-256 before torch reads them."""
    model = _work(results) / "model.pt"
    model.write_text("this is not a torch file")
    return (lambda: run_cli("suite.lmeval", ["--run", str(_result_file(results)), "--tasks", "posbench_copy", "--limit", "1"], cwd=results.parent),
            1, rf"refused {re.escape(str(model))}: model\.pt is not the file this training wrote: {re.escape(str(model))} "
               rf"has SHA-256 [0-9a-f]{{64}}, {re.escape(str(model.parent / 'trained.json'))} records [0-9a-f]{{64}}")


def case_lmeval_no_weights(results):
    model = _work(results) / "model.pt"
    model.unlink()
    return (lambda: run_cli("suite.lmeval", ["--run", str(_result_file(results)), "--tasks", "posbench_copy"], cwd=results.parent),
            2, rf"has no trained weights at {re.escape(str(model))}")


def case_lmeval_unknown_run(results):
    return (lambda: run_cli("suite.lmeval", ["--run", "nosuch-run", "--results_dir", str(results), "--tasks", "posbench_copy"], cwd=results.parent),
            2, r"no run 'nosuch-run'")


def _drop(key):
    def change(payload):
        for row in payload["rows"]:
            row.pop(key)
    return change


def _first_loss(value):
    def change(payload):
        next(r for r in payload["rows"] if r["metric"] == "loss")["value"] = value
    return change


# impossible rows, each in a second file beside the good one: (change, what the report says after
# "skipping results file <file>: ")
BAD_ROWS = {
    "share_over_no_example": (_set_row("n", 0), r"row 0: .* over n = 0 examples"),
    "share_over_negative_examples": (_set_row("n", -5), r"row 0: n -5 is not a whole number >= 0"),
    "unknown_task": (_set_row("task", "no_such_task"), r"row 0: task 'no_such_task' is not one of the run's tasks"),
    "eval_len_huge": (_set_row("eval_len", 1e30), r"row 0: eval_len 1e\+30 is not one of the run's lengths"),
    "negative_len_ratio": (_set_row("len_ratio", -1.0), r"row 0: len_ratio -1\.0 is not eval_len / train_len"),
    "no_positions": (_drop("positions"), r"row 0: row without positions"),
    "no_config_hash": (_drop("config_hash"), r"row 0: row without config_hash"),
    "seed_word": (_set_row("seed", "zero"), r"row 0: seed 'zero' is not a whole number"),
    "wall_word": (_set_row("wall_s", "long"), r"row 0: wall_s 'long' is not a number"),
    "negative_loss": (_first_loss(-1.0), r"row \d+: loss = -1\.0 is outside \[0, inf\)"),
}


def _bad_row_case(change, says):
    def case(results):
        bad = _edit_result(results, change)
        return _report(results), 0, rf"skipping results file {re.escape(str(bad))}: {says}"
    return case


for _name, (_change, _says) in BAD_ROWS.items():
    globals()[f"case_result_{_name}"] = _bad_row_case(_change, _says)


def case_result_deeply_nested(results):
    bad = results / "h" / "deep.json"
    bad.write_text("[" * 100_000 + "]" * 100_000)
    return _report(results), 0, rf"skipping unreadable results file {re.escape(str(bad))}: .*nested too deeply"


def case_result_two_claims(results):
    """A second file claims the run with other values: both are named, neither is ranked, and with
    nothing left the report says so."""
    good = _result_file(results)
    payload = json.loads(good.read_text())
    payload["rows"][0]["value"] = 1.0
    other = results / "h" / "older" / good.name  # a copy in a folder of its own, named for its run
    other.parent.mkdir()
    other.write_text(json.dumps(payload))
    return _report(results), 1, rf"skipping run {re.escape(payload['run']['run_id'])}: 2 files claim it with different contents"


def case_report_loss_lowest_first(results):
    def after(results):
        board = (results.parent / "reports" / "h" / "leaderboard.csv").read_text()
        assert ",loss," in board and "overlaps next" not in board  # loss cells, lowest first where ranked
    return _report(results, "--metric", "loss"), 0, r"scheme +MRR \(OOD\)", {"reports"}, after


def case_report_sweep_outside_out(results):
    return (lambda: run_cli("suite.report", ["../escape", "--results", str(results), "--out", str(results.parent / "r")],
                            cwd=results.parent), 2, r"sweep '\.\./escape': must be letters, digits")


def case_checkpoint_of_another_run(results):
    work = _work(results)
    (work / "trained.json").unlink()
    torch_prelude = ("import torch\n"
                     f"state = torch.load({str(work / 'model.pt')!r}, weights_only=True)\n"
                     f"torch.save({{'model': state, 'optimizer': {{}}, 'step': 1, 'run': 'someone-else'}}, {str(work / 'ckpt.pt')!r})\n")
    exec(compile(torch_prelude, "<ckpt>", "exec"), {})
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"checkpoint {re.escape(str(work / 'ckpt.pt'))} could not be loaded \(ValueError: it belongs to run 'someone-else'", \
        {"ckpt.pt", "model.pt"}


def case_trained_model_of_another_run(results):
    work = _work(results)
    record = json.loads((work / "trained.json").read_text())
    record["run"] = "someone-else"
    (work / "trained.json").write_text(json.dumps(record))
    (_result_file(results)).unlink()
    return _rerun(results), 0, rf"finished training in {re.escape(str(work))} could not be loaded \(ValueError: it records run 'someone-else'", \
        {"model.pt", "trained.json"}


def case_disk_full_in_torch_save(results):
    """torch.save reports a full disk as its own RuntimeError, not an OSError."""
    shutil.rmtree(results / "h")
    prelude = ("import torch\n"
               "def save_(obj, f, *a, **k):\n"
               "    raise RuntimeError('[enforce fail at inline_container.cc:664] . unexpected pos 320 vs 256: '\n"
               "                       'PytorchStreamWriter failed writing file data/0: file write failed')\n"
               "torch.save = save_\n")
    return (_rerun(results, prelude=prelude),
            1, r"could not write .*model\.pt\.tmp: RuntimeError: .*file write failed")


def case_interrupted(results):
    """Ctrl-C mid-training: exit 130 and one line saying a rerun resumes."""
    shutil.rmtree(results / "h")
    prelude = ("import suite.training.loop as loop\n"
               "def interrupt(*a, **k):\n"
               "    raise KeyboardInterrupt\n"
               "loop.train_step = interrupt\n")
    return (_rerun(results, prelude=prelude),
            130, r"interrupted: what was stored is kept; rerunning the same command resumes from the last checkpoint")


def case_lmeval_unknown_task(results):
    return (lambda: run_cli("suite.lmeval", ["--run", str(_result_file(results)), "--tasks", "posbench_bogus"], cwd=results.parent),
            2, r"--tasks: unknown PosBench task\(s\) posbench_bogus; valid: posbench_all, ")


def case_lmeval_truncated_run(results):
    bad = results / "h" / "truncated.json"
    bad.write_text(_result_file(results).read_text()[:100])
    return (lambda: run_cli("suite.lmeval", ["--run", str(bad), "--tasks", "posbench_copy"], cwd=results.parent),
            2, rf"{re.escape(str(bad))} does not count as stored: ")


def case_show_negative_seed(results):
    return (lambda: run_cli("suite.commands.show", ["copy", "--seed", "-1"], cwd=results.parent), 2, r"--seed=-1: must be >= 0")


STATE_CASES = [(name[5:], fn) for name, fn in sorted(globals().items()) if name.startswith("case_")]
# Each impossible row takes the one path of store.row_problem / run_problem, and tests/test_store.py
# checks every such row in-process: make test runs a few of them through the report CLI, make
# test-exhaustive the rest; every other case is its own path and runs in both.
ROW_CASES = {"result_nan_ok", "result_value_word", "result_out_of_range", "result_unknown_status", "result_share_over_negative_examples",
             "result_eval_len_huge", "result_negative_len_ratio", "result_no_config_hash", "result_seed_word",
             "result_wall_word", "result_negative_loss", "result_deeply_nested", "result_no_positions",
             "result_share_over_no_example", "result_unknown_task"}
# A second case of a path make test already runs: an empty result file is read as a truncated one is,
# a garbage eval-set cache as a truncated one, a garbage training record as a garbage model; the
# argument errors of report, lm-eval and show are tests/test_messages.py's and tests/test_entry_bounds.py's
# cases, and a results folder that is a file is tests/test_hostile_paths.py's.
SAME_PATH = {"result_empty", "cache_garbage", "trained_record_garbage", "report_unknown_metric", "report_unknown_sweep",
             "lmeval_unknown_task", "show_negative_seed", "results_dir_is_a_file"}
FAST_STATE = [case for case in STATE_CASES if case[0] not in ROW_CASES | SAME_PATH]


@pytest.mark.parametrize("name,case", fast_or_exhaustive(STATE_CASES, FAST_STATE), ids=[c[0] for c in STATE_CASES])
def test_damaged_state_is_named_and_nothing_stored_is_lost(stored_run, tmp_path, name, case):
    results = tmp_path / "results"
    shutil.copytree(stored_run, results)
    command, code, message, *rest = case(results)  # damages the copy; the command is run below
    may_change, after = (rest + [set(), None])[:2]
    before = snapshot(results)
    rc, text = command()
    assert rc == code, text[-3000:]
    assert re.search(message, first_lines(text, 6)), f"first lines do not match {message!r}:\n{first_lines(text, 6)}\n---\n{text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    assert leftovers(results) == [], "temporary files survived the failure"
    now = snapshot(results)
    lost = [f for f, digest in before.items() if now.get(f) != digest and not any(m in f for m in may_change)]
    assert lost == [], f"{name} lost or changed stored files: {lost}"
    if after:
        after(results)
