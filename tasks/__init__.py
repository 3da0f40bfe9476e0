"""PosBench tasks: seeded generators plus scorers over one shared word vocabulary.

Every module in this package that defines a class with a ``name`` and ``generate`` is a task;
``TASKS`` maps the name to the class, so adding a task is adding one file (and one YAML).
"""
from __future__ import annotations

import importlib
import pkgutil

from tasks.base import Example, Task

TASKS: dict[str, type] = {}
for _info in pkgutil.iter_modules(__path__):
    if _info.name in {"base", "show"} or _info.name.startswith("_"):
        continue
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _obj in vars(_module).values():
        if isinstance(_obj, type) and isinstance(getattr(_obj, "name", None), str) and hasattr(_obj, "generate"):
            if _obj.__module__ == _module.__name__:
                TASKS[_obj.name] = _obj


def build_task(name: str, **params):
    """Instantiate a task by name; unknown names and parameters fail with the valid choices."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    cls = TASKS[name]
    try:
        return cls(**params)
    except TypeError as err:
        import dataclasses

        valid = [f.name for f in dataclasses.fields(cls)]
        raise ValueError(f"bad parameters {sorted(params)} for task {name!r}: {err}; valid: {valid}") from None


__all__ = ["TASKS", "Example", "Task", "build_task"]
