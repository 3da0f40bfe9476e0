"""Leaderboard tables computed from the long-format results store.

* ``leaderboard``: mean and spread over seeds of the primary metric per scheme x task x eval length.
* ``mrr``: Mean Reciprocal Rank across (task x eval length) cells, the ranking of Kazemnejad et al.
  2023 ("The Impact of Positional Encoding on Length Generalization in Transformers").
* ``effective_length``: the longest eval length up to which a scheme stays at or above a threshold.
* ``breakdown``: the same metric by any setting the sweep varies (span, window, pattern, size, ...).
"""
from __future__ import annotations

import pandas as pd

PRIMARY = {"rank": "reciprocal_rank"}  # tasks whose headline metric is not exact match
TIE_RULES = ("min", "average")
BREAKDOWN_COLUMNS = ("spans", "window", "pattern", "model", "train_len")


def scheme_label(row) -> str:
    """'rope', 'alibi w=16', 'command_a w=16': the position scheme of a uniform stack, else the pattern."""
    label = row["positions"] if row["pattern"] == "uniform" else row["pattern"]
    if row["pattern"] == "uniform" and row["spans"] != "full":
        label = f"{label} {row['spans']}"
    window = row.get("window")
    if window is not None and not pd.isna(window):
        label = f"{label} w={int(window)}"
    return label


def primary(df: pd.DataFrame) -> pd.DataFrame:
    """Overall rows of each task's headline metric (exact match; reciprocal rank for ranking tasks),
    with a ``scheme`` column; cells that are not ``ok`` keep their status and a NaN value."""
    if df.empty:
        return df.assign(scheme=pd.Series(dtype=str))
    want = df.task.map(lambda t: PRIMARY.get(t, "exact_match"))
    d = df[(df.slice == "all") & (df.metric == want)].copy()
    d["scheme"] = d.apply(scheme_label, axis=1)
    d.loc[d.status != "ok", "value"] = float("nan")
    return d


def leaderboard(df: pd.DataFrame) -> pd.DataFrame:
    """Long table ``scheme, task, eval_len, mean, std, n`` (n: seeds with a value) plus ``status``
    (``ok`` or why the cell is empty)."""
    d = primary(df)
    g = d.groupby(["scheme", "task", "eval_len"], sort=True)
    out = g.value.agg(mean="mean", std="std", n="count").reset_index()
    out["std"] = out["std"].fillna(0.0).where(out["n"] > 0)
    why = g.status.agg(lambda s: "ok" if (s == "ok").any() else s.mode().iloc[0]).reset_index(drop=True)
    out["status"] = why.values
    return out


def mrr(board: pd.DataFrame, tie: str = "min") -> pd.DataFrame:
    """Per scheme: mean over (task, eval length) cells of 1 / rank of its mean score in that cell.

    ``tie="min"``: tied schemes share the best rank of their group (1, 1, 3); ``tie="average"``:
    they share the mean of the ranks they span (1.5, 1.5, 3). An empty cell (unsupported,
    diverged, failed) ranks below every scheme with a score.
    """
    if tie not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie!r}; valid: {', '.join(TIE_RULES)}")
    b = board.copy()
    b["score"] = b["mean"].fillna(-1.0)
    b["rank"] = b.groupby(["task", "eval_len"]).score.rank(method=tie, ascending=False)
    b["rr"] = 1.0 / b["rank"]
    out = b.groupby("scheme").agg(mrr=("rr", "mean"), cells=("rr", "size")).reset_index()
    return out.sort_values(["mrr", "scheme"], ascending=[False, True]).reset_index(drop=True)


def pivot(board: pd.DataFrame, task: str) -> pd.DataFrame:
    """Scheme x eval length for one task: 'mean ± std' strings, or the reason a cell is empty."""
    b = board[board.task == task]

    def cell(r):
        if r["n"] == 0:
            return r["status"]
        return f"{r['mean']:.2f} ± {r['std']:.2f}" if r["n"] > 1 else f"{r['mean']:.2f}"

    t = b.assign(cell=b.apply(cell, axis=1)).pivot(index="scheme", columns="eval_len", values="cell")
    order = b.groupby("scheme")["mean"].mean().sort_values(ascending=False).index
    return t.loc[order]


def effective_length(board: pd.DataFrame, threshold: float = 0.8) -> pd.DataFrame:
    """Scheme x task: the longest eval length L such that every eval length up to L scores at least
    ``threshold`` (0 when even the shortest does not)."""
    rows = []
    for (scheme, task), g in board.sort_values("eval_len").groupby(["scheme", "task"]):
        best = 0
        for _, r in g.iterrows():
            if r["n"] == 0 or r["mean"] < threshold:
                break
            best = int(r["eval_len"])
        rows.append({"scheme": scheme, "task": task, "effective_length": best})
    if not rows:
        return pd.DataFrame(columns=["scheme"])
    return pd.DataFrame(rows).pivot(index="scheme", columns="task", values="effective_length")


def breakdown(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Mean primary score by ``column`` x length ratio, over schemes, tasks and seeds."""
    d = primary(df)
    d[column] = d[column].astype(str)
    return d.pivot_table(index=column, columns="len_ratio", values="value", aggfunc="mean")


def varied(df: pd.DataFrame) -> list[str]:
    """The breakdown columns that take more than one value in this sweep."""
    return [c for c in BREAKDOWN_COLUMNS if c in df and df[c].astype(str).nunique() > 1]


def diagnostics(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows of a diagnostic metric with their slice fields (at, layer, site, lag, segment, far)
    as columns, plus ``scheme``."""
    d = df[(df.metric == metric) & (df.status == "ok")].copy()
    if d.empty:
        return d
    fields = d.slice.str.split(",").map(lambda kvs: dict(kv.split("=", 1) for kv in kvs))
    d = d.join(pd.DataFrame(fields.tolist(), index=d.index))
    d["scheme"] = d.apply(scheme_label, axis=1)
    d["layer"] = d["layer"].astype(int)
    return d


def recency_table(df: pd.DataFrame, site: str = "resid_out") -> pd.DataFrame:
    """Recency gap f(1) - f(L) of ``site`` by pattern and window x (stage, layer), mean over seeds."""
    d = diagnostics(df, "recency_gap")
    if d.empty:
        return d
    d = d[d.site == site]
    d["window"] = d["window"].fillna(0).astype(int)
    return d.pivot_table(index=["pattern", "window"], columns=["at", "layer"], values="value", aggfunc="mean")
