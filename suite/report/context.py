"""What every section of a report may read, computed once from the store's rows: the headline
rows, the board built from them, the split boards, the MRR, the stability of the ranking across
settings, each scheme's look in the plots, and the counts and warnings more than one section (or
the report command) states.

The board's tables and the headline MRR (``ranking.mrr_every``, which the verdict reads) hold every
run, learned or not, with the MRR over the learned runs beside it. On a board that runs a task
under several training lengths or models, each setting is ranked apart (``boards.setting_labels``)
and ``stability`` says whether the settings' rankings agree (``suite.report.stability``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from suite.report import boards, ranking, stability as holds
from suite.report.choices import EFFECTIVE_AT
from suite.report.code_status import stale_code_warning
from suite.report.styles import Style, style_map


@dataclass(frozen=True)
class Context:
    df: pd.DataFrame  # the store's rows
    sweep: str
    tie: str  # the MRR's tie rule (``choices.TIE_RULES``)
    threshold: float  # the effective-length threshold
    metric: Optional[str]  # every task scored by this metric; None: each by its own headline metric
    source: Optional[str]  # where the rows were read from
    coverage: Optional[str]  # 'k of N runs' when the board holds fewer runs than its sweep declares
    rows: pd.DataFrame  # ``boards.primary`` of ``df``
    board: pd.DataFrame  # ``boards.board_of(rows)``: every run
    splits: dict  # {(task, split): board} (``boards.split_boards``)
    setting_order: list[str]  # the settings ranked apart, in order (``boards.settings_in_order``); [] for one
    mrr: pd.DataFrame  # ``ranking.mrr_every``: every run, setting by setting, best first
    mrr_marks: dict  # {scheme: 'copy 1 of 5, vt 2 of 5'}: where some of its runs did not learn
    stability: Optional[dict]  # ``stability.build`` of ``rows``: None on a board of one setting
    styles: dict[str, Style]  # each scheme's colour and marker, the same in every plot
    tasks: list[str]
    runs: int  # the board's runs, counted per task
    not_learned: int  # of them, those that have not learned their task
    warning: Optional[str]  # runs computed by other code than this checkout holds (``stale_code_warning``)


def build(df: pd.DataFrame, sweep: str, tie: str = "min", threshold: float = EFFECTIVE_AT,
          metric: str | None = None, source: str | None = None, coverage: str | None = None) -> Context:
    """The shared state of the report of ``df``: each table built once from the headline rows.
    ``metric``: score every task by this metric instead of the task's own headline metric."""
    rows = boards.primary(df, metric)
    board = boards.board_of(rows)
    splits = boards.split_boards(df, metric, rows)
    per_task = board.drop_duplicates(["scheme", "task"])
    return Context(
        df=df, sweep=sweep, tie=tie, threshold=threshold, metric=metric, source=source, coverage=coverage,
        rows=rows, board=board, splits=splits, setting_order=boards.settings_in_order(rows),
        mrr=ranking.mrr_every(board, rows, tie), mrr_marks=marks(board),
        stability=holds.build(rows, tie),
        styles=style_map([*board.scheme, *(s for b in splits.values() for s in b.scheme)]),
        tasks=sorted(board.task.unique()), runs=int(per_task.runs.sum()),
        not_learned=int(per_task.not_learned.sum()), warning=stale_code_warning(df))


def marks(board: pd.DataFrame) -> dict[str, str]:
    """{scheme: 'copy 1 of 5, vt 2 of 5'}: the tasks on which some of a scheme's runs did not learn."""
    rows = board.drop_duplicates(["scheme", "task"])
    rows = rows[rows.not_learned > 0].sort_values("task")
    return {s: ", ".join(f"{t} {k} of {n}" for t, k, n in zip(g.task, g.not_learned, g.runs))
            for s, g in rows.groupby("scheme")}
