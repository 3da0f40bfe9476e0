"""Option declarations: each option's default and valid range, written once, on the frozen spec
field that holds it (``suite/model/spec.py``, ``suite/config/run_spec.py``, a scheme's, span's or
task's own ``Config``/class).

``option`` makes such a field; the Hydra schema (``suite/config/schema.py``) is derived from the
fields it marks, and ``range_errors`` checks their rules against composed values, naming each
broken rule by its full key. Standard library only, so every stage, the model included, can use it.

Two rules hold for every numeric field of a checked class, declared with ``option`` or not, so a
new scheme's, span's or task's options inherit them:

* a float (``float``, ``Optional[float]``, a tuple of floats) is finite, unless its declaration
  says ``finite=False``;
* an integer (not a bool) is a count within [-COUNT_MAX, COUNT_MAX] unless it declares its own
  upper bound (``le``/``lt``); lengths declare ``le=LENGTH_MAX``, and the options whose cost
  grows with their value declare their own stated maximum beside them (``model.n_layers``,
  ``train.steps``, ``eval.n_examples``). What a value under its bound costs in memory is the
  pre-flight's estimate (``suite/config/resources.py``).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from functools import lru_cache
from typing import Any, Optional

REQUIRED = dataclasses.MISSING  # no default: the config must give a value

# The bound of every integer option that declares none: the largest 32-bit signed integer, so a
# count, a seed or a size fits every index type and seed the suite hands it to (torch, numpy,
# a C int in a kernel), and 10**12 or 2**64 is refused by name, not met as an overflow mid-run.
COUNT_MAX = 2 ** 31 - 1
# The longest sequence any length option, evaluation length or position table may ask for: 2**20
# (1,048,576) tokens, 128 x the longest evaluation of the GPU recipe (8 x 1,024). One example of
# it takes a task generator about a second; a table or attention of it is sized by the pre-flight.
LENGTH_MAX = 2 ** 20


def option(default: Any = REQUIRED, *, ge=None, gt=None, le=None, lt=None, choices=None, each: bool = False,
           length: Optional[int] = None, finite: bool = True, doc: str = ""):
    """A spec field that is a config option, with the rules ``range_errors`` checks (``each``: the
    rules apply to every element of a sequence; ``length``: a sequence's required length;
    ``finite=False``: a float option that may be inf or nan)."""
    rules = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, length=length).items() if v is not None}
    metadata = {"option": True, "rules": rules, "each": each, "finite": finite, "doc": doc}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def is_option(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("option"))


def number_kind(hint) -> tuple[Optional[type], bool]:
    """(float, int or None, whether a sequence of them) for a field's type hint: ``Optional[X]``,
    ``X | None``, ``tuple[X, ...]`` and ``list[X]`` unwrapped; a bool is no number."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        kinds = {number_kind(a)[0] for a in args if a is not Ellipsis}
        return (kinds.pop() if len(kinds) == 1 else None), True
    if args and origin is not None and len(args) == 1:  # Optional[X], X | None
        return number_kind(args[0])
    if hint is float:
        return float, False
    if hint is int:
        return int, False
    return None, False


@lru_cache(maxsize=None)
def field_rules(cls: type) -> dict[str, tuple[dict, bool, bool]]:
    """Every field of ``cls`` that has rules: name -> (rules, applied to each element, declared
    ``each``: its length rules apply too). The
    declared rules, plus the two every number inherits (the module docstring): ``finite`` for a
    float, ``le``/``ge`` at ``COUNT_MAX`` for an integer that declares no bound of its own."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        rules = dict(f.metadata.get("rules", {}))
        kind, sequence = number_kind(hints.get(f.name))
        if kind is float and f.metadata.get("finite", True):
            rules["finite"] = True
        if kind is int:
            if "le" not in rules and "lt" not in rules:
                rules["le"] = COUNT_MAX
            if "ge" not in rules and "gt" not in rules:
                rules["ge"] = -COUNT_MAX
        if rules:
            declared = bool(f.metadata.get("each"))
            out[f.name] = (rules, declared or (sequence and kind is not None), declared)
    return out


_BOUNDS = [("ge", ">=", lambda v, b: v >= b), ("gt", ">", lambda v, b: v > b),
           ("le", "<=", lambda v, b: v <= b), ("lt", "<", lambda v, b: v < b)]


def _range_words(rules: dict) -> str:
    return " and ".join(f"{sign} {rules[name]}" for name, sign, _ in _BOUNDS if name in rules)


def _rule_error(key: str, value, rules: dict) -> Optional[str]:
    if "choices" in rules and value not in rules["choices"]:
        return f"unknown {key} {value!r}; valid: {', '.join(map(str, rules['choices']))}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value) and (rules.get("finite") or _range_words(rules)):
        words = _range_words(rules)
        return f"{key}={value!r}: must be a finite number{' ' + words if words else ''}"
    for name, sign, ok in _BOUNDS:
        if name in rules and not ok(value, rules[name]):
            return f"{key}={value!r}: must be {sign} {rules[name]}"
    return None


def range_errors(values: dict, schema: type, prefix: str) -> list[str]:
    """Every rule of ``schema``'s fields that ``values`` breaks, each naming its full key."""
    errors = []
    for name, (rules, each, declared_each) in field_rules(schema).items():
        value = values.get(name)
        key = f"{prefix}.{name}" if prefix else name
        if value is None:
            continue
        if each and isinstance(value, (list, tuple)):
            if declared_each and "length" in rules and len(value) != rules["length"]:
                errors.append(f"{key}={list(value)}: must have {rules['length']} values")
            if declared_each and len(value) == 0:
                errors.append(f"{key}=[]: must have at least one value")
            errors += [e for i, v in enumerate(value) if (e := _rule_error(f"{key}[{i}]", v, rules))]
        elif (e := _rule_error(key, value, rules)):
            errors.append(e)
    return errors
