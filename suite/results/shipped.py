"""``python -m suite.results.shipped pack|unpack|check <sweep> [--results results] [--published published]``:
pack a sweep's result rows into the file shipped in the repository, ``published/<sweep>.jsonl.gz``,
unpack them into ``results/<sweep>/`` (to resume a sweep), or check a shipped file.

The file's format is the store's (``suite.results.store``: ``encode_shipped``, ``read_shipped``);
this module imports the store, never the reverse.

- ``pack``: a sweep folder's valid runs (those ``store.load`` reads) into one shipped file. It
  never silently replaces a board with a smaller one: a shipped file already there is replaced
  only by a board holding all of its runs and configurations (the same runs, or more), unless
  ``--replace`` is given; a refusal (exit 2) names what would be lost. The old file is kept as
  ``<file>.bak`` until the new one is written atomically and read back; on any failure the old
  file stays as it was.
- ``unpack``: a shipped file back into run files under ``results/<sweep>/``, so a sweep started
  after it skips every run already published (a long sweep survives a change of machine). A run
  file already there is kept, never overwritten; one that does not count as stored is set aside.
- ``store.load`` reads a shipped file as it reads a folder, and ``python -m suite.report`` falls
  back to the shipped rows when ``results/<sweep>/`` holds none.
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import suite.files as files
from suite.commandline import Refused, check_output, command, parser, warnings_on_stderr
from suite.results.store import (PUBLISHED, NotStored, encode_shipped, is_shipped, payloads, shipped_path, shipped_runs,
                                 verified_run)

MAX_BYTES = 8 * 2**20  # a shipped file stays small enough to live in git (the scale board, 342 runs with every
# logged step of runs trained to the cap of 7000, packs to 4.6 MiB)


class WouldLose(ValueError):
    """Packing would write a board with fewer runs or configurations than the shipped one."""


def _shown(names, limit: int = 5) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _board(found: list[dict]) -> tuple[set, set]:
    """(run ids, configurations) of a board's payloads; a run's configuration is its rows' ``config_hash``."""
    runs = {p["run"].get("run_id") for p in found}
    configs = {r.get("config_hash") for p in found for r in p["rows"] if isinstance(r, dict)} - {None}
    return runs, configs


def board_loss(old: list[dict], new: list[dict]) -> str | None:
    """What replacing the board ``old`` with ``new`` would lose (runs, configurations), or None
    when ``new`` holds every run and configuration of ``old`` (the same board, or more)."""
    (old_runs, old_cfgs), (new_runs, new_cfgs) = _board(old), _board(new)
    lost_runs, lost_cfgs = old_runs - new_runs, old_cfgs - new_cfgs
    if not lost_runs and not lost_cfgs:
        return None
    parts = [f"{len(lost_runs)} of its {len(old_runs)} runs ({_shown(lost_runs)})" if lost_runs else "",
             f"{len(lost_cfgs)} of its {len(old_cfgs)} configurations ({_shown(lost_cfgs)})" if lost_cfgs else ""]
    return (f"it holds {len(old_runs)} runs in {len(old_cfgs)} configurations, the new board {len(new_runs)} runs in "
            f"{len(new_cfgs)}; replacing it would lose {' and '.join(p for p in parts if p)}")


def backup_path(out: str | Path) -> Path:
    """Where ``pack`` keeps the shipped file it replaces until the new one is verified."""
    return Path(f"{out}.bak")


def _verify(out: Path, expected: list[dict]) -> None:
    """``out`` read back through the store holds the runs of ``expected``; else ValueError."""
    back, bad = shipped_runs(out)
    if bad or _board(back)[0] != _board(expected)[0] or len(back) != len(expected):
        why = bad[0].reason if bad else f"{len(back)} runs read back, not {len(expected)}"
        raise ValueError(f"{out} did not read back as written ({why})")


def pack(folder: str | Path, out: str | Path, replace: bool = False) -> int:
    """Write the valid runs under ``folder`` into the shipped file ``out``; returns their count.
    Refuses (ValueError) a folder with no run, or a file past ``MAX_BYTES``; refuses (``WouldLose``)
    to replace a shipped board with one that lacks any of its runs or configurations, unless
    ``replace``. The old file is copied to ``backup_path(out)`` first; the new one is written
    atomically and read back through the store; only then is the backup removed. On any failure
    the old file is left at ``out`` as it was."""
    out = Path(out)
    found = [payload for _, payload in payloads(folder)]
    old = None
    if out.exists() and not out.is_file():
        raise ValueError(f"{out} is not a file: nothing was written")
    if out.exists():
        old, unreadable = shipped_runs(out)
        if unreadable and not replace:  # what cannot be read cannot be compared: it might be lost
            raise WouldLose(f"refusing to replace {out}: it cannot be read as a board to compare with "
                            f"({len(unreadable)} unreadable, first {unreadable[0]}); pass --replace to write over it")
    if not found:
        kept = f"; {out} ({len(old)} runs) is left as it was" if old else ""
        raise ValueError(f"no results under {folder} to pack{kept}")
    if old and not replace and (loss := board_loss(old, found)) is not None:
        raise WouldLose(f"refusing to replace {out} with the runs of {folder}: {loss}. Nothing was written; "
                        "pass --replace (make publish REPLACE=1) to replace it anyway")
    data = encode_shipped(found)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{out} would be {len(data) / 2**20:.1f} MiB, past the {MAX_BYTES // 2**20} MiB a shipped file may take")
    backup = backup_path(out)
    if old is not None:
        if backup.exists():
            raise ValueError(f"{backup} is there from a pack that did not finish: compare it with {out}, keep the "
                             "board you want at that path, remove the other, and pack again")
        files.write_atomic(backup, out.read_bytes())
    try:
        files.write_atomic(out, data)
        _verify(out, found)
    except BaseException:
        if old is not None:
            os.replace(backup, out)  # the old board, as it was
        raise
    backup.unlink(missing_ok=True)
    return len(found)


def unpack(path: str | Path, results_dir: str | Path, sweep: str) -> tuple[int, int]:
    """Write each shipped run of ``path`` as ``<results_dir>/<sweep>/<run_id>.json`` where the run
    is not stored yet; returns (written, kept). A stored run file already there is kept, and named
    when its contents differ from the shipped ones; anything else at its name (``verified_run``:
    damaged, another run's, a folder) is set aside (``files.set_aside``), named, and the shipped run
    written in its place."""
    written = kept = 0
    for _, payload in payloads(path):
        rid = payload["run"]["run_id"]
        target = files.result_path(results_dir, sweep, rid)
        if os.path.lexists(target):
            try:
                same = verified_run(target, rid) == payload
            except NotStored as err:
                warnings.warn(f"{err}; set aside as {files.set_aside(target)}, and the shipped run written in its place",
                              stacklevel=2)
            else:
                kept += 1
                if not same:
                    warnings.warn(f"kept {target}: it differs from the shipped run {rid}", stacklevel=2)
                continue
        files.write_json_atomic(target, payload)
        written += 1
    return written, kept


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.results.shipped") -> int:
    p = parser(prog, __doc__)
    p.add_argument("action", choices=["pack", "unpack", "check"])
    p.add_argument("sweep", help="sweep name: results/<sweep>/ <-> published/<sweep>.jsonl.gz")
    p.add_argument("--results", default="results", help="the results folder (default: results)")
    p.add_argument("--published", default=PUBLISHED, help=f"the folder of shipped files (default: {PUBLISHED})")
    p.add_argument("--replace", action="store_true",
                   help="pack: replace the shipped file even when the new board lacks some of its runs or configurations")
    args = p.parse_args(argv)
    if (problem := files.sweep_name_problem(args.sweep)) is not None:
        p.exit(2, f"{p.prog}: error: sweep {problem}\n")
    shipped, folder = shipped_path(args.sweep, args.published), files.sweep_dir(args.results, args.sweep)
    if args.action == "pack":  # where it writes, checked before any work
        check_output(p.prog, "--published", args.published)
        check_output(p.prog, "--published", shipped, kind="file")
    elif args.action == "unpack":
        check_output(p.prog, "--results", args.results)
        check_output(p.prog, "--results", folder)
    with warnings_on_stderr() as caught:
        try:
            if args.action == "pack":
                n = pack(folder, shipped, replace=args.replace)
                print(f"packed {n} runs of {folder} into {shipped} ({shipped.stat().st_size / 1024:.0f} KiB)")
            elif not is_shipped(shipped):
                raise Refused(f"no shipped file {shipped}", 1)
            elif args.action == "unpack":
                written, kept = unpack(shipped, args.results, args.sweep)
                print(f"unpacked {shipped} into {folder}: {written} runs written, {kept} already there")
            else:
                n = len(payloads(shipped))
                print(f"{shipped}: {n} runs")
        except WouldLose as err:
            raise Refused(f"error: {err}", 2) from None
        except ValueError as err:
            raise Refused(f"error: {err}", 1) from None
    return 1 if args.action == "check" and caught else 0


if __name__ == "__main__":
    sys.exit(main())
