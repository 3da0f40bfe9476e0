"""The leaderboard: each task's headline rows, labelled by scheme, pooled into cells.

Everything ranks from what the rows store (``suite.results.store``): each task's ``headline``
metric and each metric's direction (``higher_is_better``), range (``low``, ``high``) and ``share``
flag, so a board needs neither the task code nor today's metric declarations; ``metric_of`` gives
the metric a board row declares (``suite.data.metrics.stored``).

* ``primary``: the headline rows of every run, with the scheme label (``scheme_label``, split by
  the settings that tell configurations apart, ``labels.split_labels``) and whether the run has
  learned its task (``suite.results.has_learned``).
* ``board_of`` / ``leaderboard``: per scheme x task x eval length, the mean over seeds of the
  task's headline metric with a 95 % interval (Student-t over seeds; Wilson over examples for a
  single seed). A cell holds only runs that share ``config_hash`` (identical except for the seed).
* ``split_boards``: the same board per evaluation split of a task (flip-flop's in_dist, sparse, dense).
* ``pivot``: one task's board as the report shows it, best scheme first (``scheme_order``).
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd

from suite.evaluation.slices import parse_slice
from suite.model.span_kinds import KINDS
from suite.report import labels, stats
from suite.results.has_learned import check_rows, learned, learned_mark
from suite.data.metrics import Metric, stored
from suite.results.store import DECLARED

# what a run's configuration is made of, for rows written before ``config_hash`` existed
CONFIG_COLUMNS = ("model", "n_layers", "d_model", "n_heads", "pattern", "positions", "spans", *KINDS,
                  "train_len", "steps")
SPLIT = "split"  # the slice field naming an evaluation split: a distribution the task's eval_generate draws from
EMPTY = "-"  # a cell with no score because the scheme cannot represent the length, or a length never reached
BOARD_CSV = ["scheme", "task", "eval_len", "metric", "mean", "ci_low", "ci_high", "std", "n_seeds", "status", "not_learned"]
MODEL_COLUMNS = ("model", "n_layers", "d_model", "n_heads")  # what a model setting is: its name and its size
SETTING_COLUMNS = ("train_len", "model")  # what a setting is: a training length and a model (by name and size)
_PARTS = (("train_len", "L={}"), ("model", "{}"), ("n_layers", "{} layers"), ("d_model", "d_model {}"),
          ("n_heads", "{} heads"))  # how a setting names each column that varies
SETTING_KEYS = ("setting", "setting_at", "name")  # what ``primary`` says of a row's setting, carried into its cell
# what a board built without the metric's declaration holds: a share, where higher is better
UNDECLARED = {"metric": "", "higher_is_better": True, "low": 0.0, "high": 1.0, "share": True}


def metric_of(row) -> Metric:
    """The metric a board row (a Series, a dict or a named tuple) declares, as it stored it
    (``suite.data.metrics.stored``: its name, direction, range and share flag); a column the
    board lacks takes ``UNDECLARED``'s value."""
    get = row.get if hasattr(row, "get") else lambda key, default: getattr(row, key, default)
    return stored(*(get(key, default) for key, default in UNDECLARED.items()))


def size_label(row) -> str:
    """'w=16', 'c=16', 'w=8 c=16' or '': a row's span sizes (its column of each span kind, ``KINDS``)."""
    sizes = [(short, row.get(column)) for column, short in KINDS.items()]  # one size column per span kind
    return " ".join(f"{short}={int(size)}" for short, size in sizes if size is not None and not pd.isna(size))


def scheme_label(row) -> str:
    """'rope', 'alibi swa w=16', 'llama4 c=16': the position scheme of a uniform stack (with its
    span when not full), else the pattern; then the span sizes (``size_label``)."""
    label = row["positions"] if row["pattern"] == "uniform" else row["pattern"]
    if row["pattern"] == "uniform" and row["spans"] != "full":
        label = f"{label} {row['spans']}"
    sizes = size_label(row)
    return f"{label} {sizes}" if sizes else label


def config_key(df: pd.DataFrame) -> pd.Series:
    """Each row's ``config_hash``; for rows without one (older stores), a hash of CONFIG_COLUMNS."""
    fallback = df.reindex(columns=list(CONFIG_COLUMNS)).apply(lambda r: "|".join(map(str, r)), axis=1)
    fallback = fallback.map(lambda s: hashlib.sha1(s.encode()).hexdigest()[:12])
    if "config_hash" not in df:
        return fallback
    return df["config_hash"].where(df["config_hash"].notna(), fallback).astype(str)


def primary(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Overall rows of each task's headline metric (or of ``metric`` for every task), with
    ``config``, ``scheme``, ``setting``, ``setting_at``, ``name`` and ``learned`` columns; cells that
    are not ``ok`` keep their status and a NaN value. ``learned``: whether the row's run has learned
    its task (``learned``, judged by the run's check score where ``df`` holds one, else by these
    rows at the training length).

    ``setting``: the row's setting on a board that runs one task under several training lengths or
    models (``setting_labels``; '' on any other board), ``setting_at`` its place in their order, and
    ``name`` the scheme's label among the runs of its setting alone ('alibi'), where ``scheme`` tells
    every configuration of the board apart ('alibi train_len=64 ...'). Rankings never pool settings.

    Rows with a ``source`` (runs placed beside the sweep's, ``python -m suite.report --beside``) form
    cells of their own, labelled 'rope [path]'. A scheme label that covers more than one configuration on one task is split on every task, each
    configuration named by the settings that differ ("alibi steps=80", ``labels.split_labels``),
    so no cell pools them. One model per task (a config hash per task) is no reason to split a label.
    """
    if df.empty:
        return df.assign(scheme=pd.Series(dtype=str), config=pd.Series(dtype=str))
    want = df.headline if metric is None else metric
    d = df[(df.slice == "all") & (df.metric == want)].copy()
    if d.empty:
        return d.assign(scheme=pd.Series(dtype=str), config=pd.Series(dtype=str))
    d["config"] = config_key(d)
    if "source" in d and d.source.notna().any():  # runs placed beside the sweep's own: cells of their own
        other = d.source.notna()
        d.loc[other, "config"] = d.config[other] + "@" + d.source[other].astype(str)
    d["scheme"] = scheme_labels(d)
    d["setting"], order = setting_labels(d)
    d["setting_at"] = d.setting.map({s: i for i, s in enumerate(order)}).fillna(0).astype(int)
    d["name"] = d.scheme if len(order) < 2 else pd.concat([scheme_labels(g) for _, g in d.groupby("setting")])
    d.loc[d.status != "ok", "value"] = float("nan")
    return d.join(learned(d, check_rows(df)).rename("learned"), on=["run_id", "task"])


def scheme_labels(d: pd.DataFrame) -> pd.Series:
    """Each headline row's scheme label (``scheme_label``; 'rope [path]' for a row with a ``source``),
    a label that covers several configurations (``config``) on one task split on every task by the
    settings that differ (``labels.split_labels``)."""
    base = d.apply(scheme_label, axis=1)
    if "source" in d and d.source.notna().any():
        base = base.where(d.source.isna(), base + " [" + d.source.astype(str) + "]")
    # a scheme name ('alibi', or the pattern) covering several configurations on a task splits all of
    # them, 'alibi steps=100' and 'alibi swa w=16 steps=1750', not only those sharing a whole label
    family = d.positions.where(d.pattern == "uniform", d.pattern).astype(str)
    if "source" in d:
        family = family.where(d.source.isna(), family + " [" + d.source.astype(str) + "]")
    per_task = d.config.groupby([family, d.task]).transform("nunique")
    split = per_task.groupby(family).transform("max") > 1
    suffix = pd.Series("", index=d.index)
    for name in family[split].unique():
        rows = d[family == name]
        groups = {task: list(g.config.unique()) for task, g in rows.groupby("task")}
        specs = {c: json.loads(s) if isinstance(s, str) else None
                 for c, s in (rows.groupby("config").spec.first().items() if "spec" in rows else [])}
        named = base[rows.index].groupby(rows.config).first().to_dict()
        suffix[rows.index] = rows.config.map(labels.split_labels(groups, specs, named))
    return base.where(~split | (suffix == ""), base + " " + suffix)


def _cell(g: pd.DataFrame) -> pd.Series:
    """One leaderboard cell from its runs' rows: mean, std, n (seeds with a value), interval
    (clipped to the stored range of the metric; Wilson's over examples only for a share), status,
    and the metric's stored declaration."""
    v = g.value.dropna()
    n = len(v)
    first = g.iloc[0]
    if n >= 2:
        low, high = stats.t_interval(v, bounds=(float(first.low), float(first.high)))
    elif n == 1 and first.share == True:  # noqa: E712 (a stored bool, numpy or not)
        low, high = stats.wilson_interval(float(v.iloc[0]), g.loc[v.index, "n"].iloc[0])
    else:
        low = high = math.nan
    return pd.Series({
        "metric": first.metric, **{key: first[key] for key in DECLARED},
        "train_len": g.train_len.iloc[0], "config": g.config.iloc[0],
        "mean": v.mean() if n else math.nan, "std": v.std() if n > 1 else (0.0 if n else math.nan),
        "n": n, "ci_low": low, "ci_high": high,
        "status": "ok" if (g.status == "ok").any() else g.status.mode().iloc[0],
        **{key: first[key] for key in SETTING_KEYS if key in g},
    })


def leaderboard(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """``board_of`` the ``primary`` rows of ``df``."""
    return board_of(primary(df, metric))


def board_of(d: pd.DataFrame) -> pd.DataFrame:
    """Long table ``scheme, task, eval_len, mean, std, n, ci_low, ci_high, metric``, the metric's
    stored declaration, ``train_len, config, status, not_learned, runs`` from ``primary`` rows: n
    is the number of seeds with a value, the interval is ``stats.t_interval`` over seeds
    (``stats.wilson_interval`` over the run's examples when one seed has a value), status is ``ok``
    or why the cell is empty; with the rows' setting (``SETTING_KEYS``) where they say it."""
    cols = ["scheme", "task", "eval_len", "mean", "std", "n", "ci_low", "ci_high", "metric", *DECLARED, "train_len",
            "config", "status", "not_learned", "runs", *(key for key in SETTING_KEYS if key in d)]
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(["scheme", "task", "eval_len"], sort=True).apply(_cell, include_groups=False).reset_index()
    out["n"] = out["n"].astype(int)
    counts = not_learned(d)
    out = out.merge(counts, on=["scheme", "task"], how="left")
    out[["not_learned", "runs"]] = out[["not_learned", "runs"]].fillna(0).astype(int)
    return out[cols]


def not_learned(d: pd.DataFrame) -> pd.DataFrame:
    """``scheme, task, not_learned, runs``: how many of each cell row's runs have not learned
    their task (``primary``'s ``learned`` column; ``learned`` of ``d`` for rows without it), out of how many."""
    runs = d.drop_duplicates(["scheme", "task", "run_id"])
    if "learned" not in runs:
        runs = runs.join(learned(d).rename("learned"), on=["run_id", "task"])
    runs = runs.assign(miss=~runs.learned.astype(bool))
    return runs.groupby(["scheme", "task"]).agg(not_learned=("miss", "sum"), runs=("run_id", "size")).reset_index()


def split_boards(df: pd.DataFrame, metric: str | None = None,
                 rows: pd.DataFrame | None = None) -> dict[tuple[str, str], pd.DataFrame]:
    """``{(task, split): leaderboard}`` for every task whose rows carry evaluation splits (slices
    ``split=<name>`` alone, e.g. flip-flop's in_dist, sparse and dense): the headline metric over the
    examples of that split only, a board like ``leaderboard``'s. Splits are scored apart because the
    overall score mixes distributions the model was and was not trained on. ``rows``: the
    ``primary`` rows of ``df``, when already built."""
    if df.empty:
        return {}
    d = df[df.slice.str.startswith(f"{SPLIT}=")]
    d = d[d.slice.map(lambda s: list(parse_slice(s)) == [SPLIT]).astype(bool)]
    if d.empty:
        return {}
    whole = not_learned(primary(df, metric) if rows is None else rows)  # learned: on the whole task, never one split
    out = {}
    for (task, s), g in d.groupby(["task", "slice"], sort=True):
        board = leaderboard(g.assign(slice="all"), metric).drop(columns=["not_learned", "runs"])
        marks = board.merge(whole, on=["scheme", "task"], how="left")
        board[["not_learned", "runs"]] = marks[["not_learned", "runs"]].fillna(0).astype(int).to_numpy()
        out[(task, parse_slice(s)[SPLIT])] = board
    return out


def first_ood(board: pd.DataFrame) -> pd.DataFrame:
    """The board's cells at each task's first eval length beyond training (smallest len_ratio > 1),
    in each setting apart where the board has several."""
    b = board.assign(len_ratio=board.eval_len / board.train_len)
    beyond = b[b.len_ratio > 1]
    keys = [beyond.setting, beyond.task] if "setting" in beyond else [beyond.task]
    return beyond[beyond.len_ratio == beyond.groupby(keys).len_ratio.transform("min")]


def cell_text(mean: float, low: float, high: float, n: int, digits: int = 2) -> str:
    """'0.93 [0.88, 0.97]', the mean with its 95 % interval; '5.71 (n=1)' for a cell without an
    interval (one seed of a metric that is not a share: no spread to estimate), never '[nan, nan]'."""
    if pd.isna(low) or pd.isna(high):
        return f"{mean:.{digits}f} (n={int(n)})"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def length_header(eval_len, train_len) -> str:
    """'64 (2x)': an eval length in tokens with its multiple of the training length."""
    return f"{int(eval_len)} ({eval_len / train_len:g}x)"


def scheme_order(board: pd.DataFrame) -> list[str]:
    """Schemes best first by their mean headline score over the cells shown, signed so that a
    better score is larger (a loss counts negated); an empty cell counts as its metric's worst
    value (0 for a share; for an unbounded loss, the worst score shown); schemes with no score at
    all last; ties by name."""
    declared = [metric_of(r) for r in board.itertuples(index=False)]
    signs = pd.Series([m.sign for m in declared], index=board.index, dtype=float)
    signed = board["mean"] * signs
    # an empty cell's score: its metric's worst value, signed (the low end where higher is better, else the high end)
    floor = pd.Series([m.sign * (m.low if m.sign > 0 else m.high) for m in declared], index=board.index, dtype=float)
    shown = signed[board.n > 0].min() if (board.n > 0).any() else 0.0
    worst = floor.where(np.isfinite(floor), shown)
    key = board.assign(score=signed.where(board.n > 0, worst)).groupby("scheme").agg(
        score=("score", "mean"), scored=("n", "max"))
    key = key.assign(none=key.scored == 0).reset_index()
    key = key.sort_values(["none", "score", "scheme"], ascending=[True, False, True])
    return list(key.scheme)


def pivot(board: pd.DataFrame, task: str) -> pd.DataFrame:
    """Scheme x eval length for one task, one header row: 'mean [ci_low, ci_high]' ('mean (n=1)'
    for a cell without an interval, ``cell_text``), '-' where the
    scheme cannot represent the length (unsupported), else why the cell is empty (diverged).
    Rows best first (``scheme_order``; setting by setting where the board has several); columns
    named '64 (2x)' ('64' where the task's runs train at several lengths), then 'runs learned':
    how many of each row's runs have learned the task ('2 of 3'; the mark '(1 of 3 not learned)'
    beside the scheme says the same where some have not)."""
    b = board[board.task == task]

    def cell(r):
        if r["n"] == 0:
            return EMPTY if r["status"] == "unsupported" else r["status"]
        return cell_text(r["mean"], r["ci_low"], r["ci_high"], r["n"])

    t = b.assign(cell=b.apply(cell, axis=1)).pivot(index="scheme", columns="eval_len", values="cell")
    order = scheme_order(b)
    if "setting_at" in b:  # each setting's schemes together, in the settings' order
        at = b.groupby("scheme").setting_at.first()
        order = sorted(order, key=lambda s: at[s])
    t = t.loc[order].fillna(EMPTY)  # a length a setting never evaluated
    one_length = b.train_len.nunique() <= 1
    t.columns = [length_header(c, b.train_len.iloc[0]) if one_length else f"{int(c)}" for c in t.columns]
    if "not_learned" in b:
        marks = b.drop_duplicates("scheme").set_index("scheme")
        t["runs learned"] = [f"{marks.runs[s] - marks.not_learned[s]} of {marks.runs[s]}" for s in t.index]
        t.index = [s + learned_mark(marks.not_learned[s], marks.runs[s]) for s in t.index]
    t.index.name = "scheme"
    return t


def model_labels(df: pd.DataFrame) -> pd.Series:
    """Each row's model by name and size, 'tiny, 4 layers, d_model 64, 4 heads', so two widths of
    one named model are two settings; a size the row does not store is left out."""
    d = df.reindex(columns=list(MODEL_COLUMNS))

    out = d["model"].astype(str)
    for column, before, after in (("n_layers", "", " layers"), ("d_model", "d_model ", ""), ("n_heads", "", " heads")):
        size = pd.to_numeric(d[column], errors="coerce")
        out = out.where(size.isna(), out + ", " + before + size.fillna(0).astype(int).astype(str) + after)
    return out


def setting_values(df: pd.DataFrame, column: str) -> pd.Series:
    """Each row's value of the setting ``column`` as text: the model by name and size for "model"
    (``model_labels``), else the column's value ("None": no window)."""
    return model_labels(df) if column == "model" else df[column].map(str)


def _within_a_task(values: pd.Series, df: pd.DataFrame) -> bool:
    """Whether ``values`` (one per row of ``df``) take more than one value on some task."""
    return "task" in df and bool((values.astype(str).groupby(df.task.astype(str)).nunique() > 1).any())


def varied(df: pd.DataFrame) -> list[str]:
    """The setting columns (training length, model) that take more than one value on some task of
    this board: a task run under two training lengths or two models. A length chosen per task
    family (the flagship's text at 64 bytes, the rest at 32 tokens) varies across tasks only: no
    task meets two settings, and it is no setting."""
    return [c for c in SETTING_COLUMNS if c in df and _within_a_task(setting_values(df, c), df)]


def setting_labels(df: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """(each row's setting, the settings in order): of training length, model name, layers, width
    and heads, those that vary on some task (``varied``), joined by ' · ' ('L=32', 'd_model 64 · 4
    heads', 'L=64 · small'); ordered by training length, then model size, then name. A board on
    which no task meets two settings has one, '' (and no order)."""
    if not varied(df):
        return pd.Series("", index=df.index), []
    parts = []
    for column, text in _PARTS:
        if column in df and _within_a_task(df[column], df):
            values = df[column].map(lambda v: str(int(v)) if isinstance(v, (int, float)) and pd.notna(v) else str(v))
            parts.append(values.map(text.format))
    label = parts[0]
    for more in parts[1:]:
        label = label + " · " + more
    key = df.reindex(columns=["train_len", "d_model", "n_heads", "n_layers"]).apply(pd.to_numeric, errors="coerce")
    key = key.assign(label=label).sort_values(["train_len", "d_model", "n_heads", "n_layers", "label"])
    return label, list(dict.fromkeys(key.label))


def settings_in_order(board: pd.DataFrame) -> list[str]:
    """The settings of a board (or of ``primary`` rows) in their order (``setting_labels``); [] on a
    board of one setting."""
    if "setting" not in board or board.setting.nunique() < 2:
        return []
    return list(board.drop_duplicates("setting").sort_values("setting_at").setting)
