"""``python -m suite.report.orderings [board ...] [--before REV] [--after PATH]``: what the fair
protocol moves on each shipped board (published/<board>.jsonl.gz), for the republish note.

The headline ordering before the issue ranked the learned runs only, with one MRR over cells that
pool settings, one tie margin (0.01) for every metric and a bootstrap over seeds only. Each change
is applied in turn, in this order, so that every move is named by the change that made it:

1. ``tie margin``: each metric's own tie margin (``suite.data.metrics.Metric.tie_margin``);
2. ``every run``: every run ranked, learned or not;
3. ``per setting``: each setting ranked apart on a board that runs a task under several training
   lengths or models (cells never pool settings);
4. ``intervals``: the bootstrap resamples tasks, then seeds: which neighbours' intervals separate
   them, and which bootstraps are discrete.

5. ``retrained``: with ``--before REV``, the four changes apply to the board as git revision REV
   shipped it (its runs computed by earlier code), and the last step sets that ranking against the
   board's runs retrained by today's code (``--after``: the shipped rows, or a results folder of
   the sweep still unpublished), both under the fair protocol: what the code that computes the
   numbers moved (T5's reach, the text corpora and their scoring, the task hooks). Each of its
   moves names, in ``where``, the task on which the scheme's own OOD MRR changed most.

For each board it prints the leader before and after and one table of what moved: a scheme whose
rank changed (within its setting; ranked or not), a pair of schemes whose order flipped, a pair of
neighbours whose separation changed, and on a board of several settings Kendall's tau between
them before and after. The numbers are computed from the shipped rows by the report's own
functions (``ranking``, ``stability``), with the same seeds, so a rerun prints the same.
"""
from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd

from suite.commandline import Refused, command, parser

STEPS = ("tie margin", "every run", "per setting", "intervals")
RETRAINED = "retrained"
_SAME = 1e-12  # two MRRs closer than this are one value
MOVED = ["change", "what moved", "before", "after", "where"]


def protocol(rows: pd.DataFrame, step: int, intervals: bool = False) -> pd.DataFrame:
    """The headline MRR table of ``primary`` rows under the protocol after the first ``step`` changes
    of ``STEPS`` (0: the protocol before the fair one (docs/protocol.md)), with ``label`` ('alibi' or 'alibi [L=32]') and
    ``rank`` within the ranking the scheme stands in (its setting, or the pooled board); bootstrap
    intervals only when ``intervals`` (the seeds alone below step 4)."""
    from suite.data.metrics import TIED_BELOW
    from suite.report import boards, ranking

    label_of = dict(zip(rows.scheme, row_labels(rows)))
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


def row_labels(rows: pd.DataFrame) -> pd.Series:
    """Each ``primary`` row's label across protocols: its scheme ('alibi') on a board of one setting;
    on a board of several, its scheme within its setting and the setting ('alibi [L=32]'), which
    stays the same when retraining changes a setting-dependent option (T5's ``max_distance``)."""
    from suite.report import boards

    several = len(boards.settings_in_order(rows)) > 1
    return (rows["name"] + " [" + rows.setting + "]") if several else rows.scheme


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


def separations(before: pd.DataFrame, after: pd.DataFrame, change: str = "intervals") -> list[dict]:
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
            if x not in b.index or y not in b.index:  # a scheme the other table does not rank: its rank says so
                continue
            was, now = _apart(b.loc[x], b.loc[y]), _apart(g.loc[i], g.loc[i + 1])
            if was != now:
                out.append({"change": change, "what moved": f"separation of {x} / {y}",
                            "before": was, "after": now})
    for r in after.itertuples():
        if r.label not in b.index:
            continue
        old = b.loc[r.label]
        texts = [stats.interval_text(t.mrr_ood, t.mrr_ood_low, t.mrr_ood_high, t.mrr_ood_distinct, t.mrr_ood_modal,
                                     ranking.BOOTSTRAP_REPS) for t in (old, r)]
        if ("distinct" in texts[0]) != ("distinct" in texts[1]):
            out.append({"change": change, "what moved": f"interval of {r.label}", "before": texts[0],
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


def by_task(rows: pd.DataFrame) -> pd.DataFrame:
    """Each scheme's OOD MRR on each task alone (every run, each metric's margin): ``label`` x task."""
    out = {}
    for task, g in rows.groupby("task"):
        table = protocol(g, 4)
        out[task] = table.set_index("label").mrr_ood
    return pd.DataFrame(out)


def where(label: str, before: pd.DataFrame, after: pd.DataFrame) -> str:
    """'copy 0.50 -> 0.33': the task on which ``label``'s own OOD MRR changed most between two
    ``by_task`` tables ('' where it has no task in both)."""
    if label not in before.index or label not in after.index:
        return ""
    change = (after.loc[label] - before.loc[label]).dropna()
    if change.empty:
        return ""
    task = change.abs().idxmax()
    return f"{task} {before.loc[label, task]:.2f} -> {after.loc[label, task]:.2f}"


def retrained(old: pd.DataFrame, new: pd.DataFrame, old_rows: pd.DataFrame, new_rows: pd.DataFrame) -> list[dict]:
    """``MOVED`` rows between the board as shipped before (``old``, under the fair protocol, with
    intervals) and retrained by today's code (``new``): ranks, orders and separations, each rank or
    order naming in ``where`` the task that moved the scheme (or the pair's first scheme) most."""
    tb, ta = by_task(old_rows), by_task(new_rows)
    out = moves(old, new, RETRAINED) + separations(old, new, RETRAINED)
    for r in out:
        label = r["what moved"].split(" of ", 1)[1].split(" / ")[0]
        r["where"] = where(label, tb, ta)
    return out


def shipped_at(board: str, rev: str, repo: str | Path = ".") -> pd.DataFrame:
    """The rows of published/<board>.jsonl.gz as git revision ``rev`` of the repository at ``repo`` holds them."""
    from suite.results import store

    path = store.shipped_path(board).as_posix()
    got = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, cwd=repo)
    if got.returncode != 0:
        raise Refused(f"--before {rev!r}: git holds no {path} at that revision ({got.stderr.decode().strip()}); "
                      f"give a commit (or tag) of this repository's history that ships the board, e.g. the "
                      f"commit before the board was republished (git log -- {path})")
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / Path(path).name
        file.write_bytes(got.stdout)
        return _load(file)


def _load(path) -> pd.DataFrame:
    from suite.report import boards
    from suite.results import store

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return boards.primary(store.load(path))


def board_report(board: str, before: str | None = None, after: str | Path | None = None,
                 loaded: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> str:
    """The before-and-after of one shipped board, as Markdown: the protocol's changes on the rows
    git revision ``before`` shipped (default: the shipped rows), then, with ``before``, the
    retraining: those against ``after`` (default: the shipped rows; a results folder of the board).
    ``loaded``: those two frames (before's rows, today's), read already by the caller."""
    from suite.report import boards
    from suite.results import store

    if loaded is not None:
        rows, now = loaded
    else:
        now = _load(after if after is not None else store.shipped_path(board))
        rows = shipped_at(board, before) if before is not None else now
    steps = [protocol(rows, step) for step in range(4)]
    settings = boards.settings_in_order(rows)
    pooled = _within(steps[2], rows) if settings else steps[2]  # the pooled ranks recounted within each setting
    seeds, tasks = protocol(rows, 3, intervals=True), protocol(rows, 4, intervals=True)
    first = protocol(rows, 0, intervals=True)
    moved = [*moves(steps[0], steps[1], STEPS[0]), *moves(steps[1], steps[2], STEPS[1]),
             *moves(pooled, steps[3], STEPS[2]), *separations(seeds, tasks)]
    moved += taus(rows) if settings else []
    final = tasks
    if before is not None:
        final = protocol(now, 4, intervals=True)
        moved += retrained(tasks, final, rows, now)
        moved += retrained_taus(rows, now) if settings else []
    runs = f"{rows.run_id.nunique()} runs, {rows.scheme.nunique()} schemes"
    if before is not None:
        runs = (f"{rows.run_id.nunique()} runs at {before}, {now.run_id.nunique()} retrained "
                f"({now.scheme.nunique()} schemes)")
    head = (f"## {board}\n\n{runs}"
            + (f", {len(settings)} settings ({'; '.join(settings)})" if settings else "") + ".\n\n"
            f"- leader before (learned runs, pooled, 0.01 for every metric, seeds-only bootstrap): {leader(first)}\n"
            + (f"- fair protocol on the same runs (every run, per setting, each metric's margin, tasks and seeds): "
               f"{leader(tasks)}\n" if before is not None else "")
            + f"- leader after{' retraining' if before is not None else ''} (every run, per setting, each metric's "
              f"margin, tasks and seeds): {leader(final)}\n")
    table = pd.DataFrame([{"where": "", **m} for m in moved], columns=MOVED)
    return head + "\n" + (table.to_markdown(index=False) if len(table) else "Nothing moved.") + "\n"


def retrained_taus(old: pd.DataFrame, new: pd.DataFrame) -> list[dict]:
    """``MOVED`` rows of Kendall's tau between settings, every run with tasks and seeds resampled,
    on the shipped runs and on the retrained ones."""
    from suite.report import ranking, stability

    built = [stability.build(r, runs=stability.EVERY, resample=ranking.TASKS) for r in (old, new)]
    if any(b is None for b in built):
        return []
    was, now = (b["taus"].set_index(["setting_a", "setting_b"]) for b in built)
    out = []
    for key in sorted(set(was.index) | set(now.index)):
        texts = [stability.tau_text(t.loc[key]) if key in t.index else "-" for t in (was, now)]
        if texts[0] != texts[1]:
            out.append({"change": RETRAINED, "what moved": f"Kendall tau {key[0]} vs {key[1]}", "before": texts[0],
                        "after": texts[1]})
    return out


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.orderings") -> int:
    p = parser(prog, __doc__)
    from suite.results import store

    shipped = store.shipped_boards()
    p.add_argument("boards", nargs="*", default=shipped, help=f"shipped boards (default: {', '.join(shipped)})")
    p.add_argument("--before", metavar="REV", help="a git revision that ships the board as computed by earlier "
                   "code: its rows go through the protocol's changes, then meet today's rows (the 'retrained' step)")
    p.add_argument("--after", metavar="PATH", help="with one board: today's rows from a results folder "
                   "(results/<board>) instead of the shipped file")
    args = p.parse_args(argv)
    unknown = [b for b in args.boards if b not in shipped]
    if unknown:
        raise Refused(f"unknown board {unknown[0]!r}; the shipped boards are: {', '.join(shipped)}")
    if args.after is not None and len(args.boards) != 1:
        raise Refused(f"--after {args.after!r} gives one board's rows: name exactly one board (got {len(args.boards)})")
    for board in args.boards:
        print(board_report(board, args.before, args.after), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
