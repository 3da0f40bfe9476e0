"""The board's headline ranking: Mean Reciprocal Rank over (task x eval length) cells, the
ranking of Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length Generalization in
Transformers"), over cells beyond the training length and over every cell, each with a 95 %
bootstrap interval that resamples tasks and seeds; over every run, learned or not, with the MRR
over the learned runs beside it, setting by setting on a board that varies the training length or
the model (``ranking.mrr_every``, built once in the report's context). mrr.csv holds the numbers.
"""
from __future__ import annotations

import pandas as pd

from suite.report import stats
from suite.report.blocks import Heading, Paragraph, Table
from suite.report.ranking import BOOTSTRAP_REPS, BOOTSTRAP_SEED, LEARNED
from suite.report.sections.base import Section
from suite.data.metrics import LEARNED_AT

_ENDS = ("", "_low", "_high", "_distinct", "_modal")
MRR_CSV = ["scheme", *(f"mrr_ood{e}" for e in _ENDS), *(f"mrr_all{e}" for e in _ENDS), "cells_ood", "cells_all",
           "learned", *(f"mrr_ood{LEARNED}{e}" for e in _ENDS), *(f"mrr_all{LEARNED}{e}" for e in _ENDS)]
SETTING_CSV = ["setting", "name"]  # first in mrr.csv on a board ranked setting by setting


class MRR(Section):
    name, order = "mrr", 20
    csv_names = ("mrr.csv",)

    def build(self, ctx):
        return ctx.mrr

    def blocks(self, built, ctx):
        return [Heading("Mean Reciprocal Rank"), Paragraph(text(ctx.tie, ctx.setting_order)),
                Table(mrr_display(built, ctx.mrr_marks), index=False, floatfmt="g", id="mrr")]

    def csvs(self, built, ctx):
        columns = [*SETTING_CSV, *MRR_CSV] if ctx.setting_order else MRR_CSV
        return {"mrr.csv": built.reindex(columns=columns).round(4).to_csv(index=False)}


TIE_TEXT = {"min": ("two means closer than their metric's tie margin (the table under 'How to read the tables' "
                    "gives each metric's) are tied, the rule the power section uses: a scheme's rank is 1 plus the "
                    "number of schemes whose mean beats its own by at least the margin, so tied schemes share the "
                    "best rank (1, 1, 3)"),
            "average": ("two means closer than their metric's tie margin (the table under 'How to read the "
                        "tables' gives each metric's) are tied, the rule the power section uses: a scheme's rank is "
                        "1 plus the number of schemes that beat it by at least the margin, plus half the number "
                        "tied with it (1.5, 1.5, 3)")}

LEARNED_TEXT = (f"A run has learned its task when its headline score at the training length reaches "
                f"{LEARNED_AT} of the metric's best value: on its check set (drawn apart from the eval set) at the step it stopped, "
                f"for a run trained to criterion; on the eval set, for a run without checks. A task scored by a "
                f"metric with no such line (bits per byte) counts as learned.")

SETTINGS_TEXT = ("This board runs a task under more than one training length or model, so each setting is ranked on "
                 "its own: a cell holds the runs of one setting only, because a model evaluated at 4 × its training "
                 "length and another at 1 × its own are not like for like, and one MRR over such cells would compare "
                 "settings, not schemes. 'Does the ranking hold?' below says whether the settings' orders agree.")


def text(tie: str, settings: list[str] | None = None) -> str:
    """What the MRR table holds, under the tie rule ``tie``, on a board of ``settings`` ranked apart."""
    return (f"Mean Reciprocal Rank (Kazemnejad et al. 2023) over (task × eval length) cells: in each cell "
            f"schemes are ranked by their mean score over seeds; {TIE_TEXT[tie]}; an empty cell ranks "
            f"last. OOD: cells beyond the training length (eval_len > train_len), the headline; all: every "
            f"cell. Every run is ranked, learned or not: a run that has not learned its task is scored as it scored, "
            f"because failing to learn is a result; ranking the learned runs only would select survivors, inflating "
            f"the schemes that fail most often and dropping a scheme with no learned run from a cell instead of "
            f"ranking it last there. {LEARNED_TEXT} 'runs learned' says how many of a scheme's runs (counted per "
            f"task) have, 'not learned' on which tasks the others are, and 'MRR (OOD), learned runs' is the OOD MRR "
            f"over the learned runs only (the others left out before cells and ranks are built), for comparison. "
            f"{SETTINGS_TEXT + ' ' if settings else ''}Intervals: 95 % percentile bootstrap, {BOOTSTRAP_REPS} "
            f"replicates (seed {BOOTSTRAP_SEED}), each drawing the board's tasks with replacement and then every "
            f"(scheme, task)'s seeds with replacement, and recomputing cell means, ranks and MRR, so an interval "
            f"covers which tasks the board happens to hold as well as seed noise; the point is the MRR of the cell "
            f"means shown, and an interval whose replicates all fall to one side of it is widened to contain it (an "
            f"MRR near 1 can only lose ranks under resampling). A rank statistic takes few values: where the "
            f"replicates take fewer than {stats.DISCRETE_BELOW} distinct values the cell says how many, and an "
            f"interval of zero width is shown as that count ('k distinct values over {BOOTSTRAP_REPS} replicates, m "
            f"at x'), not as a precise [x, x]. A scheme is ranked only in cells another scheme is in too, so no "
            f"scheme gains rank 1 on a task it alone was run on. Sorted by OOD MRR over every run; 'overlaps next' "
            f"says whether a scheme's OOD interval overlaps the next-ranked scheme's: overlapping neighbours are not "
            f"separated by this sweep, and their order may be noise.")


def mrr_display(m: pd.DataFrame, marks: dict[str, str] | None = None) -> pd.DataFrame:
    """The MRR table as the report shows it: each MRR with its interval, '0.93 [0.88, 0.97]'
    (``stats.interval_text``: a discrete bootstrap says so; '-': none), the runs learned, the cells
    counted, whether the OOD interval overlaps the next scheme's, and with ``marks``
    (``context.marks``) the tasks on which some of a scheme's runs did not learn. On a board ranked
    setting by setting, the setting first and each scheme by its name there."""
    def cell(name):
        if name not in m:
            return [stats.interval_text(float("nan"), 0, 0, 0, 0, BOOTSTRAP_REPS)] * len(m)
        return [stats.interval_text(*values, BOOTSTRAP_REPS) for values in
                zip(m[name], m[f"{name}_low"], m[f"{name}_high"], m[f"{name}_distinct"], m[f"{name}_modal"])]

    several = "setting" in m and m.setting.nunique() > 1
    out = pd.DataFrame({"setting": m.setting} if several else {})
    out["scheme"] = m["name"] if several else m.scheme
    out["MRR (OOD)"], out["MRR (all)"] = cell("mrr_ood"), cell("mrr_all")
    if "learned" in m:
        out["runs learned"] = m.learned
        out["MRR (OOD), learned runs"] = cell(f"mrr_ood{LEARNED}")
    out = out.assign(**{"cells OOD": m.cells_ood, "cells all": m.cells_all, "overlaps next": m.overlaps_next})
    if marks is not None:
        out["not learned"] = [marks.get(s, "") for s in m.scheme]
    if "ranked_on" in m and m.ranked_on.nunique() > 1:  # schemes ranked on different tasks say which
        out["ranked on"] = m.ranked_on
    return out
