"""The section interface. A report is a list of sections, each in one module of this package
holding everything it shows: what it computes, its text, its tables, its plots and its CSV files.

A section is a subclass of ``Section`` with a ``name`` (unique; the report's entry for what it
built, ``render.Report``) and an ``order`` (where it stands on the page, lowest first), and:

* ``build(ctx)``: what it shows of the board, computed from the shared state ``ctx``
  (``suite.report.context.Context``: the rows, the board, the MRR, the styles); None when the
  board has nothing for it, and the section is absent from this report.
* ``blocks(built, ctx)``: its content as neutral blocks (``suite.report.blocks``: headings,
  paragraphs, tables, images), which the Markdown and HTML back ends render alike.
* ``csvs(built, ctx)``: ``{file name: CSV text}``; ``csv_names`` lists every file it may write, so
  that a rebuild removes the file of a section the board no longer has.
* ``plots(built, ctx)``: ``{name: Plot}``, written as plots/<name>.png; an ``Image`` block names one.

``SECTIONS`` (name -> class) is filled by the package (``suite/report/sections/__init__.py``
discovers its modules), so a new section is one new file.
"""
from __future__ import annotations

from typing import Any, ClassVar

from suite.report.blocks import Block
from suite.report.context import Context
from suite.report.plots import Plot

SECTIONS: dict[str, type["Section"]] = {}


class Section:
    name: ClassVar[str]
    order: ClassVar[int]
    csv_names: ClassVar[tuple[str, ...]] = ()

    def build(self, ctx: Context) -> Any | None:
        raise NotImplementedError

    def blocks(self, built: Any, ctx: Context) -> list[Block]:
        raise NotImplementedError

    def csvs(self, built: Any, ctx: Context) -> dict[str, str]:
        return {}

    def plots(self, built: Any, ctx: Context) -> dict[str, Plot]:
        return {}


def ordered(catalogue: dict[str, type[Section]] = SECTIONS) -> list[Section]:
    """One of each section of ``catalogue``, in report order (``order``, then name)."""
    return [cls() for cls in sorted(catalogue.values(), key=lambda cls: (cls.order, cls.name))]
