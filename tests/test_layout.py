"""The folders follow the data path: every module has a place in one order of stages, no stage
imports a later one, the import graph has no circle, and suite/ holds at most 12 flat modules.

Imports are read from the source, those inside functions included, and the graph adds the
imports a static reading misses: a package that ``discover``s its pieces (``suite.registry``)
imports each of them, and ``suite.cli`` imports every module of its ``COMMANDS`` table.

Mutation checks: ``from suite.results.store import write_json_atomic`` back in
suite/training/checkpoint.py makes test_no_stage_imports_a_later_one fail; ``from suite.report
import tables`` inside a function of suite/results/store.py makes it fail too; ``from
suite.config.run_spec import ...`` in suite/model/lm.py makes test_the_model_imports_torch_and_itself_only
fail; ``from suite.training.step import train_step`` in suite/evaluation/evaluate.py, or
``from suite.evaluation.evalcache import eval_set`` in suite/results/identity.py, makes
test_stages_apart_do_not_import_each_other fail; show.py back in tasks/ with ``skip=(*SHARED, "show")``
makes test_the_task_package_holds_tasks_only fail; ``from suite.model.position import SCHEMES`` inside randomized.py's ``bases`` makes
test_the_import_graph_has_no_circle fail; a 13th module suite/extra.py makes
test_suite_has_at_most_12_flat_modules fail."""
import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from suite import cli
from suite.registry import SHARED

ROOT = Path(__file__).resolve().parent.parent
# standard library (and numpy) only; any stage may import them
GROUND = ("suite.registry", "suite.options", "suite.files", "suite.pins", "suite.commandline", "suite.data.metrics", "tasks")
ROOT_PACKAGE = "suite"  # suite/__init__.py: sets the numeric pins (ground) before torch loads
# the data path, then what reads its results; a stage imports only ground modules, itself and earlier stages
STAGES = [
    "suite.model", "suite.config", "suite.data", "suite.training", "suite.evaluation", "suite.results",
    "suite.progress", "suite.tracking", "suite.lifecycle", "suite.run",
    "suite.report", "suite.lmeval", "suite.bench", "suite.commands", "suite.reproduce", "suite.cli",
]
MAX_FLAT = 12
# later stages that do not read these earlier ones: evaluation shares batching with training through
# suite.data, and the results (what a stored run is) run no training or evaluation code
APART = {"suite.evaluation": ("suite.training",), "suite.results": ("suite.training", "suite.evaluation")}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


MODULES = {_module(p): p for folder in ("suite", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))}


def _is_ground(module: str) -> bool:
    return any(module == g or module.startswith(g + ".") for g in GROUND)


def _stage(module: str) -> int | None:
    for i, stage in enumerate(STAGES):
        if module == stage or module.startswith(stage + "."):
            return i
    return None


def _imports(path: Path) -> set[str]:
    """The suite and tasks modules ``path`` imports anywhere in its source (in functions too);
    ``from package import module`` names the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if m.split(".")[0] in ("suite", "tasks")}


def _loaded_at_run_time(module: str, path: Path) -> set[str]:
    """What ``module`` imports by name at run time: a package that discovers its pieces imports
    each top-level module ``suite.registry.discover`` would; ``suite.cli`` imports its commands."""
    if module == "suite.cli":
        return {name for name, _ in cli.COMMANDS.values()}
    if path.name == "__init__.py" and "discover(" in path.read_text():
        return {f"{module}.{p.stem}" for p in path.parent.glob("*.py")
                if not p.stem.startswith("_") and p.stem not in SHARED}
    return set()


@functools.cache  # parsed once per test process: every stage's test reads the same graph
def _graph() -> dict[str, set[str]]:
    return {m: (_imports(p) | _loaded_at_run_time(m, p)) - {m} for m, p in MODULES.items()}


def test_every_module_has_a_place():
    """A new package or flat module is placed in GROUND or STAGES, so its imports are checked."""
    placeless = [m for m in MODULES if m != ROOT_PACKAGE and not _is_ground(m) and _stage(m) is None]
    assert placeless == []


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_a_later_one(stage):
    graph = _graph()
    for module in (m for m in MODULES if _stage(m) == STAGES.index(stage)):
        mine = _stage(module)
        for imported in graph[module]:
            theirs = _stage(imported)
            assert _is_ground(imported) or (theirs is not None and theirs <= mine), \
                f"{module} (stage {STAGES[mine]}) imports {imported} (stage {STAGES[theirs] if theirs is not None else '?'})"


@pytest.mark.parametrize("stage", sorted(APART))
def test_stages_apart_do_not_import_each_other(stage):
    graph = _graph()
    crossing = sorted((m, i) for m in MODULES if _stage(m) == STAGES.index(stage)
                      for i in graph[m] if any(i == o or i.startswith(o + ".") for o in APART[stage]))
    assert crossing == []


def test_the_task_package_holds_tasks_only():
    """Every module of tasks/ but the shared interface defines a task that discovery finds: no
    command lives there, and discovery skips no module by name."""
    from tasks import TASKS

    modules = {m for m in MODULES if m.startswith("tasks.") and m.split(".")[1] not in SHARED}
    assert modules == {cls.__module__ for cls in TASKS.values()}
    assert "skip=" not in MODULES["tasks"].read_text()


def test_the_import_graph_has_no_circle():
    """0 circles among modules, counting imports inside functions and the run-time imports of
    discovery and of ``suite.cli`` (a package's implicit import of its ``__init__`` is not an edge)."""
    graph, state, circles = _graph(), {}, []

    def visit(module, path):
        state[module] = "open"
        for nxt in sorted(graph.get(module, ())):
            if nxt not in MODULES:
                continue
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_suite_has_at_most_12_flat_modules():
    flat = sorted(p.name for p in (ROOT / "suite").glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat


def test_ground_modules_import_only_the_standard_library_and_each_other():
    for name in GROUND[:-1]:  # the ground may lean on itself (no circle: test_the_import_graph_has_no_circle)
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert all(_is_ground(m) for m in _imports(path)), (name, _imports(path))
    assert all(_is_ground(m) for m in _imports(MODULES[ROOT_PACKAGE]))
    assert all(_is_ground(m) for m in _graph()["tasks"] | _imports(MODULES["tasks.base"]))


def test_the_model_imports_torch_and_itself_only():
    code = "import sys, suite.model.lm; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    outside = {m.split(".")[0] for m in loaded} & {"omegaconf", "hydra", "tasks", "pandas", "wandb", "lm_eval"}
    assert outside == set()
    ours = {m for m in loaded if m.startswith("suite.")}
    assert all(m.startswith("suite.model") or m in GROUND for m in ours), sorted(ours)


FUNCTION_MAX = 60  # lines, decorators left out: a function longer than a screen is split


def test_no_function_is_longer_than_a_screen():
    """Every function of suite/ and tasks/ fits in ``FUNCTION_MAX`` lines.

    Mutation check: FUNCTION_MAX = 40 makes this fail (several functions hold 41 to 60 lines)."""
    import ast

    long = sorted((node.end_lineno - node.lineno + 1, path.relative_to(ROOT).as_posix(), node.name)
                  for part in ("suite", "tasks") for path in (ROOT / part).rglob("*.py")
                  for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > FUNCTION_MAX)
    assert long == []
