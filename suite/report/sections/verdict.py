"""The top of a board, computed from its data: the title, a one-sentence verdict (which scheme
ranks first by the MRR over every run, and whether its interval separates it from the second; on
a board that varies the training length or the model, that in each setting and whether the
settings' orders agree; how many runs have not learned, and who leads over the learned runs alone
where that differs) and the setup a reader needs before the tables (model, training steps
and the protocol, training length L, eval lengths, seeds, runs); the summary heatmap follows
(``summary``), after the layer patterns' verdict on a board that has one. A board
with fewer runs than its sweep declares, or with runs of other code, says so first.

The protocol: runs trained to criterion (a ``check_score`` row, or a stored spec with
``train.until_learned`` on a task with a learned line) train their recipe's steps and then on, up
to their cap of round(cap x steps) steps, until the check passes; the setup says so with the cap.
Any other run (rows stored before the protocol, natural text's fixed budget) trains exactly its
steps, and a board of such runs only keeps the plain 'N steps'."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from suite.report import stats
from suite.report.blocks import Alert, Heading, Paragraph, Strong
from suite.report.ranking import BOOTSTRAP_REPS, LEARNED
from suite.report.sections.base import Section
from suite.report.sections.steps import cap_steps
from suite.results.has_learned import check_rows


class Verdict(Section):
    name, order = "verdict", 10

    def build(self, ctx):
        return {"verdict": headline(ctx.mrr, ctx.not_learned, ctx.runs, ctx.stability), "setup": setup(ctx.df, ctx.rows)}

    def blocks(self, built, ctx):
        out = [Heading("PosBench leaderboard: ", 1, code=ctx.sweep)]
        out += [Alert(ctx.coverage)] if ctx.coverage else []
        out += [Alert(f"Warning: {ctx.warning}")] if ctx.warning else []
        return out + [Strong(built["verdict"], id="verdict"), Paragraph(built["setup"], id="setup")]


def headline(mrr: pd.DataFrame, not_learned: int, runs: int, stability: dict | None = None) -> str:
    """The verdict of the MRR over every run (``ranking.mrr_every``): ``verdict`` of it, or on a board
    ranked setting by setting, of each setting's and whether the settings agree (``by_setting``);
    then who leads over the learned runs alone where that differs (``learned_leader``), and how
    many of the board's ``runs`` have not learned their task (``not_learned``)."""
    several = "setting" in mrr and mrr.setting.nunique() > 1
    first = by_setting(mrr, stability) if several else verdict(mrr) + learned_leader(mrr)
    return first + _not_learned(not_learned, runs)


def _not_learned(k: int, n: int) -> str:
    """' 6 of 120 runs have not learned their task; they are ranked as they scored ...', or '' when every run has."""
    if not k:
        return ""
    return (f" {k} of {n} runs have not learned their task; they are ranked as they scored, since failing to learn "
            f"is a result (the MRR over learned runs only stands beside it).")


def _interval(row: pd.Series, name: str, digits: int = 2) -> str:
    """'0.93 [0.88, 0.97]', as ``stats.interval_text`` writes it where the row says how discrete its bootstrap is."""
    if f"{name}_distinct" in row and pd.notna(row[f"{name}_distinct"]):
        return stats.interval_text(row[name], row[f"{name}_low"], row[f"{name}_high"], int(row[f"{name}_distinct"]),
                                   int(row[f"{name}_modal"]), BOOTSTRAP_REPS, digits)
    return f"{row[name]:.{digits}f} [{row[f'{name}_low']:.{digits}f}, {row[f'{name}_high']:.{digits}f}]"


def by_setting(mrr: pd.DataFrame, stability: dict | None) -> str:
    """'Ranked within each of its 4 settings, never across them. In L=32: alibi ranks first ... In
    L=64: ... Across settings: the ranking holds: ...' ``mrr``: ``ranking.mrr_every`` of a board
    ranked setting by setting; ``stability``: ``suite.report.stability.build`` (None: its settings
    share no task)."""
    parts = [f"In {g.setting.iloc[0]}: {verdict(g.assign(scheme=g['name']))}"
             for _, g in mrr.groupby("setting_at", sort=True)]
    finding = stability["finding"] if stability else ""
    across = (f"Across settings, on the tasks they share: {finding[:1].lower()}{finding[1:]}" if stability
              else "The settings share no task: their orders are not compared.")
    return f"Ranked within each of its {len(parts)} settings, never across them. " + " ".join(parts) + " " + across


def learned_leader(mrr: pd.DataFrame) -> str:
    """' Over the learned runs only, t5 would rank first (0.61 [0.55, 0.67]).' where the first
    scheme by the OOD MRR over learned runs is another than over every run, else ''."""
    every, learned = "mrr_ood", f"mrr_ood{LEARNED}"
    if learned not in mrr or mrr[learned].isna().all() or mrr[every].isna().all():
        return ""
    lead = mrr.sort_values(every, ascending=False, kind="stable").iloc[0]
    lead_learned = mrr.sort_values(learned, ascending=False, kind="stable").iloc[0]
    if lead_learned.scheme == lead.scheme or lead_learned[learned] == mrr.loc[mrr.scheme == lead.scheme, learned].iloc[0]:
        return ""
    return (f" Over the learned runs only, {lead_learned.scheme} would rank first "
            f"({_interval(lead_learned, learned)}): ranking survivors changes the leader.")


def verdict(mrr: pd.DataFrame) -> str:
    """'alibi ranks first by MRR beyond the training length (0.93 [0.88, 0.93]), ahead of t5 (0.73
    [0.72, 0.75]); separated from the second at the 95 % level: yes (the two intervals do not
    overlap).' ``mrr``: ``ranking.mrr_intervals``. The MRR over cells beyond the training length
    (the headline) where the board has such cells, else the MRR over all cells; two schemes whose
    bootstrap intervals overlap are 'not separated', and equal MRRs share the first place."""
    if mrr.empty:
        return "No scheme has a score: nothing is ranked."
    name, where = ("mrr_ood", "beyond the training length") if mrr.mrr_ood.notna().any() else ("mrr_all", "over all cells")
    ranked = mrr[mrr[name].notna()].sort_values(name, ascending=False, kind="stable")
    if ranked.empty:  # a scheme is ranked only in cells another scheme is in too
        return "No two schemes share a cell: nothing is ranked."
    top = ranked.iloc[0]
    if len(ranked) == 1:
        return f"{top.scheme} is the only scheme ranked by MRR {where} ({_interval(top, name)}): nothing to compare."
    second = ranked.iloc[1]
    ends = [top[f"{name}_low"], top[f"{name}_high"], second[f"{name}_low"], second[f"{name}_high"]]
    if np.isnan(np.asarray(ends, dtype=float)).any():
        separated = "not known (no interval)"
    elif top[f"{name}_low"] <= second[f"{name}_high"] and second[f"{name}_low"] <= top[f"{name}_high"]:
        separated = "no (the two intervals overlap: their order may be noise)"
    else:
        separated = "yes (the two intervals do not overlap)"
    if top[name] == second[name]:
        return (f"{top.scheme} ({_interval(top, name)}) and {second.scheme} ({_interval(second, name)}) share the first "
                f"place by MRR {where}; separated from each other at the 95 % level: {separated}.")
    digits = 2 if f"{top[name]:.2f}" != f"{second[name]:.2f}" else 3  # two MRRs that read alike at 2 decimals
    return (f"{top.scheme} ranks first by MRR {where} ({_interval(top, name, digits)}), ahead of {second.scheme} "
            f"({_interval(second, name, digits)}); separated from the second at the 95 % level: {separated}.")


def _values(series: pd.Series) -> str:
    """The distinct values, sorted, as plain numbers: '32', '32, 64'."""
    return ", ".join(f"{x:g}" for x in sorted(pd.to_numeric(series, errors="coerce").dropna().unique())) or "not recorded"


def _until_learned(spec) -> bool:
    """Whether a stored run spec (JSON) says ``train.until_learned``; False when it does not say."""
    try:
        return json.loads(spec)["train"].get("until_learned") is True
    except (TypeError, ValueError, KeyError, AttributeError):
        return False


def criterion_runs(df: pd.DataFrame) -> set:
    """The ids of the runs in the store's rows ``df`` trained to criterion: those with a check row,
    and those whose spec says ``train.until_learned`` and whose headline metric has a learned line
    (bounded, higher is better: a run that diverged before its first check included)."""
    checked = set(check_rows(df).run_id)
    if "spec" not in df.columns:
        return checked
    judged = (df.higher_is_better == True) & np.isfinite(df.high.astype(float))  # == True: None is not True
    head = df[(df.metric == df.headline) & judged].drop_duplicates("run_id")
    return checked | set(head.run_id[head.spec.map(_until_learned)])


def protocol(df: pd.DataFrame, runs: pd.DataFrame) -> str:
    """'1750 steps' for runs that train exactly their steps; '1750 steps, trained on to at most 7000
    steps until the check passes' where runs were trained to criterion (with '(k of n runs; the
    others a fixed budget)' where only some were). ``runs``: one row per run of ``df``."""
    steps = f"{_values(runs.steps)} steps"
    trained_on = criterion_runs(df) & set(runs.run_id)
    if not trained_on:
        return steps
    specs = runs[runs.run_id.isin(trained_on)].spec if "spec" in runs.columns else pd.Series(dtype=object)
    caps = sorted({int(c) for c in specs.map(cap_steps).dropna()})
    cap = f"at most {', '.join(map(str, caps))} steps" if caps else "a cap"
    some = f" ({len(trained_on)} of {runs.run_id.nunique()} runs; the others a fixed budget)" \
        if len(trained_on) < runs.run_id.nunique() else ""
    return f"{steps}, trained on to {cap} until the check passes{some}"


def setup(df: pd.DataFrame, rows: pd.DataFrame | None = None) -> str:
    """'Setup: model tiny (4 layers, d_model 64, 4 heads); 1750 steps; trained at L = 32 tokens;
    evaluated at 32, 64, 128 tokens; seeds 0, 1, 2; 36 runs.' from the store's rows ``df``; the eval
    lengths are those of the board's headline rows ``rows`` (``boards.primary``) when given. Runs
    trained to criterion say so after the steps (``protocol``): '1750 steps, trained on to at most
    7000 steps until the check passes'."""
    runs = df.drop_duplicates("run_id")
    models = runs[["model", "n_layers", "d_model", "n_heads"]].drop_duplicates().dropna(subset=["n_layers"])
    model = "; ".join(f"{m.model} ({m.n_layers:g} layers, d_model {m.d_model:g}, {m.n_heads:g} heads)"
                      for m in models.sort_values(["n_layers", "d_model", "n_heads"]).itertuples()) or "not recorded"
    lengths = (rows if rows is not None and len(rows) else df).eval_len
    return (f"Setup: model {model}; {protocol(df, runs)}; trained at L = {_values(runs.train_len)} tokens; "
            f"evaluated at {_values(lengths)} tokens; seeds {_values(runs.seed)}; {runs.run_id.nunique()} runs.")
