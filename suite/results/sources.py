"""What a command reads its rows from, checked the same way by every command that names one:
a results folder (``results/<sweep>``) or a sweep's shipped rows (``published/<sweep>.jsonl.gz``).

- ``source_problem``: why a path named as a source cannot be one (empty, missing, or a file
  that is not a shipped ``.jsonl.gz``), with the valid choices; a refusal, exit 2.
- ``read_source``: a source's rows (``store.load``); a source that holds no valid run is
  "no results under <source>", exit 1.
- ``check_metric``: a ``--metric`` must be a ranked metric of the rows read (one with a better
  direction); otherwise the refusal names why and lists the valid ones, exit 2.

Used by ``report`` (``--beside``), ``summary``, ``compare`` and ``python -m suite.results.store``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.commandline import Refused, warnings_on_stderr
from suite.results import store

CHOICES = f"give a results folder (results/<sweep>) or a shipped published/<sweep>{store.SHIPPED_SUFFIX} file"


def source_problem(path) -> str | None:
    """Why ``path`` cannot be read as a source of rows, or None."""
    text = "" if path is None else str(path)
    if not text.strip():
        return f"empty; {CHOICES}"
    where = Path(text)
    if where.is_dir() or store.is_shipped(where):
        return None
    if not where.exists():
        return f"no such folder or file; {CHOICES}"
    kind = "a file" if where.is_file() else "not a regular file"
    return f"{kind}, not a results folder or a shipped {store.SHIPPED_SUFFIX} file; {CHOICES}"


def read_source(prog: str, option: str, path) -> pd.DataFrame:
    """The rows of source ``path`` (named by the command's ``option``: ``--beside``, or a
    positional's name), the store's warnings printed; ``Refused`` when it is not a source (2) or
    holds no valid run (1)."""
    problem = source_problem(path)
    if problem is not None:
        raise Refused(f"{prog}: error: {option} {str(path)!r}: {problem}", 2)
    with warnings_on_stderr():
        df = store.load(path)
    if df.empty:
        raise Refused(f"no results under {path}", 1)
    return df


def ranked_metrics(df: pd.DataFrame) -> list[str]:
    """The metrics of ``df`` a board can rank: those whose rows declare a better direction."""
    return sorted(set(df.metric[df.higher_is_better.notna()]))


def check_metric(prog: str, metric: str | None, frames: dict[str, pd.DataFrame]) -> None:
    """Refuse (exit 2) a ``--metric`` that is not ranked in every one of ``frames`` ({source:
    rows}): a measurement, or a metric some source does not hold; the refusal lists the metrics
    every source ranks."""
    if metric is None:
        return
    valid = sorted(set.intersection(*(set(ranked_metrics(df)) for df in frames.values())))
    if metric in valid:
        return
    measured = any(metric in set(df.metric) and metric not in ranked_metrics(df) for df in frames.values())
    missing = [source for source, df in frames.items() if metric not in set(df.metric)]
    why = ("a measurement with no better direction, not a score" if measured
           else f"no stored row under {', '.join(missing)} has it")
    raise Refused(f"{prog}: error: --metric {metric!r}: {why}; valid: {', '.join(valid) or 'none'}", 2)
