"""The board's headline ranking: Mean Reciprocal Rank over (task x eval length) cells, the
ranking of Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"), over cells beyond the training length and over every cell, each with a 95 %
bootstrap interval; over the learned runs, with the MRR over every run beside it
(``ranking.mrr_learned``, built once in the report's context). mrr.csv holds the numbers.
"""
from __future__ import annotations

import pandas as pd

from suite.report.blocks import Heading, Paragraph, Table
from suite.report.boards import EMPTY
from suite.report.ranking import BOOTSTRAP_REPS, BOOTSTRAP_SEED
from suite.report.sections.base import Section
from suite.data.metrics import LEARNED_AT, TIED_BELOW

MRR_CSV = ["scheme", "mrr_ood", "mrr_ood_low", "mrr_ood_high", "mrr_all", "mrr_all_low", "mrr_all_high",
           "cells_ood", "cells_all", "mrr_ood_every_run", "mrr_ood_every_run_low", "mrr_ood_every_run_high",
           "mrr_all_every_run", "mrr_all_every_run_low", "mrr_all_every_run_high"]


class MRR(Section):
    name, order = "mrr", 20
    csv_names = ("mrr.csv",)

    def build(self, ctx):
        return ctx.mrr

    def blocks(self, built, ctx):
        return [Heading("Mean Reciprocal Rank"), Paragraph(text(ctx.tie)),
                Table(mrr_display(built, ctx.mrr_marks), index=False, floatfmt="g", id="mrr")]

    def csvs(self, built, ctx):
        return {"mrr.csv": built[MRR_CSV].round(4).to_csv(index=False)}


TIE_TEXT = {"min": (f"two means closer than {TIED_BELOW} are tied, the rule the power section uses: a scheme's "
                    f"rank is 1 plus the number of schemes whose mean beats its own by at least {TIED_BELOW}, "
                    f"so tied schemes share the best rank (1, 1, 3)"),
            "average": (f"two means closer than {TIED_BELOW} are tied, the rule the power section uses: a "
                        f"scheme's rank is 1 plus the number of schemes that beat it by at least "
                        f"{TIED_BELOW}, plus half the number tied with it (1.5, 1.5, 3)")}

LEARNED_TEXT = (f"A run has learned its task when its headline score at the training length reaches "
                f"{LEARNED_AT} of the metric's best value: on its check set (drawn apart from the eval set) at the step it stopped, "
                f"for a run trained to criterion; on the eval set, for a run without checks. A task scored by a "
                f"metric with no such line (bits per byte) counts as learned.")


def text(tie: str) -> str:
    """What the MRR table holds, under the tie rule ``tie``."""
    return (f"Mean Reciprocal Rank (Kazemnejad et al. 2023) over (task × eval length) cells: in each cell "
            f"schemes are ranked by their mean score over seeds; {TIE_TEXT[tie]}; an empty cell ranks "
            f"last. OOD: cells beyond the training length (eval_len > train_len), the headline; all: every "
            f"cell. Intervals: 95 % percentile bootstrap, {BOOTSTRAP_REPS} replicates (seed "
            f"{BOOTSTRAP_SEED}), each resampling every (scheme, task)'s seeds with replacement and "
            f"recomputing cell means, ranks and MRR; the point is the MRR of the cell means shown, and an interval "
            f"whose replicates all fall to one side of it is widened to contain it (an MRR near 1 can only lose "
            f"ranks under resampling). A scheme is ranked only in cells another scheme is in too, so no scheme "
            f"gains rank 1 on a task it alone was run on. {LEARNED_TEXT} 'MRR (OOD)' and 'MRR (all)' are over the "
            f"learned runs only: the rows of each run and task it has not learned are left out before the cells and "
            f"ranks are built, so a ranking beyond the training length neither rewards a seed for failing to train "
            f"nor ranks chance-level runs, and a cell with no learned run is absent; 'MRR (OOD), every run' is the "
            f"OOD MRR over every run, learned or not, with its interval (equal to 'MRR (OOD)' where every run has "
            f"learned; mrr.csv holds both MRRs over every run, columns ending _every_run). The tables of each task "
            f"hold every run; the mark '(k of n not learned)' beside a scheme, in this table and in each task's, says "
            f"where a cell mixes not having learned with not generalizing. Sorted by the learned runs' OOD MRR; "
            f"'overlaps next' says whether a scheme's OOD interval overlaps the next-ranked scheme's: overlapping "
            f"neighbours are not separated by this sweep, and their order may be noise.")


def mrr_display(m: pd.DataFrame, marks: dict[str, str] | None = None) -> pd.DataFrame:
    """The MRR table as the report shows it: each MRR with its interval, '0.93 [0.88, 0.97]' ('-':
    none), the cells counted, whether the OOD interval overlaps the next scheme's, and with
    ``marks`` (``context.marks``) the tasks on which some of a scheme's runs did not learn."""
    def cell(name):
        return [f"{a:.2f} [{lo:.2f}, {hi:.2f}]" if pd.notna(a) else EMPTY
                for a, lo, hi in zip(m[name], m[f"{name}_low"], m[f"{name}_high"])]

    out = pd.DataFrame({"scheme": m.scheme, "MRR (OOD)": cell("mrr_ood"), "MRR (all)": cell("mrr_all")})
    if "mrr_ood_every_run" in m:
        out["MRR (OOD), every run"] = cell("mrr_ood_every_run")
    out = out.assign(**{"cells OOD": m.cells_ood, "cells all": m.cells_all, "overlaps next": m.overlaps_next})
    if marks is not None:
        out["not learned"] = [marks.get(s, "") for s in m.scheme]
    if "ranked_on" in m and m.ranked_on.nunique() > 1:  # schemes ranked on different tasks say which
        out["ranked on"] = m.ranked_on
    return out
