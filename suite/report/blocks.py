"""The neutral pieces a report section is written in, each rendered by both back ends
(``suite.report.to_markdown`` for index.md, ``suite.report.to_html`` for index.html): a section
says what it shows, never how a format spells it.

``id`` names an element of the HTML page (a test or ``make report-check`` finds it by its id);
Markdown has no such names and leaves it out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import pandas as pd


@dataclass(frozen=True)
class Heading:
    """A title at ``level`` (1: the page's, 2: a section's, 3: a part of one), ending in ``code``
    set as code when given (the sweep's name)."""

    text: str
    level: int = 2
    code: Optional[str] = None


@dataclass(frozen=True)
class Paragraph:
    text: str
    id: Optional[str] = None


@dataclass(frozen=True)
class Strong:
    """A paragraph set in bold: a finding the reader must not miss."""

    text: str
    id: Optional[str] = None


@dataclass(frozen=True)
class Alert:
    """A paragraph set apart as a warning (fewer runs than declared, runs of other code)."""

    text: str


@dataclass(frozen=True)
class Items:
    """A list of lines, one item each."""

    lines: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Table:
    """A table with one header row. ``index``: the frame's index is shown as its first column (a
    named index, or each level of a MultiIndex, under its name; Markdown leaves an unnamed index
    out, HTML shows it under an empty header). ``floatfmt``: how floats are written (a format
    spec, '.3f'; 'g' is tabulate's own). ``numparse``: Markdown reads cells that look like numbers
    as numbers (right-aligned, ``floatfmt`` applied); off, every cell is text as written."""

    frame: pd.DataFrame
    index: bool = True
    floatfmt: str = ".3f"
    numparse: bool = True
    id: Optional[str] = None


@dataclass(frozen=True)
class Image:
    """The plot ``name`` (plots/<name>.png, drawn by the section's ``plots``), described by ``alt``."""

    name: str
    alt: str
    id: Optional[str] = None


Block = Union[Heading, Paragraph, Strong, Alert, Items, Table, Image]
