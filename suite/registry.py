"""Name -> class catalogues built by scanning a package, so a new piece is one new file.

``package_modules`` is the one scanner: ``discover`` imports what it lists (position schemes,
spans, tasks) and the code digest reads the same files without importing them
(``suite/config/codedigest.py``). Standard library only.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable

SHARED = ("base",)  # modules of a piece package that hold the interface, not pieces


def package_modules(folder: Path) -> list[Path]:
    """Every module file of the package in ``folder``, its subpackages' included, in path order."""
    return sorted(folder.rglob("*.py"))


def discover(package: ModuleType, is_piece: Callable[[type], bool], skip: Iterable[str] = SHARED) -> dict[str, type]:
    """Import the top-level modules of ``package`` (not ``_private`` ones, not ``skip``) and collect
    the classes, defined there, for which ``is_piece`` holds, by their ``name``."""
    folder = Path(package.__path__[0])
    found: dict[str, type] = {}
    for path in package_modules(folder):
        if path.parent != folder or path.stem.startswith("_") or path.stem in set(skip):
            continue
        module = importlib.import_module(f"{package.__name__}.{path.stem}")
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == module.__name__ and is_piece(obj):
                found[obj.name] = obj
    return found


def subclasses_of(base: type) -> Callable[[type], bool]:
    """``is_piece`` for a package whose pieces subclass ``base``."""
    return lambda cls: issubclass(cls, base) and cls is not base


def build_config(kind: str, name: str, config_cls: type, params: dict):
    """Build a frozen config dataclass; an unknown key fails with the valid keys."""
    valid = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(params) - valid)
    if unknown:
        raise ValueError(f"unknown {kind} parameter(s) {unknown} for {name!r}; valid: {sorted(valid)}")
    return config_cls(**params)


def lookup(kind: str, name: str, catalogue: dict[str, type]) -> type:
    if name not in catalogue:
        raise ValueError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(sorted(catalogue))}")
    return catalogue[name]
