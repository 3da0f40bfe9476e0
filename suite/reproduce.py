"""``python -m suite.reproduce <sweep> [-k 3 | --run RUN_ID ... | --cells K | --cell SCHEME/TASK ...]``:
rerun published runs of a sweep on this machine and judge them statistically against the
published cells (``suite.report.reproduction``).

By run (``-k K``, default 3, drawn by ``--seed``; or ``--run RUN_ID``): each headline score of a
rerun is ``identical`` (the published number bit for bit), ``inside prediction interval`` or
``outside prediction interval``: the 95 % prediction interval of ONE new draw from the published
cell's n seeds (the published run's own among them), mean ± t_{0.975, n-1} · s · √(1 + 1/n)
(``suite.report.difference``). On another machine a rerun is another draw (the pins do not make
training bit-identical across CPU vendors), and the interval of a cell's mean is too narrow for a
single run. ``too few seeds``: a one-seed
cell has no spread to predict from; ``no published score``: the published run has none. Exits 1
when a score lands outside its prediction interval.

By cell (``--cells K``, drawn by ``--seed`` from the sweep's cells; or ``--cell SCHEME/TASK``,
repeatable): every seed of each chosen cell is rerun, then per cell x eval length the reruns'
mean is compared with the published mean by Welch's two-sample 95 % interval of their difference
(rerun minus published): ``same`` (every value identical), ``not separated`` (the interval holds
0), ``better`` or ``worse`` (it excludes 0; read with the metric's direction). A cell is named
``SCHEME/TASK``: the leaderboard's row label of the configuration and the task, e.g. ``rope/copy``
or ``'alibi swa w=16/copy'``; an unknown name is refused with the list of valid ones. Prints a
table and a one-line summary; exits 1 when any cell is separated (better or worse) or no rerun
could be compared, else 0.

The runs come from the sweep's shipped rows (``published/<sweep>.jsonl.gz``,
``suite.results.store``); each is rebuilt from its stored spec (``run.spec``), trained with the
thread count it was published with, and stored under ``<results>/<sweep>/`` (default
``results/reproduce``), so a second call reuses the reruns it already has. The published cell
is the leaderboard's (``suite.report.boards.primary``: runs identical except for the seed).
Floats are expected to be identical only under one numeric signature (``suite.results.signature``);
the command prints both. Exit 2 on bad input.

``python -m suite.reproduce --boards PUBLISHED.csv OTHER.csv`` compares two boards of one sweep
built on two machines (their ``leaderboard.csv``) cell by cell: the other board's mean against
the published cell's 95 % interval (``identical``, ``inside interval``, ``outside interval``).
Where it writes (``--out``, ``--results``) is checked before any work
(``suite.commandline.check_output``), and a board that is no ``leaderboard.csv`` is refused by
name (``read_board``).
"""
from __future__ import annotations

import dataclasses
import io
import random
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

from suite import files
from suite.commandline import Refused, check_output, command, parser, warnings_on_stderr
from suite.results import store

VERDICTS = ("identical", "inside interval", "outside interval", "no published score")  # --boards


def choose(run_ids: list[str], k: int, seed: int) -> list[str]:
    """``k`` of ``run_ids``, drawn without replacement by ``seed`` (all of them when k is larger)."""
    return sorted(random.Random(seed).sample(sorted(run_ids), min(k, len(run_ids))))


def verdict(published: float, rerun: float, low: float, high: float) -> str:
    """Where the other board's mean lands against the published mean and its interval (--boards)."""
    if pd.isna(published) or pd.isna(rerun):
        return "no published score" if pd.isna(published) else "outside interval"
    if rerun == published:
        return "identical"
    return "inside interval" if not pd.isna(low) and low <= rerun <= high else "outside interval"


def compare(published: pd.DataFrame, reruns: pd.DataFrame) -> pd.DataFrame:
    """One row per rerun run x task x eval length of its headline metric: published score, rerun
    score, the prediction interval of one new draw from the published cell's seeds (``pi_low``,
    ``pi_high``, clipped to the metric's range; ``n_seeds``) and the verdict
    (``reproduction.rerun_verdict``)."""
    from suite.report import boards, reproduction

    pub = boards.primary(published)
    seeds = pub.groupby(["scheme", "task", "eval_len"]).value.agg(lambda v: [float(x) for x in v if x == x])
    pub = pub.set_index(["run_id", "task", "eval_len"])
    new = boards.primary(reruns)
    rows = []
    for _, r in new.iterrows():
        key = (r.run_id, r.task, r.eval_len)
        before = pub.value.get(key, float("nan"))
        values = seeds.get((pub.scheme[key], r.task, r.eval_len), []) if key in pub.index else []
        low, high, _, _ = reproduction.prediction_interval(values, r.value)
        if not pd.isna(low):
            low, high = max(low, float(r.low)), min(high, float(r.high))
        rows.append({"run_id": r.run_id, "task": r.task, "eval_len": int(r.eval_len), "metric": r.metric,
                     "published": before, "rerun": r.value, "n_seeds": len(values), "pi_low": low, "pi_high": high,
                     "verdict": reproduction.rerun_verdict(before, r.value, values)})
    columns = ["run_id", "task", "eval_len", "metric", "published", "rerun", "n_seeds", "pi_low", "pi_high", "verdict"]
    return pd.DataFrame(rows, columns=columns).sort_values(["run_id", "task", "eval_len"]).reset_index(drop=True)


BOARD_KEY = ["scheme", "task", "eval_len", "metric"]


def compare_boards(published: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Two ``leaderboard.csv`` tables of the same sweep, built on two machines, cell by cell: the
    published mean and interval, the other board's mean, their difference and the verdict
    (``verdict``: identical to the 4 decimals a board holds, inside the published interval, or
    outside). A cell only one board has is left out."""
    both = published.merge(other[BOARD_KEY + ["mean"]], on=BOARD_KEY, suffixes=("", "_other"))
    both["diff"] = (both.mean_other - both["mean"]).round(4)
    both["verdict"] = [verdict(a, b, lo, hi) for a, b, lo, hi in
                       zip(both["mean"], both.mean_other, both.ci_low, both.ci_high)]
    return both[BOARD_KEY + ["mean", "ci_low", "ci_high", "mean_other", "diff", "verdict"]] \
        .sort_values(BOARD_KEY).reset_index(drop=True)


BOARD_COLUMNS = [*BOARD_KEY, "mean", "ci_low", "ci_high"]


def read_board(path: Path, prog: str = "python -m suite.reproduce") -> pd.DataFrame:
    """The ``leaderboard.csv`` at ``path``; ``Refused`` (exit 2) naming the file when it is not a
    regular file, not a CSV, or lacks a column a board has (``BOARD_COLUMNS``)."""
    def refuse(why: str):
        return Refused(f"{prog}: error: --boards {str(path)!r}: {why}; give two leaderboard.csv files of "
                       f"one sweep (reports/<sweep>/leaderboard.csv, columns {', '.join(BOARD_COLUMNS)})", 2)

    try:
        data = files.read_regular(path)
    except OSError as err:
        raise refuse(err.strerror or str(err)) from None
    try:
        board = pd.read_csv(io.BytesIO(data))
    except (ValueError, UnicodeDecodeError) as err:  # pandas' EmptyDataError and ParserError are ValueErrors
        raise refuse(f"not a CSV file ({(str(err).splitlines() or [''])[0]})") from None
    missing = [c for c in BOARD_COLUMNS if c not in board.columns]
    if missing:
        raise refuse(f"no column {', '.join(missing)}")
    return board


def boards_main(published: Path, other: Path, out: Path | None = None) -> int:
    """``--boards PUBLISHED OTHER [--out FILE.md]``: print ``compare_boards`` and the count of each
    verdict; ``out`` also gets them as a Markdown page."""
    table = compare_boards(read_board(published), read_board(other))
    if table.empty:
        print(f"{published} and {other} share no cell (scheme, task, eval_len, metric)", file=sys.stderr)
        return 1
    counts = table.verdict.value_counts()
    line = ("; ".join(f"{v}: {counts.get(v, 0)}" for v in VERDICTS[:3]) + f"; cells: {len(table)}; "
            f"largest |diff|: {table['diff'].abs().max():.4f}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    print(line)
    if out is not None:
        files.write_atomic(out, f"# Two boards, cell by cell\n\n`python -m suite.reproduce --boards {published} {other}`"
                                f"\n\n`mean`, `ci_low`, `ci_high`: {published}; `mean_other`: {other}.\n\n"
                                f"{table.to_markdown(index=False, floatfmt='.4f')}\n\n{line}\n")
    return 1 if counts.get("outside interval", 0) else 0


def rerun(payload: dict, results_dir: Path, sweep: str, outcome: dict | None = None) -> Path | None:
    """Train, evaluate and store the published run ``payload`` again, under this checkout's code;
    ``outcome["trained"]`` says whether it was trained now or found stored (``suite.run.execute``)."""
    from suite.config.build import run_spec_from_dict
    from suite.config.codedigest import spec_digest
    from suite.run import execute

    spec = run_spec_from_dict(payload["run"]["spec"])
    digest = spec_digest(payload["run"]["spec"])
    if digest is not None and digest != spec.code:
        print(f"note: {payload['run']['run_id']} was published by other code; rerunning it with this checkout's")
        spec = dataclasses.replace(spec, code=digest)
    threads = (payload["run"].get("numeric") or {}).get("threads") or 1
    return execute(dataclasses.replace(spec, sweep=sweep), results_dir=results_dir, logger_cfg=None, ckpt_every=0,
                   threads=int(threads), progress=sys.stderr.isatty(), outcome=outcome)


def show_run_log() -> None:
    """The runs' own lines (plain training progress off a terminal, each run's end) on stderr, as
    a sweep shows them: the ``posbench`` logger, which only Hydra configures, gets a handler."""
    import logging

    logger = logging.getLogger("posbench")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def stored_reruns(paths: list[Path | None]) -> list[tuple[Path, dict]]:
    """(file, payload) of each rerun's result file that counts as stored (``store.verified_run``);
    any other is named in a warning and left out of the comparison."""
    out = []
    for path in paths:
        if path is None:
            warnings.warn("a rerun is being trained by another process now; it is left out", stacklevel=2)
            continue
        try:
            out.append((path, store.verified_run(path)))
        except store.NotStored as err:
            warnings.warn(f"{err}; it is left out of the comparison", stacklevel=2)
    return out


def as_published(reruns: pd.DataFrame, published_id: dict[str, str]) -> pd.DataFrame:
    """The rerun rows under the id of the published run each reruns (``published_id``: rerun id ->
    published id), so they meet their published rows although this checkout names a run
    otherwise (another code digest, or another form of the readable id); other rows are left out."""
    kept = reruns[reruns.run_id.isin(published_id)]
    return kept.assign(run_id=kept.run_id.map(published_id))


def rerun_all(found: dict[str, dict], chosen: list[str], results: Path, sweep: str) -> list[Path | None]:
    """Rerun each of the ``chosen`` published runs (``found``: run id -> shipped payload) in turn,
    saying which of how many and how each ends; the result file of each (None: another process
    is training it)."""
    from suite.progress import SweepProgress, run_label
    from suite.results.signature import label

    show_run_log()
    paths, runs = [], SweepProgress(0, len(chosen), 1)
    for runs.k, rid in enumerate(chosen, start=1):
        run = found[rid]["run"]
        sig = run.get("numeric")
        print(f"{runs.start_line(run_label(run, str(run.get('spec', {}).get('taskset', '?'))))}\n"
              f"  {rid} (published on: {label(sig) if isinstance(sig, dict) else 'not recorded'})", flush=True)
        t0, outcome = time.perf_counter(), {}
        paths.append(rerun(found[rid], results, sweep, outcome))
        print(runs.finish(outcome.get("trained", False), time.perf_counter() - t0), flush=True)
    return paths


def rerun_rows(chosen: list[str], paths: list[Path | None]) -> pd.DataFrame:
    """The stored reruns' rows (``stored_reruns``) under the ids of the published runs they rerun."""
    with warnings_on_stderr():
        stored = stored_reruns(paths)
    rerun_of = {path: rid for rid, path in zip(chosen, paths) if path is not None}
    return as_published(store.frame(stored), {payload["run"]["run_id"]: rerun_of[path] for path, payload in stored})


def choose_cells(prog: str, cells: dict[str, list[str]], named: list[str], k: int | None, seed: int,
                 source: Path) -> list[str]:
    """The cells to rerun: those ``named`` (each must be a cell of the sweep, else ``Refused``
    listing the valid names), else ``k`` drawn by ``seed`` (``choose``)."""
    unknown = [c for c in named if c not in cells]
    if unknown:
        raise Refused(f"{prog}: error: --cell {unknown[0]!r} is not a cell of {source}; a cell is SCHEME/TASK, "
                      f"valid: {', '.join(cells)}", 2)
    return list(dict.fromkeys(named)) if named else choose(list(cells), k, seed)


def cells_main(prog: str, source: Path, found: dict[str, dict], named: list[str], k: int | None, seed: int,
               results: Path, sweep: str, out: Path | None = None, argv: list[str] | None = None) -> int:
    """``--cells K`` / ``--cell SCHEME/TASK``: rerun every seed of the chosen cells, then print
    ``reproduction.cell_table`` and its summary line; 1 when a comparison is separated. ``out``
    also gets them as a Markdown page, with the command (``argv``) and both numeric signatures."""
    from suite.report import boards, reproduction
    from suite.results.signature import label, signature

    published = store.load(source)
    cells = reproduction.cell_runs(boards.primary(published))
    picked = choose_cells(prog, cells, named, k, seed, source)
    chosen = sorted({rid for cell in picked for rid in cells[cell] if rid in found})
    print(f"reproducing {len(picked)} of {len(cells)} cells of {source} ({len(chosen)} runs, every seed) on: "
          f"{label(signature())}\ncells: {', '.join(picked)}")
    paths = rerun_all(found, chosen, results, sweep)
    print(f"comparing {len(picked)} rerun cells with the published cells (Welch's 95 % interval of rerun minus "
          f"published)", flush=True)
    table = reproduction.cell_table(published, rerun_rows(chosen, paths), picked)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    print(reproduction.summary(table))
    if out is not None:
        shipped = sorted({label(p["run"]["numeric"]) for rid, p in found.items()
                          if rid in chosen and p["run"].get("numeric")}) or ["not recorded"]
        command = " ".join(["python -m suite.reproduce", *(argv or [])])
        files.write_atomic(out, f"# Cells of `{sweep}` rerun\n\n`{command}`\n\nPublished runs computed on: "
                                f"{'; '.join(shipped)}.\n\nRerun on: {label(signature())}.\n\nCells: "
                                f"{', '.join(picked)}.\n\n{table.to_markdown(index=False, floatfmt='.4f')}\n\n"
                                f"{reproduction.summary(table)}\n")
    return 1 if reproduction.separated(table) or not (table.n_rerun > 0).any() else 0


def build_parser(prog: str):
    p = parser(prog, __doc__, whole_doc=True)
    p.add_argument("sweep", nargs="?", help="a published sweep: reads published/<sweep>.jsonl.gz")
    p.add_argument("--boards", nargs=2, type=Path, metavar=("PUBLISHED", "OTHER"),
                   help="compare two leaderboard.csv files of one sweep cell by cell instead (no training)")
    p.add_argument("--out", help="with --boards or the cell mode: also write the comparison to this Markdown file")
    p.add_argument("-k", type=int, default=None, help="how many runs to rerun, drawn by --seed (default 3)")
    p.add_argument("--seed", type=int, default=0, help="the draw of the k runs or K cells (default 0)")
    p.add_argument("--run", action="append", default=[], metavar="RUN_ID", help="rerun this run (repeatable; replaces -k)")
    p.add_argument("--cells", type=int, metavar="K",
                   help="cell mode: rerun every seed of K cells drawn by --seed, and compare each cell's mean with "
                        "the published mean (Welch)")
    p.add_argument("--cell", action="append", default=[], metavar="SCHEME/TASK",
                   help="cell mode: rerun every seed of this cell (repeatable; replaces --cells): the leaderboard's "
                        "row label and the task, e.g. rope/copy or 'alibi swa w=16/copy'")
    p.add_argument("--published", default=store.PUBLISHED, help="the folder of shipped result files")
    p.add_argument("--results", default="results/reproduce", help="where the reruns are stored")
    return p


def _refuse_mixed(p, args, cell_mode: bool) -> None:
    """Exit 2 naming the clash when the arguments mix modes or counts are below 1."""
    if args.out is not None and not (args.boards or cell_mode):
        p.exit(2, f"{p.prog}: error: --out is for --boards and the cell mode (--cells, --cell); a rerun of "
                  f"single runs is stored under --results\n")
    if args.boards and (cell_mode or args.run or args.k is not None):
        p.exit(2, f"{p.prog}: error: --boards compares two boards; it takes no -k, --run, --cells or --cell\n")
    if cell_mode and (args.run or args.k is not None):
        p.exit(2, f"{p.prog}: error: --cells / --cell rerun whole cells; -k and --run rerun single runs: give one kind\n")
    for flag, value in (("-k", args.k), ("--cells", args.cells)):
        if value is not None and value < 1:
            p.exit(2, f"{p.prog}: error: {flag} {value}: must be at least 1\n")


def _boards(p, args) -> int:
    out = None if args.out is None else check_output(p.prog, "--out", args.out, kind="file")
    missing = [str(b) for b in args.boards if not b.exists()]
    if missing:
        p.exit(2, f"{p.prog}: error: --boards: no file {missing[0]}\n")
    return boards_main(*args.boards, out=out)


def _runs(p, args, source: Path, found: dict) -> int:
    """Rerun single runs (``--run``, or ``-k`` drawn by ``--seed``), each judged by the prediction
    interval of one new draw from its cell's seeds; exit 1 when one falls outside."""
    unknown = [r for r in args.run if r not in found]
    if unknown:
        p.exit(2, f"{p.prog}: error: --run {unknown[0]!r} is not a run of {source} ({len(found)} runs; "
                  f"e.g. {', '.join(sorted(found)[:3])})\n")
    chosen = args.run or choose(list(found), 3 if args.k is None else args.k, args.seed)
    from suite.results.signature import label, signature

    print(f"reproducing {len(chosen)} of {len(found)} runs of {source} on: {label(signature())}")
    paths = rerun_all(found, chosen, Path(args.results), args.sweep)
    print(f"comparing {len(chosen)} reruns with the published cells of {len(found)} runs "
          f"(the prediction interval of one new draw from each cell's seeds)", flush=True)
    table = compare(store.load(source), rerun_rows(chosen, paths))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    from suite.report.reproduction import RERUN_VERDICTS

    counts = table.verdict.value_counts()
    print("; ".join(f"{v}: {counts.get(v, 0)}" for v in RERUN_VERDICTS))
    return 1 if counts.get("outside prediction interval", 0) else 0


INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C (128 + SIGINT)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.reproduce") -> int:
    """Rerun published runs or cells (``_main``); Ctrl-C ends it with one line, no traceback, and
    exit 130: each finished rerun is stored, so the same command goes on where it stopped."""
    try:
        return _main(argv, prog)
    except KeyboardInterrupt:
        print(f"{prog.rsplit('.', 1)[-1].split()[-1]}: interrupted; rerun the same command to go on",
              file=sys.stderr)
        return INTERRUPTED


def _main(argv: list[str] | None, prog: str) -> int:
    """Parse ``argv`` and compare two boards, rerun cells or rerun single runs."""
    p = build_parser(prog)
    args = p.parse_args(argv)
    cell_mode = args.cells is not None or bool(args.cell)
    _refuse_mixed(p, args, cell_mode)
    if args.boards:
        return _boards(p, args)
    if args.sweep is None:
        p.exit(2, f"{p.prog}: error: name a published sweep, or give --boards PUBLISHED OTHER\n")
    if (problem := files.sweep_name_problem(args.sweep)) is not None:
        p.exit(2, f"{p.prog}: error: sweep {problem}\n")
    check_output(p.prog, "--results", args.results)
    source = store.shipped_path(args.sweep, args.published)
    if not store.is_shipped(source):
        print(f"no shipped file {source}: nothing to reproduce", file=sys.stderr)
        return 1
    with warnings_on_stderr():
        found = {payload["run"]["run_id"]: payload for _, payload in store.payloads(source)}
    if cell_mode:
        out = None if args.out is None else check_output(p.prog, "--out", args.out, kind="file")
        return cells_main(p.prog, source, found, args.cell, args.cells, args.seed, Path(args.results), args.sweep,
                          out, list(sys.argv[1:] if argv is None else argv))
    return _runs(p, args, source, found)


if __name__ == "__main__":
    sys.exit(main())
