"""``posbench summary <folder>`` (``python -m suite.report.summary``): the report's leaderboard in
the terminal, the cells of ``leaderboard.csv``: one row per configuration (``config_hash``),
labelled as the report labels it, task and eval length, on each task's headline metric, with the
mean over seeds, its 95 % interval and the number of seeds. Exits 1 when there is nothing to show,
2 on a folder or ``--metric`` that cannot be one (``suite.results.store.read_source``, ``suite.report.choices``)."""
from __future__ import annotations

import sys

import pandas as pd

from suite.commandline import command, parser


def summary_table(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """The leaderboard cells as ``leaderboard.csv`` holds them (``render.BOARD_CSV``, 4 decimals)."""
    from suite.report import render, tables

    board = tables.leaderboard(df, metric).rename(columns={"n": "n_seeds"})
    return board[render.BOARD_CSV].round(4).reset_index(drop=True)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.summary") -> int:
    p = parser(prog, __doc__)
    p.add_argument("folder", help="a sweep's results folder (results/<sweep>) or a published/<sweep>.jsonl.gz")
    p.add_argument("--metric", default=None, help="score every task by this metric (default: each task's headline metric)")
    args = p.parse_args(argv)
    from suite.report import choices
    from suite.results import store

    df = store.read_source(p.prog, "folder", args.folder)
    choices.check_metric(p.prog, args.metric, {args.folder: df})
    table = summary_table(df, args.metric)
    if table.empty:
        print(f"no results under {args.folder}", file=sys.stderr)
        return 1
    shown = table.assign(interval=[f"[{lo:.4f}, {hi:.4f}]" for lo, hi in zip(table.ci_low, table.ci_high)])
    print(f"{df.run_id.nunique()} runs in {args.folder}, {shown.scheme.nunique()} configurations; "
          "mean over seeds with its 95 % interval:")
    print(shown[["scheme", "task", "eval_len", "metric", "mean", "interval", "n_seeds", "status"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
