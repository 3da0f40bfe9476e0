"""``python -m suite.commands.rank <overrides> --board B [--seeds 0,1] [--tasks copy,vt] [--unlike refuse|ok]
[--out DIR] [--published DIR] [--sweep-file PATH] [--tie min|average]``: place a new scheme on a published board.

The arm trains on the board's own grid and recipe: every job of conf/sweep/<board>.yaml with the
axis that chooses the scheme (``+arch`` or ``position``) replaced by the overrides
(``position=alibi_half``); runs stored in the out folder are not trained again. Each arm run must
be like for like with a board run (the same configuration but for the layer stack, at a seed the
board ran: ``suite.report.placement.differences``), else it is refused before any training, naming
what differs, or with ``--unlike ok`` shown apart as "not like for like", never ranked. The arm is
then ranked among the board's shipped rows (``published/<board>.jsonl.gz``) by the report's own
code: its place by OOD MRR with its 95 % interval and whether that interval is separated from its
neighbours', its paired per-cell differences against each published scheme, and each published
scheme's MRR without and with it (``suite.report.placement``). ``--seeds``/``--tasks`` train a
subset and rank every scheme on that subset, said as not like for like with the full grid.

Writes ``reports-local/rank/<board>-<label>/`` (``--out``): results/, report/ (the board's report
with the arm), rank.md and rank.csv; nothing under reports/ or published/.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from suite import files
from suite.commandline import Refused, check_output, command, comma_problem, parser, warnings_on_stderr
from suite.results import store

ROOT = Path(__file__).resolve().parents[2]
UNLIKE = ("refuse", "ok")


def build_parser(prog: str):
    p = parser(prog, __doc__)
    p.add_argument("overrides", nargs="+", help="the arm's Hydra overrides (position=alibi_half position.fraction=0.5)")
    p.add_argument("--board", required=True, help="the published board: conf/sweep/<board>.yaml and its shipped rows")
    p.add_argument("--seeds", default=None, help="train only these of the board's seeds (a subset: not like for like)")
    p.add_argument("--tasks", default=None, help="train only these of the board's tasks or families (a subset)")
    p.add_argument("--unlike", default="refuse", choices=UNLIKE,
                   help="refuse (default) an arm run unlike the board's, or show it apart, unranked (ok)")
    p.add_argument("--out", default=None, help="the rank folder (default: reports-local/rank/<board>-<label>)")
    p.add_argument("--published", default=store.PUBLISHED, help="the folder of shipped result files")
    p.add_argument("--sweep-file", default=None, help="the board's sweep file (default: conf/sweep/<board>.yaml)")
    p.add_argument("--tie", default="min", choices=("min", "average"), help="the MRR's tie rule")
    return p


def label_of(overrides: list[str]) -> str:
    """The arm's name as a folder takes it: the scheme's name, then each other override's last key
    part and value ('rope_fraction-0.5')."""
    parts = []
    for o in overrides:
        key, _, value = o.partition("=")
        key = key.lstrip("+~")
        parts.append(value if key in ("position", "arch") else f"{key.rsplit('.', 1)[-1]}-{value}")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(parts)).strip("._-")[:60] or "arm"


def boards_with_rows(published) -> list[str]:
    """The boards with both a sweep file under conf/sweep/ and shipped rows in ``published``."""
    return sorted(p.stem for p in (ROOT / "conf" / "sweep").glob("*.yaml")
                  if store.is_shipped(store.shipped_path(p.stem, published)))


def board_source(prog: str, args) -> tuple[Path, Path]:
    """(the board's sweep file, its shipped rows); ``Refused`` naming the bad value and the choices."""
    sweep = Path(args.sweep_file) if args.sweep_file else ROOT / "conf" / "sweep" / f"{args.board}.yaml"
    shipped = store.shipped_path(args.board, args.published)
    valid = ", ".join(boards_with_rows(args.published)) or "none"
    if not sweep.is_file():
        raise Refused(f"{prog}: error: --board {args.board!r}: no sweep file {sweep}; boards with a sweep file and "
                      f"published rows: {valid}")
    if not store.is_shipped(shipped):
        raise Refused(f"{prog}: error: --board {args.board!r}: no published rows at {shipped}; boards with a sweep "
                      f"file and published rows: {valid}")
    return sweep, shipped


def check_out(prog: str, out: str | Path) -> Path:
    """``out`` when the command may write there (``check_output``: an empty path, a file in the way,
    a folder it cannot write are refused), and not under reports/ or published/ of the checkout."""
    out = check_output(prog, "--out", out)
    for kept in ("reports", store.PUBLISHED):
        if out.resolve().is_relative_to((ROOT / kept).resolve()):
            raise Refused(f"{prog}: error: --out {str(out)!r} is under {kept}/, which rank never changes; "
                          "choose another folder (default: reports-local/rank/<board>-<label>)")
    return out


def _subset(prog: str, option: str, text: str | None, what: str) -> list[str] | None:
    if text is not None and (problem := comma_problem(option, text, what)) is not None:
        raise Refused(f"{prog}: error: {problem}")
    return None if text is None else [t.strip() for t in text.split(",")]


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.rank") -> int:
    args = build_parser(prog).parse_intermixed_args(argv)
    from suite.run import override_problem

    if (problem := override_problem(args.overrides)) is not None:
        raise Refused(f"{prog}: {problem}")
    sweep, shipped = board_source(prog, args)
    label = label_of(args.overrides)
    name = f"{args.board}-{label}"
    if (problem := files.sweep_name_problem(name)) is not None:
        raise Refused(f"{prog}: error: the rank's name {problem}")
    out = check_out(prog, args.out if args.out is not None else Path("reports-local") / "rank" / name)
    seeds, tasks = _subset(prog, "--seeds", args.seeds, "seed"), _subset(prog, "--tasks", args.tasks, "task")
    from suite.commands import rank_grid
    from suite.report import placement

    grid = rank_grid.arm_jobs(prog, sweep, args.board, args.overrides, seeds, tasks,
                              [f"sweep_name={name}", f"results_dir={out / 'results'}", "logger=none"])
    with warnings_on_stderr():
        published = store.load(shipped)
    setups = placement.board_setups(published)
    unlike = {rid: d for rid, spec, _ in grid.runs if (d := placement.differences(spec.to_dict(), spec.seed, setups))}
    if unlike and args.unlike == "refuse":
        raise Refused(rank_grid.unlike_refusal(prog, args, unlike))
    rank_grid.train(grid, out / "results", name)
    with warnings_on_stderr():
        arm = store.load(out / "results" / name)
    arm = arm[arm.run_id.isin([rid for rid, _, _ in grid.runs])]
    from suite.commands import rank_output

    rank_output.publish(prog, args, name, out, grid, published, arm, unlike)
    return 0


if __name__ == "__main__":
    sys.exit(main())
