"""One look per scheme, a colour and a marker fixed by the scheme's name, so a scheme keeps its look
in every plot of a report and across reports, whichever schemes stand beside it.

A scheme's colour is a function of its name alone (``colour_of``): the classic six of the
flagship board keep the six colours every report drew them in (``FIXED``, the first six of
``COLOURS``, theirs alone), and any other name takes one of the other ten by the SHA-256 of its
name (``SALT`` before it; the same in every process, unlike Python's salted ``hash``). Adding a scheme to a board never
changes another's colour. Its marker is a function of its name too (``marker_of``), except where
two schemes of one report would share colour and marker: then the later by name takes the next
marker its colour has free (``style_map``), so no two lines of a report look alike (up to 256, 16
colours x 16 markers). ``drawn`` reads back what a figure's labelled lines used (the report writes
it beside each plot) and ``clashes`` names two lines of one axes a reader cannot tell apart."""
from __future__ import annotations

import hashlib
from typing import NamedTuple

# tab10, then six more that read apart from it and from each other on white
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#000000", "#000075", "#800000", "#469990", "#f032e6", "#b8860b")
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "p", "h", "d", "H", "8", "+")
# the flagship's six, each in the colour and marker (the i-th of both) every report drew it in before looks were fixed
FIXED = {"alibi": 0, "learned": 1, "nope": 2, "rope": 3, "sinusoidal": 4, "t5": 5}
HASHED = len(COLOURS) - len(FIXED)  # the colours any other name hashes into: those after the six's
# put before a name that is hashed: the first salt ('0:', '1:', ...) under which no two of the zoo's schemes that
# share a family's panel (``suite.report.families``) share a colour (tests/test_report_looks.py checks it)
SALT = "240:"


class Style(NamedTuple):
    color: str
    marker: str


def _digest(name: str) -> int:
    """The first 8 hex digits of the SHA-256 of ``SALT`` and ``name``, as a number: the same in
    every process."""
    return int(hashlib.sha256((SALT + name).encode()).hexdigest()[:8], 16)


def colour_of(scheme: str) -> int:
    """The index in ``COLOURS`` of ``scheme``'s colour: its slot of ``FIXED``, else one of the ten
    after the six, by its digest."""
    return FIXED[scheme] if scheme in FIXED else len(FIXED) + _digest(scheme) % HASHED


def marker_of(scheme: str) -> int:
    """The index in ``MARKERS`` of the marker ``scheme`` asks for: its slot of ``FIXED``, else one of
    the 16 by its digest (other digits than its colour's)."""
    return FIXED[scheme] if scheme in FIXED else (_digest(scheme) // HASHED) % len(MARKERS)


def _free(colour: int, marker: int, taken: set) -> tuple[int, int]:
    """The first (colour, marker) not in ``taken``: ``colour`` with ``marker`` or the markers after
    it; only where all 16 of that colour are taken, the next colour's (past 16 schemes of one colour)."""
    for c in range(len(COLOURS)):
        for m in range(len(MARKERS)):
            pair = ((colour + c) % len(COLOURS), (marker + m) % len(MARKERS))
            if pair not in taken:
                return pair
    raise ValueError(f"more than {len(COLOURS) * len(MARKERS)} schemes cannot be told apart")


def style_map(schemes) -> dict[str, Style]:
    """{scheme: Style}: each scheme's colour (``colour_of``) and marker (``marker_of``), a scheme
    whose pair an earlier one (the six of ``FIXED`` first, then by name) took moved to its colour's
    next free marker. Pass every scheme of a report, so each keeps its look in all of its plots
    whatever subset a plot shows. Raises ValueError past 256 schemes."""
    names = sorted(set(schemes), key=lambda s: (s not in FIXED, FIXED.get(s, 0), s))
    taken: set = set()
    out = {}
    for name in names:
        c, m = _free(colour_of(name), marker_of(name), taken)
        taken.add((c, m))
        out[name] = Style(COLOURS[c], MARKERS[m])
    return out


def distinct_map(names) -> dict[str, Style]:
    """{name: Style} for lines that are not schemes (a plot's own groups, such as the recency plot's
    patterns): each of the first ``len(COLOURS)`` names, in sorted order, its own colour, then the
    colours again with the next marker; so a plot of few lines never tells two apart by marker alone."""
    names = sorted(set(names))
    return {name: Style(COLOURS[i % len(COLOURS)], MARKERS[(i // len(COLOURS)) % len(MARKERS)])
            for i, name in enumerate(names)}


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
