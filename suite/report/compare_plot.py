"""``compare.png``: one panel per task, the mean over seeds by eval length (log 2 axis) with its
95 % interval as a band, one colour and marker per scheme (as in the reports, ``styles.style_map``)
and one line style per source; the y axis names the metric and its direction, and a dotted
vertical line marks each training length L. Two legends at the right: schemes, then sources."""
from __future__ import annotations

import io

import pandas as pd

from suite.report.compare_text import letters
from suite.report.styles import style_map

STYLES = ["-", "--", ":", "-."]


def _ylabel(d: pd.DataFrame) -> str:
    h = d.higher_is_better.iloc[0]
    direction = "" if h is None or pd.isna(h) else " (higher is better)" if bool(h) else " (lower is better)"
    return f"{', '.join(sorted(d.metric.unique()))}{direction}"


def plot(table: pd.DataFrame, sources: list[str]) -> bytes:
    """The PNG of ``compare_table``'s ``table`` over ``sources``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    tasks = sorted(table.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks) + 2.6, 3.8), squeeze=False)
    looks = style_map(table.scheme)  # a scheme's colour and marker, as in the reports (16 distinct)
    names = letters(sources)
    for ax, task in zip(axes[0], tasks):
        d = table[table.task == task]
        for scheme, g in d.groupby("scheme", sort=True):
            g = g.sort_values("eval_len")
            look = looks[scheme]
            for j, source in enumerate(sources):
                ax.plot(g.eval_len, g[f"mean [{source}]"], STYLES[j % len(STYLES)], color=look.color,
                        marker=look.marker, markersize=4, label=f"{scheme} [{source}]")
                ax.fill_between(g.eval_len, g[f"ci_low [{source}]"], g[f"ci_high [{source}]"], color=look.color,
                                alpha=0.12, linewidth=0)
        for length in sorted(d.train_len.dropna().unique()):
            ax.axvline(length, color="0.3", linestyle=":", linewidth=1, label=f"L = {int(length)}")
            ax.annotate(f"L = {int(length)}", (length, 0), xycoords=("data", "axes fraction"), xytext=(3, 4),
                        textcoords="offset points", fontsize=7, color="0.3")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(d.eval_len.unique()), [str(int(x)) for x in sorted(d.eval_len.unique())])
        ax.set_title(task)
        ax.set_xlabel("eval length (tokens)")
        ax.set_ylabel(_ylabel(d))
    schemes = sorted(table.scheme.unique())
    scheme_handles = [Line2D([], [], color=looks[s].color, marker=looks[s].marker, label=s) for s in schemes]
    source_handles = [Line2D([], [], color="0.2", linestyle=STYLES[j % len(STYLES)], label=f"{names[s]}: {s}")
                      for j, s in enumerate(sources)]
    right = axes[0][-1]
    first = right.legend(handles=scheme_handles, title="scheme", fontsize=6, title_fontsize=7,
                         loc="upper left", bbox_to_anchor=(1.02, 1.0))
    right.add_artist(first)
    right.legend(handles=source_handles, title="source (band: 95 % interval)", fontsize=6, title_fontsize=7,
                 loc="lower left", bbox_to_anchor=(1.02, 0.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
