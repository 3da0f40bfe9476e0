"""The folders follow the data path, and no stage imports a later one.

Mutation checks: ``from suite.results.store import write_json_atomic`` back in
suite/training/checkpoint.py makes test_no_stage_imports_a_later_one fail; ``from suite.config.spec
import ...`` in suite/model/lm.py makes test_the_model_imports_torch_and_itself_only fail."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GROUND = ("suite.registry", "suite.options", "suite.files", "suite.pins", "tasks")  # standard library (and numpy) only
STAGES = ["suite.model", "suite.config", "suite.training", "suite.evaluation", "suite.results"]


def _stage(module: str) -> int | None:
    for i, stage in enumerate(STAGES):
        if module == stage or module.startswith(stage + "."):
            return i
    return None


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if m.split(".")[0] in ("suite", "tasks")}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_a_later_one(stage):
    for path in sorted((ROOT / Path(*stage.split("."))).rglob("*.py")):
        mine = _stage(_module(path))
        for imported in _imports(path):
            theirs = _stage(imported)
            ok = imported.startswith(GROUND) or (theirs is not None and theirs <= mine)
            assert ok, f"{_module(path)} (stage {STAGES[mine]}) imports {imported}"


def test_ground_modules_import_only_the_standard_library():
    for name in GROUND[:-1]:
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert _imports(path) == set(), (name, _imports(path))


def test_the_model_imports_torch_and_itself_only():
    code = "import sys, suite.model.lm; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    outside = {m.split(".")[0] for m in loaded} & {"omegaconf", "hydra", "tasks", "pandas", "wandb", "lm_eval"}
    assert outside == set()
    ours = {m for m in loaded if m.startswith("suite.")}
    assert all(m.startswith("suite.model") or m in GROUND for m in ours), sorted(ours)
