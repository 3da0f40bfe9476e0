"""Name → class catalogues built by scanning a package, so a new piece is one new file."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from types import ModuleType


def discover(package: ModuleType, base: type) -> dict[str, type]:
    """Import every module of ``package`` and collect the subclasses of ``base`` that name themselves."""
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, base) and obj is not base and obj.__module__ == module.__name__:
                found[obj.name] = obj
    return found


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
