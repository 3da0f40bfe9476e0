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
  pre-flight's estimate (``suite/config/resources.py``);
* a value of a number field is a number, and of a sequence-of-numbers field a list of numbers:
  a text, a bool or a nested list there is refused by its key (``eval.multiples[0]=[1, 2]``).

Every entry point reads these declarations, not only the Hydra config: ``typed_options`` types
values given as text or parsed from JSON by each field's declared type (``typed_value``: ``nan``,
``inf`` and ``1e3`` where a number is expected are numbers) and then judges them by the same rules
(``posbench show``'s task parameters and flags, lm-eval's ``--metadata`` and ``--model_args``). A
count computed from options (an eval length, multiple x training length) is bounded before it is
made an integer or used (``bounded_count``).
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
    declared rules, plus the three every number inherits (the module docstring): ``number`` (its
    kind, float or int), ``finite`` for a float, ``le``/``ge`` at ``COUNT_MAX`` for an integer that
    declares no bound of its own."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        rules = dict(f.metadata.get("rules", {}))
        kind, sequence = number_kind(hints.get(f.name))
        if kind is float and f.metadata.get("finite", True):
            rules["finite"] = True
        if kind is not None:
            rules["number"] = kind  # every value (each element of a sequence) must be one
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


def _not_a_number(value, kind: type) -> Optional[str]:
    """Why ``value`` is no value of a ``kind`` (float or int) field, or None: a bool, a text, a
    list (a nested one, where a list of numbers is expected), a fraction where a count is."""
    wanted = "a whole number" if kind is int else "a number"
    if isinstance(value, bool):
        return f"must be {wanted}, not true/false"
    if isinstance(value, (list, tuple, dict)):
        return f"must be {wanted}, not a {'mapping' if isinstance(value, dict) else 'list'}"
    if not isinstance(value, (int, float)):
        return f"must be {wanted}"
    if kind is int and isinstance(value, float):
        return f"must be {wanted}"
    return None


def _rule_error(key: str, value, rules: dict) -> Optional[str]:
    if "choices" in rules and value not in rules["choices"]:
        return f"unknown {key} {value!r}; valid: {', '.join(map(str, rules['choices']))}"
    if "number" in rules and (problem := _not_a_number(value, rules["number"])):
        return f"{key}={value!r}: {problem}"
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
        if each and "number" in rules and not isinstance(value, (list, tuple)):
            errors.append(f"{key}={value!r}: must be a list of numbers")
        elif each and isinstance(value, (list, tuple)):
            if declared_each and "length" in rules and len(value) != rules["length"]:
                errors.append(f"{key}={list(value)}: must have {rules['length']} values")
            if declared_each and len(value) == 0:
                errors.append(f"{key}=[]: must have at least one value")
            errors += [e for i, v in enumerate(value) if (e := _rule_error(f"{key}[{i}]", v, rules))]
        elif (e := _rule_error(key, value, rules)):
            errors.append(e)
    return errors


def _typed_number(kind: type, value):
    """``value`` as a ``kind`` (float or int) when it reads as one, else as given."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        for parse in ((int, float) if kind is int else (float,)):
            try:
                value = parse(text)
                break
            except ValueError:
                continue
        else:
            return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def typed_value(hint, value):
    """``value`` read as the declared type ``hint`` reads it (``number_kind``): a text or a number
    where a float is expected is that float (``"nan"``, ``"inf"``, ``"1e3"``, ``5``); where an int
    is expected, the whole number it writes (``"1e3"`` and ``1000.0`` are 1000); a list where a
    sequence of numbers is expected a tuple of them, each element so. Anything else (a fraction for
    an int, a word, a nested list) is left as given, for ``range_errors`` to name."""
    kind, sequence = number_kind(hint)
    if kind is None or value is None:
        return value
    if sequence:
        return tuple(_typed_number(kind, v) for v in value) if isinstance(value, (list, tuple)) else value
    return _typed_number(kind, value)


def typed_options(cls: type, given: dict, prefix: str = "") -> dict:
    """``given`` (field name -> value, as text or parsed) typed by ``cls``'s declared field types
    (``typed_value``) and judged by their rules (``range_errors``), as the run's config is: a
    ValueError naming every unknown key and every broken rule by ``prefix.key``, with the valid
    keys or range."""
    from suite.registry import check_keys

    check_keys(given, (f.name for f in dataclasses.fields(cls)), prefix=f"{prefix}." if prefix else "")
    hints = typing.get_type_hints(cls)
    values = {key: typed_value(hints.get(key), value) for key, value in given.items()}
    errors = range_errors(values, cls, prefix)
    if errors:
        raise ValueError("; ".join(errors))
    return values


def bounded_count(value: float, le: int) -> Optional[int]:
    """A count computed from options (an eval length: a multiple x the training length) as the
    nearest whole number, or None when it is not finite or past ``le``: the bound is judged on
    the computed value before ``int`` could overflow or anything of that size be built."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value > le + 1:
        return None
    count = int(round(value))
    return count if count <= le else None
