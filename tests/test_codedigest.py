"""The code digest in every run id: it covers the shared numeric code and the scheme, span and
task files a run uses, so a change retrains exactly the runs it could change.

Mutation check: in suite/config/codedigest.py numeric_files, dropping ``todo += _imported_files(path, root)``
makes test_a_piece_changes_only_the_runs_that_use_it fail (copy_repeat imports copy); in
catalogue, ``if not names`` -> ``if names`` makes test_pieces_are_found_from_the_source fail;
generator_files starting from the task's module alone (no imports followed) makes
test_an_edit_to_a_parent_task_changes_the_eval_set_id_of_every_task_that_inherits_from_it fail."""
import shutil

import pytest

import suite.config.build
from suite.config import codedigest
from suite.config.codedigest import ROOT, code_digest, numeric_files, spec_digest
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
    assert not files & {"suite/model/position/alibi.py", "suite/model/span/chunked.py", "tasks/copy.py", "suite/report/tables.py"}
    assert spec.code == code_digest(position=("rope",), span=("swa",), task=("vt",)) == _digest(ROOT, spec)


def test_a_changed_core_file_changes_every_run_id(tree, monkeypatch):
    before = make_spec("position=alibi")
    assert _digest(tree, before) == before.code
    _edit(tree / "suite" / "model" / "lm.py")
    changed = _digest(tree, before)
    assert changed != before.code and _digest(tree, make_spec("position=nope")) != make_spec("position=nope").code
    monkeypatch.setattr(suite.config.build, "code_digest", lambda **used: changed)
    after = make_spec("position=alibi")
    assert after.code == changed and after.run_id != before.run_id and after.config_hash != before.config_hash
    _edit(tree / "suite" / "report" / "tables.py", "# reports do not compute numbers\n")
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
