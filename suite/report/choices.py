"""The choices a board command takes, light enough for its ``--help`` (pandas, no plotting or
statistics): the MRR tie rules and the effective-length threshold (``TIE_RULES``, which
``suite.report.ranking`` applies, and ``EFFECTIVE_AT``, which the effective-length section
applies), and the ``--metric``.

The ``--metric`` a board command takes (``report``, ``summary``, ``compare``), checked once
against the rows it read: it must be a metric every source ranks, one whose rows declare a
better direction. Otherwise the refusal (exit 2) says why, a measurement that is not a score or
a metric some source does not hold, and lists the valid ones.
"""
from __future__ import annotations

import pandas as pd

from suite.commandline import Refused

TIE_RULES = ("min", "average")
EFFECTIVE_AT = 0.8  # the effective length: the longest eval length up to which a scheme scores at least this


def ranked_metrics(df: pd.DataFrame) -> list[str]:
    """The metrics of ``df`` a board can rank: those whose rows declare a better direction."""
    return sorted(set(df.metric[df.higher_is_better.notna()]))


def check_metric(prog: str, metric: str | None, frames: dict[str, pd.DataFrame]) -> None:
    """Refuse (``Refused``, exit 2) a ``metric`` that is not ranked in every one of ``frames``
    ({source: its rows}); None means each task's headline metric and is always valid."""
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
