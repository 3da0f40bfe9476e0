"""The digest of the code that computes a run's numbers, part of every run id.

A run's digest covers three sets of files:

* the numeric core (``CORE``): model, attention, initialization, the frozen specs (whose
  declared defaults the run id leaves out), batching, the training step and loop, evaluation,
  eval sets and diagnostics;
* the shared files of the piece packages (``PIECES``: position schemes, spans, tasks), that is
  every module there that names no piece: ``base.py``, the registries, helpers;
* the modules of the pieces the run uses (its schemes, the schemes they wrap, its spans and
  tasks), with every module of those packages that they import, followed to the end.

So an edit to RoPE gives every RoPE run a new id and retrains it, and a number it could change
is never read from an old file; a new scheme file, or an edit to ALiBi, leaves a NoPE run's id
and its stored numbers as they are. A piece is a class that names itself with a class-level
``name = "..."`` string, read from the source (no import), so reports can check a stored run
against the checkout without loading torch. Reports, logging, launch code and storage
(``suite.training.checkpoint``, ``suite.evaluation.evalcache``: each restores exactly what was saved) are left out,
so editing them keeps finished runs.
"""
from __future__ import annotations

import ast
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from suite.registry import package_modules

ROOT = Path(__file__).resolve().parents[2]
CORE = (
    "suite/model/lm.py", "suite/model/attention.py", "suite/model/init.py", "suite/model/spec.py",
    "suite/config/spec.py", "suite/data/batch.py", "suite/training/step.py", "suite/training/loop.py",
    "suite/evaluation/evaluate.py", "suite/evaluation/evalsets.py", "suite/evaluation/diagnostics.py",
    "suite/evaluation/slices.py",
)
PIECES = {"position": "suite/model/position", "span": "suite/model/span", "task": "tasks"}  # kind -> package folder


def _piece_names(path: Path) -> list[str]:
    """The names of the classes in ``path`` that name themselves (``name = "rope"``)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else getattr(stmt, "target", None)
            value = getattr(stmt, "value", None)
            if isinstance(target, ast.Name) and target.id == "name" and isinstance(value, ast.Constant) \
                    and isinstance(value.value, str):
                names.append(value.value)
    return names


def _module_file(module: str, root: Path) -> Path | None:
    """The file of a dotted module inside the piece packages, or None."""
    parts = module.split(".")
    for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if candidate.is_file() and any(candidate.is_relative_to(root / d) for d in PIECES.values()):
            return candidate
    return None


def _imported_files(path: Path, root: Path) -> set[Path]:
    """Modules of the piece packages that ``path`` imports (absolute or relative imports)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {f for f in (_module_file(m, root) for m in modules) if f is not None}
    return found


@lru_cache(maxsize=None)
def catalogue(root: Path = ROOT) -> tuple[dict[tuple[str, str], Path], tuple[Path, ...]]:
    """({(kind, name): module file} of every piece, the shared files of the piece packages)."""
    pieces, shared = {}, []
    for kind, folder in PIECES.items():
        for path in package_modules(root / folder):
            names = _piece_names(path)
            pieces.update({(kind, name): path for name in names})
            if not names:
                shared.append(path)
    return pieces, tuple(shared)


def _with_imports(start: list[Path], root: Path) -> list[Path]:
    """``start`` and every module of the piece packages they import, followed to the end, in path order."""
    files: set[Path] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path not in files:
            files.add(path)
            todo += _imported_files(path, root)
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


def _piece(pieces: dict, kind: str, name: str, root: Path) -> Path:
    if (kind, name) not in pieces:
        valid = sorted(n for k, n in pieces if k == kind)
        raise ValueError(f"no {kind} named {name!r} in {root}; valid: {', '.join(valid)}")
    return pieces[(kind, name)]


def numeric_files(root: Path = ROOT, **used: Iterable[str]) -> list[Path]:
    """The files a run's numbers depend on, in a fixed order. ``used``: piece names by kind,
    ``position=("rope", "nope"), span=("swa",), task=("copy",)``."""
    pieces, shared = catalogue(root)
    chosen = [_piece(pieces, kind, name, root) for kind, names in used.items() for name in names]
    return _with_imports([root / f for f in CORE] + list(shared) + chosen, root)


def generator_files(task: str, root: Path = ROOT) -> list[Path]:
    """The files a task's examples depend on: its module, the task modules it imports (a parent
    task's included), and the shared files of the tasks package (vocabulary, rendering)."""
    pieces, shared = catalogue(root)
    own = [f for f in shared if f.is_relative_to(root / PIECES["task"])]
    return _with_imports([_piece(pieces, "task", task, root), *own], root)


def _digest(files: list[Path], root: Path, digits: int) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:digits]


@lru_cache(maxsize=None)
def generator_digest(task: str, root: Path = ROOT) -> str:
    """16 hex digits over ``generator_files``: part of every eval-set id, so an edit to a task, or
    to a task it inherits from, never lets a cached set of the old examples be read."""
    return _digest(generator_files(task, root), root, 16)


@lru_cache(maxsize=None)
def code_digest(root: Path = ROOT, position: tuple = (), span: tuple = (), task: tuple = ()) -> str:
    """12 hex digits of SHA-256 over each numeric file's path (relative to ``root``) and bytes."""
    return _digest(numeric_files(root, position=sorted(set(position)), span=sorted(set(span)), task=sorted(set(task))), root, 12)


def pieces_of(spec: dict) -> dict[str, tuple[str, ...]]:
    """The piece names a run spec (``RunSpec.to_dict()`` form) uses, by kind. A position config's
    ``base`` field names the scheme it wraps (``randomized``), which the run uses too."""
    layers = spec["model"]["layers"]
    bases = {(layer.get("position_cfg") or {}).get("base") for layer in layers}
    return {"position": tuple(sorted({layer["position"] for layer in layers} | {b for b in bases if isinstance(b, str)})),
            "span": tuple(sorted({layer["span"] for layer in layers})),
            "task": tuple(sorted({task["name"] for task in spec["tasks"]}))}


def spec_digest(spec: dict | str, root: Path = ROOT) -> str | None:
    """The digest this checkout gives a stored run spec (a dict or its JSON), or None when the
    spec names a piece this checkout does not have."""
    spec = json.loads(spec) if isinstance(spec, str) else spec
    try:
        return code_digest(root, **pieces_of(spec))
    except (ValueError, KeyError, TypeError):
        return None
