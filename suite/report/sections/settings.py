"""Does the ranking hold? On a board that runs a task under several training lengths or models,
the order of the schemes in each setting and how far the settings agree (``suite.report.stability``,
computed once in the report's context, since the verdict states its finding too). A board on which
no task meets two settings (the flagship trains its text family at 64 bytes and the rest at 32
tokens, a choice per family) has no such section.

The section shows the per-setting ranks with each OOD MRR (a table, and a bump chart of the ranks,
``rank_plot``), Kendall's tau between every pair of settings with its bootstrap interval
(resampling the shared tasks, then the seeds), the schemes whose rank moves, and the finding; ranking_by_setting.csv and kendall_tau.csv hold the numbers.
"""
from __future__ import annotations

import pandas as pd

from suite.report import boards, ranking, stats
from suite.report.blocks import Heading, Image, Paragraph, Strong, Table
from suite.report.plots import line_styles
from suite.report.rank_plot import plot_ranks, rank_order
from suite.report.sections.base import Section
from suite.report.stability import MOVE_LIMIT, tau_text

TITLE = "Does the ranking hold?"
CSV_NAMES = ("ranking_by_setting.csv", "kendall_tau.csv")
PLOT = "ranking_by_setting"  # plots/ranking_by_setting.png: the ranks as a bump chart (``rank_plot``)


class Settings(Section):
    name, order = "settings", 60
    csv_names = CSV_NAMES

    def build(self, ctx):
        return ctx.stability

    def blocks(self, built, ctx):
        out = [Heading(TITLE), Strong(built["finding"], id="ranking-holds"), Paragraph(text(built)),
               Table(ranking_display(built), id="ranking-by-setting"),
               Image(PLOT, "rank of each scheme in each setting"),
               Table(tau_display(built), index=False, floatfmt="g", id="kendall-tau")]
        return out + ([Table(moves_display(built), index=False, floatfmt="g")] if len(built["moves"]) else [])

    def csvs(self, built, ctx):
        return csvs(built)

    def plots(self, built, ctx):
        """The ranks by setting as a bump chart, each scheme in the look of the task plots' lines."""
        return {PLOT: plot_ranks(built["ranking"], built["settings"], line_styles([ctx.board, *ctx.splits.values()]))}


def ranking_display(s: dict) -> pd.DataFrame:
    """Scheme x setting, 'rank (MRR)' ('-': not ranked there); schemes by their mean rank, then name."""
    r = s["ranking"]
    cells = r.assign(cell=[f"{k} ({m:.2f})" for k, m in zip(r["rank"], r.mrr_ood)])
    t = cells.pivot(index="scheme", columns="setting", values="cell").reindex(columns=s["settings"])
    t = t.loc[rank_order(r)].fillna(boards.EMPTY)
    t.columns.name = None
    t.index.name = "scheme"
    return t


def tau_display(s: dict) -> pd.DataFrame:
    return pd.DataFrame({"setting": s["taus"].setting_a, "vs setting": s["taus"].setting_b,
                         "schemes": s["taus"].schemes,
                         "Kendall tau [95 % interval]": [tau_text(r, s["reps"]).removeprefix("tau ")
                                                         for r in s["taus"].itertuples()],
                         "agree": s["taus"].agree})


def moves_display(s: dict) -> pd.DataFrame:
    m = s["moves"]
    return pd.DataFrame({"scheme": m.scheme, "moves by": m.move,
                         "best rank": [f"{k} at {w}" for k, w in zip(m.best_rank, m.best_in)],
                         "worst rank": [f"{k} at {w}" for k, w in zip(m.worst_rank, m.worst_in)]})


def text(s: dict) -> str:
    """What the section's tables say."""
    by = " and ".join({"train_len": "training length", "model": "model (name and size)"}[c] for c in s["columns"])
    tasks = f"Compared on the tasks every setting holds: {', '.join(s['tasks'])}"
    tasks += f" ({', '.join(s['left_out'])} left out: absent from some setting). " if s["left_out"] else ". "
    return (f"This board runs a task under more than one {by}: {len(s['settings'])} settings. A model evaluated at 4 × "
            f"its training length and another at 1 × its own are not like for like, so schemes are ranked within "
            f"each setting, never across settings; this section says whether those rankings agree. {tasks}First "
            f"table: in each setting, each scheme's rank and, in brackets, its OOD MRR computed from that setting's "
            f"cells only, over every run as the headline MRR is (schemes named without the setting, so a row is one "
            f"scheme in every setting; rank 1 plus the number of schemes with a higher MRR; '-': not ranked there); "
            f"the chart after it draws the same ranks, one line per scheme across the settings, rank 1 on top. "
            f"Second: Kendall's tau-b between every pair of settings' MRRs over the schemes both rank (1: the same "
            f"order, -1: reversed), with a 95 % percentile bootstrap interval of {s['reps']} replicates (seed "
            f"{ranking.BOOTSTRAP_SEED}), each drawing the tasks with replacement (the same tasks in every setting), "
            f"then the seeds of every scheme and task in each setting, and recomputing every MRR and tau, so the "
            f"interval covers which tasks the board holds as well as seed noise; replicates where either order is "
            f"a complete tie are left out, an interval is widened to contain its point, and a bootstrap whose "
            f"replicates take fewer than {stats.DISCRETE_BELOW} values says how many ('k distinct values over "
            f"{s['reps']} replicates'; a tau over few schemes takes few values), in place of an interval of zero "
            f"width; 'agree': the interval lies above 0. Third: the schemes whose rank differs between settings, by "
            f"how much (worst rank minus best) and where. The ranking holds only when every pair agrees and no rank "
            f"moves by more than {MOVE_LIMIT}. ranking_by_setting.csv and kendall_tau.csv hold the numbers.")


def csvs(s: dict) -> dict[str, str]:
    """The section's CSV files by name, numbers rounded to 4 decimals."""
    ranking, taus = CSV_NAMES
    return {ranking: s["ranking"].round(4).to_csv(index=False), taus: s["taus"].round(4).to_csv(index=False)}
