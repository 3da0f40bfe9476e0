"""Slice strings of the results record: the one formatter and the one parser.

A row's ``slice`` column is ``all`` (the whole evaluation set) or comma-joined ``key=value``
fields in a fixed order, e.g. ``depth=0.4`` (a task's per-example slice, ``suite.evaluation.evaluate``) or
``at=init,layer=2,site=resid_out,lag=8`` (a diagnostic, ``suite.evaluation.diagnostics``). Builders write
slices with ``format_slice`` and readers (``suite.report.boards``, ``suite.commands.diagnose``) read them
with ``parse_slice``, so a field means the same thing wherever it is read.

Values are written as an f-string writes them (``str`` for strings, ints and floats) and read
back as strings. The first ``=`` of a field separates key from value, so a key may contain
neither ``,`` nor ``=``, and a value may not contain ``,``; a value may contain ``=`` (MQAR's
``n_keys=<=16``). Torch-free: the report imports it.
"""
from __future__ import annotations

ALL = "all"  # the slice of a row over the whole evaluation set: no fields


def format_slice(**fields) -> str:
    """``key=value`` fields joined by commas in the order given; no fields: ``all``.

    Raises ValueError naming a key that is empty or contains ``,`` or ``=``, or a value that
    contains ``,``: such a field would not read back as written.
    """
    if not fields:
        return ALL
    parts = []
    for key, value in fields.items():
        text = f"{value}"
        if not key or "," in key or "=" in key:
            raise ValueError(f"slice key {key!r} must be non-empty and contain neither ',' nor '='")
        if "," in text:
            raise ValueError(f"slice value {text!r} of key {key!r} must not contain ','")
        parts.append(f"{key}={text}")
    return ",".join(parts)


def parse_slice(text: str) -> dict[str, str]:
    """The fields of a slice string as ``{key: value}`` (strings, in order); ``all``: ``{}``.

    The inverse of ``format_slice``. Raises ValueError naming a field without ``=`` or with
    an empty key, and a key that appears twice.
    """
    if text == ALL:
        return {}
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"slice field {part!r} of {text!r} is not key=value")
        if key in fields:
            raise ValueError(f"slice key {key!r} appears twice in {text!r}")
        fields[key] = value
    return fields
