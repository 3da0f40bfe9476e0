"""Where a new scheme (an arm) places on a published board, computed from DataFrames alone
(``posbench rank``, ``suite.commands.rank``).

* ``setup`` / ``differences``: whether an arm's run is like for like with a board: its
  configuration (``suite.report.compare.configuration``: the stored spec less seed, code digest,
  sweep and the model's name) less the layer stack (the position scheme and whatever the arm's
  axis sets with it: ``SCHEME_KEYS``) must be a configuration the board ran, at a seed it ran; else
  the fields that differ from the nearest one, by dotted name.
* ``place``: the arm's place by OOD MRR in its setting, with its 95 % interval and whether that
  interval is separated from those of its neighbours above and below.
* ``paired_differences``: per published scheme, the arm's mean signed difference (positive: the arm
  is better) over the out-of-distribution cells both have a score in, and in how many the arm is
  better, tied or worse by the metric's tie margin (``Metric.tie_margin``, as ``ranking.tie_ranks``).
* ``mrr_shift``: each published scheme's OOD MRR without the arm and with it (an MRR depends on
  the field it is ranked in).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from suite.report import boards, ranking
from suite.report.compare import IGNORED, configuration

SCHEME_KEYS = ("layers", "pattern")  # of a configuration's model: the stack the scheme axis chooses


def setup(spec: str | dict) -> dict:
    """A run's configuration (``compare.configuration``) less its layer stack (``SCHEME_KEYS``):
    what an arm must share with a board run (recipe, tasks, eval grid, model size)."""
    d = configuration(spec)
    if isinstance(d.get("model"), dict):
        d = {**d, "model": {k: v for k, v in d["model"].items() if k not in SCHEME_KEYS}}
    return d


def setup_key(spec: str | dict) -> str:
    """``setup`` as one comparable text."""
    return json.dumps(setup(spec), sort_keys=True, default=str)


def _flat(d, prefix: str = "") -> dict:
    """A nested dict as {dotted name: value} (lists kept whole: ``eval.multiples``, ``tasks``)."""
    if not isinstance(d, dict):
        return {prefix: d}
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _full(spec: str | dict) -> dict:
    """A spec rebuilt with every option written out (a default shows as its value), less what
    ``setup`` leaves out; as stored where this code cannot rebuild it."""
    from suite.config.build import run_spec_from_dict

    d = json.loads(spec) if isinstance(spec, str) else dict(spec)
    try:
        d = run_spec_from_dict(d).to_dict()
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    model = {k: v for k, v in d.get("model", {}).items() if k not in (*SCHEME_KEYS, "name")}
    return {**{k: v for k, v in d.items() if k not in IGNORED}, "model": model}


def differences(spec: str | dict, seed: int, board: dict[str, tuple[str, set]]) -> list[str]:
    """What keeps an arm run (``spec``, ``seed``) from being like for like with a board, [] when
    nothing does. ``board``: {setup key: (a spec of it, the seeds it ran)}. A setup the board ran at
    another seed names the seed; else the fields of the nearest setup (fewest fields apart) that
    differ, 'train.steps: 12 here, 1750 on the board'."""
    key = setup_key(spec)
    if key in board:
        seeds = board[key][1]
        return [] if seed in seeds else [f"seed: {seed} here, {', '.join(map(str, sorted(seeds)))} on the board"]
    mine = _flat(_full(spec))
    best: list[str] | None = None
    for other, _ in board.values():
        theirs = _flat(_full(other))
        names = sorted(n for n in mine.keys() | theirs.keys() if mine.get(n) != theirs.get(n))
        if best is None or len(names) < len(best):
            best, nearest = names, theirs
    if best is None:
        return ["the board holds no run to compare with"]
    return [f"{n}: {mine.get(n, 'absent')} here, {nearest.get(n, 'absent')} on the board" for n in best]


def board_setups(df: pd.DataFrame) -> dict[str, tuple[str, set]]:
    """{setup key: (a stored spec, the seeds run)} of a board's rows (their ``spec`` column)."""
    runs = df.drop_duplicates("run_id")
    out: dict[str, tuple[str, set]] = {}
    for spec, seed in zip(runs.spec, runs.seed):
        if isinstance(spec, str):
            out.setdefault(setup_key(spec), (spec, set()))[1].add(int(seed))
    return out


def _overlap(a, b) -> bool:
    return bool(a.mrr_ood_low <= b.mrr_ood_high and b.mrr_ood_low <= a.mrr_ood_high)


def _separation(a, b) -> str:
    """'yes' where the two OOD MRR intervals are disjoint, 'no' where they overlap, and 'n/a' where
    both are single points (one seed of one task: the bootstrap had nothing to resample, so two
    different values say nothing of separation)."""
    if a.mrr_ood_low == a.mrr_ood_high and b.mrr_ood_low == b.mrr_ood_high:
        return "n/a"
    return "no" if _overlap(a, b) else "yes"


def place(table: pd.DataFrame, arm: list[str]) -> pd.DataFrame:
    """Per arm scheme of an MRR table with intervals (``ranking.mrr_intervals``/``mrr_every``,
    sorted best first setting by setting): ``scheme, setting, place`` (1 plus the schemes of its
    setting with a higher OOD MRR), ``of`` (the schemes there), ``mrr_ood, mrr_ood_low,
    mrr_ood_high``, ``above`` and ``below`` (the next schemes in the table's order, '' at an end)
    and ``separated_above``/``separated_below``: whether the arm's interval and theirs are
    disjoint ("yes"/"no"; "n/a" where both are single points, ``_separation``; "" at an end)."""
    out = []
    for scheme in arm:
        at = table.setting_at[table.scheme == scheme].iloc[0] if "setting_at" in table else 0
        field = table[table.setting_at == at] if "setting_at" in table else table
        field = field.reset_index(drop=True)
        i = int(np.flatnonzero(field.scheme == scheme)[0])
        me = field.iloc[i]
        row = {"scheme": scheme, "setting": me.get("setting", ""),
               "place": int((field.mrr_ood > me.mrr_ood).sum()) + 1, "of": len(field),
               "mrr_ood": me.mrr_ood, "mrr_ood_low": me.mrr_ood_low, "mrr_ood_high": me.mrr_ood_high}
        for side, j in (("above", i - 1), ("below", i + 1)):
            there = 0 <= j < len(field)
            row[side] = field.scheme.iloc[j] if there else ""
            row[f"separated_{side}"] = _separation(me, field.iloc[j]) if there else ""
        out.append(row)
    return pd.DataFrame(out)


def paired_differences(board: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Per other scheme of ``arm``'s setting on ``board`` (``boards.board_of``): over the
    out-of-distribution cells (task, eval length) where both have a score, ``cells``, ``mean_diff``
    (the arm's score minus theirs, signed by the metric so positive is the arm better) and
    ``better``, ``tied``, ``worse``: the cells where the signed difference is at least the metric's
    tie margin, within it, or at most minus it. Sorted by mean difference, smallest first."""
    b = board[board.eval_len > board.train_len]
    if "setting" in b:
        b = b[b.setting == board.setting[board.scheme == arm].iloc[0]]
    mine = b[b.scheme == arm].set_index(["task", "eval_len"])
    out = []
    for scheme, theirs in b[b.scheme != arm].groupby("scheme"):
        both = mine.join(theirs.set_index(["task", "eval_len"])["mean"].rename("theirs"), how="inner")
        both = both[both["mean"].notna() & both.theirs.notna()]
        metrics = [boards.metric_of(r) for _, r in both.iterrows()]
        diff = np.array([m.sign for m in metrics]) * (both["mean"].to_numpy() - both.theirs.to_numpy())
        margin = np.array([m.tie_margin for m in metrics])
        out.append({"scheme": scheme, "cells": len(both), "mean_diff": diff.mean() if len(both) else np.nan,
                    "better": int((diff >= margin).sum()), "tied": int((np.abs(diff) < margin).sum()),
                    "worse": int((diff <= -margin).sum())})
    columns = ["scheme", "cells", "mean_diff", "better", "tied", "worse"]
    return pd.DataFrame(out, columns=columns).sort_values(["mean_diff", "scheme"], ignore_index=True)


def mrr_shift(board: pd.DataFrame, arm: list[str], tie: str = "min") -> pd.DataFrame:
    """Per published scheme (every scheme of ``board`` not in ``arm``): ``mrr_ood_without`` (its OOD
    MRR on the board without the arm), ``mrr_ood_with`` (with it) and ``change`` (with - without),
    in the order of the board without the arm (``ranking.mrr``)."""
    without = ranking.mrr(board[~board.scheme.isin(arm)], tie)[["scheme", "mrr_ood"]]
    with_arm = ranking.mrr(board, tie).set_index("scheme").mrr_ood
    out = without.rename(columns={"mrr_ood": "mrr_ood_without"})
    out["mrr_ood_with"] = out.scheme.map(with_arm)
    out["change"] = out.mrr_ood_with - out.mrr_ood_without
    return out.reset_index(drop=True)
