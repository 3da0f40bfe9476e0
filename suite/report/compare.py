"""``posbench compare A B [C ...]`` (``python -m suite.report.compare``): two or more sweeps in one
table and one plot. Each source is a results folder or a shipped ``published/<sweep>.jsonl.gz``;
its leaderboard is built as the report builds it (``tables.leaderboard``), and cells are matched
across sources by configuration with task and eval length: by the stored spec less its seed and
code digest (so a board built by older code matches), else by ``config_hash``. Writes ``compare.csv`` and ``compare.png`` under ``--out``; exits 1 when a
source holds no results or no configuration is in two sources, 2 on a bad ``--out``, source or
``--metric`` (``suite.commandline.check_output``, ``store.read_source``, ``suite.report.choices``)."""
from __future__ import annotations

import hashlib
import json
import sys

import pandas as pd

from suite import files
from suite.commandline import Refused, check_output, command, parser
from suite.report.styles import style_map

KEY = ["config", "task", "eval_len"]


def match_keys(df: pd.DataFrame) -> dict[str, str]:
    """{config_hash: key}: the key a configuration is matched by across sources, a hash of its
    stored spec without ``seed`` and ``code``; the config hash itself for a run with no spec."""
    from suite.report import tables

    d = df.assign(config=tables.config_key(df))
    keys = {}
    for config, spec in (d.groupby("config").spec.first().items() if "spec" in d else []):
        if isinstance(spec, str):
            body = {k: v for k, v in json.loads(spec).items() if k not in ("seed", "code")}
            keys[config] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    return keys


def compare_table(frames: dict[str, pd.DataFrame], metric: str | None = None) -> pd.DataFrame:
    """One row per (configuration, task, eval length) present in every source: ``scheme`` (the
    first source's label), then ``mean``, ``ci_low``, ``ci_high`` and ``n_seeds`` per source, each
    suffixed ``[<source>]``."""
    from suite.report import tables

    merged = None
    for source, df in frames.items():
        board = tables.leaderboard(df, metric).rename(columns={"n": "n_seeds"})
        keys = match_keys(df)
        board["config"] = board.config.map(lambda c: keys.get(c, c))
        board = board[["scheme", *KEY, "metric", "mean", "ci_low", "ci_high", "n_seeds"]]
        board = board.rename(columns={c: f"{c} [{source}]" for c in ("scheme", "mean", "ci_low", "ci_high", "n_seeds")})
        merged = board if merged is None else merged.merge(board.drop(columns="metric"), on=KEY, how="inner")
    first = next(iter(frames))
    merged = merged.rename(columns={f"scheme [{first}]": "scheme"})
    merged = merged.drop(columns=[c for c in merged if c.startswith("scheme [")])
    return merged.sort_values(["task", "scheme", "eval_len"]).reset_index(drop=True)


def plot(table: pd.DataFrame, sources: list[str]) -> bytes:
    """Mean by eval length, one panel per task, one colour and marker per configuration (the same in
    every panel), one line style per source."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted(table.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    styles = ["-", "--", ":", "-."]
    looks = style_map(table.scheme)  # a scheme's colour and marker, as in the reports (16 distinct)
    for ax, task in zip(axes[0], tasks):
        d = table[table.task == task]
        for scheme, g in d.groupby("scheme", sort=True):
            look = looks[scheme]
            for j, source in enumerate(sources):
                ax.plot(g.eval_len, g[f"mean [{source}]"], styles[j % len(styles)], color=look.color,
                        marker=look.marker, label=f"{scheme} [{source}]")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(d.eval_len.unique()), [str(int(x)) for x in sorted(d.eval_len.unique())])
        ax.set_title(task)
        ax.set_xlabel("eval length")
        ax.legend(fontsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.report.compare") -> int:
    p = parser(prog, __doc__)
    p.add_argument("sources", nargs="+", help="results folders (results/<sweep>) or published/<sweep>.jsonl.gz files")
    p.add_argument("--out", default="reports/compare", help="where compare.csv and compare.png go (default: reports/compare)")
    p.add_argument("--metric", default=None, help="score every task by this metric (default: each task's headline metric)")
    args = p.parse_args(argv)
    if len(args.sources) < 2:
        p.error(f"give two or more sources, got {len(args.sources)}: {args.sources[0]}")
    out = check_output(p.prog, "--out", args.out)
    from suite.report import choices
    from suite.results import store

    for source in args.sources:
        if (problem := store.source_problem(source)) is not None:
            raise Refused(f"{p.prog}: error: source {source!r}: {problem}", 2)
    frames = {source: store.read_source(p.prog, "source", source) for source in args.sources}
    choices.check_metric(p.prog, args.metric, frames)
    table = compare_table(frames, args.metric)
    if table.empty:
        print(f"no configuration is in all of {', '.join(args.sources)} (cells match by config_hash)", file=sys.stderr)
        return 1
    files.write_atomic(out / "compare.csv", table.round(4).to_csv(index=False))
    files.write_atomic(out / "compare.png", plot(table, args.sources))
    print(table.round(4).to_string(index=False))
    print(f"wrote {out / 'compare.csv'} and {out / 'compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
