"""Recency diagnostics: how much a layer's hidden states resemble their near neighbours more than
far ones (the recency gap, cosine similarity at lag 1 minus at the far lag), at initialization and
after training, by attention pattern and span size; a table, the gap of the last layer against the
window, and each layer's profile against the lag; on a board where one pattern runs under several
position schemes (the ``hybrids`` board's uniform alibi, rope and nope), each scheme is its own row,
line and panel (``arm_keys``). Only runs stored with diagnostics
(``eval.diagnostics``) have these rows; a board without them has no such section."""
from __future__ import annotations

import pandas as pd

from suite.evaluation.slices import parse_slice
from suite.model.span_kinds import KINDS
from suite.report.blocks import Heading, Image, Paragraph, Table
from suite.report.boards import scheme_label, size_label
from suite.report.plots import Plot, height_for, legend_beside, plt, png
from suite.report.sections.base import Section
from suite.report.styles import distinct_map

RECENCY_TEXT = ("Mean cosine similarity of hidden states (block outputs) at lag 1 minus at the far lag L "
                "(the largest grid lag at most half the training length), by layer, at initialization and "
                "after training; mean over seeds. Rows: pattern (and its position schemes, where one pattern runs "
                "under several) and window (0: no window); a sweep with chunked layers adds their chunk size "
                "(0: none), which is not a window.")


class Recency(Section):
    name, order = "recency", 100

    def build(self, ctx):
        t = recency_table(ctx.df)
        return None if t.empty else t

    def blocks(self, built, ctx):
        return [Heading("Recency gap (diagnostics)"), Paragraph(RECENCY_TEXT), Table(built, index=False),
                Image("recency", "recency"), Image("profiles", "profiles")]

    def plots(self, built, ctx):
        drawn = {"recency": plot_recency(ctx.df), "profiles": plot_profiles(ctx.df)}
        return {name: plot for name, plot in drawn.items() if plot is not None}


def size_columns(d: pd.DataFrame) -> list[str]:
    """The span-kind columns (``KINDS``): the first (``window``) always, each other (``chunk``) when
    some row has one, filled in place with 0 for "none" (integers, so the diagnostics group on them)."""
    first, *others = KINDS
    kept = [first, *(k for k in others if k in d and d[k].notna().any())]
    for kind in kept:
        d[kind] = d[kind].fillna(0).astype(int)
    return kept


def diagnostics(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of a diagnostic metric with their slice fields (at, layer, site, lag, segment, far)
    as columns, plus ``scheme``."""
    d = df[(df.metric == metric) & (df.status == "ok")].copy()
    if d.empty:
        return d
    fields = d.slice.map(parse_slice)
    d = d.join(pd.DataFrame(fields.tolist(), index=d.index))
    d["scheme"] = d.apply(scheme_label, axis=1)
    d["layer"] = d["layer"].astype(int)
    return d


def arm_keys(d: pd.DataFrame, sizes: list[str]) -> list[str]:
    """``["pattern"]``, and ``"positions"`` after it where one pattern and span size run under
    several position schemes: the keys that tell a board's arms apart without pooling two schemes."""
    several = d.groupby(["pattern", *sizes]).positions.nunique().gt(1).any()
    return ["pattern", "positions"] if several else ["pattern"]


def recency_table(df: pd.DataFrame, site: str = "resid_out") -> pd.DataFrame:
    """Recency gap f(1) - f(L) of ``site`` by pattern (and positions, ``arm_keys``), window (0: none)
    and, when a run has chunked layers, chunk (0: none) x (stage, layer), mean over seeds."""
    d = diagnostics(df, "recency_gap")
    if d.empty:
        return d
    d = d[d.site == site]
    sizes = size_columns(d)
    t = d.pivot_table(index=[*arm_keys(d, sizes), *sizes], columns=["at", "layer"], values="value", aggfunc="mean")
    t.columns = [f"{at} layer {layer}" for at, layer in t.columns]
    return t.reset_index()


def plot_recency(df: pd.DataFrame) -> Plot | None:
    """Recency gap of the last layer's output against window size, one panel per stage (init,
    trained), one line per pattern (and position scheme, ``arm_keys``; a chunked run is its own
    line, at window 0, never a point on the window axis), each line in its own colour
    (``styles.distinct_map``), the same in both panels."""
    d = diagnostics(df, "recency_gap")
    if d.empty:
        return None
    d = d[(d.site == "resid_out") & (d.layer == d.layer.max())].copy()
    window, *others = size_columns(d)  # others: ["chunk"] when some run has chunked layers
    arms = arm_keys(d, [window, *others])
    d["line"] = [" ".join(str(v) for v in names) + "".join(f" {KINDS[k]}={size}" for k, size in zip(others, sizes) if size)
                 for names, sizes in zip(d[arms].itertuples(index=False), d[others].itertuples(index=False))]
    styles = distinct_map(d.line)
    stages = [at for at in ("init", "trained") if at in set(d["at"])]
    fig, axes = plt.subplots(1, len(stages), figsize=(4.2 * len(stages) + 1, height_for(d.line.nunique())), dpi=100,
                             sharey=True, squeeze=False)
    for ax, at in zip(axes[0], stages):
        for line, g in d[d["at"] == at].groupby("line"):
            g = g.groupby(window).value.mean()
            ax.plot(g.index, g.values, marker=styles[line].marker, color=styles[line].color, label=line)
        ax.set_title(f"{'at initialization' if at == 'init' else 'trained'}")
        ax.set_xlabel("window (0: no window)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("recency gap f(1) - f(L)")
    fig.suptitle("last layer output: recency gap against window")
    legend_beside(fig, axes[0][-1])
    return png(fig)


def plot_profiles(df: pd.DataFrame) -> Plot | None:
    """Recency profiles f(d) of each layer's output against lag, one panel per pattern and span
    size (window, or chunk: 'w=16', 'c=16') (trained: solid, init: dashed), mean over seeds."""
    d = diagnostics(df, "recency_cos")
    if d.empty:
        return None
    d = d[d.site == "resid_out"].copy()
    sizes = size_columns(d)
    d["lag"] = d["lag"].astype(int)
    arms = arm_keys(d, sizes)
    panels = list(d.groupby([*arms, *sizes]))
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), dpi=90, squeeze=False, sharey=True)
    for ax, (key, g) in zip(axes.flat, panels):
        pattern, values = " ".join(key[:len(arms)]), key[len(arms):]
        for (layer, at), h in g.groupby(["layer", "at"]):
            if at not in ("init", "trained"):
                continue
            h = h.groupby("lag").value.mean()
            ax.plot(h.index, h.values, ls="-" if at == "trained" else "--", color=f"C{layer}",
                    label=f"layer {layer}" if at == "trained" else None)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{pattern} {size_label({k: v or None for k, v in zip(sizes, values)})}".strip(), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    fig.legend(*axes.flat[0].get_legend_handles_labels(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.95))
    fig.supxlabel("lag d")
    fig.supylabel("cos(h_i, h_{i-d})")
    return png(fig)
