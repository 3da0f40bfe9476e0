"""The code digest in every run id: it covers the shared numeric code and the scheme, span and
task files a run uses, so a change retrains exactly the runs it could change.

Mutation check: in suite/config/codedigest.py numeric_files, dropping ``todo += _imported_files(path, root)``
makes test_a_piece_changes_only_the_runs_that_use_it fail (copy_repeat imports copy); in
catalogue, ``if not names`` -> ``if names`` makes test_pieces_are_found_from_the_source fail;
generator_files starting from the task's module alone (no imports followed) makes
test_an_edit_to_a_parent_task_changes_the_eval_set_id_of_every_task_that_inherits_from_it fail.
The other tests name their own mutations."""
import inspect
import json
import shutil
import subprocess
import sys

import pytest

import suite.config.build
from suite.config import codedigest
from suite.config.codedigest import EXCLUDED, ROOT, code_digest, is_excluded, module_file, numeric_files, spec_digest
from suite.model.position import SCHEMES
from suite.model.span import SPANS
from tasks import TASKS
from tests.conftest import make_spec


@pytest.fixture
def tree(tmp_path):
    """A copy of the numeric code to edit; the caches are cleared before and after."""
    for part in ("suite", "tasks"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    code_digest.cache_clear(), codedigest.catalogue.cache_clear()
    yield tmp_path
    code_digest.cache_clear(), codedigest.catalogue.cache_clear()


def _edit(path, text="\n# edited\n"):
    path.write_text(path.read_text() + text)
    code_digest.cache_clear(), codedigest.catalogue.cache_clear(), codedigest.generator_digest.cache_clear()


def _digest(root, spec):
    return spec_digest(spec.to_dict(), root)


def test_pieces_are_found_from_the_source():
    pieces, shared = codedigest.catalogue()
    for kind, registry in (("position", SCHEMES), ("span", SPANS), ("task", TASKS)):
        assert {name for k, name in pieces if k == kind} == set(registry)
        assert all(pieces[(kind, name)].stem == cls.__module__.rsplit(".", 1)[1] for name, cls in registry.items())
    assert {p.relative_to(ROOT).as_posix() for p in shared} >= {"suite/model/position/base.py", "suite/model/span/base.py",
                                                                 "tasks/base.py", "tasks/__init__.py"}


def test_a_run_spec_carries_the_digest_of_what_it_uses():
    spec = make_spec("position=rope", "span=swa", "task=vt")
    files = {f.relative_to(ROOT).as_posix() for f in numeric_files(position=["rope"], span=["swa"], task=["vt"])}
    assert {"suite/model/lm.py", "suite/training/loop.py", "suite/model/position/rope.py", "suite/model/span/swa.py", "tasks/vt.py"} <= files
    assert not files & {"suite/model/position/alibi.py", "suite/model/span/chunked.py", "tasks/copy.py", "suite/report/boards.py"}
    assert spec.code == code_digest(position=("rope",), span=("swa",), task=("vt",), mixer=("attention",)) == _digest(ROOT, spec)


def test_a_changed_core_file_changes_every_run_id(tree, monkeypatch):
    before = make_spec("position=alibi")
    assert _digest(tree, before) == before.code
    _edit(tree / "suite" / "model" / "lm.py")
    changed = _digest(tree, before)
    assert changed != before.code and _digest(tree, make_spec("position=nope")) != make_spec("position=nope").code
    monkeypatch.setattr(suite.config.build, "code_digest", lambda **used: changed)
    after = make_spec("position=alibi")
    assert after.code == changed and after.run_id != before.run_id and after.config_hash != before.config_hash
    _edit(tree / "suite" / "report" / "boards.py", "# reports do not compute numbers\n")
    assert _digest(tree, before) == changed


def test_a_piece_changes_only_the_runs_that_use_it(tree):
    rope, nope = make_spec("position=rope"), make_spec("position=nope")
    copy_repeat, vt = make_spec("position=nope", "task=copy_repeat"), make_spec("position=nope", "task=vt")
    _edit(tree / "suite" / "model" / "position" / "rope.py")
    assert _digest(tree, rope) != rope.code and _digest(tree, nope) == nope.code
    _edit(tree / "tasks" / "copy.py")  # copy_repeat imports copy's generator
    assert _digest(tree, copy_repeat) != copy_repeat.code and _digest(tree, vt) == vt.code
    (tree / "suite" / "model" / "position" / "zzz.py").write_text(
        "from suite.model.position.base import PositionScheme\n\n\nclass Zzz(PositionScheme):\n    name = \"zzz\"\n")
    code_digest.cache_clear(), codedigest.catalogue.cache_clear()
    assert _digest(tree, vt) == vt.code  # a new scheme file leaves other runs alone
    _edit(tree / "suite" / "model" / "position" / "base.py")  # shared by every scheme
    assert _digest(tree, vt) != vt.code


def test_a_spec_naming_a_missing_piece_has_no_digest():
    spec = make_spec("position=rope").to_dict()
    spec["model"]["layers"][0]["position"] = "gone"
    assert spec_digest(spec) is None
    with pytest.raises(ValueError, match=f"no position named 'gone'.*valid: {', '.join(sorted(SCHEMES))}$"):
        numeric_files(position=["gone"])


def test_an_edit_to_a_parent_task_changes_the_eval_set_id_of_every_task_that_inherits_from_it(tree):
    from suite.evaluation.evalsets import eval_set_hash

    def ids(root):
        return {name: eval_set_hash(name, {}, 32, 0, 10, codedigest.generator_digest(name, root)) for name in TASKS}

    before = ids(tree)
    assert before == ids(ROOT)  # the copy is the checkout
    _edit(tree / "tasks" / "copy.py")
    after = ids(tree)
    changed = {name for name in TASKS if after[name] != before[name]}
    assert changed == {"copy", "copy_repeat", "reverse"}  # both import copy's generator
    _edit(tree / "tasks" / "base.py")  # the vocabulary: every task's examples
    assert all(ids(tree)[name] != after[name] for name in TASKS)


RUN = {"position": ("rope",), "span": ("full",), "task": ("copy",), "mixer": ("attention",)}
PROBE = "\n_digest_probe = 1\n"  # a statement, not only a comment: the module's code changes


def _rel(files, root=ROOT) -> set[str]:
    return {f.relative_to(root).as_posix() for f in files}


def test_every_excluded_name_exists():
    """Each entry of the exclusion list names a module or package of this checkout (a stale name,
    left after a move, fails here), and each says why it is left out.

    Mutation check: adding ``"suite.training.gone": "..."`` to EXCLUDED makes this fail."""
    missing = [name for name in EXCLUDED if module_file(name) is None]
    assert missing == [], f"EXCLUDED names no module: {missing}"
    assert all(isinstance(why, str) and why for why in EXCLUDED.values())


def test_the_import_reader_follows_every_form_of_import(tmp_path):
    """Imports inside functions, relative imports (one and two levels up, with and without a
    module), ``import a.b.c`` (with each package's ``__init__``) and a ``from`` import of a
    submodule are all followed; a third-party module and a plain name are not files.

    Mutation checks: reading only the module's top-level statements (``ast.iter_child_nodes`` for
    ``ast.walk``) in imported_files, or dropping ``- node.level + 1`` (relative imports resolved
    from the root), makes this fail."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\n\n\ndef f():\n    from pkg.sub import b\n    return b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from . import c\nfrom ..d import value\n",
        "pkg/sub/c.py": "import pkg.deep.e\n",
        "pkg/d.py": "value = 1\n",
        "pkg/deep/__init__.py": "",
        "pkg/deep/e.py": "from pkg import unrelated_name\n",
        "pkg/never.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = _rel(codedigest._closure([tmp_path / "pkg" / "a.py"], tmp_path), tmp_path)
    assert found == set(files) - {"pkg/never.py"}


def test_the_closure_is_what_a_run_imports_less_the_exclusions():
    """The numeric files are the modules ``suite.run`` reaches, less EXCLUDED and the pieces it
    does not use; the entry point's closure holds the model, training and evaluation code."""
    files = numeric_files(**RUN)
    assert not any(is_excluded(f) for f in files)
    assert {"suite/model/lm.py", "suite/model/attention.py", "suite/evaluation/evaluate.py", "suite/training/loop.py",
            "suite/config/run_spec.py", "suite/model/position/rope.py", "tasks/copy.py"} <= _rel(files)
    assert not _rel(files) & {"suite/run.py", "suite/report/boards.py", "suite/tracking.py", "suite/model/position/alibi.py"}


def test_what_a_run_calls_to_compute_its_numbers_is_hashed():
    """The functions one run calls to compute its numbers (taken from the run's own code, so a
    move of any of them is followed) live in hashed files: the model, the training loop and step,
    batching, the loss, evaluation, eval-set generation and the diagnostics.

    Mutation check: adding ``"suite.evaluation.evaluate"`` (or ``"suite.training"``) to EXCLUDED
    makes this fail."""
    from suite import lifecycle

    train, evaluate = lifecycle.train, lifecycle.evaluate
    called = [lifecycle.PosBenchLM, train, train.__globals__["train_step"], train.__globals__["make_batch"], evaluate,
              evaluate.__globals__["collate"], evaluate.__globals__["next_token_loss"],
              evaluate.__globals__["eval_set"].__globals__["generate"], lifecycle.diagnostic_rows, lifecycle.diagnostic_examples]
    hashed = set(numeric_files(**RUN))
    unhashed = sorted({inspect.getsourcefile(inspect.unwrap(obj)) for obj in called} - {str(f) for f in hashed})
    assert unhashed == []


def test_every_module_a_run_loads_is_hashed_or_excluded_by_name(tmp_path):
    """A two-step run in a fresh process: every project module it has loaded when it is done is a
    numeric file of the run, a piece the registries import or a module such a piece imports (each
    run hashes the ones it uses: the gated linear mixers' shared layer), or a module the exclusion
    list names. So nothing the run imports, however it imports it, is left
    out of the digest by accident.

    Mutation checks: numeric_files dropping one file of the closure (``[...][1:]``: the package
    ``suite/__init__.py``), or imported_files reading ``from a import b`` as ``a`` only (``names +=
    [base]``: ``suite.pins`` and ``suite.training.distributed`` are lost), makes this fail."""
    script = (
        "import json, sys\n"
        "from suite.run import execute\n"
        "from suite.config.compose import compose_config\n"
        "from suite.config.build import build\n"
        "spec = build(compose_config(['position=rope', 'task=copy', 'train.steps=2', 'train.batch_size=2',\n"
        "    'train.seq_len=16', 'eval.n_examples=2', 'eval.batch_size=2', 'eval.multiples=[1]', 'model.n_layers=1',\n"
        "    'model.d_model=16', 'logger=none']))\n"
        "assert execute(spec, results_dir=sys.argv[1], progress=False) is not None\n"
        "print(json.dumps(sorted(str(getattr(m, '__file__', None)) for m in list(sys.modules.values()))))\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = {f for f in json.loads(out.stdout.splitlines()[-1]) if f.startswith((str(ROOT / "suite"), str(ROOT / "tasks")))}
    pieces = {str(f) for f in codedigest._closure(codedigest.catalogue()[0].values(), ROOT)}
    allowed = {str(f) for f in numeric_files(**RUN)} | pieces
    stray = sorted(f for f in loaded - allowed if not is_excluded(codedigest.Path(f)))
    assert "suite/evaluation/evaluate.py" in {f[len(str(ROOT)) + 1:] for f in loaded}  # the run did evaluate
    assert stray == []


OUTSIDE = ("suite/run.py", "suite/report/boards.py", "suite/lmeval/kv_cache.py", "suite/bench/perf.py", "suite/tracking.py",
           "suite/training/checkpoint.py", "suite/evaluation/evalcache.py", "suite/model/position/alibi.py", "tasks/vt.py")


def _moved_by_an_edit(root, files) -> dict[str, bool]:
    """Append a statement to each file in turn: {file: whether the run's digest changed}."""
    base = code_digest(root, **RUN)
    moved = {}
    for path in files:
        text = path.read_text()
        path.write_text(text + PROBE)
        code_digest.cache_clear()
        moved[path.relative_to(root).as_posix()] = code_digest(root, **RUN) != base
        path.write_text(text)
    code_digest.cache_clear()
    assert code_digest(root, **RUN) == base
    return moved


@pytest.mark.exhaustive  # every numeric file edited in turn; test_a_piece_changes_only_the_runs_that_use_it runs in make test
def test_an_edit_to_any_numeric_file_changes_the_run_id(tree):
    """In a copy of the code, a statement appended to each file of a run's closure in turn changes
    that run's digest; the same edit to the entry point, a report, lm-eval, bench, tracking or
    storage module, or a scheme or task the run does not use, leaves it as it is (every other file
    of ``suite/`` and ``tasks/``: the exhaustive test below).

    Mutation checks: in _digest, hashing only the files' paths (not their bytes) makes this fail;
    so does numeric_files without its ``is_excluded`` filter (the entry point, tracking and storage
    then count)."""
    numeric = numeric_files(tree, **RUN)
    assert len(numeric) > 20
    moved = _moved_by_an_edit(tree, [*numeric, *(tree / f for f in OUTSIDE)])
    assert sorted(f for f, m in moved.items() if not m and f not in OUTSIDE) == [], "numeric files whose edit keeps the id"
    assert sorted(f for f in OUTSIDE if moved[f]) == [], "files outside the closure whose edit changes the id"


@pytest.mark.exhaustive
def test_an_edit_to_any_file_outside_the_closure_keeps_the_run_id(tree):
    """Every file of ``suite/`` and ``tasks/`` outside the run's closure, edited in turn, leaves
    its digest as it is. Mutation check: in _digest, hashing every ``.py`` file under ``root``
    makes this fail."""
    numeric = set(numeric_files(tree, **RUN))
    others = [f for part in ("suite", "tasks") for f in sorted((tree / part).rglob("*.py")) if f not in numeric]
    assert len(others) > 40
    assert sorted(f for f, m in _moved_by_an_edit(tree, others).items() if m) == []
