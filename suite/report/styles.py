"""One look per scheme: a colour and a marker, distinct for up to 16 schemes (beyond, a colour comes back with another marker), the
same in every plot of a report. ``drawn`` reads back what a figure's labelled lines used (the report
writes it beside each plot) and ``clashes`` names two lines of one axes a reader cannot tell apart."""
from __future__ import annotations

from typing import NamedTuple

# tab10, then six more that read apart from it and from each other on white
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#000000", "#000075", "#800000", "#469990", "#f032e6", "#b8860b")
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "p", "h", "d", "H", "8", "+")


class Style(NamedTuple):
    color: str
    marker: str


def style(i: int) -> Style:
    """The i-th look: colour and marker both distinct for i < 16; beyond, the marker shifts by one
    per round of colours, so the pair stays distinct for 256 schemes."""
    n = len(COLOURS)
    return Style(COLOURS[i % n], MARKERS[(i + i // n) % len(MARKERS)])


def style_map(schemes) -> dict[str, Style]:
    """{scheme: Style} by sorted name: pass every scheme of a report, so each keeps its look in all of
    its plots whatever subset a plot shows."""
    return {s: style(i) for i, s in enumerate(sorted(set(schemes)))}


def drawn(fig) -> list[dict]:
    """Each labelled line of each axes of ``fig`` (legend order), as {axes, label, color, marker}:
    what was drawn, read from the artists, not what was meant."""
    import matplotlib.colors

    out = []
    for i, ax in enumerate(fig.axes):
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            line = handle.lines[0] if hasattr(handle, "lines") else handle  # an errorbar's data line
            if not hasattr(line, "get_marker"):
                continue
            out.append({"axes": i, "label": label, "color": matplotlib.colors.to_hex(line.get_color()),
                        "marker": str(line.get_marker())})
    return out


def clashes(lines: list[dict]) -> list[str]:
    """Pairs of lines on one axes sharing both colour and marker."""
    seen, out = {}, []
    for line in lines:
        key = (line["axes"], line["color"], line["marker"])
        if key in seen:
            out.append(f"{seen[key]!r} and {line['label']!r} share colour {line['color']} and marker {line['marker']!r}")
        else:
            seen[key] = line["label"]
    return out
