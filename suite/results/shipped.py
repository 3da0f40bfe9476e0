"""A published sweep's result rows, shipped in the repository: ``published/<sweep>.jsonl.gz``.

One line per run: the run file's whole payload (``{"schema", "run", "rows"}``, as
``suite.results.store.write_run`` writes it), lines sorted by run id, keys sorted, gzip written
with no time stamp or file name, so packing the same runs twice gives the same bytes.

- ``pack``: a sweep folder's valid runs (those ``store.load`` reads) into one shipped file.
- ``unpack``: a shipped file back into run files under ``results/<sweep>/``, so a sweep started
  after it skips every run already published (a long sweep survives a change of machine). A run
  file already there is kept, never overwritten.
- ``store.load`` reads a shipped file as it reads a folder, and ``python -m suite.report`` falls
  back to the shipped rows when ``results/<sweep>/`` holds none.

``python -m suite.results.shipped pack|unpack|check <sweep> [--results results] [--published published]``.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import warnings
from pathlib import Path

import suite.files as files

SUFFIX = ".jsonl.gz"
FOLDER = "published"
MAX_BYTES = 5 * 2**20  # a shipped file stays small enough to live in git


def is_shipped(path: str | Path) -> bool:
    return Path(path).name.endswith(SUFFIX) and Path(path).is_file()


def path_of(sweep: str, published: str | Path = FOLDER) -> Path:
    return Path(published) / f"{sweep}{SUFFIX}"


def encode(payloads: list[dict]) -> bytes:
    """The shipped bytes of ``payloads``: JSON lines sorted by run id, gzip without time or name."""
    lines = sorted((json.dumps(p, sort_keys=True, separators=(",", ":")) for p in payloads),
                   key=lambda line: json.loads(line)["run"]["run_id"])
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(("\n".join(lines) + "\n").encode())
    return buf.getvalue()


def read(path: str | Path):
    """(``path:line``, payload or the error that makes the line unreadable) for every line."""
    from suite.results.store import SCHEMA

    try:
        text = gzip.decompress(Path(path).read_bytes()).decode()
    except (OSError, EOFError, UnicodeDecodeError) as err:
        yield Path(path), ValueError(f"not a gzipped JSON-lines file ({err})")
        return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = Path(f"{path}:{i}")
        try:
            payload = json.loads(line)
        except (ValueError, RecursionError) as err:
            yield where, ValueError(f"line {i} is not JSON ({err})")
            continue
        if not isinstance(payload, dict) or payload.get("schema") != SCHEMA or not isinstance(payload.get("rows"), list):
            yield where, ValueError(f"line {i} is not a PosBench run (schema {SCHEMA})")
            continue
        yield where, payload


def pack(folder: str | Path, out: str | Path) -> int:
    """Write the valid runs under ``folder`` into the shipped file ``out``; returns their count.
    Refuses (ValueError) a folder with no run, or a file past ``MAX_BYTES``."""
    from suite.results.store import payloads

    found = [payload for _, payload in payloads(folder)]
    if not found:
        raise ValueError(f"no results under {folder} to pack")
    data = encode(found)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{out} would be {len(data) / 2**20:.1f} MiB, past the {MAX_BYTES // 2**20} MiB a shipped file may take")
    files.write_atomic(out, data)
    return len(found)


def unpack(path: str | Path, results_dir: str | Path, sweep: str) -> tuple[int, int]:
    """Write each shipped run of ``path`` as ``<results_dir>/<sweep>/<run_id>.json`` where no file
    is there yet; returns (written, kept). A run file already there is kept, and named when its
    contents differ from the shipped ones."""
    from suite.results.store import payloads

    written = kept = 0
    for _, payload in payloads(path):
        rid = payload["run"]["run_id"]
        target = files.result_path(results_dir, sweep, rid)
        if target.exists():
            kept += 1
            try:
                same = json.loads(target.read_text()) == payload
            except (OSError, ValueError):
                same = False
            if not same:
                warnings.warn(f"kept {target}: it differs from the shipped run {rid}", stacklevel=2)
            continue
        files.write_json_atomic(target, payload)
        written += 1
    return written, kept


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.results.shipped",
                                description="Pack a sweep's results into published/<sweep>.jsonl.gz, unpack "
                                            "them into results/<sweep>/ (to resume a sweep), or check a shipped file.")
    p.add_argument("action", choices=["pack", "unpack", "check"])
    p.add_argument("sweep", help="sweep name: results/<sweep>/ <-> published/<sweep>.jsonl.gz")
    p.add_argument("--results", default="results", help="the results folder (default: results)")
    p.add_argument("--published", default=FOLDER, help=f"the folder of shipped files (default: {FOLDER})")
    args = p.parse_args(argv)
    if (problem := files.sweep_name_problem(args.sweep)) is not None:
        p.exit(2, f"{p.prog}: error: sweep {problem}\n")
    shipped, folder = path_of(args.sweep, args.published), files.sweep_dir(args.results, args.sweep)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if args.action == "pack":
                n = pack(folder, shipped)
                print(f"packed {n} runs of {folder} into {shipped} ({shipped.stat().st_size / 1024:.0f} KiB)")
            elif not is_shipped(shipped):
                print(f"no shipped file {shipped}", file=sys.stderr)
                return 1
            elif args.action == "unpack":
                written, kept = unpack(shipped, args.results, args.sweep)
                print(f"unpacked {shipped} into {folder}: {written} runs written, {kept} already there")
            else:
                from suite.results.store import payloads

                n = len(payloads(shipped))
                print(f"{shipped}: {n} runs")
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return 1 if args.action == "check" and caught else 0


if __name__ == "__main__":
    sys.exit(main())
