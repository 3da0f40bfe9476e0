"""One look per scheme: a colour and a marker, distinct for up to 16 schemes (the zoo has 13), the
same in every plot of a report."""
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

