"""``posbench summary <folder>`` (``python -m suite.report.summary``): the report's leaderboard in
the terminal: the headline MRR over every run with its interval (``ranking.mrr_every``, as the
report computes it), then the leaderboard one row per configuration and one column per
task@eval_len (``--long``: the cells of ``leaderboard.csv``, one line each: one row per configuration (``config_hash``),
labelled as the report labels it, task and eval length, schemes in the order of the report's
headline MRR over every run (``ranking.in_order``), on each task's headline metric, with the
mean over seeds and its 95 % interval ('5.71 (n=1)' for a cell without one), the number of runs
behind it (n=5) and how many of them have not learned the task (the mark the report's tables
carry: a run trained to criterion by its check score, any other by its score at the training length,
``suite.results.has_learned``)). ``--csv`` / ``--json`` write the same table machine-readably to stdout
(the columns of ``leaderboard.csv`` and ``runs``; JSON: one object per cell, null for no number).
Exits 1 when there is nothing to show, 2 on a folder or ``--metric`` that cannot be one
(``suite.results.store.read_source``, ``suite.report.choices``)."""
from __future__ import annotations

import sys

import pandas as pd

from suite.commandline import command, parser


def summary_table(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """The leaderboard cells as ``leaderboard.csv`` holds them (``boards.BOARD_CSV``, 4 decimals, in
    the headline MRR's order, ``ranking.in_order``), with ``runs``: how many runs stand behind the
    cell's scheme on its task (``not_learned`` of them have not learned it)."""
    from suite.report import boards, ranking

    board = ranking.in_order(boards.leaderboard(df, metric)).rename(columns={"n": "n_seeds"})
    return board[[*boards.BOARD_CSV, "runs"]].round(4).reset_index(drop=True)


def terminal_table(table: pd.DataFrame) -> pd.DataFrame:
    """``summary_table`` as the terminal shows it: 'mean [low, high]' or 'mean (n=1)'
    (``boards.cell_text``), 'n=3' seeds with a value, and '1 of 3' runs not learned."""
    from suite.report import boards

    cells = [boards.EMPTY if n == 0 else boards.cell_text(m, lo, hi, n, digits=4)
             for m, lo, hi, n in zip(table["mean"], table.ci_low, table.ci_high, table.n_seeds)]
    marks = [f"{k} of {r}" if k else "" for k, r in zip(table.not_learned, table.runs)]
    return pd.DataFrame({"scheme": table.scheme, "task": table.task, "eval_len": table.eval_len, "metric": table.metric,
                         "mean [95 % interval]": cells, "n": [f"n={n}" for n in table.n_seeds],
                         "not learned": marks, "status": table.status})


def mrr_table(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """The report's headline MRR (``ranking.mrr_every``: every run, learned or not, with its 95 %
    bootstrap interval over tasks and seeds), setting by setting, best first, as the terminal shows
    it: the OOD MRR with its interval, the all-cells MRR and the cells each is ranked on."""
    from suite.report import boards, ranking

    rows = boards.primary(df, metric)
    table = ranking.mrr_every(boards.board_of(rows), rows)

    def interval(point, low, high) -> str:
        return "-" if pd.isna(point) else boards.cell_text(point, low, high, 2, digits=3)

    return pd.DataFrame({
        "scheme": table.scheme,
        "OOD MRR [95 % interval]": [interval(*v) for v in zip(table.mrr_ood, table.mrr_ood_low, table.mrr_ood_high)],
        "all-cells MRR": [interval(*v) for v in zip(table.mrr_all, table.mrr_all_low, table.mrr_all_high)],
        "OOD cells": table.cells_ood, "cells": table.cells_all})


def wide_table(table: pd.DataFrame, interval: bool = False, digits: int = 4) -> pd.DataFrame:
    """``summary_table`` as one row per scheme (in its order) and one column per ``task@eval_len``:
    the mean over seeds, '-' for an empty cell; with ``interval``, '0.9000 ± 0.0500' (the half
    width of the 95 % interval, where the cell has one)."""
    def cell(row) -> str:
        if row.n_seeds == 0 or pd.isna(row["mean"]):
            return "-"
        text = f"{row['mean']:.{digits}f}"
        if interval and not (pd.isna(row.ci_low) or pd.isna(row.ci_high)):
            text += f" ± {(row.ci_high - row.ci_low) / 2:.{digits}f}"
        return text

    long = table.assign(column=[f"{t}@{int(n)}" for t, n in zip(table.task, table.eval_len)],
                        text=[cell(row) for _, row in table.iterrows()])
    wide = long.pivot(index="scheme", columns="column", values="text")
    columns = long.drop_duplicates("column").sort_values(["task", "eval_len"]).column
    return wide.loc[list(dict.fromkeys(table.scheme)), list(columns)].fillna("-").rename_axis(index=None, columns=None)


def write_machine(table: pd.DataFrame, kind: str) -> None:
    """``table`` to stdout as CSV (a header row, then one row per cell) or JSON (a list of objects)."""
    if kind == "csv":
        table.to_csv(sys.stdout, index=False)
    else:
        sys.stdout.write(table.to_json(orient="records", indent=1) + "\n")


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.summary") -> int:
    p = parser(prog, __doc__)
    p.add_argument("folder", help="a sweep's results folder (results/<sweep>) or a published/<sweep>.jsonl.gz")
    p.add_argument("--metric", default=None, help="score every task by this metric (default: each task's headline metric)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--csv", dest="form", action="store_const", const="csv",
                      help="write the table to stdout as CSV, the columns of the report's leaderboard.csv plus runs")
    form.add_argument("--json", dest="form", action="store_const", const="json",
                      help="write the table to stdout as JSON: a list of one object per cell, null for no number")
    form.add_argument("--long", dest="form", action="store_const", const="long",
                      help="print one line per cell (mean, interval, seeds, runs not learned) instead of the MRR "
                           "table and the wide leaderboard")
    args = p.parse_args(argv)
    from suite.report import choices
    from suite.results import store

    df = store.read_source(p.prog, "folder", args.folder)
    choices.check_metric(p.prog, args.metric, {args.folder: df})
    table = summary_table(df, args.metric)
    if table.empty:
        print(f"no results under {args.folder}", file=sys.stderr)
        return 1
    if args.form in ("csv", "json"):
        write_machine(table, args.form)
        return 0
    if args.form == "long":
        print(f"{df.run_id.nunique()} runs in {args.folder}, {table.scheme.nunique()} configurations; mean over "
              "seeds with its 95 % interval, n: seeds with a value, not learned: runs below the line at the training "
              "length (on their check set, for runs trained to criterion):")
        print(terminal_table(table).to_string(index=False))
        return 0
    print(f"{df.run_id.nunique()} runs in {args.folder}, {table.scheme.nunique()} configurations; MRR over every "
          "run, setting by setting, best first, with its 95 % interval over tasks and seeds:")
    print(mrr_table(df, args.metric).to_string(index=False))
    print("\nleaderboard: mean over seeds per task@eval_len (--long: intervals, seeds and runs not learned):")
    print(wide_table(table).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
