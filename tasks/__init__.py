"""PosBench tasks: seeded generators plus scorers over one shared word vocabulary.

Every module in this package that defines a subclass of ``tasks.base.Task`` with a ``name`` is a task;
``TASKS`` maps the name to the class, so adding a task is adding one file (and one YAML).
"""
from __future__ import annotations

import sys

from suite.registry import discover
from tasks.base import Example, Task


def _is_task(cls: type) -> bool:
    """A concrete task: a ``Task`` with a name (``tasks.text.TextLM``, the base of two, has none)."""
    return issubclass(cls, Task) and isinstance(getattr(cls, "name", None), str)


TASKS: dict[str, type] = discover(sys.modules[__name__], _is_task)


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
