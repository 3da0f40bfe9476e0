"""The digest of the code that computes a run's numbers, part of every run id.

The files it covers are derived, never listed: every project module the entry point
``suite.run`` reaches through its ``import`` and ``from ... import`` statements (read with
``ast``, without importing anything: imports inside functions, relative imports and the
``__init__`` of every package on the way count), followed to the end, less ``EXCLUDED``.

Position schemes, spans, token mixers and tasks are found at run time (``suite.registry.discover``), not
imported by name, so the closure holds their packages' shared files (``base.py``, the
registries) and no piece. A run adds the modules of the pieces it uses (its schemes, the schemes
they wrap, its spans, mixers and tasks) and what those import, followed the same way. So an edit to RoPE
gives every RoPE run a new id and retrains it, and a number it could change is never read from
an old file; a new scheme file, or an edit to ALiBi, leaves a NoPE run's id and its stored
numbers as they are. A piece is a class that names itself with a class-level ``name = "..."``
string, read from the source (no import), so reports can check a stored run against the
checkout without loading torch.

``EXCLUDED`` names the modules and packages whose own bytes are left out, each with its reason:
reports, lm-eval and the benchmarks (no run computes its numbers with them), W&B tracking and
progress bars, launch code and the config reader (the spec it builds is hashed into the run id
itself), and storage that restores exactly what was saved (checkpoints, the eval-set cache, the
results store). What an excluded module imports is still followed, so leaving a wrapper out never
leaves out the numeric code behind it; editing an excluded file keeps finished runs.
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
ENTRY = "suite.run"  # the module a run starts from: ``python -m suite.run``
_LAUNCH = "launch code: it starts a run and passes the spec on"
_SPEC = "reads the config and builds the spec, which the run id hashes itself"
_STORAGE = "storage that writes and restores exactly what a run computed"
EXCLUDED: dict[str, str] = {  # dotted module or package -> why its bytes are not part of the digest
    "suite.run": _LAUNCH,
    "suite.config.build": _SPEC,
    "suite.config.compose": _SPEC,
    "suite.config.schema": _SPEC,
    "suite.config.preflight": _LAUNCH,
    "suite.config.resources": _LAUNCH,
    "suite.config.codedigest": "computes the run id, not the run's numbers",
    "suite.tracking": "W&B, a mirror of the stored results",
    "suite.progress": "progress lines and bars",
    "suite.files": _STORAGE,
    "suite.training.checkpoint": _STORAGE,
    "suite.evaluation.evalcache": _STORAGE,
    "suite.results.store": _STORAGE,
    "suite.report": "reads stored runs, computes none",
    "suite.lmeval": "evaluates with lm-eval-harness, outside the run",
    "suite.bench": "times and checks the code, outside the run",
}
PIECES = {"position": "suite/model/position", "span": "suite/model/span", "mixer": "suite/model/mixer",
          "task": "tasks"}  # kind -> package folder


@lru_cache(maxsize=None)
def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The file of a dotted project module (``a/b.py`` or ``a/b/__init__.py`` under ``root``), or None.
    Looked up once per process, as ``catalogue`` lists the pieces once: a module file added under
    ``root`` after the first lookup is seen by the next process (every run is one)."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module in ``path`` (a package's ``__init__.py``: the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=4096)
def _imported_names(source: str, package: str) -> tuple[str, ...]:
    """Every dotted name ``source`` imports anywhere (inside functions too), relative imports
    resolved against ``package``; each ``from a import b`` gives ``a`` and ``a.b`` (a name may be a
    submodule). Parsed once per distinct source text: a digest walks the same files for every run."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return tuple(dict.fromkeys(names))


def imported_files(path: Path, root: Path = ROOT) -> set[Path]:
    """The project modules ``path`` imports anywhere in its source (inside functions too, relative
    imports resolved), each with the ``__init__`` of every package on its way."""
    own = module_name(path, root)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = set()
    for name in _imported_names(path.read_text(), package):
        parts = name.split(".")
        found |= {f for f in (module_file(".".join(parts[:i]), root) for i in range(1, len(parts) + 1)) if f is not None}
    return found


def _closure(start: Iterable[Path], root: Path, within: tuple[str, ...] = ()) -> list[Path]:
    """``start`` and every project module they import, followed to the end (only into the folders
    ``within`` when given), in path order."""
    files: set[Path] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path not in files:
            files.add(path)
            todo += [f for f in imported_files(path, root) if not within or any(f.is_relative_to(root / d) for d in within)]
    return sorted(files, key=lambda f: f.relative_to(root).as_posix())


def is_excluded(path: Path, root: Path = ROOT) -> bool:
    """Whether ``path`` is, or lies in, a module or package that ``EXCLUDED`` names."""
    name = module_name(path, root)
    return any(name == x or name.startswith(x + ".") for x in EXCLUDED)


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


def _piece(pieces: dict, kind: str, name: str, root: Path) -> Path:
    if (kind, name) not in pieces:
        valid = sorted(n for k, n in pieces if k == kind)
        raise ValueError(f"no {kind} named {name!r} in {root}; valid: {', '.join(valid)}")
    return pieces[(kind, name)]


def numeric_files(root: Path = ROOT, **used: Iterable[str]) -> list[Path]:
    """The files a run's numbers depend on, in a fixed order: what ``ENTRY`` and the modules of the
    pieces it uses import, followed to the end, less ``EXCLUDED``. ``used``: piece names by kind,
    ``position=("rope", "nope"), span=("swa",), task=("copy",)``."""
    pieces, _ = catalogue(root)
    chosen = [_piece(pieces, kind, name, root) for kind, names in used.items() for name in names]
    entry = module_file(ENTRY, root)
    if entry is None:
        raise FileNotFoundError(f"no entry point {ENTRY} under {root}")
    return [f for f in _closure([entry, *chosen], root) if not is_excluded(f, root)]


def generator_files(task: str, root: Path = ROOT) -> list[Path]:
    """The files a task's examples depend on: its module, the task modules it imports (a parent
    task's included), and the shared files of the tasks package (vocabulary, rendering)."""
    pieces, shared = catalogue(root)
    own = [f for f in shared if f.is_relative_to(root / PIECES["task"])]
    return _closure([_piece(pieces, "task", task, root), *own], root, within=tuple(PIECES.values()))


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
def code_digest(root: Path = ROOT, position: tuple = (), span: tuple = (), task: tuple = (), mixer: tuple = ()) -> str:
    """12 hex digits of SHA-256 over each numeric file's path (relative to ``root``) and bytes."""
    return _digest(numeric_files(root, position=sorted(set(position)), span=sorted(set(span)), mixer=sorted(set(mixer)),
                                 task=sorted(set(task))), root, 12)


def pieces_of(spec: dict) -> dict[str, tuple[str, ...]]:
    """The piece names a run spec (``RunSpec.to_dict()`` form) uses, by kind. A position config's
    ``base`` field names the scheme it wraps (``randomized``), which the run uses too; a layer's
    ``earlier`` schemes (a training schedule's earlier phases, DroPE's RoPE) are used as well; a
    layer that names no mixer (a spec stored before mixers) is softmax attention."""
    layers = spec["model"]["layers"]
    schemes = [(layer["position"], layer.get("position_cfg")) for layer in layers]
    schemes += [(name, cfg) for layer in layers for name, cfg in layer.get("earlier") or ()]
    bases = {(cfg or {}).get("base") for _, cfg in schemes}
    return {"position": tuple(sorted({name for name, _ in schemes} | {b for b in bases if isinstance(b, str)})),
            "span": tuple(sorted({layer["span"] for layer in layers})),
            "mixer": tuple(sorted({layer.get("mixer", "attention") for layer in layers})),
            "task": tuple(sorted({task["name"] for task in spec["tasks"]}))}


def spec_digest(spec: dict | str, root: Path = ROOT) -> str | None:
    """The digest this checkout gives a stored run spec (a dict or its JSON), or None when the
    spec names a piece this checkout does not have."""
    spec = json.loads(spec) if isinstance(spec, str) else spec
    try:
        return code_digest(root, **pieces_of(spec))
    except (ValueError, KeyError, TypeError):
        return None
