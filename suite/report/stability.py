"""Does the ranking hold? On a board that runs a task under several training lengths or models
(``boards.setting_labels``), the order of the schemes in each setting and how far the settings
agree: the headline of such a board, which never pools settings in one ranking.

Settings are compared on the tasks every one of them holds (``shared_tasks``): a task absent from
a setting is left out of every setting's ranking here and named, so no two settings are ranked on
different tasks.

* ``ranking``: per setting, the out-of-distribution MRR of each scheme (``ranking.mrr``, whose
  cells never mix settings) over every run, learned or not, as the board's headline MRR, and its
  rank among that setting's schemes (1 plus the number of schemes with a higher MRR). A scheme is
  named within its setting (``boards.primary``'s ``name``), so one scheme is one row across settings.
* ``taus``: Kendall's tau-b (ties counted as in ``scipy.stats.kendalltau``) between every pair of
  settings' MRRs over the schemes both rank, with a 95 % percentile bootstrap interval: each of
  ``ranking.BOOTSTRAP_REPS`` replicates draws the shared tasks with replacement, the same draw in
  every setting, then the seeds of every (setting, scheme, task) (``ranking.mrr_replicates``, seed
  ``ranking.BOOTSTRAP_SEED``, so a rebuild gives the same bytes), recomputes every setting's MRRs
  and their tau; replicates where either order is a complete tie (tau undefined) are left out,
  the interval is widened to contain the point (``stats.containing``), as the MRR's is, and says
  how many distinct values its replicates take (``stats.distinct``).
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

MOVE_LIMIT = 1  # the most a scheme's rank may move between settings for the ranking to hold
RANKING_COLUMNS = ["setting", "scheme", "rank", "mrr_ood", "cells_ood"]
TAU_COLUMNS = ["setting_a", "setting_b", "schemes", "tau", "tau_low", "tau_high", "tau_distinct", "tau_modal", "agree"]
MOVE_COLUMNS = ["scheme", "move", "best_rank", "best_in", "worst_rank", "worst_in"]
EVERY, LEARNED = "every", "learned"  # which runs a ranking holds: every run (the headline), or the learned ones
_SAME = 1e-12  # two MRRs closer than this are one value (equal sums of reciprocal ranks, summed apart)


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


def shared_tasks(rows: pd.DataFrame, order: list[str], runs: str = EVERY) -> tuple[list[str], list[str]]:
    """(the tasks every setting of ``order`` holds, the board's other tasks), each sorted; ``runs=LEARNED``:
    the tasks some run has learned in every setting (the protocol before the fair one (docs/protocol.md))."""
    held = rows if runs == EVERY else ranking.learned_rows(rows)
    every = set.intersection(*(set(held.task[held.setting == setting]) for setting in order)) if order else set()
    return sorted(every), sorted(set(rows.task.dropna()) - every)


def build(rows: pd.DataFrame, tie: str = "min", reps: int = ranking.BOOTSTRAP_REPS, seed=ranking.BOOTSTRAP_SEED,
          runs: str = EVERY, resample: str = ranking.TASKS, margin: float | None = None) -> dict | None:
    """The tables (``ranking``, ``taus``, ``moves``) and ``finding`` of ``primary`` rows over the
    tasks every setting holds (``tasks``; ``left_out``: the others), or None when the board has one
    setting or its settings share no task. ``runs``, ``resample`` and ``margin``: which runs are
    ranked, what the bootstrap resamples and the tie margin (``ranking.mrr_replicates``); the
    defaults are the report's."""
    order = boards.settings_in_order(rows)
    if len(order) < 2:
        return None
    tasks, left_out = shared_tasks(rows, order, runs)
    if not tasks:
        return None
    kept = rows[rows.task.isin(tasks)]
    kept = kept if runs == EVERY else ranking.learned_rows(kept)
    board = boards.board_of(kept)
    point = ranking.mrr(board, tie, margin)
    schemes, b_ood, _ = ranking.mrr_replicates(board, kept, tie, reps, seed, resample, margin)
    point = point[point.mrr_ood.notna()]
    table = ranking_table(point)
    samples = {(r.setting, r.name): b_ood[:, schemes.index(r.scheme)] for r in point.itertuples()}
    taus = pd.DataFrame([_tau(table, samples, a, b) for k, a in enumerate(order) for b in order[k + 1:]],
                        columns=TAU_COLUMNS)
    moves = _moves(table, order)
    return {"settings": order, "columns": boards.varied(rows), "tasks": tasks, "left_out": left_out,
            "ranking": table, "taus": taus, "moves": moves, "finding": finding(taus, moves, reps), "reps": reps}


def ranking_table(point: pd.DataFrame) -> pd.DataFrame:
    """``RANKING_COLUMNS`` of an MRR table (``ranking.mrr``, one or more settings): each scheme by
    its name within its setting, with its rank there."""
    parts = [pd.DataFrame({"setting": g.setting.iloc[0], "scheme": g["name"].to_numpy(), "rank": ranks(g.mrr_ood).to_numpy(),
                           "mrr_ood": g.mrr_ood.to_numpy(), "cells_ood": g.cells_ood.to_numpy()})
             for _, g in point.groupby("setting_at", sort=True)]
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=RANKING_COLUMNS)
    return table[RANKING_COLUMNS].astype({"rank": int})


def _tau(table: pd.DataFrame, samples: dict, a: str, b: str) -> dict:
    """One row of ``taus``: tau-b of settings a and b over the schemes both rank, its interval."""
    ma = table[table.setting == a].set_index("scheme").mrr_ood
    mb = table[table.setting == b].set_index("scheme").mrr_ood
    both = sorted(set(ma.index) & set(mb.index))
    point = float(tau_b(ma[both].to_numpy(), mb[both].to_numpy())) if both else math.nan
    low = high = math.nan
    n_distinct = modal = 0
    if not math.isnan(point):
        xa = np.stack([samples[(a, s)] for s in both], axis=-1)  # (reps, schemes)
        xb = np.stack([samples[(b, s)] for s in both], axis=-1)
        b_tau = tau_b(xa, xb)
        b_tau = b_tau[np.isfinite(b_tau)]
        if len(b_tau):
            low, high = (float(x) for x in stats.containing(point, *stats.percentile_interval(b_tau)))
            n_distinct, modal = (int(x[0]) for x in stats.distinct(b_tau[:, None]))
    agree = "yes" if low > 0 else ("cannot tell" if math.isnan(low) else "no")
    return {"setting_a": a, "setting_b": b, "schemes": len(both), "tau": point, "tau_low": low, "tau_high": high,
            "tau_distinct": n_distinct, "tau_modal": modal, "agree": agree}


def _moves(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """``MOVE_COLUMNS``: each scheme ranked in two or more settings whose rank differs, the largest move first."""
    rows = []
    for scheme, g in table.groupby("scheme", sort=True):
        if len(g) < 2 or g["rank"].nunique() < 2:
            continue
        g = g.assign(at=g.setting.map(order.index)).sort_values("at")
        best, worst = g["rank"].min(), g["rank"].max()
        rows.append({"scheme": scheme, "move": int(worst - best), "best_rank": int(best),
                     "best_in": " and ".join(g.setting[g["rank"] == best]), "worst_rank": int(worst),
                     "worst_in": " and ".join(g.setting[g["rank"] == worst])})
    out = pd.DataFrame(rows, columns=MOVE_COLUMNS)
    return out.sort_values(["move", "scheme"], ascending=[False, True], ignore_index=True)


def finding(taus: pd.DataFrame, moves: pd.DataFrame, reps: int = ranking.BOOTSTRAP_REPS) -> str:
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
        pairs = "; ".join(f"{r.setting_a} vs {r.setting_b} ({tau_text(r, reps)})" for r in apart.itertuples())
        said.append(f"these pairs of settings do not order the schemes alike (tau interval not above 0): {pairs}")
    if len(far):
        schemes = "; ".join(f"{r.scheme} by {r.move} ({r.best_rank} at {r.best_in}, {r.worst_rank} at {r.worst_in})"
                            for r in far.itertuples())
        said.append(f"these schemes' ranks move by more than {MOVE_LIMIT}: {schemes}")
    return "The ranking does not hold: " + "; and ".join(said) + "."


def tau_text(r, reps: int = ranking.BOOTSTRAP_REPS) -> str:
    """'tau 0.87 [0.73, 1.00]' (``stats.interval_text``: a discrete bootstrap says so); 'no tau: ...'."""
    if pd.isna(r.tau):
        return f"no tau: {r.schemes} scheme(s) ranked in both, or every MRR tied"
    if pd.isna(r.tau_low):
        return f"tau {r.tau:.2f}, no interval"
    return "tau " + stats.interval_text(r.tau, r.tau_low, r.tau_high, r.tau_distinct, r.tau_modal, reps)
