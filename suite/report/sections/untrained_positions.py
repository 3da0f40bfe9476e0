"""Untrained positions: the share of the learned position parameters read at each evaluation length
that training never read, per scheme, beside the scores.

A scheme with learned parameters indexed by position (T5's relative-position buckets, Raffel et al.
2020; a learned absolute table's rows, as GPT's; CoPE's position columns, Golovneva et al. 2024)
declares which of them attention reads at a length (``PositionScheme.position_entries``), and each
run stores, per task and evaluation length, the share of those entries that its training length
never read (the ``untrained_positions`` measurement, ``suite.evaluation.evaluate``). An entry that
no training step read never received a gradient and holds its initial value (a T5 bucket its zero
start, a table row its random draw), so a score that reads it measures the initialization, not
what the scheme learned. The table is scheme x evaluation length, mean over the runs (the share
depends only on the configuration, so the runs agree); untrained_positions.csv holds it. Boards
whose runs stored no such rows (no scheme with position-indexed parameters: RoPE, ALiBi, NoPE)
have no such section.
"""
from __future__ import annotations

import pandas as pd

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import scheme_label
from suite.report.sections.base import Section

METRIC = "untrained_positions"
CSV = "untrained_positions.csv"
TEXT = ("Share of the learned position parameters read at each evaluation length that training never "
        "read: T5's relative-position buckets, a learned absolute table's rows, CoPE's position columns "
        "(pooled over a model's schemes). Such an entry never received a gradient and still holds its "
        "initial value (a T5 bucket its zero start, a table row its random draw), so a score at that length "
        "partly measures the initialization rather than what the scheme learned. 0: every entry read was "
        "trained (T5 with max_distance at the training length clamps far offsets into a trained bucket); a "
        "learned table is untrained beyond the training length by construction (1/2 of its rows at 2x, 3/4 at "
        "4x), which is reported, not fixed. Mean over runs; columns: evaluation length (x training length).")


class UntrainedPositions(Section):
    name, order = "untrained_positions", 45
    csv_names = (CSV,)

    def build(self, ctx):
        t = untrained_table(ctx.df, ctx.rows)
        return None if t.empty else t

    def blocks(self, built, ctx):
        return [Heading("Untrained position parameters"), Paragraph(TEXT),
                Table(display(built), index=False, floatfmt=".2f", id="untrained-positions")]

    def csvs(self, built, ctx):
        return {CSV: built.round(4).to_csv(index=False)}


def untrained_table(df: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Long table (scheme, train_len, eval_len, len_ratio, share, runs) of the stored
    ``untrained_positions`` rows (slice 'all', status ok), mean over tasks and runs. A run's scheme
    is the label its headline rows carry on the board (``rows``: ``boards.primary``, split where a
    label covers several configurations, 't5 max_distance=128'), else ``scheme_label``."""
    columns = ["scheme", "train_len", "eval_len", "len_ratio", "share", "runs"]
    if df.empty or "metric" not in df:
        return pd.DataFrame(columns=columns)
    d = df[(df.metric == METRIC) & (df.slice == "all") & (df.status == "ok")].copy()
    if d.empty:
        return pd.DataFrame(columns=columns)
    d["scheme"] = d.apply(scheme_label, axis=1)
    if len(rows):
        named = rows.drop_duplicates(["run_id", "task"]).set_index(["run_id", "task"]).scheme
        on_board = pd.Series(named.reindex(pd.MultiIndex.from_frame(d[["run_id", "task"]])).to_numpy(), index=d.index)
        d["scheme"] = on_board.where(on_board.notna(), d.scheme)
    g = d.groupby(["scheme", "train_len", "eval_len"], sort=True)
    out = g.agg(share=("value", "mean"), runs=("run_id", "nunique")).reset_index()
    out["len_ratio"] = out.eval_len / out.train_len
    return out[columns]


def display(t: pd.DataFrame) -> pd.DataFrame:
    """Scheme (and training length L) x evaluation length, 'n (r x)' headers, '-' where a scheme
    has no row at that length (unsupported there, or not evaluated)."""
    wide = t.pivot_table(index=["scheme", "train_len"], columns="eval_len", values="share", aggfunc="mean")
    ratios = t.groupby("eval_len").len_ratio.first()
    single = t.train_len.nunique() == 1
    wide.columns = [f"{n} ({ratios[n]:g}x)" if single else str(n) for n in wide.columns]
    wide = wide.reset_index().rename(columns={"train_len": "L"})
    cells = wide.drop(columns=["scheme", "L"]).map(lambda v: "-" if pd.isna(v) else f"{v:.2f}")
    return pd.concat([wide[["scheme", "L"]].astype({"L": int}), cells], axis=1)
