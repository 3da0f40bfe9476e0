"""Breakdowns: each task's headline score per scheme by each setting the sweep varies (span,
window, chunk, pattern, model, training length), one section per setting, mean over seeds of every
run at each multiple of the training length. A sweep that varies none has no such section."""
from __future__ import annotations

import pandas as pd

from suite.model.span_kinds import KINDS
from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import primary, setting_values
from suite.report.sections.base import Section

BREAKDOWN_COLUMNS = ("spans", *KINDS, "pattern", "model", "train_len")


class Breakdowns(Section):
    name, order = "breakdowns", 110

    def build(self, ctx):
        """{setting: its table} for every setting the sweep varies; None when it varies none."""
        return {c: breakdown(ctx.df, c, ctx.metric) for c in varied(ctx.df)} or None

    def blocks(self, built, ctx):
        return [block for column, t in built.items()
                for block in (Heading(f"By {column}"), Paragraph(text(column)), Table(t))]


def breakdown(df: pd.DataFrame, column: str, metric: str | None = None) -> pd.DataFrame:
    """Each task's headline score (or ``metric``) by scheme and ``column``, mean over seeds, one
    column per length ratio: rows ``task, metric, scheme, <column>``, every run. The schemes are
    labelled within each value of ``column`` (``primary`` of that value's rows), so a scheme run
    at two training lengths is one scheme on two rows, not two schemes; no value averages two
    tasks, two metrics or two schemes."""
    values = setting_values(df, column)
    parts = [primary(df[values == v], metric).assign(**{column: v}) for v in values.unique()]
    d = pd.concat([p for p in parts if len(p)]) if any(len(p) for p in parts) else pd.DataFrame()
    if d.empty:
        return pd.DataFrame()
    t = d.pivot_table(index=["task", "metric", "scheme", column], columns="len_ratio", values="value", aggfunc="mean")
    t = t.loc[sorted(t.index, key=lambda k: (k[0], k[1], k[2], _numeric_first(k[3])))]
    t.columns = [ratio_header(c) for c in t.columns]
    return t


def _numeric_first(value: str) -> tuple:
    """Sort key of a breakdown row: numbers in numeric order (4, 8, 16, not '16', '4', '8'), then
    the rest ('None': no window) by name."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def varied(df: pd.DataFrame) -> list[str]:
    """The breakdown columns that take more than one value in this sweep."""
    return [c for c in BREAKDOWN_COLUMNS if c in df and setting_values(df, c).nunique() > 1]


def ratio_header(ratio: float) -> str:
    """'2x train length': a breakdown's column, one multiple of the training length."""
    return f"{ratio:g}x train length"


def text(column: str) -> str:
    """What a breakdown table holds."""
    return (f"Each task's headline metric (column metric) per scheme and {column}, mean over seeds of every run, "
            f"learned or not, at each multiple of the training length: one task, one metric and one scheme per "
            f"row, so no value averages two metrics or two schemes. Schemes are named within each value of {column}, "
            f"so a scheme's rows at its different values sit together.")
