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


def plot_summary(board: pd.DataFrame, order: list[str]) -> Plot | None:
    """Heatmap of schemes (rows, in ``order``: the headline MRR's, best first) x tasks at each task's first eval
    length beyond training, coloured by the headline metric's mean over seeds, each cell annotated
    with the mean and its 95 % interval (or why it is empty); rows labelled short (``labels.short_labels``)."""
    first = first_ood(board)
    if first.empty:
        return None
    tasks = sorted(first.task.unique())
    schemes = [s for s in order if s in set(first.scheme)] + sorted(set(first.scheme) - set(order))
    grid = np.full((len(schemes), len(tasks)), np.nan)
    fig, ax = plt.subplots(figsize=(1.9 * len(tasks) + 2.6, 0.45 * len(schemes) + 1.4), dpi=100)
    for _, r in first.iterrows():
        i, j = schemes.index(r.scheme), tasks.index(r.task)
        grid[i, j] = r["mean"]
        text = (f"{r['mean']:.2f}\n[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r["n"] else "-" if r.status == "unsupported"
                else str(r.status))
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="white" if r["n"] and r["mean"] < 0.55 else "black")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(tasks)), [f"{t}\n{_lengths(first[first.task == t].eval_len)} tokens" for t in tasks], fontsize=8)
    short = short_labels(schemes)  # 'alibi d_ff=192 t_len=32', not the scale board's 90 characters
    ax.set_yticks(range(len(schemes)), [short[s] for s in schemes], fontsize=8)
    shared = shared_options(schemes)  # what the short labels leave out, said once
    ax.set_title("first length beyond training: mean over seeds [95 % interval]"
                 + (f"\nevery row: {' '.join(shared)}" if shared else ""), fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="headline metric")
    return png(fig)
