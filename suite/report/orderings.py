"""``python -m suite.report.orderings [board ...]``: what the fair protocol of issue 60 moves on
each shipped board (published/<board>.jsonl.gz), for the republish note.

The headline ordering before the issue ranked the learned runs only, with one MRR over cells that
pool settings, one tie margin (0.01) for every metric and a bootstrap over seeds only. Each change
is applied in turn, in this order, so that every move is named by the change that made it:

1. ``tie margin``: each metric's own tie margin (``suite.data.metrics.Metric.tie_margin``);
2. ``every run``: every run ranked, learned or not;
3. ``per setting``: each setting ranked apart on a board that runs a task under several training
   lengths or models (cells never pool settings);
4. ``intervals``: the bootstrap resamples tasks, then seeds: which neighbours' intervals separate
   them, and which bootstraps are discrete.

For each board it prints the leader before and after and one table of what moved: a scheme whose
rank changed (within its setting; ranked or not), a pair of schemes whose order flipped, a pair of
neighbours whose separation changed, and on a board of several settings Kendall's tau between
them before and after. The numbers are computed from the shipped rows by the report's own
functions (``ranking``, ``stability``), with the same seeds, so a rerun prints the same.
"""
from __future__ import annotations

import itertools
import sys
import warnings

import pandas as pd

from suite.commandline import command, parser

BOARDS = ("default", "flagship", "flipflop_path", "kz", "lm", "scale", "state", "windows", "zoo")
STEPS = ("tie margin", "every run", "per setting", "intervals")
_SAME = 1e-12  # two MRRs closer than this are one value
MOVED = ["change", "what moved", "before", "after"]


def protocol(rows: pd.DataFrame, step: int, intervals: bool = False) -> pd.DataFrame:
    """The headline MRR table of ``primary`` rows under the protocol after the first ``step`` changes
    of ``STEPS`` (0: the protocol before issue 60), with ``label`` ('alibi' or 'alibi [L=32]') and
    ``rank`` within the ranking the scheme stands in (its setting, or the pooled board); bootstrap
    intervals only when ``intervals`` (the seeds alone below step 4)."""
    from suite.data.metrics import TIED_BELOW
    from suite.report import boards, ranking

    several = len(boards.settings_in_order(rows)) > 1
    labels = (rows["name"] + " [" + rows.setting + "]") if several else rows.scheme
    label_of = dict(zip(rows.scheme, labels))
    kept = rows if step >= 2 else ranking.learned_rows(rows)
    if step < 3:  # one ranking over every cell: settings pooled
        kept = kept.assign(setting="", setting_at=0, name=kept.scheme)
    margin = TIED_BELOW if step < 1 else None
    board = boards.board_of(kept)
    if intervals:
        resample = ranking.TASKS if step >= 4 else ranking.SEEDS
        table = ranking.mrr_intervals(board, kept, resample=resample, margin=margin)
    else:
        table = ranking.mrr(board, margin=margin)
    table = table.assign(label=table.scheme.map(label_of))
    return table.assign(rank=table.groupby("setting_at").mrr_ood.transform(_ranks))


def _ranks(mrr: pd.Series) -> pd.Series:
    """1 plus the number of schemes with a higher MRR; NaN where a scheme has none."""
    return mrr.map(lambda m: float("nan") if pd.isna(m) else 1 + int(((mrr - m) >= _SAME).sum()))


def _within(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """A pooled table's ranks recounted among each setting's schemes alone (``rank``), the
    setting of each scheme in ``setting``: what a per-setting ranking is compared with."""
    setting = rows.drop_duplicates("scheme").set_index("scheme").setting
    table = table.assign(setting=table.scheme.map(setting))
    return table.assign(rank=table.groupby("setting").mrr_ood.transform(_ranks))


def moves(before: pd.DataFrame, after: pd.DataFrame, change: str) -> list[dict]:
    """``MOVED`` rows: each scheme whose rank changed (or that became ranked or unranked), and each
    pair of schemes of one setting whose order flipped, between two tables of ``protocol``."""
    b, a = before.set_index("label"), after.set_index("label")
    out = []
    for label in sorted(set(b.index) | set(a.index), key=lambda k: (a["rank"].get(k, 1e9), k)):
        rb, ra = b["rank"].get(label, float("nan")), a["rank"].get(label, float("nan"))  # absent: not ranked
        if not (pd.isna(rb) and pd.isna(ra)) and rb != ra:
            out.append({"change": change, "what moved": f"rank of {label}", "before": _rank_text(rb),
                        "after": _rank_text(ra)})
    for x, y in itertools.combinations(sorted(set(b.index) & set(a.index)), 2):
        if b.setting[x] != b.setting[y] or a.setting[x] != a.setting[y]:
            continue
        db, da = b.mrr_ood[x] - b.mrr_ood[y], a.mrr_ood[x] - a.mrr_ood[y]
        if abs(db) >= _SAME and abs(da) >= _SAME and (db > 0) != (da > 0):
            first, second = (x, y) if db > 0 else (y, x)
            out.append({"change": change, "what moved": f"order of {first} / {second}",
                        "before": f"{first} ahead ({b.mrr_ood[first]:.3f} vs {b.mrr_ood[second]:.3f})",
                        "after": f"{second} ahead ({a.mrr_ood[second]:.3f} vs {a.mrr_ood[first]:.3f})"})
    return out


def _rank_text(rank) -> str:
    return "not ranked" if pd.isna(rank) else f"{int(rank)}"


def separations(before: pd.DataFrame, after: pd.DataFrame) -> list[dict]:
    """``MOVED`` rows: each pair of neighbours (in the order after) whose OOD intervals separated
    them under one bootstrap and not under the other, and each scheme whose interval became or
    stopped being discrete (``stats.interval_text``)."""
    from suite.report import ranking, stats

    b = before.set_index("label")
    out = []
    for at, g in after.groupby("setting_at", sort=True):
        g = g.reset_index(drop=True)
        for i in range(len(g) - 1):
            x, y = g.label[i], g.label[i + 1]
            was, now = _apart(b.loc[x], b.loc[y]), _apart(g.loc[i], g.loc[i + 1])
            if was != now:
                out.append({"change": "intervals", "what moved": f"separation of {x} / {y}",
                            "before": was, "after": now})
    for r in after.itertuples():
        old = b.loc[r.label]
        texts = [stats.interval_text(t.mrr_ood, t.mrr_ood_low, t.mrr_ood_high, t.mrr_ood_distinct, t.mrr_ood_modal,
                                     ranking.BOOTSTRAP_REPS) for t in (old, r)]
        if ("distinct" in texts[0]) != ("distinct" in texts[1]):
            out.append({"change": "intervals", "what moved": f"interval of {r.label}", "before": texts[0],
                        "after": texts[1]})
    return out


def _apart(x, y) -> str:
    """'separated' or 'not separated': whether two OOD intervals are disjoint."""
    if x.mrr_ood_low > y.mrr_ood_high or y.mrr_ood_low > x.mrr_ood_high:
        return "separated"
    return "not separated"


def leader(table: pd.DataFrame) -> str:
    """'alibi (0.68 [0.60, 0.71]; not separated from t5)': the first scheme of each ranking in
    ``table`` with its OOD MRR (``stats.interval_text``) and whether it is separated from the second."""
    from suite.report import ranking, stats

    out = []
    for _, g in table.groupby("setting_at", sort=True):
        g = g[g.mrr_ood.notna()].reset_index(drop=True)
        if g.empty:
            continue
        top = g.loc[0]
        mrr = stats.interval_text(top.mrr_ood, top.mrr_ood_low, top.mrr_ood_high, top.mrr_ood_distinct,
                                  top.mrr_ood_modal, ranking.BOOTSTRAP_REPS)
        apart = f"{_apart(top, g.loc[1])} from {g.label[1]}" if len(g) > 1 else "alone"
        out.append(f"{top.label} ({mrr}; {apart})")
    return "; ".join(out) or "nothing ranked"


def taus(rows: pd.DataFrame) -> list[dict]:
    """``MOVED`` rows of Kendall's tau between settings: learned runs with a seeds-only bootstrap
    (before), every run with it (every run), every run resampling tasks and seeds (intervals)."""
    from suite.report import ranking, stability

    built = {name: stability.build(rows, runs=runs, resample=resample) for name, runs, resample in (
        ("before", stability.LEARNED, ranking.SEEDS), ("every run", stability.EVERY, ranking.SEEDS),
        ("after", stability.EVERY, ranking.TASKS))}
    if any(b is None for b in built.values()):
        return []
    out = []
    text = {name: b["taus"].set_index(["setting_a", "setting_b"]) for name, b in built.items()}
    for key, row in text["before"].iterrows():
        steps = [stability.tau_text(t.loc[key]) for t in text.values()]
        for change, (was, now) in (("every run", steps[:2]), ("intervals", steps[1:])):
            if was != now:
                out.append({"change": change, "what moved": f"Kendall tau {key[0]} vs {key[1]}", "before": was,
                            "after": now})
    return out


def board_report(board: str) -> str:
    """The before-and-after of one shipped board, as Markdown."""
    from suite.report import boards
    from suite.results import store

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = boards.primary(store.load(store.shipped_path(board)))
    steps = [protocol(rows, step) for step in range(4)]
    settings = boards.settings_in_order(rows)
    pooled = _within(steps[2], rows) if settings else steps[2]  # the pooled ranks recounted within each setting
    seeds, tasks = protocol(rows, 3, intervals=True), protocol(rows, 4, intervals=True)
    first = protocol(rows, 0, intervals=True)
    moved = [*moves(steps[0], steps[1], STEPS[0]), *moves(steps[1], steps[2], STEPS[1]),
             *moves(pooled, steps[3], STEPS[2]), *separations(seeds, tasks)]
    moved += taus(rows) if settings else []
    head = (f"## {board}\n\n{rows.run_id.nunique()} runs, {rows.scheme.nunique()} configurations"
            + (f", {len(settings)} settings ({'; '.join(settings)})" if settings else "") + ".\n\n"
            f"- leader before (learned runs, pooled, 0.01 for every metric, seeds-only bootstrap): {leader(first)}\n"
            f"- leader after (every run, per setting, each metric's margin, tasks and seeds): {leader(tasks)}\n")
    table = pd.DataFrame(moved, columns=MOVED)
    return head + "\n" + (table.to_markdown(index=False) if len(table) else "Nothing moved.") + "\n"


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.orderings") -> int:
    p = parser(prog, __doc__)
    p.add_argument("boards", nargs="*", default=list(BOARDS), help=f"shipped boards (default: {', '.join(BOARDS)})")
    args = p.parse_args(argv)
    for board in args.boards:
        print(board_report(board), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
