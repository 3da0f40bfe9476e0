"""``python -m suite.report <sweep> [--results results] [--from auto|results|published] [--beside PATH ...]
[--out DIR] [--tie min|average] [--metric METRIC] [--threshold X] [--wandb offline|online [--project P] [--entity E]]
[--force]``.

The rows come from ``<results>/<sweep>/`` (your runs) or, with ``--from published`` or when that
folder holds none, from the sweep's shipped rows ``published/<sweep>.jsonl.gz``
(``suite.results.store``). ``--beside`` adds other sources (a results folder or a shipped file),
each configuration of each source in cells of its own, labelled by the source. ``--out`` is
checked before any work (``suite.commandline.check_output``); every source and ``--metric`` is
checked as every command checks them (``store.read_source``, ``suite.report.choices``).

Where it goes: a board built from its own shipped rows as they are (``published/<sweep>.jsonl.gz``,
no ``--beside``, the default metric, tie rule and threshold) is the published one and goes to
``reports/<sweep>/``; any other (your runs, a reduced or partial sweep, runs beside the board,
another metric) goes to the git-ignored ``reports-local/<sweep>/``, and the command says so.
``--out`` picks another folder, but never ``reports/`` for a board that is not the published one.

A board that holds fewer runs than the sweep declares (``suite.report.declared``: the distinct runs
of conf/sweep/<sweep>.yaml's sweeper params) says "k of N runs" at the top of index.md, index.html
and the terminal's output. A board with fewer runs than the report already under ``--out``
(its index.md's Provenance count) is refused, naming both counts, unless ``--force``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from suite import files
from suite.commandline import Refused, check_output, command, parser, warnings_on_stderr
from suite.report import choices
from suite.results import store

# the tables, statistics and plots are imported by ``main`` after parsing, so --help answers before they load
SHIPPED_OUT, LOCAL_OUT = "reports", "reports-local"  # the published boards' reports (tracked); every other build (ignored)
OUT_HELP = (f"where the report goes, as <out>/<sweep>/ (default: {SHIPPED_OUT}/ for a board built from its own shipped "
            f"rows as they are, else {LOCAL_OUT}/)")


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = parser(prog, "Build a sweep's leaderboard.")
    p.add_argument("sweep", help="sweep name: reads <results>/<sweep>/, writes <out>/<sweep>/")
    p.add_argument("--results", default="results", help="the folder of results folders, one per sweep (default: results)")
    p.add_argument("--from", dest="source", default="auto", choices=["auto", "results", "published"],
                   help="auto: <results>/<sweep>/ when it holds runs, else published/<sweep>.jsonl.gz")
    p.add_argument("--published", default=store.PUBLISHED, help="the folder of shipped result files")
    p.add_argument("--beside", action="append", default=[], metavar="PATH",
                   help="also show the runs of PATH (a results folder or a .jsonl.gz), in cells of their own")
    p.add_argument("--out", default=None, help=OUT_HELP)
    p.add_argument("--tie", default="min", choices=choices.TIE_RULES,
                   help="MRR tie rule: min (ties share the best rank) or average")
    p.add_argument("--metric", default=None,
                   help="score every task by this metric (default: each task's own headline metric)")
    p.add_argument("--threshold", type=float, default=choices.EFFECTIVE_AT,
                   help=f"effective-length threshold: the longest length a scheme scores at least this at "
                        f"(default {choices.EFFECTIVE_AT})")
    p.add_argument("--wandb", choices=["offline", "online"], default=None,
                   help="also log the leaderboard and MRR to W&B as tables (offline: sync later)")
    p.add_argument("--project", default=None, help="W&B project for --wandb (default: the config's logger.project)")
    p.add_argument("--entity", default=None, help="W&B entity for --wandb (default: the config's logger.entity)")
    p.add_argument("--force", action="store_true",
                   help="replace a report under --out that holds more runs than this one (make report FORCE=1)")
    return p


def read_rows(p: argparse.ArgumentParser, args) -> tuple[pd.DataFrame, Path]:
    """(the sweep's rows, with those of every --beside source; where the sweep's came from): its
    results folder, else its shipped rows. The store's warnings are printed; a --beside that is
    no source, or holds no run, is refused (``store.read_source``)."""
    folder, published = Path(args.results) / args.sweep, store.shipped_path(args.sweep, args.published)
    for extra in args.beside:
        if (problem := store.source_problem(extra)) is not None:
            raise Refused(f"{p.prog}: error: --beside {extra!r}: {problem}", 2)
    with warnings_on_stderr():
        df = store.load(folder) if args.source != "published" and folder.is_dir() else store.load_empty()
        source = folder
        if df.empty and args.source != "results" and store.is_shipped(published):
            df, source = store.load(published), published
    if df.empty:
        return df, source
    beside = [store.read_source(p.prog, "--beside", extra).assign(source=str(extra)) for extra in args.beside]
    if source != folder:
        print(f"reading the published rows {source} ({df.run_id.nunique()} runs)")
    return pd.concat([df.assign(source=None), *beside], ignore_index=True), source


def not_published(args, source) -> str | None:
    """Why the report of ``args`` built from ``source`` is not the sweep's published board, or
    None when it is: the board's own shipped rows, as they are."""
    if Path(source).resolve() != store.shipped_path(args.sweep, store.PUBLISHED).resolve():
        return f"it is built from {source}, not the board's shipped rows {store.shipped_path(args.sweep, store.PUBLISHED)}"
    changed = [what for what, on in (("--beside", args.beside), ("--metric", args.metric is not None),
                                     ("--tie", args.tie != "min"), ("--threshold", args.threshold != choices.EFFECTIVE_AT))
               if on]
    return f"{', '.join(changed)} change{'s' if len(changed) == 1 else ''} the board" if changed else None


def destination(prog: str, args, source) -> Path:
    """The folder the report fills: ``<out>/<sweep>`` where --out is given, else under
    ``SHIPPED_OUT`` for the published board and ``LOCAL_OUT`` for any other (said on stdout);
    --out naming ``SHIPPED_OUT`` for a board that is not the published one is refused (2)."""
    why = not_published(args, source)
    if args.out is None:
        out = Path(LOCAL_OUT if why else SHIPPED_OUT)
        if why:
            print(f"{args.sweep}: not the published board ({why}): the report goes to {out / args.sweep}/ "
                  f"(git-ignored); {SHIPPED_OUT}/{args.sweep}/ is rebuilt only from its shipped rows "
                  f"(make report SWEEP={args.sweep} FROM=published) or by make publish")
    else:
        out = Path(args.out)
        if why and out.resolve() == Path(SHIPPED_OUT).resolve():
            raise Refused(f"{prog}: error: --out {args.out}: {SHIPPED_OUT}/{args.sweep}/ holds the published board, "
                          f"and {why}; leave --out out to write it under {LOCAL_OUT}/{args.sweep}/. Nothing was written", 2)
    check_output(prog, "--out", out)
    check_output(prog, "--out", out / args.sweep)  # the folder the report fills
    return out / args.sweep


def check_replace(prog: str, args, runs: int, total: int | None) -> None:
    """Refuse (``Refused``, 1) to write a board of ``runs`` runs (of the ``total`` its sweep
    declares) over one under --out that holds more (``declared.written_runs``), unless --force: an
    interrupted sweep must not silently replace a fuller published report."""
    from suite.report import declared

    out = args.report_dir
    written = declared.written_runs(out)
    if written is not None and runs < written and not args.force:
        raise Refused(f"{prog}: error: {out}/index.md holds a board of {written} runs; this one has "
                      f"{declared.held(runs, total)}. Nothing was written; pass --force (make report FORCE=1) to "
                      "replace it", 1)


def console_mrr(r) -> pd.DataFrame:
    """The MRR table as the terminal shows it: the report's (``r``: ``render.Report``), with the runs
    behind each of a scheme's cells ('n=3'; 'n=2-3' where its tasks differ) and the tasks on which
    some did not learn (the report's mark)."""
    from suite.report.sections.mrr import mrr_display

    shown = mrr_display(r["mrr"], r["mrr_marks"])
    runs = r["board"].drop_duplicates(["scheme", "task"]).groupby("scheme").runs.agg(["min", "max"])
    counts = [f"n={lo}" if lo == hi else f"n={lo}-{hi}" for lo, hi in runs.loc[r["mrr"].scheme].to_numpy()]
    shown.insert(list(shown.columns).index("cells all") + 1, "runs", counts)
    return shown


def publish(r, args) -> Path:
    """Write the built report ``r`` (``render.Report``) under --out, print its MRR, and log it to
    W&B when asked."""
    from suite.report import render

    if r["warning"]:
        print(f"warning: {r['warning']}", file=sys.stderr)
    out = render.save(r, args.report_dir)
    print(console_mrr(r).to_string(index=False))
    if r.get("settings"):
        from suite.report.sections import settings

        print(f"\n{settings.TITLE} {r['settings']['finding']}")
        print(settings.ranking_display(r["settings"]).to_string())
        print(settings.tau_display(r["settings"]).to_string(index=False))
    if args.wandb:
        from suite.report.to_wandb import log_report

        where = log_report(r["board"], r["mrr"], args.sweep, mode=args.wandb, project=args.project, entity=args.entity,
                           results_dir=args.results)
        print(f"W&B ({args.wandb}): {where}")
    print(f"report: {out}/index.md, {out}/index.html")
    return out


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report") -> int:
    p = build_parser(prog)
    args = p.parse_args(argv)
    if (problem := files.sweep_name_problem(args.sweep)) is not None:  # it names a folder under --out too
        p.exit(2, f"{p.prog}: error: sweep {problem}\n")
    if args.out is not None:  # checked before any work; the default's folder once the rows say which it is
        check_output(p.prog, "--out", args.out)
    if args.wandb:
        check_output(p.prog, "--results", args.results)  # --wandb writes its run under <results>/<sweep>/wandb
    df, source = read_rows(p, args)
    if df.empty:
        folder = Path(args.results) / args.sweep
        where = folder if args.source == "results" else f"{folder} or {store.shipped_path(args.sweep, args.published)}"
        print(f"no results under {where}", file=sys.stderr)
        return 1
    choices.check_metric(p.prog, args.metric, {str(source): df})
    args.report_dir = destination(p.prog, args, source)
    build_and_publish(p.prog, args, df, source)
    return 0


def build_and_publish(prog: str, args, df: pd.DataFrame, source) -> None:
    """Count the board's runs against its sweep's (refusing to replace a fuller report), build it
    and write it, each phase said on stderr."""
    from suite.report import declared, render

    phase = lambda text: print(f"{args.sweep}: {text}", file=sys.stderr, flush=True)  # noqa: E731
    phase(f"read {df.run_id.nunique()} runs ({len(df):,} rows) from {source}"
          + (f" and {len(args.beside)} --beside source(s)" if args.beside else ""))
    runs = int(df[df.source.isna()].run_id.nunique())  # the sweep's own, not those --beside it
    total = declared.declared_runs(args.sweep, runs)
    check_replace(prog, args, runs, total)
    if coverage := declared.coverage(args.sweep, runs, total):
        print(coverage)
    phase(f"building the board: {df.task.nunique()} task(s), the MRR's bootstrap intervals, the power section")
    built = render.build(df, args.sweep, args.tie, args.threshold, args.metric, source=str(source), coverage=coverage)
    phase(f"writing the board ({len(built['board'])} cells), its plots and pages under {args.report_dir}")
    publish(built, args)


if __name__ == "__main__":
    sys.exit(main())
