"""What ``posbench rank`` (``suite.commands.rank``) shows and writes once the arm's runs are stored:
the board with the arm among its schemes, built and saved by the report's own code
(``suite.report.render``) under ``<out>/report/``; the arm's place, its paired differences and the
MRR shift (``suite.report.placement``) in ``rank.md`` (also printed) and ``rank.csv``; and the arm's
runs that are not like for like with the board in a section of their own, never ranked."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite import files
from suite.report import placement
from suite.report.blocks import Alert, Heading, Paragraph, Table

ARM = "arm"  # the arm's rows' source: its cells are its own, labelled '<scheme> [arm]'


def _interval(m, lo, hi) -> str:
    return "-" if pd.isna(m) else f"{m:.2f} [{lo:.2f}, {hi:.2f}]"


SEPARATION = {"yes": "separated", "no": "not separated (the intervals overlap)",
              "n/a": "separation not judged (both intervals are single points: one seed of one task leaves the "
                     "bootstrap nothing to resample)"}


def verdict(p, table: pd.DataFrame, subset: str | None) -> str:
    """One line of the arm's place (a ``placement.place`` row): its OOD MRR with its interval, and
    whether that interval is separated from those of the schemes above and below it."""
    at = table.set_index("scheme")
    sides = [f"{side} {p[side]} {_interval(*at.loc[p[side], ['mrr_ood', 'mrr_ood_low', 'mrr_ood_high']])}: "
             f"{SEPARATION[p[f'separated_{side}']]}" for side in ("above", "below") if p[side]]
    where = f" in setting {p['setting']}" if p["setting"] else ""
    on = " on a subset of the board's grid (not like for like)" if subset else ""
    return (f"{p['scheme']} places {p['place']} of {p['of']}{where} by OOD MRR{on}: "
            f"{_interval(p['mrr_ood'], p['mrr_ood_low'], p['mrr_ood_high'])}" + "".join(f"; {s}" for s in sides))


def ranked(r, arm_schemes: list[str], tie: str) -> tuple[list, dict]:
    """(blocks, CSV tables) of a report ``r`` holding the arm: its place, the MRR table, the paired
    differences against each published scheme and the MRR shift."""
    table, board = r["mrr"], r["board"]
    places = placement.place(table, arm_schemes)
    shown = table.assign(**{"OOD MRR [95 %]": [_interval(*v) for v in table[["mrr_ood", "mrr_ood_low", "mrr_ood_high"]]
                                                 .itertuples(index=False)]})
    shown = shown[["scheme", "OOD MRR [95 %]", "mrr_all", "cells_ood", *(["learned"] if "learned" in shown else [])]]
    blocks = [Heading("Place by OOD MRR (95 % bootstrap interval)"),
              *(Paragraph(verdict(p, table, r.context.coverage)) for _, p in places.iterrows()),
              Table(shown.set_index("scheme"))]
    csvs = {"place": places, "mrr": table}
    for arm in arm_schemes:
        diffs = placement.paired_differences(board, arm)
        blocks += [Heading(f"{arm} against each published scheme, out-of-distribution cells"),
                   Paragraph("mean_diff: the arm's headline score minus theirs, cell by cell, signed so that positive "
                             "is the arm better; better/tied/worse by the metric's tie margin."),
                   Table(diffs.set_index("scheme"))]
        csvs[f"paired {arm}"] = diffs
    shift = placement.mrr_shift(board, arm_schemes, tie)
    blocks += [Heading("What adding the arm does to each published scheme's OOD MRR"), Table(shift.set_index("scheme"))]
    csvs["mrr shift"] = shift
    return blocks, csvs


def unlike_blocks(arm: pd.DataFrame, unlike: dict) -> tuple[list, pd.DataFrame]:
    """The section of the arm's runs that are not like for like with the board: their cells
    (``boards.leaderboard``) and, per run, what differs. Never ranked."""
    from suite.report import boards

    rows = arm[arm.run_id.isin(list(unlike))]
    if rows.empty:
        return [], pd.DataFrame()
    cells = boards.leaderboard(rows)[["scheme", "task", "eval_len", "metric", "mean", "n"]]
    why = pd.DataFrame([{"run": rid, "differs": "; ".join(d)} for rid, d in unlike.items() if rid in set(rows.run_id)])
    return [Heading("Not like for like (never ranked with the board)"),
            Alert("These runs differ from every configuration of the board; they are shown apart and not ranked."),
            Table(why.set_index("run"), numparse=False), Table(cells.set_index("scheme"))], cells


def publish(prog: str, args, name: str, out: Path, grid, published: pd.DataFrame, arm: pd.DataFrame,
            unlike: dict) -> None:
    """Build the board with the arm's like-for-like runs among its schemes, save its report under
    ``out/report``, write rank.md and rank.csv, and print rank.md and where everything went."""
    from suite.report import render, to_markdown

    if grid.subset:
        published = published[published.task.isin(grid.tasks) & published.seed.isin(grid.seeds)]
    like = arm[~arm.run_id.isin(list(unlike))]
    blocks = [Heading(f"{name}: {' '.join(args.overrides)} on the {args.board} board", 1)]
    blocks += [Alert(grid.subset)] if grid.subset else []
    csvs: dict[str, pd.DataFrame] = {}
    if like.empty:
        blocks.append(Alert("No run of the arm is like for like with the board: nothing was ranked."))
    else:
        df = pd.concat([published.assign(source=None), like.assign(source=ARM)], ignore_index=True)
        r = render.build(df, name, args.tie, source=f"{args.board} published rows and {out / 'results' / name}",
                         coverage=grid.subset)
        render.save(r, out / "report")
        more, csvs = ranked(r, sorted(r["rows"].scheme[r["rows"].source == ARM].unique()), args.tie)
        blocks += [*more, Paragraph(f"The board's report with the arm: {out / 'report' / 'index.md'}")]
    apart, cells = unlike_blocks(arm, unlike)
    blocks += apart
    csvs |= {"not like for like": cells} if not cells.empty else {}
    text = to_markdown.render(blocks)
    files.write_atomic(out / "rank.md", text)
    long = pd.concat([t.assign(table=k) for k, t in csvs.items()], ignore_index=True) if csvs else pd.DataFrame()
    files.write_atomic(out / "rank.csv", long.to_csv(index=False))
    print(text)
    print(f"wrote {out / 'rank.md'}, {out / 'rank.csv'}" + ("" if like.empty else f" and {out / 'report'}/"))
