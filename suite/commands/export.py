"""``python -m suite.commands.export <board or folder> [--format csv|latex] [--out PATH] [--interval]
[--metric NAME] [--published DIR]``: the leaderboard as a paper's wide table.

One row per scheme, best first in the report's order (its headline MRR over every run,
``suite.report.ranking.in_order``), one column per ``task@eval_len``, each cell the mean over seeds
of the task's headline metric ('-' for an empty cell); with ``--interval``, '0.9000 ± 0.0500', the
half width of the cell's 95 % interval where it has one (``suite.report.summary.wide_table``).
``--format csv`` (the default) or ``latex`` (a ``tabular``, via pandas' ``DataFrame.to_latex``).

The source is a published board's name (``published/<board>.jsonl.gz``), a shipped
``.jsonl.gz`` file, or a results folder (``results/<sweep>``). The table goes to stdout, or to
``--out PATH`` (checked before any work; never under reports/ or published/, which only their own
builds write). Exits 2 on a bad source, format, metric or output path, 1 when there is nothing to
show.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from suite.commandline import Refused, check_output, command, parser
from suite.results import store

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("csv", "latex")
KEPT = ("reports", store.PUBLISHED)  # folders this command never writes under
LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def source_path(prog: str, source: str, published=store.PUBLISHED) -> Path:
    """The folder or shipped file ``source`` names: itself where it exists, else the published board
    of that name. A bare name (no folder, no suffix) that is neither is refused, naming the boards
    shipped in ``published``; any other path is left for ``store.read_source`` to judge."""
    where = Path(source)
    if source.strip() and not where.exists() and store.is_shipped(store.shipped_path(source, published)):
        return store.shipped_path(source, published)
    if source.strip() and not where.exists() and len(where.parts) == 1 and not where.suffix:
        boards = ", ".join(store.shipped_boards(published)) or "none"
        raise Refused(f"{prog}: error: source {source!r}: no such folder, and no published board of that name in "
                      f"{published}/; boards: {boards}; or {store.SOURCE_CHOICES}")
    return where


def check_format(prog: str, form: str) -> str:
    """``form`` when it is one of ``FORMATS``; ``Refused`` naming it and the valid ones otherwise."""
    if form not in FORMATS:
        raise Refused(f"{prog}: error: --format {form!r}: not a format; valid: {', '.join(FORMATS)}")
    return form


def check_out(prog: str, out: str | None) -> Path | None:
    """``out`` as a file this command may write (``check_output``), None for stdout; under reports/
    or published/ (of the checkout or of the current folder) it is refused."""
    if out is None:
        return None
    target = Path(out).resolve() if str(out).strip() else None
    for kept in KEPT:
        if target is not None and any(target.is_relative_to(base) for base in {(ROOT / kept).resolve(),
                                                                               Path(kept).resolve()}):
            raise Refused(f"{prog}: error: --out {str(out)!r} is under {kept}/, which only its own build writes; "
                          "choose a path elsewhere (or leave --out out to write to stdout)")
    return check_output(prog, "--out", out, kind="file")


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped ('rope_in_swa' -> 'rope\\_in\\_swa') and the
    interval's '±' written as math ('$\\pm$')."""
    escaped = re.sub(r"[\\&%$#_{}~^]", lambda m: LATEX_SPECIALS[m.group()], str(text))
    return escaped.replace("±", r"$\pm$")


def render(wide: pd.DataFrame, form: str) -> str:
    """The wide table as text: CSV with a 'scheme' first column, or a LaTeX ``tabular`` (schemes
    left-aligned, scores right-aligned, every name and cell escaped by ``latex_escape``)."""
    table = wide.rename_axis(index="scheme").reset_index()
    if form == "csv":
        return table.to_csv(index=False)
    escaped = table.map(latex_escape).rename(columns=latex_escape)
    return escaped.to_latex(index=False, escape=False, column_format="l" + "r" * (len(table.columns) - 1))


def export_table(df: pd.DataFrame, interval: bool = False, metric: str | None = None) -> pd.DataFrame:
    """The wide table of the rows ``df``: ``summary.wide_table`` of the report's leaderboard in its
    order (``summary.summary_table``), with the half interval when ``interval``."""
    from suite.report.summary import summary_table, wide_table

    return wide_table(summary_table(df, metric), interval=interval)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.export") -> int:
    p = parser(prog, __doc__)
    p.add_argument("source", help="a published board's name, a published/<board>.jsonl.gz file or a results folder")
    p.add_argument("--format", default="csv", help=f"the table's format: {' or '.join(FORMATS)} (default: csv)")
    p.add_argument("--out", default=None, help="write the table to this file (default: stdout)")
    p.add_argument("--interval", action="store_true", help="add '± half width of the 95 %% interval' to each cell")
    p.add_argument("--metric", default=None, help="score every task by this metric (default: each task's headline)")
    p.add_argument("--published", default=store.PUBLISHED, help="the folder of published boards a bare name is "
                                                                  "looked up in (default: published)")
    args = p.parse_args(argv)
    form = check_format(p.prog, args.format)
    out = check_out(p.prog, args.out)
    from suite.report import choices

    where = source_path(p.prog, args.source, args.published)
    df = store.read_source(p.prog, "source", where)
    choices.check_metric(p.prog, args.metric, {str(where): df})
    wide = export_table(df, args.interval, args.metric)
    if wide.empty:
        raise Refused(f"no leaderboard cells under {where}", 1)
    text = render(wide, form)
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out} ({len(wide)} schemes x {len(wide.columns)} columns, {form})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
