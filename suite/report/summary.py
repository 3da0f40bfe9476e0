"""``posbench summary <folder>`` (``python -m suite.report.summary``): the report's leaderboard in
the terminal, the cells of ``leaderboard.csv``: one row per configuration (``config_hash``),
labelled as the report labels it, task and eval length, schemes in the order of the report's
headline MRR over every run (``ranking.in_order``), on each task's headline metric, with the
mean over seeds and its 95 % interval ('5.71 (n=1)' for a cell without one), the number of runs
behind it (n=5) and how many of them have not learned the task (the mark the report's tables
carry: a run trained to criterion by its check score, any other by its score at the training length,
``suite.results.has_learned``). ``--csv`` / ``--json`` write the same table machine-readably to stdout
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
    args = p.parse_args(argv)
    from suite.report import choices
    from suite.results import store

    df = store.read_source(p.prog, "folder", args.folder)
    choices.check_metric(p.prog, args.metric, {args.folder: df})
    table = summary_table(df, args.metric)
    if table.empty:
        print(f"no results under {args.folder}", file=sys.stderr)
        return 1
    if args.form:
        write_machine(table, args.form)
        return 0
    print(f"{df.run_id.nunique()} runs in {args.folder}, {table.scheme.nunique()} configurations; mean over seeds "
          "with its 95 % interval, n: seeds with a value, not learned: runs below the line at the training length "
          "(on their check set, for runs trained to criterion):")
    print(terminal_table(table).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
