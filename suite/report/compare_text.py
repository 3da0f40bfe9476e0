"""The terminal table of ``posbench compare``: the sources named by letter, then per pair (the
first source against each other one) and per task a block of ``scheme, len, A, B, seeds, A - B
[95 % interval], verdict`` that fits ``WIDTH`` columns (a long scheme label is cut to fit; a
scheme with runs that did not learn their task at L is marked per source), and a count of the
verdicts. The per-source intervals are in ``compare.csv`` and ``compare.png``."""
from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from suite.report.difference import VERDICTS
from suite.results.has_learned import learned_mark

WIDTH = 120
GAP = "  "


def letters(sources: list[str]) -> dict[str, str]:
    """{source: 'A'}, 'B', ... in order (then 'S27', ... past Z)."""
    return {s: chr(ord("A") + i) if i < 26 else f"S{i + 1}" for i, s in enumerate(sources)}


def _num(x: float, signed: bool = False) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.3f}" if signed else f"{x:.3f}"


def difference_text(diff: float, low: float, high: float) -> str:
    """'+0.012 [-0.034, +0.058]'; the difference alone when it has no interval; '-' when none."""
    if math.isnan(diff):
        return "-"
    if math.isnan(low):
        return _num(diff, True)
    return f"{_num(diff, True)} [{_num(low, True)}, {_num(high, True)}]"


def _direction(h) -> str:
    return "no better direction" if h is None or pd.isna(h) else "higher is better" if bool(h) else "lower is better"


def _lines(header: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    """Aligned columns (``left`` ones flush left, the rest right), the first cut to fit WIDTH."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    room = WIDTH - sum(widths[1:]) - len(GAP) * (len(widths) - 1)
    if widths[0] > room:
        widths[0] = max(room, 8)
        rows = [[r[0] if len(r[0]) <= widths[0] else r[0][: widths[0] - 1] + "…", *r[1:]] for r in rows]
    def line(r):
        return GAP.join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return [line(header), *(line(r) for r in rows)]


def not_learned_marks(row, letters_of: dict[str, str]) -> str:
    """' (A: 1 of 3 not learned)': the not-learned mark of each source whose runs of the cell's
    row include one that did not learn its task at L (``suite.results.has_learned.learned_mark``)."""
    marks = [f"{letter}: {learned_mark(row[f'not_learned [{s}]'], row[f'runs [{s}]']).strip(' ()')}"
             for s, letter in letters_of.items() if row.get(f"not_learned [{s}]", 0) > 0]
    return f" ({'; '.join(marks)})" if marks else ""


def pair_block(table: pd.DataFrame, first: str, other: str, names: dict[str, str]) -> list[str]:
    """The lines comparing source ``first`` with ``other``: one block per task, then the tally."""
    a, b = names[first], names[other]
    out = []
    for (task, metric), d in table.groupby(["task", "metric"], sort=True):
        lengths = ", ".join(str(int(x)) for x in sorted(d.train_len.dropna().unique()))
        out += ["", f"{task}: {metric}, {_direction(d.higher_is_better.iloc[0])}, L = {lengths}"]
        header = ["scheme", "len", a, b, "seeds", f"{a} - {b} [95 % interval]", "verdict"]
        rows = [[r.scheme + not_learned_marks(r, {first: a, other: b}), str(int(r.eval_len)), _num(r[f"mean [{first}]"]), _num(r[f"mean [{other}]"]),
                 f"{int(r[f'n_seeds [{first}]'])}/{int(r[f'n_seeds [{other}]'])}",
                 difference_text(r[f"diff [{other}]"], r[f"diff_low [{other}]"], r[f"diff_high [{other}]"]),
                 r[f"verdict [{other}]"]] for _, r in d.iterrows()]
        out += _lines(header, rows, left={0, 5, 6})
    tally = Counter(table[f"verdict [{other}]"])
    counts = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
    out += ["", f"{a} against {b}: {len(table)} cells: {counts}"]
    return out


def render(table: pd.DataFrame, sources: list[str], runs: dict[str, int] | None = None) -> str:
    """The whole terminal output of ``compare`` for ``compare_table``'s ``table``."""
    names = letters(sources)
    out = [f"{names[s]}  {s}" + (f" ({runs[s]} runs)" if runs and s in runs else "") for s in sources]
    a, x = names[sources[0]], names[sources[1]] if len(sources) == 2 else "X"
    out.append(f"{a} - {x}: the difference of means over seeds with Welch's 95 % t interval; verdict: {a} against {x}")
    out.append("(one seed against several: the 95 % prediction interval of one draw)")
    for other in sources[1:]:
        if len(sources) > 2:
            out += ["", f"== {names[sources[0]]} against {names[other]} =="]
        out += pair_block(table, sources[0], other, names)
    return "\n".join(out)
