"""``python -m suite.report.readme_check [FILE ...]``: every number README.md and the pages of
docs/ quote in a table copied from a report is one the report holds.

A copied table is marked by an HTML comment on a line of its own before it, naming the report file
it quotes, relative to the repository root::

    <!-- from reports/default/index.md -->

    | scheme | MRR, OOD cells [95 % bootstrap] | copy @32 | ...

Each body row of the table (first cell: a scheme label) is checked against the report's table rows
with the same label (a report label may add its not-learned mark, 'nope (1 of 3 not learned)'):
an interval quoted as 'mean [low, high]' must be the start of one of those rows' cells, and a lone
number must be the mean (first number) of one of them, digit for digit; a cell copied verbatim from
one of those rows ('1 (0.96)', a setting's name) is held as it stands, and a cell without a number
(a verdict, a list of families) must be one. A marker with no table
after it, a report file that does not exist, or a label the report has no row for is a problem too.
Standard library only, no browser: ``make report-check`` runs it before the Chromium checks, and
``make test`` runs it over the real README (``tests/test_readme_check.py``).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from suite.commandline import parser

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^\s*<!--\s*from\s+(\S+)\s*-->\s*$")
NUMBER = r"-?\d+(?:\.\d+)?"
QUOTED = re.compile(rf"({NUMBER})(?:\s*\[\s*({NUMBER}),\s*({NUMBER})\s*\])?")  # '0.31 [0.26, 0.40]' or '0.98'
MARK = re.compile(r"\s*\(\d+ of \d+ not learned\)$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_rule(line: str) -> bool:
    """A table's header rule: '|---|:---|'."""
    return bool(re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", line.strip()))


def marked_tables(text: str) -> list[tuple[int, str, list[tuple[int, list[str]]]]]:
    """(marker line number, the report it names, [(line number, cells) of each body row]) for each
    marker in ``text``; a marker not followed (blank lines aside) by a table has no rows."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        table = []
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            table.append(j)
            j += 1
        has_header = len(table) >= 2 and _is_rule(lines[table[1]])  # a header row, its rule, then the body
        body = [(k + 1, _cells(lines[k])) for k in table[2:]] if has_header else []
        out.append((i + 1, match.group(1), body))
    return out


def report_rows(text: str) -> dict[str, list[list[str]]]:
    """{label: [cells after the label, of every table row of the report with that label]}: a row is
    found by its label without its not-learned mark, and a marked row also by its label with the
    mark, so README may copy the report's row as it stands, mark and all, and the mark must agree."""
    rows: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("|") and not _is_rule(line):
            cells = _cells(line)
            for label in {MARK.sub("", cells[0]), cells[0]}:
                rows.setdefault(label, []).append(cells[1:])
    return rows


def _held(quoted: re.Match, cells: list[str]) -> bool:
    """Whether a report cell holds the quoted interval (as its start) or the quoted lone number (as
    its first number)."""
    for cell in cells:
        found = QUOTED.match(cell)
        if not found:
            continue
        if quoted.group(2) is None and found.group(1) == quoted.group(1):
            return True
        if quoted.group(2) is not None and found.groups() == quoted.groups():
            return True
    return False


def mismatches(readme: Path, root: Path = ROOT) -> list[str]:
    """Every number of ``readme``'s marked tables that the report it names does not hold, and every
    marker, report or label that cannot be checked, as 'README.md:962: rope: 0.31 [0.27, 0.40] is not in
    reports/default/index.md'."""
    readme = Path(readme)
    problems = []
    for at, source, body in marked_tables(readme.read_text(encoding="utf-8")):
        where = f"{readme.name}:{at}"
        report = Path(root) / source
        if not body:
            problems.append(f"{where}: the marker naming {source} is not followed by a table")
            continue
        if not report.is_file():
            problems.append(f"{where}: {source} does not exist")
            continue
        held = report_rows(report.read_text(encoding="utf-8"))
        for line, cells in body:
            label, quoted = cells[0], cells[1:]
            if label not in held:
                problems.append(f"{readme.name}:{line}: {source} has no row {label!r}")
                continue
            row_cells = [c for r in held[label] for c in r]
            for cell in quoted:
                if cell in row_cells:  # the report's own cell, copied as it stands
                    continue
                if not QUOTED.search(cell):  # words (a verdict, a list of families): the report's cell as it stands
                    problems.append(f"{readme.name}:{line}: {label}: {cell!r} is not a cell of its row in {source}")
                for number in QUOTED.finditer(cell):
                    if not _held(number, row_cells):
                        problems.append(f"{readme.name}:{line}: {label}: {number.group(0)} is not in {source}")
    return problems


def documents(root: Path = ROOT) -> list[Path]:
    """The pages checked by default: README.md and every docs/*.md, in that order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m suite.report.readme_check", __doc__)
    p.add_argument("files", nargs="*", type=Path,
                   help="the Markdown files whose marked tables are checked (default: README.md and docs/*.md)")
    p.add_argument("--root", type=Path, default=ROOT, help="the folder the markers' report paths are relative to")
    args = p.parse_args(argv)
    files = args.files or documents(ROOT)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        p.error(f"{missing[0]} is not a file")
    problems = [problem for f in files for problem in mismatches(f, args.root)]
    tables = sum(len(marked_tables(f.read_text(encoding="utf-8"))) for f in files)
    for problem in problems:
        print(problem)
    where = str(files[0]) if len(files) == 1 else f"{len(files)} pages"
    print(f"{where}: {tables} marked tables, " + (f"{len(problems)} numbers or rows not in their reports"
                                                  if problems else "every number is in its report"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
