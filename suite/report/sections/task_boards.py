"""Each task's board: scheme x eval length, the mean over seeds with its 95 % interval, best
scheme first, and its plot; then, for a task whose evaluation mixes splits drawn from different
distributions (flip-flop's in_dist, sparse, dense), the board of each split alone.
leaderboard.csv holds every cell (schemes in the headline MRR's order), splits.csv every split's."""
from __future__ import annotations

import re

import pandas as pd

from suite.report.blocks import Heading, Image, Paragraph, Table
from suite.report.boards import BOARD_CSV, pivot
from suite.report.ranking import in_order
from suite.report.plots import line_styles, plot_task
from suite.report.sections.base import Section

SPLIT_TEXT = ("The task's evaluation set mixes splits drawn from different distributions, not all of which it "
              "is trained on (flipflop: in_dist is its training distribution); each table below scores the "
              "examples of one split alone, cells as above. splits.csv holds them.")


class TaskBoards(Section):
    name, order = "task_boards", 40
    csv_names = ("leaderboard.csv", "splits.csv")

    def build(self, ctx):
        """{task: [(split, its board), ...]} for every task of the board (no split: [])."""
        return {task: [(split, board) for (t, split), board in ctx.splits.items() if t == task] for task in ctx.tasks}

    def blocks(self, built, ctx):
        out = []
        for task, splits in built.items():
            out += [Heading(task), Table(pivot(ctx.board, task)), Image(task, task)]
            for i, (split, board) in enumerate(splits):
                out += [Heading(f"{task}, split {split}", 3)] + ([Paragraph(SPLIT_TEXT)] if i == 0 else [])
                out += [Table(pivot(board, task)), Image(split_plot(task, split), f"{task}, split {split}")]
        return out

    def csvs(self, built, ctx):
        board = in_order(ctx.board, ctx.tie).rename(columns={"n": "n_seeds"})  # schemes as the headline MRR orders them
        out = {"leaderboard.csv": board[BOARD_CSV].round(4).to_csv(index=False)}
        if ctx.splits:
            splits = pd.concat([b.rename(columns={"n": "n_seeds"})[BOARD_CSV].assign(split=split)
                                for (_, split), b in ctx.splits.items()])
            out["splits.csv"] = splits[BOARD_CSV[:3] + ["split"] + BOARD_CSV[3:]].round(4).to_csv(index=False)
        return out

    def plots(self, built, ctx):
        """Each task's plot and each split's, every scheme in the report's style (on a board ranked
        setting by setting, every scheme's name within its setting: ``plots.line_styles``)."""
        looks = line_styles([ctx.board, *ctx.splits.values()]) if ctx.setting_order else ctx.styles
        out = {task: plot_task(ctx.board, task, looks) for task in built}
        for (task, split), board in ctx.splits.items():
            out[split_plot(task, split)] = plot_task(board, task, looks, title=f"{task}, split {split}")
        return out


def split_plot(task: str, split: str) -> str:
    """The name of a split's plot: plots/<task>.<split>.png ('flipflop.in_dist')."""
    return f"{task}.{re.sub(r'[^A-Za-z0-9_-]', '_', split)}"
