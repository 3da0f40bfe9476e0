"""Does the ranking hold? The order of the schemes in each setting a board varies, and how far the
settings agree.

A setting is a training length and a model (its name and size, ``boards.model_labels``), named by
what varies ('L=64 · d_model 128'); a board whose runs vary either has one section. Settings are
compared on the tasks that some run has learned in every one of them (``shared_tasks``): a task
absent from a setting, or learned by no run there, is left out of every setting's ranking and
named, so no two settings are ranked on different tasks. The flagship trains its text family at 64
bytes and the rest at 32 tokens, a choice per family, not a second setting of one task: its
settings share no task, so it has no section.

* ``ranking``: per setting, the out-of-distribution MRR of each scheme computed from that setting's
  cells only, over the learned runs as the board's headline is (``ranking.mrr_learned``: the rows of
  each run/task pair that has not learned dropped first), and its rank among the schemes that
  setting ranks (1 plus the number of schemes with a higher MRR). Schemes are labelled within each
  setting (``boards.primary`` of its rows), so one scheme is one row across settings.
* ``taus``: Kendall's tau-b (ties counted as in ``scipy.stats.kendalltau``) between every pair of
  settings' MRRs over the schemes both rank, with a 95 % percentile bootstrap interval: each of
  ``ranking.BOOTSTRAP_REPS`` replicates resamples the seeds of every scheme x task in each setting
  (``ranking.mrr_replicates``; setting i with seed [BOOTSTRAP_SEED, i], so a rebuild gives the same
  bytes), recomputes both settings' MRRs and their tau; replicates where either order is a
  complete tie (tau undefined) are left out, and the interval is widened to contain the point
  (``stats.containing``), as the MRR's is.
* ``moves``: each scheme ranked in two or more settings whose rank differs, by how much (worst
  rank minus best) and where.
* ``finding``: one sentence. The ranking holds only when every pair's tau interval lies above 0
  and no rank moves by more than 1; otherwise it names the pairs that disagree and the schemes
  that move.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from suite.report import boards, ranking, stats
from suite.report.blocks import Heading, Paragraph, Strong, Table
from suite.report.sections.base import Section

TITLE = "Does the ranking hold?"
SETTING_COLUMNS = ("train_len", "model")  # the model: by name and size (boards.model_labels)
MOVE_LIMIT = 1  # the most a scheme's rank may move between settings for the ranking to hold
RANKING_COLUMNS = ["setting", "scheme", "rank", "mrr_ood", "cells_ood"]
TAU_COLUMNS = ["setting_a", "setting_b", "schemes", "tau", "tau_low", "tau_high", "agree"]
MOVE_COLUMNS = ["scheme", "move", "best_rank", "best_in", "worst_rank", "worst_in"]
CSV_NAMES = ("ranking_by_setting.csv", "kendall_tau.csv")
_SAME = 1e-12  # two MRRs closer than this are one value (equal sums of reciprocal ranks, summed apart)


class Settings(Section):
    name, order = "settings", 60
    csv_names = CSV_NAMES

    def build(self, ctx):
        return build(ctx.df, ctx.metric, ctx.tie)

    def blocks(self, built, ctx):
        out = [Heading(TITLE), Strong(built["finding"], id="ranking-holds"), Paragraph(text(built)),
               Table(ranking_display(built), id="ranking-by-setting"),
               Table(tau_display(built), index=False, floatfmt="g", id="kendall-tau")]
        return out + ([Table(moves_display(built), index=False, floatfmt="g")] if len(built["moves"]) else [])

    def csvs(self, built, ctx):
        return csvs(built)


def varied(df: pd.DataFrame) -> list[str]:
    """The setting columns (training length, model) that take more than one value on this board."""
    return [c for c in SETTING_COLUMNS if c in df and boards.setting_values(df, c).nunique() > 1]


_PARTS = (("train_len", "L={}"), ("model", "{}"), ("n_layers", "{} layers"), ("d_model", "d_model {}"),
          ("n_heads", "{} heads"))  # how a setting names each column that varies


def setting_labels(df: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """(each row's setting, the settings in order): what varies among training length, model name,
    layers, width and heads, joined by ' · ' ('L=32', 'd_model 64 · 4 heads', 'L=64 · small');
    ordered by training length, then model size, then name."""
    parts = []
    for column, text in _PARTS:
        if column in df and df[column].astype(str).nunique() > 1:
            values = df[column].map(lambda v: str(int(v)) if isinstance(v, (int, float)) and pd.notna(v) else str(v))
            parts.append(values.map(text.format))
    if not parts or not varied(df):
        return pd.Series("", index=df.index), []
    label = parts[0]
    for more in parts[1:]:
        label = label + " · " + more
    key = df.reindex(columns=["train_len", "d_model", "n_heads", "n_layers"]).apply(pd.to_numeric, errors="coerce")
    key = key.assign(label=label).sort_values(["train_len", "d_model", "n_heads", "n_layers", "label"])
    return label, list(dict.fromkeys(key.label))


def tau_b(x, y) -> np.ndarray:
    """Kendall's tau-b of ``x`` and ``y`` along the last axis: (concordant - discordant pairs) /
    sqrt(pairs not tied in x * pairs not tied in y); NaN where either is a complete tie (or has
    fewer than two values). Values closer than 1e-12 are tied."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    i, j = np.triu_indices(x.shape[-1], 1)

    def signs(v):
        d = v[..., j] - v[..., i]
        return np.where(np.abs(d) < _SAME, 0.0, np.sign(d))

    sx, sy = signs(x), signs(y)
    den = np.sqrt((sx != 0).sum(-1) * (sy != 0).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (sx * sy).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def ranks(mrr: pd.Series) -> pd.Series:
    """1 plus the number of schemes with a higher MRR (ties share the best rank); NaN MRRs unranked."""
    v = mrr.dropna()
    return v.map(lambda m: 1 + int(((v - m) >= _SAME).sum()))


def _setting(df: pd.DataFrame, metric: str | None, tie: str, reps: int, seed) -> tuple[pd.DataFrame, dict]:
    """(``RANKING_COLUMNS`` less setting, {scheme: (reps,) OOD MRR replicates}) of one setting's rows."""
    kept = ranking.learned_rows(boards.primary(df, metric))
    if kept.empty:
        return pd.DataFrame(columns=RANKING_COLUMNS[1:]), {}
    board = boards.board_of(kept)
    point = ranking.mrr(board, tie).set_index("scheme")
    schemes, b_ood, _ = ranking.mrr_replicates(board, kept, tie, reps, seed)
    point = point[point.mrr_ood.notna()]
    out = pd.DataFrame({"scheme": point.index, "rank": ranks(point.mrr_ood).to_numpy(),
                        "mrr_ood": point.mrr_ood.to_numpy(), "cells_ood": point.cells_ood.to_numpy()})
    return out, {s: b_ood[:, schemes.index(s)] for s in point.index}


def shared_tasks(df: pd.DataFrame, label: pd.Series, order: list[str], metric: str | None = None
                 ) -> tuple[list[str], list[str]]:
    """(the tasks some run has learned in every setting of ``order``, the board's other tasks), each sorted."""
    held = [set(ranking.learned_rows(boards.primary(df[label == setting], metric)).task) for setting in order]
    every = set.intersection(*held) if held else set()
    return sorted(every), sorted(set(df.task.dropna()) - every)


def build(df: pd.DataFrame, metric: str | None = None, tie: str = "min", reps: int = ranking.BOOTSTRAP_REPS,
          seed: int = ranking.BOOTSTRAP_SEED) -> dict | None:
    """The section's tables (``ranking``, ``taus``, ``moves``) and ``finding`` over the tasks every
    setting holds (``tasks``; ``left_out``: the others), or None when the board's runs share one
    setting or its settings share no task."""
    label, order = setting_labels(df)
    if len(order) < 2:
        return None
    tasks, left_out = shared_tasks(df, label, order, metric)
    if not tasks:
        return None
    keep = df.task.isin(tasks)
    df, label = df[keep], label[keep]
    ranked, samples = [], {}
    for i, setting in enumerate(order):
        t, samples[setting] = _setting(df[label == setting], metric, tie, reps, [seed, i])
        ranked.append(t.assign(setting=setting))
    ranking = pd.concat(ranked, ignore_index=True)[RANKING_COLUMNS]
    ranking["rank"] = ranking["rank"].astype(int)
    taus = pd.DataFrame([_tau(ranking, samples, a, b) for k, a in enumerate(order) for b in order[k + 1:]],
                        columns=TAU_COLUMNS)
    moves = _moves(ranking, order)
    return {"settings": order, "columns": varied(df), "tasks": tasks, "left_out": left_out, "ranking": ranking,
            "taus": taus, "moves": moves, "finding": finding(taus, moves)}


def _tau(ranking: pd.DataFrame, samples: dict, a: str, b: str) -> dict:
    """One row of ``taus``: tau-b of settings a and b over the schemes both rank, its interval."""
    ma = ranking[ranking.setting == a].set_index("scheme").mrr_ood
    mb = ranking[ranking.setting == b].set_index("scheme").mrr_ood
    both = sorted(set(ma.index) & set(mb.index))
    point = float(tau_b(ma[both].to_numpy(), mb[both].to_numpy())) if both else math.nan
    low = high = math.nan
    if not math.isnan(point):
        xa = np.stack([samples[a][s] for s in both], axis=-1)  # (reps, schemes)
        xb = np.stack([samples[b][s] for s in both], axis=-1)
        b_tau = tau_b(xa, xb)
        b_tau = b_tau[np.isfinite(b_tau)]
        if len(b_tau):
            low, high = (float(x) for x in stats.containing(point, *stats.percentile_interval(b_tau)))
    agree = "yes" if low > 0 else ("cannot tell" if math.isnan(low) else "no")
    return {"setting_a": a, "setting_b": b, "schemes": len(both), "tau": point, "tau_low": low, "tau_high": high,
            "agree": agree}


def _moves(ranking: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """``MOVE_COLUMNS``: each scheme ranked in two or more settings whose rank differs, the largest move first."""
    rows = []
    for scheme, g in ranking.groupby("scheme", sort=True):
        if len(g) < 2 or g["rank"].nunique() < 2:
            continue
        g = g.assign(at=g.setting.map(order.index)).sort_values("at")
        best, worst = g["rank"].min(), g["rank"].max()
        rows.append({"scheme": scheme, "move": int(worst - best), "best_rank": int(best),
                     "best_in": " and ".join(g.setting[g["rank"] == best]), "worst_rank": int(worst),
                     "worst_in": " and ".join(g.setting[g["rank"] == worst])})
    out = pd.DataFrame(rows, columns=MOVE_COLUMNS)
    return out.sort_values(["move", "scheme"], ascending=[False, True], ignore_index=True)


def finding(taus: pd.DataFrame, moves: pd.DataFrame) -> str:
    """'The ranking holds: ...' only when every pair's tau interval lies above 0 and no rank moves
    by more than ``MOVE_LIMIT``; else which pairs disagree and which schemes move."""
    apart = taus[taus.agree != "yes"]
    far = moves[moves.move > MOVE_LIMIT]
    if taus.empty:
        return "The ranking cannot be compared: fewer than two settings rank any scheme."
    if apart.empty and far.empty:
        return (f"The ranking holds: every pair of settings orders the schemes alike (Kendall's tau interval above "
                f"0) and no scheme's rank moves by more than {MOVE_LIMIT}.")
    said = []
    if len(apart):
        pairs = "; ".join(f"{r.setting_a} vs {r.setting_b} ({_tau_text(r)})" for r in apart.itertuples())
        said.append(f"these pairs of settings do not order the schemes alike (tau interval not above 0): {pairs}")
    if len(far):
        schemes = "; ".join(f"{r.scheme} by {r.move} ({r.best_rank} at {r.best_in}, {r.worst_rank} at {r.worst_in})"
                            for r in far.itertuples())
        said.append(f"these schemes' ranks move by more than {MOVE_LIMIT}: {schemes}")
    return "The ranking does not hold: " + "; and ".join(said) + "."


def _tau_text(r) -> str:
    if pd.isna(r.tau):
        return f"no tau: {r.schemes} scheme(s) ranked in both, or every MRR tied"
    if pd.isna(r.tau_low):
        return f"tau {r.tau:.2f}, no interval"
    return f"tau {r.tau:.2f} [{r.tau_low:.2f}, {r.tau_high:.2f}]"


def ranking_display(s: dict) -> pd.DataFrame:
    """Scheme x setting, 'rank (MRR)' ('-': not ranked there); schemes by their mean rank, then name."""
    r = s["ranking"]
    cells = r.assign(cell=[f"{k} ({m:.2f})" for k, m in zip(r["rank"], r.mrr_ood)])
    t = cells.pivot(index="scheme", columns="setting", values="cell").reindex(columns=s["settings"])
    order = r.groupby("scheme")["rank"].mean().sort_values(kind="stable")
    order = sorted(order.index, key=lambda name: (order[name], name))
    t = t.loc[order].fillna(boards.EMPTY)
    t.columns.name = None
    t.index.name = "scheme"
    return t


def tau_display(s: dict) -> pd.DataFrame:
    return pd.DataFrame({"setting": s["taus"].setting_a, "vs setting": s["taus"].setting_b,
                         "schemes": s["taus"].schemes,
                         "Kendall tau [95 % interval]": [_tau_text(r).removeprefix("tau ") for r in s["taus"].itertuples()],
                         "agree": s["taus"].agree})


def moves_display(s: dict) -> pd.DataFrame:
    m = s["moves"]
    return pd.DataFrame({"scheme": m.scheme, "moves by": m.move,
                         "best rank": [f"{k} at {w}" for k, w in zip(m.best_rank, m.best_in)],
                         "worst rank": [f"{k} at {w}" for k, w in zip(m.worst_rank, m.worst_in)]})


def text(s: dict) -> str:
    """What the section's tables say."""
    by = " and ".join({"train_len": "training length", "model": "model (name and size)"}[c] for c in s["columns"])
    tasks = f"Compared on the tasks some run has learned in every setting: {', '.join(s['tasks'])}"
    tasks += f" ({', '.join(s['left_out'])} left out: absent or learned by no run in some setting). " if s["left_out"] else ". "
    return (f"This board's runs vary the {by}: {len(s['settings'])} settings. {tasks}First table: in each setting, each "
            f"scheme's rank and, in brackets, its OOD MRR computed from that setting's cells only, over the learned "
            f"runs as the headline MRR is (schemes named without the setting, so a row is one scheme in every "
            f"setting; rank 1 plus the number of schemes with a higher MRR; '-': not ranked there). Second: "
            f"Kendall's tau-b between every pair of settings' MRRs over the schemes both rank (1: the same order, "
            f"-1: reversed), with a 95 % percentile bootstrap interval of {ranking.BOOTSTRAP_REPS} replicates, each "
            f"resampling the seeds of every scheme and task in each setting and recomputing both MRRs and tau "
            f"(seed {ranking.BOOTSTRAP_SEED}); replicates where either order is a complete tie are left out and an "
            f"interval is widened to contain its point; 'agree': the interval lies above 0. Third: the schemes "
            f"whose rank differs between settings, by how much (worst rank minus best) and where. The ranking "
            f"holds only when every pair agrees and no rank moves by more than {MOVE_LIMIT}. "
            f"ranking_by_setting.csv and kendall_tau.csv hold the numbers.")


def csvs(s: dict) -> dict[str, str]:
    """The section's CSV files by name, numbers rounded to 4 decimals."""
    ranking, taus = CSV_NAMES
    return {ranking: s["ranking"].round(4).to_csv(index=False), taus: s["taus"].round(4).to_csv(index=False)}
