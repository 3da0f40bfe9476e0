"""``posbench compare A B [C ...]`` (``python -m suite.report.compare``): two or more sweeps cell
by cell. Cells are matched by configuration (the stored spec less seed, code digest and sweep); the
first source's mean is compared with each other source's: the difference over seeds with Welch's
95 % t interval, and a verdict (same, better, worse, not separated).

Each source is a results folder or a shipped ``published/<sweep>.jsonl.gz``; its leaderboard is
built as the report builds it (``boards.primary`` and ``boards.board_of``). Cells are matched by
the configuration a user means, with task, eval length and metric: the stored spec less its seed,
code digest and the sweep it is stored in (``match_key``; the model's name, a label, is left out
too), so fresh runs match a shipped board and two shipped boards holding the same runs match each
other. The first source is compared with each other one: its mean minus theirs over seeds with
Welch's 95 % t interval (for one seed against several, the prediction interval of one draw), and
a verdict (same, better, worse, not separated, ...;
``suite.report.difference``). What is not in every source is named, not dropped silently: each
configuration left out by its label and task, under the source that holds it (``left_out``). Writes ``compare.csv`` and ``compare.png`` under ``--out``; exits 1
when a source holds no results or no configuration is in every source, 2 on a bad ``--out``, source
or ``--metric`` (``suite.commandline.check_output``, ``store.read_source``, ``suite.report.choices``)."""
from __future__ import annotations

import hashlib
import json
import sys
import textwrap

import pandas as pd

from suite import files
from suite.commandline import Refused, check_output, command, parser
from suite.report.compare_text import WIDTH
from suite.report.difference import verdict, welch_interval

KEY = ["config", "task", "eval_len", "metric"]
IGNORED = ("seed", "code", "sweep")  # what two runs of one configuration may differ in
PER_SOURCE = ("mean", "ci_low", "ci_high", "n_seeds", "not_learned", "runs")


def configuration(spec: str | dict) -> dict:
    """The configuration a stored spec describes: the spec rebuilt by this code with the options
    at their defaults left out (so a spec stored before an option existed reads like one stored
    after), less ``IGNORED`` and the model's ``name`` (a label of the sizes the model spec states
    in full: 'tiny' and 'tiny(n_heads=2)' name one model when its fields agree). A spec this code
    cannot rebuild is taken as stored."""
    from suite.config.build import run_spec_from_dict

    d = json.loads(spec) if isinstance(spec, str) else dict(spec)
    try:
        d = run_spec_from_dict(d).to_dict(drop_defaults=True)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    if isinstance(d.get("model"), dict):
        d = {**d, "model": {k: v for k, v in d["model"].items() if k != "name"}}
    return {k: v for k, v in d.items() if k not in IGNORED}


def match_key(spec: str | dict) -> str:
    """The key cells are matched by across sources: a hash of ``configuration(spec)``."""
    body = json.dumps(configuration(spec), sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:12]


def keyed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each run's ``config_hash`` replaced by the ``match_key`` of its stored spec (a
    run without one keeps its config hash), so a leaderboard cell holds one configuration's runs
    whatever code digest or sweep they were stored under."""
    if "spec" not in df or df.empty:
        return df
    specs = df.drop_duplicates("run_id").set_index("run_id").spec
    keys = {run: match_key(spec) for run, spec in specs.items() if isinstance(spec, str)}
    return df.assign(config_hash=df.run_id.map(keys).where(df.run_id.isin(keys.keys()), df.config_hash))


def cells(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """A source's leaderboard cells keyed by ``KEY``: ``scheme, config, task, eval_len, metric,
    higher_is_better, train_len, mean, ci_low, ci_high, n_seeds, not_learned, runs`` (how many of
    the cell row's runs have not learned the task at L, ``boards.not_learned``) and ``values``
    (the seeds' values)."""
    from suite.report import boards

    rows = boards.primary(keyed(df), metric)
    board = boards.board_of(rows).rename(columns={"n": "n_seeds"})
    values = rows.groupby(["scheme", "task", "eval_len"]).value.agg(lambda v: tuple(float(x) for x in v if x == x))
    board = board.join(values.rename("values"), on=["scheme", "task", "eval_len"])
    return board[["scheme", *KEY, "higher_is_better", "train_len", *PER_SOURCE, "values"]]


def _direction(x) -> bool | None:
    return None if x is None or pd.isna(x) else bool(x)


def compare_table(frames: dict[str, pd.DataFrame], metric: str | None = None,
                  boards: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per (configuration, task, eval length, metric) present in every source (``boards``:
    each source's ``cells`` where already built; ``left_out`` names the rest): ``scheme``
    (the first source's label), ``higher_is_better``, ``train_len``, then ``mean``, ``ci_low``,
    ``ci_high``, ``n_seeds``, ``not_learned``, ``runs`` and ``values`` per source, each suffixed ``[<source>]``, then per
    source after the first ``diff``, ``diff_low``, ``diff_high`` (the first source's mean minus
    that source's, Welch's interval) and ``verdict`` (the first source against it)."""
    sources = list(frames)
    merged = None
    for source, df in frames.items():
        board = cells(df, metric) if boards is None else boards[source]
        if merged is None:
            merged = board.rename(columns={c: f"{c} [{source}]" for c in (*PER_SOURCE, "values")})
            continue
        board = board.drop(columns=["scheme", "higher_is_better", "train_len"])
        merged = merged.merge(board.rename(columns={c: f"{c} [{source}]" for c in (*PER_SOURCE, "values")}),
                              on=KEY, how="inner")
    first = sources[0]
    for other in sources[1:]:
        pairs = list(zip(merged[f"values [{first}]"], merged[f"values [{other}]"]))
        intervals = [welch_interval(a, b) for a, b in pairs]
        for j, name in enumerate(("diff", "diff_low", "diff_high")):
            merged[f"{name} [{other}]"] = pd.Series([i[j] for i in intervals], index=merged.index, dtype=float)
        merged[f"verdict [{other}]"] = pd.Series(
            [verdict(a, b, _direction(h)) for (a, b), h in zip(pairs, merged.higher_is_better)], index=merged.index, dtype=object)
    return merged.sort_values(["task", "scheme", "eval_len"]).reset_index(drop=True)


def left_out(boards: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """Per source (of ``boards``: each source's ``cells``), what the comparison leaves out because
    it is not in every source: each configuration not in all of them, by its short label there and
    task ('rope on copy'), then '<n> cells of shared configurations' for the cells of configurations
    in every source at an eval length or metric not in every one. Sources that lose nothing are absent."""
    shared = set.intersection(*(set(board.config) for board in boards.values()))
    keys = set.intersection(*(set(map(tuple, board[KEY].itertuples(index=False))) for board in boards.values()))
    out = {}
    for source, board in boards.items():
        alone = board[~board.config.isin(shared)]
        names = list(dict.fromkeys(f"{scheme} on {task}" for scheme, task in zip(alone.scheme, alone.task)))
        rest = board[board.config.isin(shared)]
        lost = sum(key not in keys for key in map(tuple, rest[KEY].itertuples(index=False)))
        names += [f"{lost} cell{'s' if lost > 1 else ''} of shared configurations"] if lost else []
        if names:
            out[source] = names
    return out


def left_out_text(missing: dict[str, list[str]]) -> str:
    """``left_out`` as the terminal shows it: a header line, then each source's names wrapped to
    ``WIDTH`` columns, as the table is; '' when nothing is left out."""
    if not missing:
        return ""
    lines = [f"left out, not in every source (cells match by the stored spec less {', '.join(IGNORED)}):"]
    return "\n".join(lines + [textwrap.fill(", ".join(names), width=WIDTH, initial_indent=f"  {source}: ",
                                             subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
                              for source, names in missing.items()])


def csv_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table as ``compare.csv`` holds it: without the seeds' values, numbers to 4 places."""
    return table.drop(columns=[c for c in table if c.startswith("values [")]).round(4)


def unique_names(sources: list[str]) -> list[str]:
    """The sources as the table's columns name them: a source given again is 'path #2', ..."""
    seen: dict[str, int] = {}
    out = []
    for source in sources:
        seen[source] = seen.get(source, 0) + 1
        out.append(source if seen[source] == 1 else f"{source} #{seen[source]}")
    return out


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.compare") -> int:
    p = parser(prog, __doc__)
    p.add_argument("sources", nargs="+", help="results folders (results/<sweep>) or published/<sweep>.jsonl.gz files; "
                                              "the first is compared with each other one")
    p.add_argument("--out", default="reports-local/compare",
                   help="where compare.csv and compare.png go (default: reports-local/compare, git-ignored)")
    p.add_argument("--metric", default=None, help="score every task by this metric (default: each task's headline metric)")
    args = p.parse_args(argv)
    if len(args.sources) < 2:
        p.error(f"give two or more sources, got {len(args.sources)}: {args.sources[0]}")
    out = check_output(p.prog, "--out", args.out)
    from suite.report import choices
    from suite.report.compare_plot import plot
    from suite.report.compare_text import render
    from suite.results import store

    for source in args.sources:
        if (problem := store.source_problem(source)) is not None:
            raise Refused(f"{p.prog}: error: source {source!r}: {problem}", 2)
    read = {source: store.read_source(p.prog, "source", source) for source in dict.fromkeys(args.sources)}
    names = unique_names(args.sources)
    frames = {name: read[source] for name, source in zip(names, args.sources)}
    choices.check_metric(p.prog, args.metric, frames)
    boards = {name: cells(df, args.metric) for name, df in frames.items()}
    table = compare_table(frames, args.metric, boards)
    missing = left_out_text(left_out(boards))
    if table.empty:
        print(f"no configuration is in all of {', '.join(args.sources)} (cells match by the stored spec less "
              f"{', '.join(IGNORED)})" + (f"\n{missing}" if missing else ""), file=sys.stderr)
        return 1
    files.write_atomic(out / "compare.csv", csv_table(table).to_csv(index=False))
    files.write_atomic(out / "compare.png", plot(table, names))
    print(render(table, names, {s: df.run_id.nunique() for s, df in frames.items()}))
    if missing:
        print(missing)
    print(f"wrote {out / 'compare.csv'} and {out / 'compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
