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

SHARED = ("base", "corpora")  # modules of a piece package that hold what its pieces share (the interface, the text corpora), not pieces


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


def check_keys(given: Iterable[str], valid: Iterable[str], what: str = "", prefix: str = "", where: str = "",
               error: type[Exception] = ValueError) -> None:
    """The one unknown-key check: raise ``error`` naming every key of ``given`` not in ``valid``
    and every valid key, each written ``prefix + key`` (``prefix="train."``: the full key);
    ``what`` says whose keys they are, ``where`` where they were given."""
    valid = sorted(valid)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise error(f"unknown {what + ' ' if what else ''}key(s) {[prefix + k for k in unknown]}{where}; "
                    f"valid: {', '.join(prefix + k for k in valid) or 'none'}")


def build_config(kind: str, name: str, config_cls: type, params: dict):
    """Build a frozen config dataclass; an unknown key fails with the valid keys."""
    check_keys(params, (f.name for f in dataclasses.fields(config_cls)), kind, where=f" for {name!r}")
    return config_cls(**params)


def lookup(kind: str, name: str, catalogue: dict[str, type]) -> type:
    if name not in catalogue:
        raise ValueError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(sorted(catalogue))}")
    return catalogue[name]
