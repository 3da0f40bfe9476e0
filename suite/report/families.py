"""Scheme families: the panels a plot of many schemes is split into (``suite.report.plots``), declared
here once.

A line's family is read from its label: the position scheme the label names, its first word
('rope drop_low=0.25' is rope, p-RoPE), and of a training schedule the scheme it ends on
('rope>drope@0.8' is drope, DroPE). The classic six are the flagship's schemes at their defaults
(a bare name: 'rope', not 'rope drop_low=0.25'), so they stand together as the reference; every
other family holds every label of its schemes, options or not (plain rope beside its variants). A
scheme can stand in two panels (rope: classic and rotary), in one look. A label whose scheme no
family names (a pattern, 'llama4 c=16'; a scheme added after this list) falls in ``OTHER``, so
nothing is left undrawn.
"""
from __future__ import annotations

CLASSIC = "classic six"
OTHER = "other schemes"

# {panel title: the position schemes (``suite.model.position`` names) it holds}, in panel order
FAMILIES: dict[str, tuple[str, ...]] = {
    CLASSIC: ("nope", "sinusoidal", "learned", "rope", "alibi", "t5"),
    "rotary variants": ("rope", "xpos", "randomized", "pope", "fope", "drope"),
    "additive biases": ("alibi", "t5", "kerple", "kerple_power", "fire", "dape"),
    "data-dependent": ("fox", "stickbreaking", "path", "cope"),
}


def scheme_of(label: str) -> str:
    """The position scheme a line's label names: its first word, and of a schedule
    ('rope>drope@0.8') the last phase's scheme."""
    first = label.split(" ")[0]
    return first.split(">")[-1].split("@")[0]


def families_of(label: str) -> list[str]:
    """The families (``FAMILIES``' titles) ``label`` stands in: the classic six only as a bare name."""
    scheme = scheme_of(label)
    return [title for title, members in FAMILIES.items()
            if scheme in members and (title != CLASSIC or label == scheme)]


def split(labels) -> list[tuple[str, list[str]]]:
    """[(panel title, its labels in the given order), ...]: each family that holds a label, in
    ``FAMILIES``' order, then ``OTHER`` for labels no family holds; empty panels left out."""
    labels = list(dict.fromkeys(labels))
    panels = [(title, [label for label in labels if title in families_of(label)]) for title in FAMILIES]
    panels.append((OTHER, [label for label in labels if not families_of(label)]))
    return [(title, members) for title, members in panels if members]
