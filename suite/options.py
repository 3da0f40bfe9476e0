"""Option declarations: each option's default and valid range, written once, on the frozen spec
field that holds it (``suite/model/spec.py``, ``suite/config/spec.py``).

``option`` makes such a field; the Hydra schema (``suite/config/schema.py``) is derived from the
fields it marks, and ``range_errors`` checks their rules against composed values, naming each
broken rule by its full key. Standard library only, so every stage, the model included, can use it.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

REQUIRED = dataclasses.MISSING  # no default: the config must give a value


def option(default: Any = REQUIRED, *, ge=None, gt=None, le=None, lt=None, choices=None, each: bool = False,
           length: Optional[int] = None, doc: str = ""):
    """A spec field that is a config option, with the rules ``range_errors`` checks (``each``: the
    rules apply to every element of a sequence; ``length``: a sequence's required length)."""
    rules = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, length=length).items() if v is not None}
    metadata = {"option": True, "rules": rules, "each": each, "doc": doc}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def is_option(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("option"))


def _rule_error(key: str, value, rules: dict) -> Optional[str]:
    if "choices" in rules and value not in rules["choices"]:
        return f"unknown {key} {value!r}; valid: {', '.join(map(str, rules['choices']))}"
    if isinstance(value, float) and not math.isfinite(value) and any(r in rules for r in ("ge", "gt", "le", "lt")):
        return f"{key}={value!r}: must be a finite number"
    bounds = [("ge", ">=", lambda v, b: v >= b), ("gt", ">", lambda v, b: v > b),
              ("le", "<=", lambda v, b: v <= b), ("lt", "<", lambda v, b: v < b)]
    for name, sign, ok in bounds:
        if name in rules and not ok(value, rules[name]):
            return f"{key}={value!r}: must be {sign} {rules[name]}"
    return None


def range_errors(values: dict, schema: type, prefix: str) -> list[str]:
    """Every rule of ``schema``'s fields that ``values`` breaks, each naming its full key."""
    errors = []
    for f in dataclasses.fields(schema):
        rules, value = f.metadata.get("rules", {}), values.get(f.name)
        key = f"{prefix}.{f.name}" if prefix else f.name
        if not rules or value is None:
            continue
        if f.metadata.get("each"):
            if "length" in rules and len(value) != rules["length"]:
                errors.append(f"{key}={list(value)}: must have {rules['length']} values")
            if len(value) == 0:
                errors.append(f"{key}=[]: must have at least one value")
            errors += [e for i, v in enumerate(value) if (e := _rule_error(f"{key}[{i}]", v, rules))]
        elif (e := _rule_error(key, value, rules)):
            errors.append(e)
    return errors
