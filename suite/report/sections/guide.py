"""How to read the tables: what a cell is and how its interval is computed, what an empty cell
means, how rows are ordered, and the metric each task is scored by with the margin below which two
of its means tie (``suite.data.metrics.Metric.tie_margin``, read by the MRR and the power section)."""
from __future__ import annotations

import pandas as pd

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import metric_of
from suite.report.sections.base import Section


class Guide(Section):
    name, order = "guide", 30

    def build(self, ctx):
        return with_margins(headline_metrics(ctx.df, ctx.metric), ctx.board)

    def blocks(self, built, ctx):
        return [Heading("How to read the tables"), Paragraph(text(ctx.metric, ctx.threshold)),
                Table(built, index=False, floatfmt="g")]


def headline_metrics(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """``task, metric``: the metric each task is scored by, ``metric`` when given (one metric for
    every task), else the headline its rows store (several, joined by ', ', if its runs differ)."""
    tasks = sorted(df.task.dropna().unique())
    if metric:
        return pd.DataFrame({"task": tasks, "metric": metric})
    stored = df.dropna(subset=["headline"]).groupby("task").headline.agg(lambda h: ", ".join(sorted(set(h))))
    return pd.DataFrame({"task": tasks, "metric": [stored.get(t, "none stored") for t in tasks]})


def with_margins(metrics: pd.DataFrame, board: pd.DataFrame) -> pd.DataFrame:
    """``headline_metrics`` with each task's ``tie margin``: two means of its metric closer than this
    are tied, in the MRR and in the power section (the margin of the metric its board rows declare,
    ``boards.metric_of``; '-' for a task the board does not rank)."""
    first = board.drop_duplicates("task").set_index("task")
    margins = {task: f"{metric_of(row).tie_margin:g}" for task, row in first.iterrows()}
    return metrics.assign(**{"tie margin": [margins.get(t, "-") for t in metrics.task]})


def text(metric: str | None, threshold: float) -> str:
    """The reading guide of a board scored by ``metric`` (None: each task's headline metric), whose
    effective lengths read the threshold ``threshold``."""
    scored = (f"every task is scored by {metric}" if metric
              else "each task is scored by the headline metric it declares (table below)")
    return (f"Scores: {scored}. A cell is one configuration (runs identical except for the seed, same "
            f"config_hash) at one eval length; a scheme label that covers several configurations on one task "
            f"names each by the settings in which they differ ('alibi steps=80'; 'code=…' for runs from "
            f"different code). n counts seeds. Cells show the mean over seeds with a 95 % interval [low, high]: "
            f"a Student-t interval over seeds (mean ± t(0.975, n-1) · sd / √n) when two or more seeds have a "
            f"value; with one seed, a Wilson score interval over that run's examples where the metric is a "
            f"share of examples (none otherwise). Intervals are clipped to the metric's range ([0, 1] for a "
            f"share, [0, inf) for a loss). A cell without a score reads '-' where the scheme cannot represent "
            f"the length (unsupported), else why (diverged). Rows: best mean score first, lowest first for a "
            f"metric where lower is better (loss); the MRR ranks the same way. Tie margin: two means of a metric "
            f"closer than its margin are tied, in the MRR and in the power section; each metric declares its own, "
            f"on its own scale (0.01 for a share or an accuracy, 0.02 bits for bits per byte). Effective length (metrics "
            f"where higher is better): the longest eval length up to which the mean stays at or above "
            f"{threshold:.2f} ('-': never).")
