"""``python -m suite.report.fair_page [--out reports/fair_protocol.md]``: what the fair protocol
(docs/protocol.md) changed, every shipped board on one Markdown page; README's section "What the
fair protocol changed" quotes its tables (``suite.report.readme_check`` holds them to it).

Each board is set against its rows as the git revision ``OLD_PROTOCOL`` names shipped them, the
runs computed before the fair protocol: the ranking those rows had under the protocol before it
(learned runs only, pooled settings, one tie margin, seeds-only bootstrap), the same rows under the
fair protocol, and the rows shipped now, retrained by today's code (``orderings.protocol``). The
page's tables:

- **leaders**: each board's leader before, on the same runs under the fair protocol, and after
  retraining, with its runs and how many learned;
- **T5**: T5's rank and OOD MRR on each board holding it, and the task on which retraining moved it
  most (its biases now reach every distance a model trains on: Raffel et al., 2020, JMLR 21:140);
- **text**: bits per byte of each scheme on code and prose at each evaluation length, before (each
  length scored on other bytes) and after (every length scores the same bytes);
- **stability**: Kendall's tau between the settings of a board of several;
- **published results reproduced**: on a board with a paper to reproduce (its reference file),
  the published MRR beside ours and the authors' computation, before and after retraining;
- then each board's table of every ordering that moved, with the point that moved it
  (``orderings.board_report``).

A board whose shipped runs are not all computed by this checkout's code is marked 'not retrained'
and its after-columns read '-'; a board the revision already ships computed by today's code was
published under the fair protocol and has nothing to set against.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pandas as pd

from suite.commandline import check_output, command, parser
from suite.report import orderings

# The revisions whose published/ holds each board as computed before the fair protocol: default
# was republished first; every other board was still shipped as it was at 883f43a.
OLD_PROTOCOL = {"default": "b9f795b"}
OLD_PROTOCOL_REST = "883f43a"
TEXT_TASKS = ("code", "prose")
PAGE = Path("reports/fair_protocol.md")
NOT_RETRAINED = "-"


def old_revision(board: str) -> str:
    return OLD_PROTOCOL.get(board, OLD_PROTOCOL_REST)


def code_status(rows: pd.DataFrame) -> pd.Series:
    from suite.report.code_status import code_status as status

    return status(rows)


def state(old: pd.DataFrame, now: pd.DataFrame) -> str:
    """'retrained', 'not retrained' (k of n runs computed by this code) or 'fair from the start'
    (the old revision already ships runs computed by this code: a board published under the fair
    protocol)."""
    if (code_status(old) == "current").all():
        return "fair from the start"
    current = code_status(now)
    if (current == "current").all():
        return "retrained"
    return f"not retrained ({int((current == 'current').sum())} of {len(current)} runs computed by this code)"


def _runs(rows: pd.DataFrame) -> str:
    """'180 runs, 171 learned'."""
    learned = rows.drop_duplicates("run_id").learned.astype(bool)
    return f"{len(learned)} runs, {int(learned.sum())} learned"


def _settings(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A ``protocol`` table split by setting: {'' or the setting's name: its rows}."""
    if "setting" not in table or table.setting.fillna("").eq("").all():
        return {"": table}
    return {s: g for s, g in table.groupby("setting", sort=False)}


def _standing(table: pd.DataFrame, label: str) -> str:
    """'2 of 6, 0.75 [0.60, 0.90]': a scheme's rank among its setting's ranked schemes and its OOD MRR."""
    from suite.report import ranking, stats

    t = table.set_index("label")
    if label not in t.index or pd.isna(t.mrr_ood[label]):
        return "not ranked"
    r = t.loc[label]
    ranked = table[(table.setting_at == r.setting_at) & table.mrr_ood.notna()]
    mrr = stats.interval_text(r.mrr_ood, r.mrr_ood_low, r.mrr_ood_high, r.mrr_ood_distinct, r.mrr_ood_modal,
                              ranking.BOOTSTRAP_REPS)
    return f"{int(r['rank'])} of {len(ranked)}, {mrr}"


def board_rows(board: str) -> dict:
    """One board's rows and rankings: ``old`` (the old revision's rows), ``now`` (shipped now),
    ``state``, and the ``protocol`` tables ``first`` (old rows, old protocol), ``same`` (old rows,
    fair protocol) and ``final`` (rows now, fair protocol; None when not retrained)."""
    from suite.results import store

    rev = old_revision(board)
    old, now = orderings.shipped_at(board, rev), orderings._load(store.shipped_path(board))
    st = state(old, now)
    out = {"board": board, "rev": rev, "old": old, "now": now, "state": st}
    if st == "fair from the start":
        return out
    out["first"] = orderings.protocol(old, 0, intervals=True)
    out["same"] = orderings.protocol(old, 4, intervals=True)
    out["final"] = orderings.protocol(now, 4, intervals=True) if st == "retrained" else None
    return out


def leaders(boards: list[dict]) -> pd.DataFrame:
    rows = []
    for b in boards:
        if b["state"] == "fair from the start":
            continue
        retrained = b["final"] is not None
        rows.append({"board": b["board"], "runs before": _runs(b["old"]),
                     "leader before": orderings.leader(b["first"]),
                     "fair protocol, same runs": orderings.leader(b["same"]),
                     "runs after": _runs(b["now"]) if retrained else NOT_RETRAINED,
                     "leader after retraining": orderings.leader(b["final"]) if retrained else NOT_RETRAINED})
    return pd.DataFrame(rows, columns=["board", "runs before", "leader before", "fair protocol, same runs",
                                       "runs after", "leader after retraining"])


def t5(boards: list[dict]) -> pd.DataFrame:
    """T5's standing on each board (each setting of a board of several) holding it."""
    rows = []
    for b in boards:
        if b["state"] == "fair from the start" or "t5" not in set(b["old"]["name"]):
            continue
        retrained = b["final"] is not None
        tb = orderings.by_task(b["old"])
        ta = orderings.by_task(b["now"]) if retrained else None
        name_of = dict(zip(b["old"].scheme, b["old"]["name"]))  # the scheme within its setting
        for setting, same in _settings(b["same"]).items():
            label = same[same.scheme.map(name_of) == "t5"].label
            if label.empty:
                continue
            label = label.iloc[0]
            rows.append({"board": f"{b['board']} {setting}".strip(),
                         "T5 before (fair protocol, same runs)": _standing(b["same"], label),
                         "T5 after retraining": _standing(b["final"], label) if retrained else NOT_RETRAINED,
                         "task moved most": orderings.where(label, tb, ta) if retrained else NOT_RETRAINED})
    return pd.DataFrame(rows, columns=["board", "T5 before (fair protocol, same runs)", "T5 after retraining",
                                       "task moved most"])


def _text_means(boards_rows: list[pd.DataFrame]) -> pd.Series:
    """Mean headline value over seeds per (label, task, len_ratio) of the text tasks of the boards'
    rows, each run once; a label is ``orderings.row_labels``' (its setting named on a board of several)."""
    rows = pd.concat([r.assign(label=orderings.row_labels(r)) for r in boards_rows])
    text = rows[rows.task.isin(TEXT_TASKS) & (rows.metric == rows.headline)].drop_duplicates(
        ["run_id", "task", "eval_len", "metric"])
    return text.groupby(["label", "task", "len_ratio"]).value.mean()


def text(boards: list[dict]) -> pd.DataFrame:
    """Each scheme's bits per byte on each text task at each length multiple, 'before -> after', over
    the retrained boards' text runs (a run two boards share counted once)."""
    picked = [b for b in boards if b["state"] == "retrained" and b["old"].task.isin(TEXT_TASKS).any()]
    if not picked:
        return pd.DataFrame()
    before = _text_means([b["old"] for b in picked])
    after = _text_means([b["now"] for b in picked])
    ratios = sorted(set(before.index.get_level_values(2)) | set(after.index.get_level_values(2)))
    schemes = sorted(set(before.index.get_level_values(0)) | set(after.index.get_level_values(0)))
    out = []
    for scheme in schemes:
        row = {"scheme": scheme}
        for task in TEXT_TASKS:
            for ratio in ratios:
                key = (scheme, task, ratio)
                cells = [f"{s[key]:.3f}" if key in s.index else "-" for s in (before, after)]
                row[f"{task} {ratio:g}x"] = " -> ".join(cells)
        out.append(row)
    return pd.DataFrame(out)


def stability(boards: list[dict]) -> pd.DataFrame:
    """Kendall's tau between each pair of settings of each board of several: the old protocol,
    the fair one on the same runs, after retraining."""
    from suite.report import ranking
    from suite.report import stability as st

    out = []
    for b in boards:
        if b["state"] == "fair from the start":
            continue
        builds = [st.build(b["old"], runs=st.LEARNED, resample=ranking.SEEDS),
                  st.build(b["old"], runs=st.EVERY, resample=ranking.TASKS),
                  st.build(b["now"], runs=st.EVERY, resample=ranking.TASKS) if b["final"] is not None else None]
        if builds[0] is None:
            continue
        taus = [x["taus"].set_index(["setting_a", "setting_b"]) if x is not None else None for x in builds]
        for key in taus[0].index:
            cells = [st.tau_text(t.loc[key]) if t is not None and key in t.index else NOT_RETRAINED for t in taus]
            out.append({"settings": f"{key[0]} vs {key[1]}", "board": b["board"], "old protocol": cells[0],
                        "fair protocol, same runs": cells[1], "after retraining": cells[2]})
    return pd.DataFrame(out, columns=["settings", "board", "old protocol", "fair protocol, same runs",
                                      "after retraining"])


def reproduction(b: dict) -> pd.DataFrame | None:
    """A board with published results to reproduce (``suite/report/references/<board>.yaml``): the
    published MRR beside both MRRs of our runs (ours, and the authors' computation on our runs:
    ``references.our_scores``), on the runs shipped before and, when retrained, on the runs shipped
    now, each with its order and Kendall's tau against the published MRR order. None for a board
    without a reference file."""
    from suite.report import boards
    from suite.report.sections import references as refs

    ref = refs.load(b["board"])
    if not ref or b["state"] == "fair from the start":
        return None
    paper = refs.paper_scores(ref).loc[refs.OURS]
    lines = [("published (their runs, their computation)", paper)]
    for when, rows in (("runs before", b["old"]), ("retrained", b["now"] if b["final"] is not None else None)):
        if rows is None:
            lines += [(f"ours, {when}", None), (f"their computation, {when}", None)]
            continue
        ours = refs.our_scores(ref, boards.board_of(rows), rows)
        lines += [(f"ours, {when}", ours.loc[refs.OURS] if refs.OURS in ours.index else None),
                  (f"their computation, {when}", ours.loc[refs.THEIRS] if refs.THEIRS in ours.index else None)]
    out = []
    for label, values in lines:
        row = {"MRR": label}
        if values is None:
            row.update({c: NOT_RETRAINED for c in [*paper.index, "order", "tau vs published"]})
        else:
            given = {k: float(v) for k, v in values.items() if not pd.isna(v)}
            agree = refs.compare(paper.dropna().to_dict(), given)
            row.update({c: "—" if pd.isna(values.get(c)) else f"{values[c]:.3f}" for c in paper.index})
            row.update({"order": agree["ours"], "tau vs published": f"{agree['tau']:.2f}"})
        out.append(row)
    return pd.DataFrame(out)


def shipped_digest(board: str) -> str:
    """'published/lm.jsonl.gz sha256 0123456789ab': the shipped rows a page was computed from; a
    board republished since reads another digest (tests/test_fair_page.py holds the page to it)."""
    from suite.results import store

    path = store.shipped_path(board)
    return f"{path.as_posix()} sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"


def reproductions(boards: list[dict]) -> list[str]:
    """The page's part on published results: one table per board that reproduces a paper."""
    tables = [(b["board"], t) for b in boards if (t := reproduction(b)) is not None]
    if not tables:
        return []
    parts = ["## Published results reproduced\n",
             "Mean reciprocal rank of the schemes a paper ranks, at its test lengths (the board's report, section "
             "'Published results'): the published MRR; ours (cell means ranked per task and length, every run, each "
             "metric's tie margin) and the authors' own computation (each seed ranked apart, ties by row order), "
             "on the runs shipped before and on the retrained runs; each with its order and Kendall's tau against "
             "the published order ('—': a scheme the runs do not hold).\n"]
    for board, table in tables:
        parts += [f"### {board}\n", table.to_markdown(index=False, disable_numparse=True) + "\n"]
    return parts


def _md(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False) if len(table) else "None."


def page(names: list[str]) -> str:
    """The whole page for the shipped boards ``names``."""
    boards = [board_rows(n) for n in names]
    state_lines = "\n".join(f"- `{b['board']}`: {b['state']}; " + (
        f"before: its rows at {b['rev']}; " if b["state"] != "fair from the start" else "")
        + f"now: {shipped_digest(b['board'])}" for b in boards)
    parts = [
        "# What the fair protocol changed\n",
        "Written by `python -m suite.report.fair_page` from the shipped boards and the git revisions that "
        "shipped them as computed before the fair protocol (docs/protocol.md). 'Before': those runs "
        "ranked as they then were (learned runs only, settings pooled, one tie margin of 0.01, a "
        "bootstrap over seeds). 'Fair protocol, same runs': the same runs, every run ranked, each "
        "setting apart, each metric's own margin, tasks and seeds resampled. 'After retraining': the "
        "board's runs as shipped now, computed by today's code.\n",
        state_lines + "\n",
        "## Leaders\n", _md(leaders(boards)) + "\n",
        "## T5\n", "T5's rank among its setting's schemes and its OOD MRR [95 % bootstrap over tasks and "
        "seeds]; the task on which its own OOD MRR moved most with retraining.\n", _md(t5(boards)) + "\n",
        "## Text\n", "Bits per byte (lower is better), mean over seeds, before -> after retraining, at each "
        "multiple of the training length L (64 bytes; on a board of several settings, the L its setting names, "
        "the scheme labelled with it); a run two boards share is counted once. Before, each "
        "length scored windows of its own, every byte of them, so a longer window scored more bytes with "
        "more context before them; after, every length scores the same 16-byte targets (docs/tasks.md), "
        "so a change along a curve is context and extrapolation alone.\n",
        _md(text(boards)) + "\n",
        "## Stability across settings\n", "Kendall's tau between the rankings of two settings of one board.\n",
        _md(stability(boards)) + "\n",
        *reproductions(boards),
        "## Every ordering that moved, board by board\n",
    ]
    for b in boards:
        if b["state"] == "fair from the start":
            continue
        retrained = b["state"] == "retrained"
        report = orderings.board_report(b["board"], b["rev"] if retrained else None,
                                        loaded=(b["old"] if retrained else b["now"], b["now"]))
        parts.append(report.replace(f"## {b['board']}", f"### {b['board']}", 1))
    return "\n".join(p for p in parts if p)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.fair_page") -> int:
    from suite.results import store

    p = parser(prog, __doc__)
    shipped = store.shipped_boards()
    p.add_argument("boards", nargs="*", default=shipped, help=f"shipped boards (default: {', '.join(shipped)})")
    p.add_argument("--out", default=str(PAGE), help=f"the page written (default: {PAGE})")
    args = p.parse_args(argv)
    out = check_output(p.prog, "--out", args.out, kind="file")
    unknown = [b for b in args.boards if b not in shipped]
    if unknown:
        raise orderings.Refused(f"unknown board {unknown[0]!r}; the shipped boards are: {', '.join(shipped)}")
    text = page(args.boards)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
