"""``python -m suite.report <sweep> [--results results] [--out reports] [--tie min|average]``."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from suite import store
from suite.report import render, tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.report", description="Build a sweep's leaderboard.")
    p.add_argument("sweep", help="sweep name: reads <results>/<sweep>/, writes <out>/<sweep>/")
    p.add_argument("--results", default="results")
    p.add_argument("--out", default="reports")
    p.add_argument("--tie", default="min", choices=tables.TIE_RULES,
                   help="MRR tie rule: min (ties share the best rank) or average")
    p.add_argument("--threshold", type=float, default=render.THRESHOLD, help="effective-length threshold")
    args = p.parse_args(argv)
    folder = Path(args.results) / args.sweep
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.load(folder)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    if df.empty:
        print(f"no results under {folder}", file=sys.stderr)
        return 1
    out = render.write(df, args.sweep, Path(args.out) / args.sweep, args.tie, args.threshold)
    mrr = tables.mrr(tables.leaderboard(df), args.tie)
    print(mrr.to_string(index=False, float_format="{:.3f}".format))
    print(f"report: {out}/index.md, {out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
