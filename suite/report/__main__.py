"""``python -m suite.report <sweep> [--results results] [--out reports] [--tie min|average]
[--metric METRIC] [--threshold X] [--wandb offline|online [--project P] [--entity E]]``."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from suite import files
from suite.results import store
from suite.results.metrics import METRICS
from suite.report import render, tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.report", description="Build a sweep's leaderboard.")
    p.add_argument("sweep", help="sweep name: reads <results>/<sweep>/, writes <out>/<sweep>/")
    p.add_argument("--results", default="results")
    p.add_argument("--out", default="reports")
    p.add_argument("--tie", default="min", choices=tables.TIE_RULES,
                   help="MRR tie rule: min (ties share the best rank) or average")
    p.add_argument("--metric", default=None,
                   help="score every task by this metric (default: each task's own headline metric)")
    p.add_argument("--threshold", type=float, default=render.THRESHOLD, help="effective-length threshold")
    p.add_argument("--wandb", choices=["offline", "online"], default=None,
                   help="also log the leaderboard and MRR to W&B as tables (offline: sync later)")
    p.add_argument("--project", default=None, help="W&B project for --wandb (default: the config's logger.project)")
    p.add_argument("--entity", default=None, help="W&B entity for --wandb (default: the config's logger.entity)")
    args = p.parse_args(argv)
    if (problem := files.sweep_name_problem(args.sweep)) is not None:  # it names a folder under --out too
        p.exit(2, f"{p.prog}: error: sweep {problem}\n")
    folder = Path(args.results) / args.sweep
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.load(folder)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    if df.empty:
        print(f"no results under {folder}", file=sys.stderr)
        return 1
    ranked = sorted(m for m in set(df.metric) if m in METRICS and METRICS[m].higher_is_better is not None)
    if args.metric is not None and args.metric not in ranked:
        why = ("a measurement with no better direction, not a score" if args.metric in METRICS
               and args.metric in set(df.metric) else f"no stored row under {folder} has it")
        p.exit(2, f"{p.prog}: error: --metric {args.metric!r}: {why}; valid: {', '.join(ranked)}\n")
    r = render.build(df, args.sweep, args.tie, args.threshold, args.metric)
    if r["warning"]:
        print(f"warning: {r['warning']}", file=sys.stderr)
    out = render.save(r, Path(args.out) / args.sweep)
    print(render.mrr_display(r["mrr"]).to_string(index=False))
    if args.wandb:
        from suite.report.to_wandb import log_report

        where = log_report(r["board"], r["mrr"], args.sweep, mode=args.wandb, project=args.project, entity=args.entity,
                           results_dir=args.results)
        print(f"W&B ({args.wandb}): {where}")
    print(f"report: {out}/index.md, {out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
