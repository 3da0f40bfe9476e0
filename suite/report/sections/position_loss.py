"""Loss by position: bits per byte at each position of the natural-text evaluation windows, the
loss-against-position curve long-context papers show (Press et al. 2022, "Train Short, Test Long",
fig. 1 and its appendix; Chen et al. 2023 on position interpolation). At the longest eval length a
scheme that uses the longer context keeps its loss flat or falling past the training length L; one
that does not rises there. Only runs that stored ``bits_per_byte_at`` rows (the same-bytes text
protocol, ``tasks/text.py``) have it; a board without them has no such section.

Each point is the mean over seeds of the run's bits per byte pooled over the examples' bytes in a
position bin (``suite.data.metrics.position_bins``: log-spaced, four bins to an octave), at each
task's longest eval length, per scheme as the board labels it."""
from __future__ import annotations

import numpy as np
import pandas as pd

from suite.evaluation.slices import parse_slice
from suite.report.blocks import Heading, Image, Paragraph, Table
from suite.report.boards import scheme_label
from suite.report.plots import Plot, height_for, legend_beside, plt, png
from suite.report.sections.base import Section

METRIC = "bits_per_byte_at"
TEXT = ("Bits per byte (lower is better) at each position of the evaluation windows, context and target bytes "
        "alike, at each task's longest eval length: mean over seeds of each run's bits pooled over the bytes of a "
        "position bin (four log-spaced bins to a doubling of the position). A scheme that reads the longer context "
        "keeps the curve flat or falling past the training length (dashed); one that fails to extrapolate rises "
        "there. position_loss.csv holds every bin at every eval length.")


class PositionLoss(Section):
    name, order = "position_loss", 45
    csv_names = ("position_loss.csv",)

    def build(self, ctx):
        t = profile(ctx.df)
        return None if t.empty else t

    def blocks(self, built, ctx):
        out = [Heading("Loss by position"), Paragraph(TEXT)]
        for task in sorted(built.task.unique()):
            out += [Heading(f"{task}, loss by position", level=3), Table(wide(built, task)),
                    Image(f"position_loss.{task}", f"{task}, bits per byte by position")]
        return out

    def csvs(self, built, ctx):
        cols = ["task", "scheme", "eval_len", "train_len", "lo", "hi", "bits_per_byte", "n_seeds"]
        return {"position_loss.csv": built[cols].round(4).to_csv(index=False)}

    def plots(self, built, ctx):
        return {f"position_loss.{task}": plot(built, task, ctx.styles) for task in sorted(built.task.unique())}


def profile(df: pd.DataFrame) -> pd.DataFrame:
    """``task, scheme, eval_len, train_len, lo, hi, bits_per_byte, n_seeds``: each position bin's
    bits per byte, mean over the seeds of each configuration, from the ``bits_per_byte_at`` rows."""
    d = df[(df.metric == METRIC) & (df.status == "ok")]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(scheme=d.apply(scheme_label, axis=1))
    bounds = d.slice.map(lambda s: parse_slice(s)["position"].split("-"))
    d = d.assign(lo=bounds.map(lambda b: int(b[0])), hi=bounds.map(lambda b: int(b[1])))
    keys = ["task", "scheme", "eval_len", "train_len", "lo", "hi"]
    out = d.groupby(keys, sort=True).value.agg(["mean", "size"]).reset_index()
    return out.rename(columns={"mean": "bits_per_byte", "size": "n_seeds"})


def longest(t: pd.DataFrame, task: str) -> pd.DataFrame:
    """The task's rows at its longest eval length."""
    g = t[t.task == task]
    return g[g.eval_len == g.eval_len.max()]


def wide(t: pd.DataFrame, task: str, columns: int = 8) -> pd.DataFrame:
    """Scheme x position bin at the task's longest eval length, about ``columns`` bins shown
    (evenly spaced over the log-spaced bins, the last always)."""
    g = longest(t, task)
    bins = sorted(set(zip(g.lo, g.hi)))
    keep = sorted({bins[i] for i in np.linspace(0, len(bins) - 1, min(columns, len(bins))).round().astype(int)})
    g = g[[b in keep for b in zip(g.lo, g.hi)]]
    table = g.pivot_table(index="scheme", columns=["lo", "hi"], values="bits_per_byte", aggfunc="mean")
    table.columns = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in table.columns]
    table.index.name = f"scheme (positions, at {int(g.eval_len.max())} tokens)"
    return table.loc[table.iloc[:, -1].sort_values().index].round(3)


def plot(t: pd.DataFrame, task: str, styles: dict) -> Plot:
    """Bits per byte against position (log axis, each bin at its geometric middle), one line per
    scheme at the task's longest eval length, the training length dashed."""
    g = longest(t, task)
    order = list(g.groupby("scheme").bits_per_byte.last().sort_values().index)
    fig, ax = plt.subplots(figsize=(6.4, height_for(len(order))), dpi=100)
    for scheme in order:
        s = g[g.scheme == scheme].sort_values("lo")
        look = styles.get(scheme)
        ax.plot(np.sqrt(s.lo * s.hi), s.bits_per_byte, label=scheme, lw=1.3, ms=3,
                color=None if look is None else look.color, marker=None if look is None else look.marker)
    for train_len in sorted(g.train_len.dropna().unique()):
        ax.axvline(train_len, color="0.35", ls="--", lw=0.9)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("position in the window (bytes)")
    ax.set_ylabel("bits per byte (lower is better)")
    ax.set_title(f"{task}: loss by position at {int(g.eval_len.max())} tokens")
    ax.grid(alpha=0.3)
    legend_beside(fig, ax)
    return png(fig)
