"""How the report draws: each figure a ``Plot`` (PNG bytes and the style of every labelled line,
made by ``png``), and the figure of a board, a task's (or split's) score against length
(``plot_task``); the sections draw their other figures with the same tools (the summary heatmap,
the recency diagnostics). Every legend sits outside the data, right of the axes in one column: the
figure grows taller with the number of lines and wider with the longest label, so the legend never
takes more than a quarter of its width (``legend_beside``); lines are told apart by colour and
marker together (``suite.report.styles``, no pair repeated up to 256 lines)."""
from __future__ import annotations

import io
import json
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from suite.report.boards import scheme_order  # noqa: E402
from suite.report.styles import Style, drawn, style_map  # noqa: E402


class Plot(NamedTuple):
    """A drawn figure: its PNG bytes and the colour and marker of each labelled line, as drawn."""
    png: bytes
    lines: list[dict]

    def record(self) -> str:
        """The lines' styles as the JSON the report writes beside the PNG (plots/<name>.styles.json)."""
        return json.dumps({"lines": self.lines}, indent=1, sort_keys=True) + "\n"


def png(fig) -> Plot:
    """The figure as PNG bytes, cropped to what it draws (legends outside the axes included), with
    the styles its labelled lines were drawn in; closed."""
    fig.tight_layout()
    lines = drawn(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return Plot(buf.getvalue(), lines)


LEGEND_SHARE = 0.23  # the most of a figure's width its legend may take (a reader's limit is a quarter;
# the margin covers the crop of savefig's tight bounding box)
LINE_HEIGHT = 0.16  # inches of legend a line takes at fontsize 7


def height_for(n_lines: int, base: float = 3.6) -> float:
    """A figure height (inches) that holds a one-column legend of ``n_lines`` beside the axes:
    ``base`` up to about 18 lines, then ``LINE_HEIGHT`` more per line."""
    return max(base, LINE_HEIGHT * n_lines + 0.75)  # the title and the x axis take the rest


def legend_beside(fig, ax):
    """The axes' legend right of the data, one column, in legend order; the figure widened so that
    the legend takes at most ``LEGEND_SHARE`` of its width however long the labels are ('fox
    decay_time_max=256 decay_time_min=2'). Returns the legend."""
    legend = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    width = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi  # inches, fixed by the font
    fig.set_size_inches(max(fig.get_figwidth(), width / LEGEND_SHARE), fig.get_figheight())
    return legend


def fitted(b: pd.DataFrame, margin: float = 0.06) -> tuple[float, float]:
    """y limits around every mean and interval end the board shows, ``margin`` of their range (at
    least 0.02) either side: flip-flop's 0.6 to 1 fills the axes, and no interval is clipped."""
    scored = b[b.n > 0]
    values = pd.concat([scored["mean"], scored.ci_low, scored.ci_high]).astype(float)
    values = values[np.isfinite(values)]
    if values.empty:
        return -0.03, 1.03
    lo, hi = float(values.min()), float(values.max())
    pad = max(margin * (hi - lo), 0.02)
    return lo - pad, hi + pad


def dodge(n: int, lengths: list) -> list[float]:
    """Factors that move each of ``n`` lines a little left or right of the evaluated lengths on a
    log axis, so their error bars at one length stand side by side: 0.04 octave apart, the group
    spanning at most 0.6 of the narrowest gap between two lengths (centred on the length)."""
    if n < 2:
        return [1.0] * n
    gaps = np.diff(np.log2(lengths)) if len(lengths) > 1 else np.array([1.0])
    step = min(0.04, 0.6 * gaps.min() / (n - 1))
    return [float(2 ** ((k - (n - 1) / 2) * step)) for k in range(n)]


def _length_axis(ax, lengths: list, train_lens: list) -> None:
    """A log x axis ticked at the evaluated lengths, as plain numbers (64, not 2^6), the training
    length a dashed line labelled 'trained at 32' above the axes, the lengths up to it shaded."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xticks(lengths, [f"{x:g}" for x in lengths], fontsize=8)
    ax.set_xlabel("eval length (tokens)")
    left, right = ax.get_xlim()
    for train_len in train_lens:
        ax.axvline(train_len, color="0.35", ls="--", lw=0.9, zorder=0)
        ax.axvspan(left, train_len, color="0.5", alpha=0.12, lw=0, zorder=0)
        ax.text(train_len, 1.01, f"trained at {train_len:g}", transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=7, color="0.35")
    ax.set_xlim(left, right)


def plot_task(board: pd.DataFrame, task: str, styles: dict[str, Style] | None = None,
              title: str | None = None) -> Plot:
    """The task's headline metric against eval length, one line per scheme: mean over seeds with
    its 95 % interval as error bars, each scheme's a little aside (``dodge``); the legend sits
    right of the axes, in the order of the task's table (``boards.scheme_order``: best first).
    ``styles``: each scheme's colour and marker (``styles.style_map`` of the whole report, so a
    scheme looks the same in every plot); default, those of this board's schemes. ``title``:
    default, the task (a split's board: 'flipflop, split dense')."""
    b = board[board.task == task]
    styles = styles or style_map(b.scheme)
    order = scheme_order(b)
    fig, ax = plt.subplots(figsize=(6.4, height_for(len(order))), dpi=100)  # the task table's row order, so the legend ranks best first
    shifts = dodge(len(order), sorted(b.eval_len.unique()))
    for scheme, shift in zip(order, shifts):
        g = b[b.scheme == scheme].sort_values("eval_len")
        yerr = [(g["mean"] - g.ci_low).clip(lower=0).fillna(0), (g.ci_high - g["mean"]).clip(lower=0).fillna(0)]
        look = styles[scheme]
        ax.errorbar(g.eval_len * shift, g["mean"], yerr=yerr, color=look.color, marker=look.marker, ms=4, capsize=2,
                    label=scheme)
    _length_axis(ax, sorted(b.eval_len.unique()), sorted(b.train_len.dropna().unique()))
    ax.set_ylabel(b.metric.iloc[0] if len(b) else "score")
    ax.set_ylim(*fitted(b))
    ax.set_title(title or task)
    ax.grid(alpha=0.3)
    legend_beside(fig, ax)
    return png(fig)
