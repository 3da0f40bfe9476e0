"""How the bench reports print their numbers: Markdown tables with one plain header row
(``plain_table``: pandas' index and column levels flattened to readable names, never a raw tuple)
and CSV files whose measured floats carry 4 significant digits (``csv_text``), written with their
Markdown page by ``write_report``. Shared by ``make bench`` (``suite.bench.perf``) and its GPU part
(``suite.bench.gpu``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.files import write_atomic

NAMES = {"peak_mb": "peak MB", "tokens_per_s": "tokens/s"}
WHOLE = ("length", "steps", "batch", "seq_len")
SIGNIFICANT = 4  # a timing repeats to a few per cent: more digits are noise


def plain_table(t: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """A markdown table with one plain header row: index levels become columns, column levels are
    joined ('peak MB, chunked'), lengths and step counts print as integers, a missing value as '-'."""
    t = t.copy()
    if isinstance(t.columns, pd.MultiIndex):
        t.columns = [", ".join(NAMES.get(str(x), str(x)) for x in c) for c in t.columns]
    t.columns = [NAMES.get(str(c), str(c)) for c in t.columns]
    t = t.reset_index() if t.index.name or isinstance(t.index, pd.MultiIndex) else t
    for c in t.columns:
        if c in WHOLE:
            t[c] = t[c].astype("Int64")
        elif pd.api.types.is_float_dtype(t[c]):
            t[c] = t[c].astype(object).where(t[c].notna(), None)
    return t.to_markdown(index=False, floatfmt=floatfmt, missingval="-")


def significant(value: float, digits: int = SIGNIFICANT) -> float:
    """``value`` rounded to ``digits`` significant digits (21999.11 -> 22000.0, 156.2189 -> 156.2)."""
    return float(f"{value:.{digits}g}")


def csv_text(df: pd.DataFrame, digits: int = SIGNIFICANT) -> str:
    """``df`` as CSV, every float column's values rounded to ``digits`` significant digits (integer
    and text columns as they are, a missing value empty)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(lambda v: significant(v, digits) if pd.notna(v) else v)
    return out.to_csv(index=False)


def write_report(out: Path, measured: pd.DataFrame, text: str) -> None:
    """``out``/bench.csv (``csv_text`` of ``measured``) and ``out``/index.md (``text``), each written
    atomically."""
    out = Path(out)
    write_atomic(out / "bench.csv", csv_text(measured))
    write_atomic(out / "index.md", text)
