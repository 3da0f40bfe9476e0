"""Effective length: per scheme and task, the longest eval length up to which the mean score stays
at or above a threshold (``--threshold``, ``choices.EFFECTIVE_AT`` by default). Only a score where
higher is better has one; the section names the tasks scored by a metric where lower is better."""
from __future__ import annotations

import pandas as pd

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import EMPTY, scheme_order
from suite.report.choices import EFFECTIVE_AT
from suite.report.sections.base import Section


class EffectiveLength(Section):
    name, order = "effective_length", 90

    def build(self, ctx):
        return {"tasks": ctx.tasks, "effective": effective_length(ctx.board, ctx.threshold)}

    def blocks(self, built, ctx):
        said = note(built)
        out = [Heading("Effective length")] + ([Paragraph(said)] if said else [])
        return out + ([Table(effective_display(built["effective"]))] if _has_effective(built) else [])


def effective_length(board: pd.DataFrame, threshold: float = EFFECTIVE_AT) -> pd.DataFrame:
    """Scheme x task: the longest eval length L such that every eval length up to L scores at least
    ``threshold`` (0 when even the shortest does not: never); best schemes first. Only tasks
    scored by a metric where higher is better have one."""
    rows = []
    if "higher_is_better" in board:
        board = board[board.higher_is_better == True]  # noqa: E712 (None is not True)
    for (scheme, task), g in board.sort_values("eval_len").groupby(["scheme", "task"]):
        best = 0
        for _, r in g.iterrows():
            if r["n"] == 0 or r["mean"] < threshold:
                break
            best = int(r["eval_len"])
        rows.append({"scheme": scheme, "task": task, "effective_length": best})
    if not rows:
        return pd.DataFrame(columns=["scheme"])
    t = pd.DataFrame(rows).pivot(index="scheme", columns="task", values="effective_length")
    t.columns.name = None
    return t.loc[[s for s in scheme_order(board) if s in t.index]]


def effective_display(t: pd.DataFrame) -> pd.DataFrame:
    """Effective lengths in tokens, '-' for never (not even the shortest length reaches the threshold)."""
    return t.apply(lambda col: col.map(lambda v: f"{int(v)} tokens" if pd.notna(v) and v > 0 else EMPTY))


def note(r: dict) -> str:
    """What the effective-length table leaves out: the tasks scored by a metric where lower is
    better (bits per byte, loss), which no threshold on a rising score fits; '' when none.
    ``r``: the section's build, the board's ``tasks`` and its ``effective`` table."""
    lower = sorted(t for t in r["tasks"] if t not in r["effective"].columns)
    if not lower:
        return ""
    which = ", ".join(lower)
    if len(lower) == len(r["tasks"]):
        return (f"Not applicable: effective length reads a threshold on a score where higher is better, and every "
                f"task of this board ({which}) is scored by one where lower is better.")
    return f"Not applicable to {which}: scored by a metric where lower is better."


def _has_effective(r: dict) -> bool:
    """Whether any task of the board has an effective length (a metric where higher is better)."""
    return any(t in r["effective"].columns for t in r["tasks"])
