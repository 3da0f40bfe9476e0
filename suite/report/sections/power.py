"""Power: how much the sweep can tell schemes apart. Per task, the spread between the best and
the worst scheme at the first length beyond training, the half-width of the cells' 95 % intervals
there, the cells in which every scheme ties (best minus worst below the metric's tie margin, the
MRR's rule, ``suite.data.metrics.Metric.tie_margin``), and the runs that have not learned the
task; on a board ranked setting by setting, each (setting, task) apart, as the MRR ranks them.
power.csv holds the table."""
from __future__ import annotations

import math

import pandas as pd

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import first_ood, metric_of
from suite.report.sections.base import Section
from suite.data.metrics import LEARNED_AT

POWER_COLUMNS = ["task", "metric", "tie_margin", "first_ood_len", "spread", "median_half_width", "max_half_width",
                 "tied_cells", "cells", "tied_share", "not_learned", "runs"]


class Power(Section):
    name, order = "power", 70
    csv_names = ("power.csv",)

    def build(self, ctx):
        table, half = power(ctx.board), first_ood_half_widths(ctx.board)
        return {"table": table, "tied_share": tied_share(table), "half_median": half.median() if len(half) else math.nan,
                "half_max": half.max() if len(half) else math.nan, "not_learned": ctx.not_learned, "runs": ctx.runs}

    def blocks(self, built, ctx):
        return [Heading("Power"), Paragraph(text(built)), Table(built["table"], index=False, floatfmt=".2f")]

    def csvs(self, built, ctx):
        return {"power.csv": built["table"].round(4).to_csv(index=False)}


def power(board: pd.DataFrame, tied_below: float | None = None) -> pd.DataFrame:
    """Per task (per setting and task on a board ranked setting by setting, with a ``setting``
    column first): ``spread``, best minus worst scheme mean at the first eval length beyond
    training (smallest len_ratio > 1), and ``tied_cells`` of ``cells``, the eval lengths where best
    minus worst scheme mean is below ``tied_below`` (cells with at least two scheme means count); by
    default the tie margin of the metric the task's rows declare (``boards.metric_of``), stated as
    ``tie_margin``."""
    several = "setting" in board and board.setting.nunique() > 1
    b = board.assign(len_ratio=board.eval_len / board.train_len, _setting=board.setting if several else "")
    rows = []

    def gap(means):
        return means.max() - means.min() if means.count() >= 2 else math.nan

    firsts = first_ood(board)
    for (setting, task), g in b.groupby(["_setting", "task"], sort=True):
        first = firsts[(firsts.task == task) & ((firsts.setting == setting) if several else True)]
        gaps = g.groupby("eval_len")["mean"].agg(gap).dropna()
        margin = metric_of(g.iloc[0]).tie_margin if tied_below is None else tied_below
        tied = int((gaps < margin).sum())
        half = half_widths(first)
        per_scheme = g.drop_duplicates("scheme")
        rows.append({"setting": setting, "task": task, "metric": g.metric.iloc[0], "tie_margin": margin,
                     "first_ood_len": int(first.eval_len.min()) if len(first) else None,
                     "spread": gap(first["mean"]) if len(first) else math.nan,
                     "median_half_width": half.median() if len(half) else math.nan,
                     "max_half_width": half.max() if len(half) else math.nan,
                     "tied_cells": tied, "cells": len(gaps), "tied_share": tied / len(gaps) if len(gaps) else math.nan,
                     "not_learned": int(per_scheme.not_learned.sum()) if "not_learned" in g else 0,
                     "runs": int(per_scheme.runs.sum()) if "runs" in g else 0})
    out = pd.DataFrame(rows, columns=["setting", *POWER_COLUMNS])
    if several:
        return out.sort_values(["setting", "task"], key=_in_order(board), ignore_index=True)
    return out.drop(columns="setting").sort_values("task", ignore_index=True)


def _in_order(board: pd.DataFrame):
    """A sort key that orders a ``setting`` column as the board orders its settings."""
    at = board.groupby("setting").setting_at.first()
    return lambda column: column.map(at) if column.name == "setting" else column


def half_widths(cells: pd.DataFrame) -> pd.Series:
    """Half the width of each cell's 95 % interval, (ci_high - ci_low) / 2, where it has one."""
    if not {"ci_low", "ci_high"} <= set(cells):
        return pd.Series(dtype=float)
    return ((cells.ci_high - cells.ci_low) / 2).dropna()


def first_ood_half_widths(board: pd.DataFrame) -> pd.Series:
    """Interval half-widths of every cell at its task's first eval length beyond training."""
    return half_widths(first_ood(board))


def tied_share(power_table: pd.DataFrame) -> float:
    """Share of all (task, eval length) cells in which every scheme ties."""
    cells = power_table.cells.sum()
    return power_table.tied_cells.sum() / cells if cells else math.nan


def text(r: dict) -> str:
    """What the power table holds, with the figures over every task: ``r``, the section's build."""
    return (f"Spread: best minus worst scheme mean at the first eval length beyond training (smallest "
            f"len_ratio > 1). Tied cells: eval lengths where best minus worst scheme mean is below the tie "
            f"margin of the task's metric (tie_margin: declared with the metric, the MRR's margin), so every scheme "
            f"there shares rank 1 (cells with at least two scheme means). Overall, "
            f"{'no' if pd.isna(r['tied_share']) else format(r['tied_share'], '.0%')} of cells are tied "
            f"across all schemes. Half-width: half the width of a cell's 95 % interval at the first eval length "
            f"beyond training; over every such cell, the median is {_fmt_or_none(r['half_median'])} and the "
            f"largest {_fmt_or_none(r['half_max'])}. Not learned: runs whose headline score at the training "
            f"length stays below {LEARNED_AT} (on the check set for a run trained to criterion; "
            f"{r['not_learned']} of {r['runs']} runs).")


def _fmt_or_none(x) -> str:
    return "none" if pd.isna(x) else f"{x:.3f}"
