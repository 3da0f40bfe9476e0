"""Write a sweep's report: index.md, a self-contained index.html (plots embedded), tidy CSVs and
plots/*.png, each with the record of the styles its lines were drawn in.

A report is its sections (``suite.report.sections``), in order, over one shared state
(``suite.report.context``): ``build`` asks every section what it shows of this board, and ``save``
writes what the present ones give, their blocks through the Markdown and the HTML back ends
(``to_markdown``, ``to_html``), their CSV files and their plots.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from suite.files import write_atomic
from suite.report import context, to_html, to_markdown
from suite.report.blocks import Block
from suite.report.choices import EFFECTIVE_AT
from suite.report.context import Context
from suite.report.plots import Plot
from suite.report.sections import Section, ordered

__all__ = ["Report", "build", "html_page", "markdown", "save", "write"]


@dataclass(frozen=True)
class Report:
    """A built report: the shared state and every section with what it built for this board, in
    report order; a section that built None is absent. ``report[name]`` is what the present
    section ``name`` built, else the shared state of that name (``report["board"]``)."""

    context: Context
    parts: tuple[tuple[Section, Any], ...]

    def present(self) -> list[tuple[Section, Any]]:
        return [(section, built) for section, built in self.parts if built is not None]

    def __getitem__(self, name: str):
        for section, built in self.present():
            if section.name == name:
                return built
        if name in Context.__dataclass_fields__:
            return getattr(self.context, name)
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return name in Context.__dataclass_fields__ or any(section.name == name for section, _ in self.present())

    def get(self, name: str, default=None):
        return self[name] if name in self else default

    def blocks(self) -> list[Block]:
        return [block for section, built in self.present() for block in section.blocks(built, self.context)]

    def plots(self) -> dict[str, Plot]:
        return {name: plot for section, built in self.present() for name, plot in section.plots(built, self.context).items()}

    def csvs(self) -> dict[str, str]:
        return {name: text for section, built in self.present() for name, text in section.csvs(built, self.context).items()}


def build(df: pd.DataFrame, sweep: str, tie: str = "min", threshold: float = EFFECTIVE_AT,
          metric: str | None = None, source: str | None = None, coverage: str | None = None) -> Report:
    """The report of the store's rows ``df``: the shared state (``context.build``), then each
    section's build. ``metric``: score every task by this metric instead of the task's own
    headline metric; ``coverage``: the 'k of N runs' line of a board with fewer runs than declared."""
    ctx = context.build(df, sweep, tie, threshold, metric, source, coverage)
    return Report(ctx, tuple((section, section.build(ctx)) for section in ordered()))


def markdown(report: Report) -> str:
    return to_markdown.render(report.blocks())


def html_page(report: Report, plots: dict[str, Plot] | None = None) -> str:
    """The page, each image the plot of its name in ``plots`` (default: the report's, drawn now)."""
    return to_html.render(report.blocks(), report.plots() if plots is None else plots,
                          title=f"PosBench: {report.context.sweep}")


def save(report: Report, out_dir: Path) -> Path:
    """Write a built report as index.md, index.html, every present section's CSV files and plots
    (plots/<name>.png beside plots/<name>.styles.json) under ``out_dir``; everything is built before
    the first file is replaced. A CSV file of a section this board no longer has, and a plot it no
    longer draws, is removed."""
    out_dir = Path(out_dir)
    plots = report.plots()
    files = {}
    for name, plot in plots.items():  # each PNG with the record of the styles its lines were drawn in
        files[f"plots/{name}.png"], files[f"plots/{name}.styles.json"] = plot.png, plot.record()
    files |= report.csvs()
    files["index.md"] = markdown(report)
    files["index.html"] = html_page(report, plots)
    for name, data in files.items():
        write_atomic(out_dir / name, data)
    written = {name for section, _ in report.parts for name in section.csv_names}
    for old in [*(out_dir / name for name in sorted(written - set(files))),
                *(out_dir / "plots").glob("*.png"), *(out_dir / "plots").glob("*.styles.json")]:
        if old.exists() and old.relative_to(out_dir).as_posix() not in files:
            old.unlink()
    return out_dir


def write(df: pd.DataFrame, sweep: str, out_dir: Path, tie: str = "min", threshold: float = EFFECTIVE_AT,
          metric: str | None = None) -> Path:
    """Build the report of ``df`` and ``save`` it under ``out_dir``."""
    return save(build(df, sweep, tie, threshold, metric), out_dir)
