"""The summary heatmap under the verdict: every scheme (rows, in the headline MRR's order) on every
task at its first eval length beyond training, each cell its mean over seeds and 95 % interval.
Ordered after the verdict (``verdict``) and a board's layer-pattern verdict (``patterns``), before
the tables."""
from __future__ import annotations

import numpy as np
import pandas as pd

from suite.report.blocks import Image
from suite.report.boards import first_ood
from suite.report.labels import shared_options, short_labels
from suite.report.plots import Plot, plt, png
from suite.report.sections.base import Section

SUMMARY = "summary: every scheme on every task at the first length beyond training"


class Summary(Section):
    name, order = "summary", 12

    def build(self, ctx):
        return None if first_ood(ctx.board).empty else True

    def blocks(self, built, ctx):
        return [Image("summary", SUMMARY, id="summary")]

    def plots(self, built, ctx):
        return {"summary": plot_summary(ctx.board, list(ctx.mrr.scheme))}


def _lengths(eval_lens: pd.Series) -> str:
    """'64', or '40-256' where the settings of a task reach beyond training at different lengths."""
    lengths = sorted({int(e) for e in eval_lens})
    return f"{lengths[0]}" if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}"


SHADE = "colour: a share as it stands; bits per byte (lower is better): the column's best 1, worst 0"


def shade(first: pd.DataFrame) -> pd.Series:
    """Each cell's colour in [0, 1], on ``first_ood`` rows: the mean itself for a metric bounded by
    [0, 1] where higher is better (an accuracy, a share); for any other metric (bits per byte), the
    task's best mean 1 and its worst 0, linear between, so a bright cell is a good one in every
    column (a column of one value, or of equal values, is 1)."""
    out = pd.Series(np.nan, index=first.index)
    shares = _shares(first)
    for _, g in first[first["n"] > 0].groupby("task"):
        if shares[g.index].all():
            out[g.index] = g["mean"].clip(0, 1)
            continue
        higher = bool(g.get("higher_is_better", pd.Series(True, index=g.index)).iloc[0])
        best, worst = (g["mean"].max(), g["mean"].min()) if higher else (g["mean"].min(), g["mean"].max())
        out[g.index] = 1.0 if best == worst else (g["mean"] - worst) / (best - worst)
    return out


def _shares(first: pd.DataFrame) -> pd.Series:
    """Per row: whether its metric is bounded by [0, 1] with higher better (a board built without
    the metric declarations reads as one)."""
    if not {"higher_is_better", "low", "high"} <= set(first.columns):
        return pd.Series(True, index=first.index)
    return first.higher_is_better.astype(bool) & (first["low"] == 0) & (first["high"] == 1)


def plot_summary(board: pd.DataFrame, order: list[str]) -> Plot | None:
    """Heatmap of schemes (rows, in ``order``: the headline MRR's, best first) x tasks at each task's first eval
    length beyond training, coloured by ``shade`` (bright is good in every column), each cell annotated
    with the mean and its 95 % interval (or why it is empty); rows labelled short (``labels.short_labels``)."""
    first = first_ood(board)
    if first.empty:
        return None
    tasks = sorted(first.task.unique())
    schemes = [s for s in order if s in set(first.scheme)] + sorted(set(first.scheme) - set(order))
    grid = np.full((len(schemes), len(tasks)), np.nan)
    fig, ax = plt.subplots(figsize=(1.9 * len(tasks) + 2.6, 0.45 * len(schemes) + 1.4), dpi=100)
    colour = shade(first)
    for k, r in first.iterrows():
        i, j = schemes.index(r.scheme), tasks.index(r.task)
        grid[i, j] = colour[k]
        text = (f"{r['mean']:.2f}\n[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r["n"] else "-" if r.status == "unsupported"
                else str(r.status))
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="white" if r["n"] and colour[k] < 0.55 else "black")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tasks)), [f"{t}\n{_lengths(first[first.task == t].eval_len)} tokens" for t in tasks], fontsize=8)
    short = short_labels(schemes)  # 'alibi d_ff=192 t_len=32', not the scale board's 90 characters
    ax.set_yticks(range(len(schemes)), [short[s] for s in schemes], fontsize=8)
    shared = shared_options(schemes)  # what the short labels leave out, said once
    relative = not _shares(first[first["n"] > 0]).all()
    ax.set_title("first length beyond training: mean over seeds [95 % interval]"
                 + (f"\n{SHADE}" if relative else "")
                 + (f"\nevery row: {' '.join(shared)}" if shared else ""), fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="headline metric (bright is better)")
    return png(fig)
