"""Published results beside a sweep's own: ``suite/report/references/<sweep>.yaml`` and the
agreement of orderings. A board without a reference file has no such section.

A reference file holds ``source``, ``context`` (the published setup), ``metric``, ``columns`` (our
scheme label: theirs), ``tasks`` (our task: their row), ``results`` (their row: {their scheme:
value}) and ``mrr`` ({their scheme: value}). Their numbers and ours need not be the same metric,
so the report compares orderings: per mapped task, the published order against ours (our mean
over out-of-distribution lengths of the headline metric), and the published MRR order against
our OOD MRR, with Kendall's tau (tau-b, which allows ties; Kendall 1945, "The treatment of ties
in ranking problems") and the scheme pairs ordered oppositely.

Two MRRs of our runs stand beside the published one: ours (``ranking.mrr``: cell means ranked
per (task, eval length) cell, our tie margin) and the authors' own computation (``authors_mrr``:
Kazemnejad et al. 2023, McGill-NLP/length-generalization, notebooks/plot_aggregate_final.ipynb,
``compute_mean_reciprocal_rank`` and ``get_mrr_df``), which ranks each seed apart: per (seed, task)
query, the schemes by that seed's accuracy pooled over the whole test split, ties broken by row
order, and a scheme's MRR is the mean of its reciprocal ranks over all queries.
"""
from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.stats import kendalltau

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.ranking import mrr
from suite.report.sections.base import Section

REFERENCES = Path(__file__).parent.parent / "references"
EMPTY = -1.0  # a scheme with no score ranks below every scheme with one, as in the MRR
OURS, THEIRS = "MRR", "MRR, their computation"  # our MRR's row, and the authors' computation on our runs


class References(Section):
    name, order = "references", 80

    def build(self, ctx):
        ref = load(ctx.sweep)
        if not ref:
            return None
        ours = our_scores(ref, ctx.board, ctx.rows)
        return {"reference": ref, "paper": paper_scores(ref), "ours": ours, "agreement": agreement(ref, ours),
                "mrrs": side_by_side(paper_scores(ref), ours), "lengths": test_lengths(ref, ctx.board)}

    def blocks(self, built, ctx):
        return [Heading("Published results"), *(Paragraph(t) for t in texts(built["reference"], built["lengths"])),
                Table(display(built["paper"], "published"), numparse=False),
                Table(display(built["ours"], "ours"), numparse=False),
                Table(display(built["mrrs"], "MRR"), numparse=False),
                Table(built["agreement"], index=False, floatfmt=".2f")]


def load(sweep: str, folder: str | Path = REFERENCES) -> dict | None:
    """The reference file for ``sweep``, or None when there is none."""
    path = Path(folder) / f"{sweep}.yaml"
    if not path.exists():
        return None
    with open(path) as fh:
        return yaml.safe_load(fh)


def order(values: dict[str, float]) -> str:
    """'NoPE > T5 > RoPE = APE': names by value, highest first; equal values joined by '='; a
    scheme without a score (EMPTY) is marked and comes last. Equal values keep their given order."""
    ranked = sorted(values, key=lambda k: -values[k])  # stable: ties keep the given (row) order
    out = ""
    for i, k in enumerate(ranked):
        name = f"{k} (no score)" if values[k] == EMPTY else k
        out += name if i == 0 else (" = " if values[k] == values[ranked[i - 1]] else " > ") + name
    return out


def compare(theirs: dict[str, float], ours: dict[str, float]) -> dict:
    """Agreement of two orderings of the schemes both name: ``paper``, ``ours`` (order strings),
    ``tau`` (Kendall's tau-b; NaN under two schemes or a constant side) and ``differ`` (the pairs
    that one side orders a > b and the other b > a; a tie on either side is no disagreement)."""
    common = [k for k in theirs if k in ours]
    p = {k: theirs[k] for k in common}
    o = {k: ours[k] for k in common}
    tau = math.nan
    if len(common) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tau = float(kendalltau([p[k] for k in common], [o[k] for k in common]).statistic)
    differ = [f"{a}/{b}" for a, b in itertools.combinations(common, 2)
              if np.sign(p[a] - p[b]) * np.sign(o[a] - o[b]) < 0]
    return {"paper": order(p), "ours": order(o), "tau": tau, "differ": differ}


def _ours(values: pd.Series, columns: dict) -> dict[str, float]:
    """Our values under their scheme names, rounded to the published 3 decimals; EMPTY for NaN."""
    return {theirs: EMPTY if pd.isna(values.get(mine)) else round(float(values[mine]), 3)
            for mine, theirs in columns.items() if mine in values.index}


def test_cells(ref: dict, board: pd.DataFrame) -> pd.DataFrame:
    """The board's cells at the published test lengths: beyond training, up to ``max_ratio`` x
    the training length (``max_ratio`` in the reference file; every OOD length when absent)."""
    ratio = board.eval_len / board.train_len
    return board[(ratio > 1) & (ratio <= float(ref.get("max_ratio", math.inf)))]


def test_lengths(ref: dict, board: pd.DataFrame) -> list[int]:
    """Our eval lengths at their test lengths (``test_cells``), in tokens."""
    return sorted({int(e) for e in test_cells(ref, board).eval_len})


def our_scores(ref: dict, board: pd.DataFrame, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Their layout (rows: their tasks and MRR; columns: their schemes) filled with our numbers at
    their test lengths (``test_cells``): each task's mean over those lengths of the cell means, and
    the MRR over those cells of the schemes they rank (ranks within the cells, our tie rule); with ``rows`` (the board's
    ``primary`` rows), the authors' MRR computation on them too (``authors_mrr``, row ``THEIRS``);
    rows we did not run are left out."""
    test = test_cells(ref, board)
    out = {}
    for mine, theirs in ref["tasks"].items():
        t = test[test.task == mine]
        if not t.empty:
            out[theirs] = _ours(t.groupby("scheme")["mean"].mean(), ref["columns"])
    ranked = test[test.scheme.isin(list(ref["columns"]))]  # the schemes they rank, as they rank them
    if not ranked.empty:
        out[OURS] = _ours(mrr(ranked).set_index("scheme").mrr_ood, ref["columns"])
    if rows is not None and not (theirs_mrr := authors_mrr(ref, rows)).empty:
        out[THEIRS] = _ours(theirs_mrr, ref["columns"])
    return pd.DataFrame.from_dict(out, orient="index").reindex(columns=list(ref["columns"].values()))


def authors_mrr(ref: dict, rows: pd.DataFrame) -> pd.Series:
    """Kazemnejad et al. 2023's own MRR (McGill-NLP/length-generalization,
    notebooks/plot_aggregate_final.ipynb, ``compute_mean_reciprocal_rank`` and ``get_mrr_df``) of
    our ``primary`` rows, by our scheme label: each (seed, task) is a query; in it the schemes of
    ``ref["columns"]`` that have that seed are ranked by the seed's accuracy pooled over the whole
    test split, the mean of the headline metric over every eval length beyond training up to
    ``max_ratio`` x it (their builder draws equal example counts per length, and so does ours),
    with ``rank(method="first", ascending=False)``: ties broken by row order, the order the
    reference file lists the schemes in (their table's); a run without a score there has no rank
    (pandas keeps NaN). A scheme's MRR is the mean of its reciprocal ranks over all queries."""
    ratio = rows.eval_len / rows.train_len
    test = rows[(ratio > 1) & (ratio <= float(ref.get("max_ratio", math.inf))) & rows.scheme.isin(list(ref["columns"]))
                & rows.task.isin(list(ref["tasks"]))]
    if test.empty:
        return pd.Series(dtype=float)
    pooled = test.groupby(["seed", "task", "scheme"]).value.mean()  # one accuracy per run over the test split
    order = [s for s in ref["columns"] if s in set(test.scheme)]
    reciprocal = []
    for _, query in pooled.groupby(level=["seed", "task"], sort=True):
        q = query.droplevel(["seed", "task"])
        q = q.reindex([s for s in order if s in q.index])  # their rows, in their order: ties go to the earlier
        reciprocal.append(1.0 / q.rank(method="first", ascending=False))
    return pd.concat(reciprocal, axis=1).mean(axis=1)


def paper_scores(ref: dict) -> pd.DataFrame:
    """The published table: rows their tasks and MRR, columns their schemes."""
    rows = {**ref["results"], "MRR": ref["mrr"]}
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(ref["columns"].values()))


def agreement(ref: dict, ours: pd.DataFrame) -> pd.DataFrame:
    """Per row of ``ours`` (``our_scores``) the published table shares (both our MRRs against the
    published MRR): ``row, paper order, our order, kendall tau, opposite pairs``."""
    paper = paper_scores(ref)
    out = []
    for row in ours.index:
        mine = {k: v for k, v in ours.loc[row].items() if not pd.isna(v)}
        c = compare(paper.loc[OURS if row == THEIRS else row].dropna().to_dict(), mine)
        out.append({"row": row, "paper order": c["paper"], "our order": c["ours"], "kendall tau": c["tau"],
                    "opposite pairs": ", ".join(c["differ"]) or "none"})
    return pd.DataFrame(out, columns=["row", "paper order", "our order", "kendall tau", "opposite pairs"])


def side_by_side(paper: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """The three MRRs, one row each: published (their runs), ours (cell means, our tie rule) and
    the authors' computation on our runs; a row we cannot compute is left out."""
    rows = {"published (their runs, their computation)": paper.loc[OURS]}
    if OURS in ours.index:
        rows["ours: cell means per (task, length), our tie margin"] = ours.loc[OURS]
    if THEIRS in ours.index:
        rows["theirs on our runs: per (seed, task), ties by row order"] = ours.loc[THEIRS]
    return pd.DataFrame(rows).T


def display(t: pd.DataFrame, whose: str) -> pd.DataFrame:
    """Scores to 3 decimals; 'no score' for a scheme we ran without a value, '—' for one we did not run."""
    shown = t.map(lambda v: "—" if pd.isna(v) else "no score" if v == EMPTY else f"{v:.3f}")
    return shown.rename_axis(whose)


AUTHORS_TEXT = ("Three MRRs side by side: the published one; ours, from the same runs as the table above (each scheme's "
                "cell means ranked in each (task, length) cell under our tie margin, over every run); and the authors' "
                "own computation on our runs (Kazemnejad et al. 2023, McGill-NLP/length-generalization, "
                "notebooks/plot_aggregate_final.ipynb: compute_mean_reciprocal_rank, get_mrr_df), which ranks each seed "
                "apart: for every (seed, task) query it ranks the schemes by that seed's accuracy pooled over the whole "
                "test split (the mean over the test lengths, each with as many examples), with ties broken by row order "
                "(pandas rank method 'first', rows in the order of their table's columns), and a scheme's MRR is the "
                "mean of its reciprocal ranks over all queries. Where the two computations on our runs disagree, the "
                "computation, not the runs, makes the difference.")


def texts(ref: dict, lengths: list[int] | None = None) -> list[str]:
    """The section's paragraphs: the source, its setup, and what the tables below compare;
    ``lengths``: our eval lengths at their test lengths (``test_lengths``)."""
    at = f"; on this board {', '.join(map(str, lengths))} tokens" if lengths else ""
    return [f"Source: {ref['source']}", f"Their setup: {ref['context']}",
            f"Published: {ref['metric']}; then ours under their scheme names, at their test lengths (beyond "
            f"training, up to {ref.get('max_ratio', 'the longest')} x the training length{at}): the mean over those "
            f"lengths of our headline metric, and the MRR over those cells. The metrics differ, so compare orderings: "
            f"Kendall's tau between the published and our order of the schemes both report, and the pairs "
            f"ordered oppositely (a tie on either side is no disagreement).",
            AUTHORS_TEXT]
