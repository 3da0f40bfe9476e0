"""How the report draws: each figure a ``Plot`` (PNG bytes and the style of every labelled line,
made by ``png``), and the figure of a board, a task's (or split's) score against length
(``plot_task``): one axes, or small multiples where a board has many lines (one panel per setting
on a board ranked setting by setting, one per scheme family on the zoo's, ``panels``), the score
axis saying which way is better (``score_label``), legend labels short (``labels.short_labels``).
The sections draw their other figures with the same tools (the summary heatmap, the recency
diagnostics, the ranks by setting of ``rank_plot``). Every legend sits outside the data, right of
the axes in one column: the figure grows taller with the number of lines and wider with the longest label, so the legend never
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

from suite.report import families  # noqa: E402
from suite.report.boards import metric_of, scheme_order  # noqa: E402
from suite.report.labels import shared_options, short_labels  # noqa: E402
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
MANY_LINES = 12  # past this many schemes, a task's plot is split by family (``panels``)


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


class Panel(NamedTuple):
    """One axes of a task's figure: its title ('' for a figure of one axes) and its cells, whose
    ``scheme`` names the line each belongs to (in a setting's panel, the scheme's name there)."""
    title: str
    board: pd.DataFrame


def panels(b: pd.DataFrame) -> list[Panel]:
    """The axes one task's board ``b`` is drawn on: on a board ranked setting by setting, one per
    setting, in the settings' order (``setting_at``), its lines the schemes by their names within
    it (``boards.primary``'s ``name``: 'rope', not 'rope d_model=64 train_len=32 ...'); else, past
    ``MANY_LINES`` schemes, one per family (``families.split``: the zoo's classic six, rotary
    variants, additive biases, data-dependent schemes) where they make more than one; else one."""
    if "setting" in b and (b.setting.astype(str) != "").any():
        order = b.drop_duplicates("setting").sort_values(["setting_at", "setting"]).setting
        named = b.assign(scheme=b["name"]) if "name" in b else b
        return [Panel(str(s), named[named.setting == s]) for s in order]
    groups = families.split(scheme_order(b)) if b.scheme.nunique() > MANY_LINES else []
    if len(groups) > 1:
        return [Panel(title, b[b.scheme.isin(members)]) for title, members in groups]
    return [Panel("", b)]


def direction(higher_is_better) -> str:
    """' (higher is better)', ' (lower is better)', or '' for a metric that is not ranked (None)."""
    if higher_is_better is None:
        return ""
    return f" ({'higher' if higher_is_better else 'lower'} is better)"


def score_label(b: pd.DataFrame) -> str:
    """The score axis of a board's cells: its metric and which way is better, as the metric's
    declaration the rows stored says (``boards.metric_of``, ``Metric.higher_is_better``): 'token
    accuracy (higher is better)', 'bits per byte (lower is better)'; 'score' for no cells."""
    if b.empty:
        return "score"
    return str(b.metric.iloc[0]).replace("_", " ") + direction(metric_of(b.iloc[0]).higher_is_better)


def _draw(ax, b: pd.DataFrame, styles: dict[str, Style]) -> list[str]:
    """One axes: ``b``'s schemes against eval length, best first (``scheme_order``), each a mean
    with its 95 % interval, dodged (``dodge``), labelled short (``labels.short_labels``); returns
    the options every line shares, which the legend leaves out (``labels.shared_options``)."""
    order = scheme_order(b)
    short = short_labels(order)
    shifts = dodge(len(order), sorted(b.eval_len.unique()))
    for scheme, shift in zip(order, shifts):
        g = b[b.scheme == scheme].sort_values("eval_len")
        yerr = [(g["mean"] - g.ci_low).clip(lower=0).fillna(0), (g.ci_high - g["mean"]).clip(lower=0).fillna(0)]
        look = styles[scheme]
        ax.errorbar(g.eval_len * shift, g["mean"], yerr=yerr, color=look.color, marker=look.marker, ms=4, capsize=2,
                    label=short[scheme])
    _length_axis(ax, sorted(b.eval_len.unique()), sorted(b.train_len.dropna().unique()))
    ax.set_ylabel(score_label(b))
    ax.grid(alpha=0.3)
    return shared_options(order)


def _titled(title: str, shared: list[str]) -> str:
    """'copy', or 'copy (every line: w=16)' where every line shares options its label leaves out."""
    return f"{title} (every line: {' '.join(shared)})" if shared else title


def _grid(parts: list[Panel]):
    """(figure, its axes, one per panel): one axes 6.4 in wide, or small multiples two abreast,
    each row tall enough for the longest legend of the figure (``height_for``)."""
    ncols = 1 if len(parts) == 1 else 2
    nrows = -(-len(parts) // ncols)
    lines = max((p.board.scheme.nunique() for p in parts), default=0)
    row = height_for(lines) if ncols == 1 else height_for(lines, 3.2)
    fig, grid = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, row * nrows), dpi=100, squeeze=False)
    for ax in grid.flat[len(parts):]:
        ax.remove()
    return fig, list(grid.flat[:len(parts)])


def plot_task(board: pd.DataFrame, task: str, styles: dict[str, Style] | None = None,
              title: str | None = None) -> Plot:
    """The task's headline metric against eval length, one line per scheme: mean over seeds with
    its 95 % interval as error bars, each scheme's a little aside (``dodge``), on the axes of
    ``panels``: one, or small multiples (a setting's or a family's, titled so under the task's
    title), two abreast, all on one y range (``fitted`` over the whole task), each with its own
    length axis and its legend right of it, in the order of its table (``scheme_order``: best
    first), labels short (``labels.short_labels``; the options every line of an axes shares in its
    title). ``styles``: each line's colour and marker (``styles.style_map`` of the whole report:
    by scheme, or by name within the setting on a board ranked setting by setting,
    ``line_styles``), so a line looks the same in every plot; a line it lacks takes its own look
    (``style_map``, fixed by its name). ``title``: default, the task ('flipflop, split dense')."""
    b = board[board.task == task]
    parts = panels(b)
    styles = {**style_map(s for p in parts for s in p.board.scheme), **(styles or {})}
    fig, axes = _grid(parts)
    limits = fitted(b)
    for ax, part in zip(axes, parts):
        shared = _draw(ax, part.board, styles)
        ax.set_ylim(*limits)
        ax.set_title(_titled(part.title or title or task, shared), fontsize=10 if part.title else None)
        legend_beside(fig, ax)
    if parts[0].title:
        fig.suptitle(title or task)
    return png(fig)


def line_styles(boards_) -> dict[str, Style]:
    """Each line's look in a report's task plots where the board is ranked setting by setting: by
    the scheme's name within its setting ('alibi' in every setting one look: ``styles.style_map``
    of every name of ``boards_``)."""
    return style_map(n for b in boards_ if "name" in b for n in b["name"])
