"""The ranks by setting as a bump chart, for "Does the ranking hold?" (``sections.settings``): one
line per scheme across the settings in their order (x), at its rank by OOD MRR in each (y, rank 1
on top), so a scheme whose rank moves between settings shows as a line that crosses others."""
from __future__ import annotations

import pandas as pd

from suite.report.plots import LINE_HEIGHT, Plot, legend_beside, plt, png
from suite.report.styles import Style, style_map


def rank_order(table: pd.DataFrame) -> list[str]:
    """The schemes of a ranking table (``stability.ranking_table``) by their mean rank, then name:
    the order of the section's table and of the chart's legend."""
    mean = table.groupby("scheme")["rank"].mean()
    return sorted(mean.index, key=lambda name: (mean[name], name))


def setting_tick(setting: str) -> str:
    """A setting's label on the x axis, one part a line ('L=32\\ntiny\\nd_model 64\\n4 heads')."""
    return setting.replace(" · ", "\n")


def plot_ranks(table: pd.DataFrame, settings: list[str], styles: dict[str, Style] | None = None) -> Plot:
    """The bump chart of ``table`` (``setting, scheme, rank``, as ``stability.ranking_table``
    gives it) over ``settings`` in their order: each scheme's rank in each setting (a gap where it
    is not ranked), rank 1 at the top, every rank a tick; the legend beside, best mean rank first.
    ``styles``: each scheme's look (by its name within a setting, as the task plots draw it);
    default, its own (``style_map``)."""
    order = rank_order(table)
    styles = {**style_map(order), **(styles or {})}
    at = {setting: i for i, setting in enumerate(settings)}
    fig, ax = plt.subplots(figsize=(6.4, max(3.6, LINE_HEIGHT * len(order) + 1.2)), dpi=100)
    for scheme in order:
        g = table[table.scheme == scheme]
        ranks = g.set_index("setting")["rank"].reindex(settings).astype(float)
        look = styles[scheme]
        ax.plot([at[s] for s in settings], ranks.to_numpy(), color=look.color, marker=look.marker, ms=6, lw=1.6,
                label=scheme)
    ax.set_xticks(range(len(settings)), [setting_tick(s) for s in settings], fontsize=8)
    ax.set_xlim(-0.3, len(settings) - 0.7)
    worst = int(table["rank"].max()) if len(table) else 1
    ax.set_yticks(range(1, worst + 1))
    ax.set_ylim(worst + 0.5, 0.5)  # rank 1 on top
    ax.set_ylabel("rank by OOD MRR (1 is best)")
    ax.set_xlabel("setting")
    ax.set_title("Rank of each scheme in each setting")
    ax.grid(axis="y", alpha=0.3)
    legend_beside(fig, ax)
    return png(fig)
