"""``python -m suite.results.shipped pack|unpack|check <sweep> [--results results] [--published published]``:
pack a sweep's result rows into the file shipped in the repository, ``published/<sweep>.jsonl.gz``,
unpack them into ``results/<sweep>/`` (to resume a sweep), or check a shipped file.

The file's format is the store's (``suite.results.store``: ``encode_shipped``, ``read_shipped``);
this module imports the store, never the reverse.

- ``pack``: a sweep folder's valid runs (those ``store.load`` reads) into one shipped file.
- ``unpack``: a shipped file back into run files under ``results/<sweep>/``, so a sweep started
  after it skips every run already published (a long sweep survives a change of machine). A run
  file already there is kept, never overwritten.
- ``store.load`` reads a shipped file as it reads a folder, and ``python -m suite.report`` falls
  back to the shipped rows when ``results/<sweep>/`` holds none.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import suite.files as files
from suite.commandline import Refused, check_output, command, parser, warnings_on_stderr
from suite.results.store import PUBLISHED, encode_shipped, is_shipped, payloads, shipped_path

MAX_BYTES = 5 * 2**20  # a shipped file stays small enough to live in git


def pack(folder: str | Path, out: str | Path) -> int:
    """Write the valid runs under ``folder`` into the shipped file ``out``; returns their count.
    Refuses (ValueError) a folder with no run, or a file past ``MAX_BYTES``."""
    found = [payload for _, payload in payloads(folder)]
    if not found:
        raise ValueError(f"no results under {folder} to pack")
    data = encode_shipped(found)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{out} would be {len(data) / 2**20:.1f} MiB, past the {MAX_BYTES // 2**20} MiB a shipped file may take")
    files.write_atomic(out, data)
    return len(found)


def unpack(path: str | Path, results_dir: str | Path, sweep: str) -> tuple[int, int]:
    """Write each shipped run of ``path`` as ``<results_dir>/<sweep>/<run_id>.json`` where no file
    is there yet; returns (written, kept). A run file already there is kept, and named when its
    contents differ from the shipped ones."""
    written = kept = 0
    for _, payload in payloads(path):
        rid = payload["run"]["run_id"]
        target = files.result_path(results_dir, sweep, rid)
        if target.exists():
            kept += 1
            try:
                same = json.loads(files.read_regular(target)) == payload  # a FIFO there is named, not read
            except (OSError, ValueError):
                same = False
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
                n = pack(folder, shipped)
                print(f"packed {n} runs of {folder} into {shipped} ({shipped.stat().st_size / 1024:.0f} KiB)")
            elif not is_shipped(shipped):
                raise Refused(f"no shipped file {shipped}", 1)
            elif args.action == "unpack":
                written, kept = unpack(shipped, args.results, args.sweep)
                print(f"unpacked {shipped} into {folder}: {written} runs written, {kept} already there")
            else:
                n = len(payloads(shipped))
                print(f"{shipped}: {n} runs")
        except ValueError as err:
            raise Refused(f"error: {err}", 1) from None
    return 1 if args.action == "check" and caught else 0


if __name__ == "__main__":
    sys.exit(main())
