"""``python -m suite.results.shipped pack|unpack|check <sweep> [--results results] [--published published]``:
pack a sweep's result rows into the file shipped in the repository, ``published/<sweep>.jsonl.gz``,
unpack them into ``results/<sweep>/`` (to resume a sweep), or check a shipped file.

The file's format is the store's (``suite.results.store``: ``encode_shipped``, ``read_shipped``);
this module imports the store, never the reverse.

- ``pack``: a sweep folder's valid runs (those ``store.load`` reads, each a run of the sweep the
  folder names) into one shipped file. A folder holding another sweep's run (copied, linked) is
  refused (exit 2), naming the file. It never silently replaces a board with a smaller or another
  one: a shipped file already there is replaced only by a board holding all of its runs and
  configurations (the same runs, or more) with the same numbers for every run it holds, unless
  ``--replace`` is given; a refusal (exit 2) names what would be lost, or lists the changed cells
  (run, task, eval length, metric: old -> new; the first ``CELLS_SHOWN`` and a count), which
  ``--replace`` prints as it replaces them. The old file is kept as ``<file>.bak`` until the new
  one is written atomically, read back and found to hold exactly the runs written; on any failure
  the old file stays as it was.
- ``unpack``: a shipped file back into run files under ``results/<sweep>/``, so a sweep started
  after it skips every run already published (a long sweep survives a change of machine). A run
  file already there is kept, never overwritten; one that does not count as stored is set aside.
  The lines that count as stored are written; each that does not (a damaged or cut-short file,
  another sweep's run) is named, and the exit status is 1, as ``check``'s is on the same file.
- ``check``: the runs of a shipped file that count as stored; exit 1, each named, when a line does not.
- Every ``OSError`` under them (a full disk, no permission, a folder in the way) is one line
  naming the path, exit 1; nothing stored or shipped is lost.
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
from suite.results.store import (PUBLISHED, NotStored, encode_shipped, is_shipped, payloads, read_board, shipped_path,
                                 shipped_runs, verified_run)

MAX_BYTES = 8 * 2**20  # a shipped file stays small enough to live in git (the scale board, 342 runs with every
# logged step of runs trained to the cap of 7000, packs to 4.6 MiB)


class WouldLose(ValueError):
    """Packing would lose or change what the shipped board holds, or pack another sweep's runs: refused (exit 2)."""


CELLS_SHOWN = 10  # changed cells a refusal lists before it counts the rest


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


def _cells(payload: dict) -> dict:
    """{(task, eval_len, slice, metric): (value, status)} of a run's rows."""
    return {(r.get("task"), r.get("eval_len"), r.get("slice"), r.get("metric")): (r.get("value"), r.get("status"))
            for r in payload["rows"]}


def _same_cell(a, b) -> bool:
    return a == b or (a is not None and b is not None and a[1] == b[1] and a[0] != a[0] and b[0] != b[0])  # NaN is NaN


def changed_cells(old: list[dict], new: list[dict]) -> list[tuple]:
    """The cells of the runs both boards hold (by run id) whose value or status differ, in order:
    (run id, task, eval_len, slice, metric, old (value, status) or None, new (value, status) or None)."""
    before = {p["run"].get("run_id"): _cells(p) for p in old}
    out = []
    for payload in sorted(new, key=lambda p: str(p["run"].get("run_id"))):
        rid = payload["run"].get("run_id")
        if rid not in before:
            continue
        now = _cells(payload)
        for key in sorted(before[rid].keys() | now.keys(), key=str):
            if not _same_cell(before[rid].get(key), now.get(key)):
                out.append((rid, *key, before[rid].get(key), now.get(key)))
    return out


def _cell_value(cell) -> str:
    if cell is None:
        return "absent"
    value, status = cell
    return f"{value!r}" + ("" if status == "ok" else f" ({status})")


def changes_text(changes: list[tuple], limit: int = CELLS_SHOWN) -> str:
    """The changed cells as a person reads them: a count, then one line per cell (run, task, eval
    length, slice when not all, metric: old -> new), the first ``limit`` of them and a count of the rest."""
    runs = len({c[0] for c in changes})
    count = f"{len(changes)} cell{'s' * (len(changes) != 1)} of {runs} run{'s' * (runs != 1)} it holds change"
    lines = [f"  {rid} {task} @{eval_len}{'' if sl == 'all' else f' [{sl}]'} {metric}: {_cell_value(a)} -> {_cell_value(b)}"
             for rid, task, eval_len, sl, metric, a, b in changes[:limit]]
    more = [f"  and {len(changes) - limit} more"] if len(changes) > limit else []
    return "\n".join([f"{count} (run, task, @eval length, metric: old -> new):", *lines, *more])


def backup_path(out: str | Path) -> Path:
    """Where ``pack`` keeps the shipped file it replaces until the new one is verified."""
    return Path(f"{out}.bak")


def _verify(out: Path, expected: list[dict]) -> None:
    """``out`` read back through the store holds exactly the runs of ``expected``; else ValueError."""
    back, bad = shipped_runs(out)
    key = lambda p: str(p["run"].get("run_id"))  # noqa: E731
    if bad or sorted(back, key=key) != sorted(expected, key=key):
        why = bad[0].reason if bad else f"{len(back)} runs read back, not the {len(expected)} written"
        raise ValueError(f"{out} did not read back as written ({why})")


def _old_board(out: Path, replace: bool) -> list[dict] | None:
    """The runs of the shipped board at ``out`` (None when there is none); ``WouldLose`` when it
    cannot be read whole, so cannot be compared, unless ``replace``."""
    if os.path.lexists(out) and not out.is_file():
        raise ValueError(f"{out} is not a file: nothing was written")
    if not out.exists():
        return None
    old, unreadable = shipped_runs(out)
    if unreadable and not replace:  # what cannot be read cannot be compared: it might be lost
        raise WouldLose(f"refusing to replace {out}: it cannot be read as a board to compare with "
                        f"({len(unreadable)} unreadable, first {unreadable[0]}); pass --replace to write over it")
    return old


def _foreign_refusal(folder: Path, foreign: list) -> WouldLose:
    first = foreign[0]
    more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
    return WouldLose(f"refusing to pack {folder}: {first.where} is a run of sweep {first.foreign!r}{more}, not of "
                     f"{folder.name!r}; a shipped board holds its own sweep's runs. Nothing was written; move it out "
                     f"of {folder} (a run of another sweep joins this one when `make sweep` copies it, relabelled)")


def _write_board(out: Path, data: bytes, expected: list[dict], replacing: bool) -> None:
    """Write ``data`` to ``out`` atomically and read it back (``_verify``). A board it replaces is
    first copied to ``backup_path(out)``, put back on any failure, and removed once the new one is
    verified. An ``OSError`` names its path, and the board at ``out`` is then as it was."""
    backup = backup_path(out)
    if replacing:
        if os.path.lexists(backup):
            raise ValueError(f"{backup} is there from a pack that did not finish: compare it with {out}, keep the "
                             "board you want at that path, remove the other, and pack again")
        files.write_atomic(backup, out.read_bytes())
    try:
        files.write_atomic(out, data)
        _verify(out, expected)
    except BaseException as err:
        if not replacing:
            out.unlink(missing_ok=True)  # a new file that did not read back: there was no board before it
        else:
            try:
                os.replace(backup, out)  # the old board, as it was
            except OSError as again:
                raise ValueError(f"{err}; and the old board could not be put back at {out} ({again.strerror or again}): "
                                 f"it is kept at {backup}") from err
        raise
    if replacing:
        try:
            backup.unlink()
        except OSError as err:
            warnings.warn(f"packed {out}, but the copy of the board it replaced, {backup}, could not be removed "
                          f"({err.strerror or err}): remove it", stacklevel=3)


def pack(folder: str | Path, out: str | Path, replace: bool = False, say=None) -> int:
    """Write the valid runs of the sweep folder ``folder`` (the runs of the sweep it names) into the
    shipped file ``out``; returns their count. Refuses (``WouldLose``) a folder holding another
    sweep's run, and, unless ``replace``, a board that would lose any run or configuration of the
    one at ``out`` or change a number of a run it holds (the changed cells named; with ``replace``
    they are passed to ``say``); refuses (ValueError) a folder with no run, or a file past
    ``MAX_BYTES``. The write is ``_write_board``'s: on any failure the old file is at ``out`` as it was."""
    out, folder = Path(out), Path(folder)
    board = read_board(folder, sweep=folder.name)
    for line in (*board.problems, *board.notes):
        warnings.warn(line, stacklevel=2)
    if board.foreign:
        raise _foreign_refusal(folder, board.foreign)
    found = [payload for _, payload in board.runs]
    old = _old_board(out, replace)
    if not found:
        kept = f"; {out} ({len(old)} runs) is left as it was" if old else ""
        raise ValueError(f"no results under {folder} to pack{kept}")
    if old and not replace and (loss := board_loss(old, found)) is not None:
        raise WouldLose(f"refusing to replace {out} with the runs of {folder}: {loss}. Nothing was written; "
                        "pass --replace (make publish REPLACE=1) to replace it anyway")
    if changes := changed_cells(old or [], found):
        if not replace:
            raise WouldLose(f"refusing to replace {out}: {changes_text(changes)}\nNothing was written; pass --replace "
                            "(make publish REPLACE=1) to replace them")
        (say or (lambda line: None))(f"replacing {out}: {changes_text(changes)}")
    data = encode_shipped(found)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{out} would be {len(data) / 2**20:.1f} MiB, past the {MAX_BYTES // 2**20} MiB a shipped file may take")
    _write_board(out, data, found, old is not None)
    return len(found)


def write_runs(runs: list[dict], results_dir: str | Path, sweep: str) -> tuple[int, int]:
    """Write each run of ``runs`` as ``<results_dir>/<sweep>/<run_id>.json`` where the run is not
    stored yet; returns (written, kept). A stored run file already there is kept, and named when
    its contents differ; anything else at its name (``verified_run``: damaged, another run's or
    sweep's, a folder) is set aside (``files.set_aside``), named, and the run written in its place.
    An ``OSError`` names its path; the runs written before it stay stored."""
    written = kept = 0
    for payload in runs:
        rid = payload["run"]["run_id"]
        target = files.result_path(results_dir, sweep, rid)
        if os.path.lexists(target):
            try:
                same = verified_run(target, rid, sweep=sweep) == payload
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


def unpack(path: str | Path, results_dir: str | Path, sweep: str) -> tuple[int, int]:
    """Write each run of the shipped file ``path`` that counts as stored (as a run of ``sweep``;
    each line that does not is warned about by name) under ``<results_dir>/<sweep>/``
    (``write_runs``); returns (written, kept)."""
    return write_runs([payload for _, payload in payloads(path, sweep)], results_dir, sweep)


def _io_line(action: str, err: OSError, shipped: Path) -> str:
    """One line for an ``OSError`` under ``action``: the path, why, and what is as it was."""
    after = {"pack": f"nothing was written: {shipped} is as it was",
             "unpack": "the runs written before it are stored; unpacking again writes the rest (no stored file is overwritten)",
             "check": "nothing was written"}[action]
    return f"error: could not {action} {shipped}: {err.filename or shipped}: {err.strerror or err}; {after}"


def _act(args, shipped: Path, folder: Path) -> int:
    """Run ``args.action``; returns the exit status: 1 when a line of the shipped file it read
    (``unpack``, ``check``) does not count as stored, as each is named, else 0."""
    if args.action == "pack":
        n = pack(folder, shipped, replace=args.replace, say=print)
        print(f"packed {n} runs of {folder} into {shipped} ({shipped.stat().st_size / 1024:.0f} KiB)")
        return 0
    if not is_shipped(shipped):
        raise Refused(f"no shipped file {shipped}", 1)
    board = read_board(shipped, sweep=args.sweep)
    for line in (*board.problems, *board.notes):
        warnings.warn(line, stacklevel=2)
    left = f"; {len(board.problems)} left out (each named above)" if board.problems else ""
    if args.action == "unpack":
        written, kept = write_runs([payload for _, payload in board.runs], args.results, args.sweep)
        print(f"unpacked {shipped} into {folder}: {written} runs written, {kept} already there{left}")
    else:
        print(f"{shipped}: {len(board.runs)} runs{left}")
    return 1 if board.problems else 0


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.results.shipped") -> int:
    p = parser(prog, __doc__)
    p.add_argument("action", choices=["pack", "unpack", "check"])
    p.add_argument("sweep", help="sweep name: results/<sweep>/ <-> published/<sweep>.jsonl.gz")
    p.add_argument("--results", default="results", help="the results folder (default: results)")
    p.add_argument("--published", default=PUBLISHED, help=f"the folder of shipped files (default: {PUBLISHED})")
    p.add_argument("--replace", action="store_true",
                   help="pack: replace the shipped file even when the new board lacks some of its runs or "
                        "configurations, or changes numbers of runs it holds (the changed cells are listed)")
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
    with warnings_on_stderr():
        try:
            return _act(args, shipped, folder)
        except WouldLose as err:
            raise Refused(f"error: {err}", 2) from None
        except ValueError as err:
            raise Refused(f"error: {err}", 1) from None
        except OSError as err:
            raise Refused(_io_line(args.action, err, shipped), 1) from None


if __name__ == "__main__":
    sys.exit(main())
