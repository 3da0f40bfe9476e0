"""The results store: one JSON file per run under ``results/<sweep>/``, long-format rows.

One row per run x task x eval length x metric (x slice), with the columns below; eval length
is a column, never part of a metric name. Files are written atomically (temporary file, then
rename), so parallel workers never corrupt each other and a killed run leaves no half file.
The store is the source of truth; W&B only mirrors it.

A published sweep's rows ship in the repository in one file, ``published/<sweep>.jsonl.gz``:
one line per run, the run file's whole payload (``{"schema", "run", "rows"}``), lines sorted by
run id, keys sorted, gzip written with no time stamp or file name, so the same runs always give
the same bytes (``encode_shipped``). ``load`` reads such a file as it reads a folder; every run,
in a file or on a line, passes the one envelope check (``envelope_problem``).
``suite.results.shipped`` packs and unpacks them.

A run file counts as stored only when ``verified_run`` accepts it: a regular file that parses,
passes the envelope, row and run checks, and names its run (the file's name, or the run a caller
expects) and spec hash in its record and every row. It is the one test of "stored": the run's
and the sweep's skip (``suite.run``, which sets anything else aside and runs again), ``load``,
lm-eval, diagnose, reproduce and unpack all ask it; a shipped line passes the same checks
(``checked``), so every reader gives one verdict on one run.

Every row agrees with its own run record (``record_problem``): it repeats the run's columns
(``RUN_COLUMNS``: run id, sweep, spec and config hash, scheme, spans, span sizes) as the record
states them; the record's columns are what its stored spec gives, where this checkout can tell
(``_spec_problem``: the spec is rebuilt, ``suite.config.build.run_spec_from_dict``, and when it
rebuilds to the run's own spec hash this checkout reads it as the code that ran it did, so its
config hash, positions, spans and span sizes must follow; a spec hashed under a default since
changed, or written by hand, is held to the sweep it states only); each task's rows name one
headline metric, one the run stores; its times (``wall_s``, ``timing``) are finite and >= 0, and
its ``timestamp`` an ISO 8601 time with its offset. The store imports no torch; the spec rebuild
does, on the first run checked, as reading a run's spec always did (``run_problem``).

A run belongs to one sweep, and a reader leaves out another sweep's run, naming the file and its
sweep (``foreign_sweep``): a run file is one of the sweep a folder on its path names
(``results/<sweep>/``, ``file_place``), a shipped line one of the sweep its file ships
(``shipped_place``), and ``pack``, ``unpack`` and ``check`` take only the sweep they are told. A
run the suite copies from another sweep is relabelled for its new sweep (``relabelled``: record,
spec and rows, marked ``copied_from``), so it is that sweep's own.

Time decides nothing: no reader orders or picks runs by their finish time (two files claiming one
run with different contents are both left out), and whether a file counts as stored never
depends on when it is read. A finish time later than the reader's clock (by more than
``FUTURE_SKEW``) is not trusted: ``read_board`` names it, and the run is read as stored.

Each row carries what a reader needs without the code: its task's ``headline`` metric, and its
metric's declaration (``DECLARED``: direction, range, whether it is a share of examples), which
``write_run`` copies from ``suite.data.metrics``. Rows stored before rows carried them are
completed when read (``described``), from today's declarations.
"""
from __future__ import annotations

import ast
import dataclasses
import gzip
import io
import json
import math
import re
import warnings
import zlib
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from suite.commandline import Refused
from suite.files import read_regular, result_path, write_json_atomic
from suite.registry import package_modules
from suite.model.span_kinds import KINDS
from suite.data.metrics import METRICS

COLUMNS = [
    "run_id", "sweep", "spec_hash", "config_hash", "code_digest", "git_sha", "seed", "model", "n_layers", "d_model", "n_heads",
    "pattern", "positions", "spans", *KINDS, "train_len", "steps", "task", "eval_len", "len_ratio",
    "slice", "metric", "value", "n", "status", "wall_s", "timestamp", "eval_set",
    "headline", "higher_is_better", "low", "high", "share",
]
DECLARED = ("higher_is_better", "low", "high", "share")  # a metric's declaration (suite.data.metrics), in each row
TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
SCHEMA = "posbench.run/1"
STATUSES = ("ok", "diverged", "unsupported")
REQUIRED = ("run_id", "task", "eval_len", "len_ratio", "slice", "metric", "value", "n", "status")
# the folders W&B writes a run's files in (its JSON files are not results): offline-run-<time>-<id>, run-<time>-<id>
WANDB_RUN_FOLDER = re.compile(r"(offline-)?run-\d{8}_\d{6}-.+|latest-run")
SHIPPED_SUFFIX = ".jsonl.gz"
PUBLISHED = "published"  # the folder of shipped files


def declaration(metric: str) -> dict:
    """The ``DECLARED`` fields of ``metric`` as ``suite.data.metrics`` declares it ({} if unknown)."""
    m = METRICS.get(metric)
    return {} if m is None else {"higher_is_better": m.higher_is_better, "low": m.low, "high": m.high, "share": m.share}


def write_run(results_dir, sweep: str, run_id: str, run: dict, rows: list[dict]) -> Path:
    """Write one run's rows (each completed with the run's columns and its metric's declaration)
    atomically; returns the path."""
    full = [{col: {**run, **declaration(row.get("metric")), **row}.get(col) for col in COLUMNS} for row in rows]
    path = result_path(results_dir, sweep, run_id)
    write_json_atomic(path, {"schema": SCHEMA, "run": run, "rows": full})
    return path


def relabelled(payload: dict, sweep: str, source: str) -> dict:
    """``payload`` as the run file of sweep ``sweep``: the same spec, rows and numbers, named for
    ``sweep`` and marked ``copied_from: source``."""
    run = {**payload["run"], "sweep": sweep, "copied_from": source}
    if isinstance(run.get("spec"), dict):
        run["spec"] = {**run["spec"], "sweep": sweep}
    return {**payload, "run": run, "rows": [{**row, "sweep": sweep} for row in payload["rows"]]}


def copy_from_sibling(results_dir, sweep: str, run_id: str, spec_hash: str | None = None) -> Path | None:
    """Store run ``run_id`` of sweep ``sweep`` from another sweep's folder under ``results_dir``
    that holds it stored (``verified_run``: the same run id and spec hash, so the same numbers: a
    run id leaves the sweep name out). Returns the new file, or None when no sibling has it.
    ``make sweep`` after the flagship board trains nothing: its runs are the flagship's own."""
    for other in sorted(p for p in Path(results_dir).glob(f"*/{run_id}.json") if p.parent.name != sweep):
        try:
            payload = verified_run(other, run_id, spec_hash)
        except NotStored:
            continue
        path = result_path(results_dir, sweep, run_id)
        write_json_atomic(path, relabelled(payload, sweep, other.parent.name))
        return path
    return None


def read_run(path: str | Path) -> dict:
    """A run file's payload; a file that is not one (foreign, truncated, nested past what the
    parser takes) is a ValueError naming it, and one that is not a regular file (a FIFO, a
    socket) an OSError naming it, raised without waiting on it (``suite.files.read_regular``)."""
    data = read_regular(path)
    try:
        payload = json.loads(data)
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to be a PosBench run file") from None
    if (problem := envelope_problem(payload)) is not None:
        raise ValueError(f"{path} {problem}")
    return payload


def envelope_problem(payload) -> str | None:
    """What makes a parsed run file (or a shipped line) not a PosBench run, or None: it must be an
    object of this ``SCHEMA`` with a list of rows."""
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA or not isinstance(payload.get("rows"), list):
        return f"is not a PosBench run (schema {SCHEMA})"
    return None


def is_shipped(path: str | Path) -> bool:
    """Whether ``path`` is a shipped file (``published/<sweep>.jsonl.gz``) rather than a folder."""
    return Path(path).name.endswith(SHIPPED_SUFFIX) and Path(path).is_file()


def shipped_path(sweep: str, published: str | Path = PUBLISHED) -> Path:
    return Path(published) / f"{sweep}{SHIPPED_SUFFIX}"


def shipped_boards(published: str | Path = PUBLISHED) -> list[str]:
    """The names of the boards shipped in ``published`` (``<board>.jsonl.gz``), sorted."""
    folder = Path(published)
    files = sorted(folder.glob(f"*{SHIPPED_SUFFIX}")) if folder.is_dir() else []
    return [f.name.removesuffix(SHIPPED_SUFFIX) for f in files]


def encode_shipped(payloads: list[dict]) -> bytes:
    """The shipped bytes of ``payloads``: JSON lines sorted by run id, gzip without time or name."""
    lines = sorted((json.dumps(p, sort_keys=True, separators=(",", ":")) for p in payloads),
                   key=lambda line: json.loads(line)["run"]["run_id"])
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(("\n".join(lines) + "\n").encode())
    return buf.getvalue()


def _shipped_text(path: Path) -> tuple[str, str | None]:
    """(the whole lines of the shipped file ``path``, what is wrong with the file or None). A
    gzip stream cut short (a truncated download or copy) gives the whole lines before the cut and
    says so; a file that is no gzip stream, or not text, gives none. A FIFO or a folder is named,
    never opened for reading (``suite.files.read_regular``)."""
    try:
        data = read_regular(path)
    except OSError as err:
        return "", f"it cannot be read ({err.strerror or err})"
    if not data:
        return "", "it is empty, not a gzipped JSON-lines file"
    try:
        return gzip.decompress(data).decode(), None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        whole = f"not a gzipped JSON-lines file ({err})"
    stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        text = stream.decompress(data).decode(errors="replace")
    except zlib.error:
        return "", whole
    if stream.eof:  # a whole stream that is not UTF-8, or more than one member: not a shipped file
        return "", whole
    kept = text[: text.rfind("\n") + 1]
    return kept, (f"the file is cut short: its gzip stream ends before its end, after {kept.count(chr(10))} whole "
                  f"lines (each checked as any line is; the rest is lost)")


def read_shipped(path: str | Path):
    """(``path:line``, payload or the error that makes the line unreadable) for every line, and
    (``path``, the error) first when the file as a whole is damaged (``_shipped_text``)."""
    text, problem = _shipped_text(Path(path))
    if problem is not None:
        yield Path(path), ValueError(problem)
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = Path(f"{path}:{i}")
        try:
            payload = json.loads(line)
        except (ValueError, RecursionError) as err:
            yield where, ValueError(f"line {i} is not JSON ({err})")
            continue
        problem = envelope_problem(payload)
        yield where, payload if problem is None else ValueError(f"line {i} {problem}")


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_whole(x) -> bool:
    return _is_number(x) and math.isfinite(x) and x == int(x)


def seconds_problem(name: str, value) -> str | None:
    """Why ``value`` cannot be the time ``name`` took, or None: a time is a finite number of seconds >= 0."""
    if not _is_number(value):
        return f"{name} {value!r} is not a number"
    if not math.isfinite(value) or value < 0:
        return f"{name} {value!r} is not a time (a finite number of seconds >= 0)"
    return None


# identity columns a row must carry (null in none of them): the report groups and names runs by these
IDENTITY = ("run_id", "sweep", "config_hash", "spec_hash", "seed", "model", "pattern", "positions", "spans", "train_len")


def row_problem(row) -> str | None:
    """What makes a stored row impossible, or None: a missing key or identity column, a value
    that is not a number, an unknown metric or status, a value outside its metric's range
    (``suite.data.metrics``), NaN in a run that is ok, a share counted over no example, an
    eval length that is not a positive whole number, a badly typed seed or n, or a wall time that
    is not a time (``seconds_problem``)."""
    if not isinstance(row, dict):
        return f"a row is a {type(row).__name__}, not an object"
    missing = [k for k in (*REQUIRED, *IDENTITY) if row.get(k) is None and not (k == "value" and k in row)]
    if missing:
        return f"row without {', '.join(missing)}"
    name, value, status = row["metric"], row["value"], row["status"]
    if status not in STATUSES:
        return f"status {status!r} (valid: {', '.join(STATUSES)})"
    if name not in METRICS:
        return f"unknown metric {name!r} (known: {', '.join(METRICS)})"
    declared = METRICS[name]
    for key in DECLARED:
        ok = _is_number if key in ("low", "high") else (lambda x: x is None or isinstance(x, bool))
        if key in row and not ok(row[key]):
            return f"{key} {row[key]!r} is not a {'number' if key in ('low', 'high') else 'bool or null'}"
    if row.get("headline") is not None and not isinstance(row["headline"], str):
        return f"headline {row['headline']!r} is not a metric name"
    for key in ("seed", "n", "train_len"):
        if not _is_whole(row.get(key)) or row[key] < 0:
            return f"{key} {row.get(key)!r} is not a whole number >= 0"
    if row.get("wall_s") is not None and (problem := seconds_problem("wall_s", row["wall_s"])):
        return problem
    if value is None:
        value = float("nan")
    if not _is_number(value):
        return f"{name} value {value!r} is not a number"
    if not _is_whole(row["eval_len"]) or row["eval_len"] <= 0:
        return f"eval_len {row['eval_len']!r} is not a positive whole number"
    if value != value:
        return f"{name} is NaN in a run that is ok" if status == "ok" and declared.higher_is_better is not None else None
    if math.isinf(value):  # a number past the largest float (1e400) reads as inf
        return f"{name} = {value} is not a finite number (a stored number too large for a float reads as inf); valid: {declared.range_label}"
    if not declared.contains(value):
        return f"{name} = {value} is outside {declared.range_label}"
    if status == "ok" and row["n"] < 1:
        return f"{name} = {value} over n = {row['n']} examples (a score needs at least one)"
    return None


def run_problem(payload: dict) -> str | None:
    """What makes a run file's rows disagree with its own spec, or None: every row's task is one
    of the run's tasks, and its eval length is the training length or one of the run's eval
    lengths (``suite.config.run_spec.eval_length``), with ``len_ratio`` = eval_len / train_len."""
    from suite.config.run_spec import eval_length

    run = payload.get("run")
    if not isinstance(run, dict):
        return "no run record"
    spec = run.get("spec")
    try:
        train_len = int(spec["train"]["seq_len"])
        lengths = {train_len} | {eval_length(float(x), train_len) for x in spec["eval"]["multiples"]}
        tasks = {t["name"] for t in spec["tasks"]}
    except (TypeError, KeyError, ValueError, OverflowError):
        return "no readable run spec (train.seq_len, eval.multiples, tasks)"
    for i, row in enumerate(payload["rows"]):
        if row["task"] not in tasks:
            return f"row {i}: task {row['task']!r} is not one of the run's tasks {sorted(tasks)}"
        if row["eval_len"] not in lengths or row["train_len"] != train_len:
            return f"row {i}: eval_len {row['eval_len']} is not one of the run's lengths {sorted(lengths)}"
        ratio = row.get("len_ratio")
        if not _is_number(ratio) or abs(ratio - row["eval_len"] / train_len) > 1e-6:
            return f"row {i}: len_ratio {ratio!r} is not eval_len / train_len = {row['eval_len'] / train_len:g}"
    return None


def _problem(payload: dict) -> str | None:
    problem = next((f"row {i}: {p}" for i, row in enumerate(payload["rows"]) if (p := row_problem(row))), None)
    return problem or run_problem(payload)


def identity_problem(payload: dict, run_id: str | None = None, spec_hash: str | None = None) -> str | None:
    """What makes a run file not the run it should be, or None: its record names run ``run_id``
    with spec hash ``spec_hash`` (each, when given); the spec hash its record states is the one
    its run id ends with (a run id is ``<readable part>-<spec hash>``); and every row names the
    record's run and spec hash."""
    run = payload.get("run") if isinstance(payload.get("run"), dict) else {}
    rid, own_hash = run.get("run_id"), run.get("spec_hash")
    if run_id is not None and rid != run_id:
        return f"it holds run {rid!r}, not {run_id!r}"
    if spec_hash is not None and own_hash != spec_hash:
        return f"its spec hash is {own_hash!r}, not the run's {spec_hash!r}"
    if own_hash is not None and not str(rid).endswith(f"-{own_hash}"):  # suite.results.identity.run_id
        return f"its spec hash {own_hash!r} is not the one its run id {rid!r} ends with"
    for i, row in enumerate(payload["rows"]):
        if row.get("run_id") != rid:
            return f"row {i}: run {row.get('run_id')!r}, not the file's {rid!r}"
        if own_hash is not None and row.get("spec_hash") != own_hash:
            return f"row {i}: spec hash {row.get('spec_hash')!r}, not the file's {own_hash!r}"
    return None


# The run columns every row repeats from its run's record and the record takes from the run's spec
# (``suite.results.identity.run_columns``): what names the run and what a board groups and labels it by.
RUN_COLUMNS = ("run_id", "sweep", "spec_hash", "config_hash", "positions", "spans", *KINDS)
# what a rebuilt spec's run columns hold that is not the spec's to say: a name whose readable part may be
# an older form of it, and the sweep it is stored in (a spec states its sweep only once the suite copied
# the run from another sweep: ``relabelled``)
NOT_FROM_SPEC = ("run_id", "sweep")
FUTURE_SKEW = timedelta(days=1)  # a finish time this far past the reading machine's clock is named (``read_board``)


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def own_columns(payload: dict) -> dict[str, tuple[object, str]]:
    """{run column: (its value, who states it)}: as the run's record states it, else (a record
    written by hand, or stored before the column existed) as its first row does."""
    run, rows = payload["run"], payload["rows"]
    first = rows[0] if rows else {}
    return {c: (run[c], "its record") if c in run else (first.get(c), "its row 0") for c in (*RUN_COLUMNS, "timestamp")}


def _rows_problem(rows: list[dict], own: dict) -> str | None:
    """The first row whose run columns are not its run's, or None."""
    for i, row in enumerate(rows):
        for col in RUN_COLUMNS:
            value, said_by = own[col]
            if not _same(row.get(col), value):
                return f"row {i}: {col} {row.get(col)!r}, not the {value!r} {said_by} states (a row repeats its run's)"
    return None


@lru_cache(maxsize=4096)
def _rebuilt(text: str):
    """The ``RunSpec`` this checkout rebuilds from a stored spec's JSON, or None when it cannot."""
    try:
        from suite.config.build import run_spec_from_dict  # here: the store imports no torch until it checks a run

        return run_spec_from_dict(json.loads(text))
    except Exception:  # noqa: BLE001 - a spec this checkout cannot rebuild (written by hand, another version's, no task code)
        return None


def spec_columns(spec) -> dict | None:
    """The run columns (``RUN_COLUMNS``) this checkout derives from a stored spec (``suite.results.
    identity.run_columns`` of ``suite.config.build.run_spec_from_dict``), less ``NOT_FROM_SPEC``;
    None when the spec does not rebuild (one written by hand, or naming a piece or option this
    checkout lacks). Specs that differ only in their seed are rebuilt once."""
    if not isinstance(spec, dict) or "seed" not in spec:
        return None
    rebuilt = _rebuilt(json.dumps({**spec, "seed": 0}, sort_keys=True))
    if rebuilt is None:
        return None
    from suite.results.identity import run_columns

    columns = run_columns(dataclasses.replace(rebuilt, seed=spec["seed"]))
    return {k: columns[k] for k in RUN_COLUMNS if k not in NOT_FROM_SPEC}


def _spec_problem(spec, own: dict) -> str | None:
    """What in the run's columns its stored spec contradicts, or None: the sweep it states (a run
    the suite copied from another sweep, ``relabelled``), and, when this checkout rebuilds the spec
    to the run's own spec hash (so it reads the spec as the code that ran it did), every column it
    derives: config hash, positions, spans, span sizes. A spec hashed by other code (a default
    changed since: its hash cannot be recomputed here) or written by hand is held only to its sweep."""
    if not isinstance(spec, dict):
        return None
    if "sweep" in spec and not _same(own["sweep"][0], spec["sweep"]):
        return f"its sweep {own['sweep'][0]!r} ({own['sweep'][1]}) is not the {spec['sweep']!r} its stored spec states"
    derived = spec_columns(spec)
    if derived is None or derived["spec_hash"] != own["spec_hash"][0]:
        return None
    for col, value in derived.items():
        if not _same(own[col][0], value):
            return (f"its {col} {own[col][0]!r} ({own[col][1]}) is not the {value!r} its stored spec gives "
                    f"(rebuilt by this checkout to the run's own spec hash {derived['spec_hash']!r})")
    return None


def _headline_problem(rows: list[dict]) -> str | None:
    """The first row whose headline is not its task's in this run, or None: a run judges each task
    by one metric (every row of the task names it), one the run stores for that task."""
    stored: dict = {}
    for row in rows:
        stored.setdefault(row.get("task"), set()).add(row.get("metric"))
    named: dict = {}
    for i, row in enumerate(rows):
        headline, task = row.get("headline"), row.get("task")
        if headline is None:
            continue  # stored before rows named it: ``described`` fills it in
        first = named.setdefault(task, (i, headline))
        if first[1] != headline:
            return f"row {i}: headline {headline!r} of task {task!r}, not the {first[1]!r} its row {first[0]} names (a run judges a task by one metric)"
        if headline not in stored[task]:
            return f"row {i}: headline {headline!r} is not a metric the run stores for task {task!r}"
    return None


def finish_time(stamp) -> datetime | None:
    """A run's finish time (``timestamp``: ISO 8601 with its UTC offset), or None when it is no such time."""
    try:
        when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


def _time_problem(run: dict, own: dict) -> str | None:
    """Why the run's times cannot be its times, or None: its wall time and every entry of its
    ``timing`` are finite numbers of seconds >= 0, and its finish time, when stated, an ISO 8601
    time with its UTC offset. A finish time later than the reader's clock is no problem here: the
    verdict on a file never depends on when it is read (``read_board`` names such a time)."""
    if run.get("wall_s") is not None and (problem := seconds_problem("its record's wall_s", run["wall_s"])):
        return problem
    timing = run.get("timing")
    if timing is not None and not isinstance(timing, dict):
        return f"its timing {timing!r} is not a mapping of phases to seconds"
    for key, value in (timing or {}).items():
        if problem := seconds_problem(f"its timing {key}", value):
            return problem
    stamp = own["timestamp"][0]
    if stamp is not None and finish_time(stamp) is None:
        return f"its timestamp {stamp!r} is not an ISO 8601 time with its UTC offset"
    return None


def record_problem(payload: dict) -> str | None:
    """What makes a run's rows disagree with its own record, or None: every row repeats its run's
    columns (``RUN_COLUMNS``: run id, sweep, spec and config hash, scheme, spans, span sizes) as
    its record states them (``own_columns``); the record holds what its stored spec gives
    (``_spec_problem``); a task's rows name one headline metric the run stores
    (``_headline_problem``); and its times are times (``_time_problem``)."""
    run = payload.get("run")
    if not isinstance(run, dict):
        return "no run record"
    own = own_columns(payload)
    return (_rows_problem(payload["rows"], own) or _spec_problem(run.get("spec"), own)
            or _headline_problem(payload["rows"]) or _time_problem(run, own))


class Place(NamedTuple):
    """Where a run is read: the sweeps it may belong to there, and how a refusal names them."""

    sweeps: frozenset
    named: str


def file_place(path: str | Path) -> Place:
    """A run file belongs to the sweep whose folder holds it, ``results/<sweep>/`` or a folder below
    it: any folder on its path may name the run's sweep."""
    return Place(frozenset(Path(path).absolute().parent.parts), "and no folder on its path is named so")


def sweep_place(sweep: str) -> Place:
    """A reader that is told the sweep (``pack``, ``unpack``, ``check``): only that sweep's runs."""
    return Place(frozenset({sweep}), f"not of {sweep!r}")


def foreign_sweep(payload: dict, place: Place) -> str | None:
    """The sweep of a run read in ``place`` when it is not one ``place`` allows, else None."""
    run = payload.get("run") if isinstance(payload.get("run"), dict) else {}
    sweep = run.get("sweep", payload["rows"][0].get("sweep") if payload["rows"] else None)
    return None if sweep is None or sweep in place.sweeps else sweep


def foreign_reason(sweep: str, place: Place) -> str:
    """Why a run of ``sweep`` read in ``place`` is left out (``foreign_sweep``)."""
    return (f"it is a run of sweep {sweep!r}, {place.named}: another sweep's run (a run the suite copies from "
            "another sweep is relabelled for its new one and carries copied_from)")


class NotStored(ValueError):
    """A result file that does not count as stored: ``where`` is the file (or shipped line),
    ``reason`` why, ``readable`` whether it parsed as a PosBench run at all, ``foreign`` the sweep
    it is a run of when that is all that is wrong (another sweep's run, ``foreign_sweep``)."""

    def __init__(self, where, reason: str, readable: bool, foreign: str | None = None):
        super().__init__(f"{where} does not count as stored: {reason}")
        self.where, self.reason, self.readable, self.foreign = where, reason, readable, foreign


def payload_problem(payload: dict, run_id: str | None = None, spec_hash: str | None = None) -> str | None:
    """What keeps a parsed run (a file's, or a shipped line's) from counting as stored, or None:
    every row and run check (``row_problem``, ``run_problem``), then its identity
    (``identity_problem``), then its rows' agreement with its record (``record_problem``)."""
    return _problem(payload) or identity_problem(payload, run_id, spec_hash) or record_problem(payload)


def checked(where, payload: dict, place: Place, run_id: str | None = None, spec_hash: str | None = None) -> dict:
    """``payload`` when it counts as stored where it is read (``place``), else ``NotStored``: the
    one verdict every reader gives a run file or a shipped line (``payload_problem``, then
    ``foreign_sweep``)."""
    if (problem := payload_problem(payload, run_id, spec_hash)) is not None:
        raise NotStored(where, problem, True)
    if (sweep := foreign_sweep(payload, place)) is not None:
        raise NotStored(where, foreign_reason(sweep, place), True, foreign=sweep)
    return payload


def verified_run(path: str | Path, run_id: str | None = None, spec_hash: str | None = None,
                 sweep: str | None = None) -> dict:
    """The payload of the result file ``path`` when it counts as stored, else ``NotStored``: a
    regular file (a folder, FIFO or socket is never opened) that parses, passes the envelope,
    row and run checks, holds run ``run_id`` (default: the file's name, ``<run_id>.json``) with
    spec hash ``spec_hash`` (default: the one its record states), in its record and in every
    row, whose rows agree with its record and its record with its spec (``record_problem``), and
    that is a run of sweep ``sweep`` (default: a sweep a folder on its path names, ``file_place``).
    The one test of "stored": the run's and the sweep's skip, the report (``load``), lm-eval,
    diagnose and reproduce all ask it."""
    path = Path(path)
    try:
        payload = read_run(path)  # a folder, FIFO or socket is named by read_regular, never opened
    except OSError as err:
        raise NotStored(path, f"it cannot be read ({err.strerror or err})", False) from None
    except ValueError as err:  # read_run's messages name the file: keep the reason only
        raise NotStored(path, str(err).removeprefix(f"{path} "), False) from None
    place = file_place(path) if sweep is None else sweep_place(sweep)
    return checked(path, payload, place, path.stem if run_id is None else run_id, spec_hash)


def numeric_label(sig: dict) -> str:
    from suite.results.signature import label

    return label(sig)


def shipped_place(path: Path, found: list, sweep: str | None = None) -> Place:
    """The sweep a shipped file's lines belong to: ``sweep`` when the reader is told it, else the
    sweep its name names (``<sweep>.jsonl.gz``) when a line is of that sweep, else (a file named
    otherwise, as tests/data's boards) the sweep most of its lines name, the first met on a tie."""
    if sweep is not None:
        return sweep_place(sweep)
    named = path.name.removesuffix(SHIPPED_SUFFIX)
    sweeps = [p["run"].get("sweep") for p in found if isinstance(p, dict) and isinstance(p.get("run"), dict)]
    board = named if named in sweeps or not sweeps else max(dict.fromkeys(sweeps), key=sweeps.count)
    return Place(frozenset({board}), f"not of {board!r}, whose board {path.name} is")


def _shipped_lines(path: Path, sweep: str | None = None):
    """(``path:line``, verified payload or ``NotStored``) for every line of the shipped file
    ``path``, and (``path``, ``NotStored``) first when the file as a whole is damaged."""
    lines = list(read_shipped(path))
    place = shipped_place(path, [p for _, p in lines], sweep)
    for where, payload in lines:
        if isinstance(payload, Exception):
            yield where, NotStored(where, str(payload), False)
            continue
        try:
            yield where, checked(where, payload, place)
        except NotStored as err:
            yield where, err


def shipped_runs(path: str | Path, sweep: str | None = None) -> tuple[list[dict], list[NotStored]]:
    """(the runs of the shipped file ``path`` that count as stored, one ``NotStored`` for each line
    that does not), warning about none: for a writer that must compare or verify a board."""
    found = list(_shipped_lines(Path(path), sweep))
    return ([p for _, p in found if not isinstance(p, NotStored)], [p for _, p in found if isinstance(p, NotStored)])


def _files(path: Path, sweep: str | None = None):
    """(name, verified payload or ``NotStored``) for every run file under the folder ``path``, or
    every line of the shipped file ``path``, as runs of ``sweep`` when given (else of the sweep
    their place names: ``file_place``, ``shipped_place``). A ``*.json`` that is not a regular file
    (a FIFO, a socket, a folder) is ``NotStored`` naming what it is, never opened for reading."""
    if is_shipped(path):
        yield from _shipped_lines(path, sweep)
        return
    for file in sorted(path.rglob("*.json")):
        parts = file.relative_to(path).parts
        if any(part.startswith("_") for part in parts) or any(WANDB_RUN_FOLDER.fullmatch(part) for part in parts[:-1]):
            continue  # checkpoints, cached eval sets, files set aside, W&B's files
        try:
            yield file, verified_run(file, sweep=sweep)
        except NotStored as err:
            yield file, err


SOURCE_CHOICES = f"give a results folder (results/<sweep>) or a shipped published/<sweep>{SHIPPED_SUFFIX} file"


def source_problem(path) -> str | None:
    """Why ``path``, named to a command as a source of rows, cannot be one, or None: a source is
    a results folder or a shipped file; the answer lists the valid choices."""
    text = "" if path is None else str(path)
    if not text.strip():
        return f"empty; {SOURCE_CHOICES}"
    where = Path(text)
    if where.is_dir() or is_shipped(where):
        return None
    if not where.exists():
        return f"no such folder or file; {SOURCE_CHOICES}"
    kind = "a file" if where.is_file() else "not a regular file"
    return f"{kind}, not a results folder or a shipped {SHIPPED_SUFFIX} file; {SOURCE_CHOICES}"


def first_run_hint(path, prog: str) -> str | None:
    """For a results folder ``path`` that does not exist (a fresh clone has none), the line that
    says which command makes it, and the published board of the same sweep that can be read
    instead where one is shipped; None when ``path`` exists or names a file."""
    where = Path(str(path))
    if where.exists() or where.suffix or not where.name:
        return None
    hint = f"no results under {where}: run `make sweep` (or `make sweep SWEEP={where.name}`) first"
    shipped = Path(PUBLISHED) / f"{where.name}{SHIPPED_SUFFIX}"
    return hint + (f", or read the published board: {prog} {shipped}" if is_shipped(shipped) else "")


def read_source(prog: str, option: str, path) -> pd.DataFrame:
    """The rows of the source ``path`` that a command's ``option`` names (``--beside``, or a
    positional's name), the skipped files warned about on stderr: the one reader of every
    folder-or-shipped-file argument. ``Refused`` when it is no source (2, ``source_problem``)
    or holds no valid run (1, "no results under <path>")."""
    from suite.commandline import warnings_on_stderr

    if (problem := source_problem(path)) is not None:
        hint = first_run_hint(path, prog)
        raise Refused(f"{prog}: error: {option} {str(path)!r}: {problem}" + (f"\n{hint}" if hint else ""), 2)
    with warnings_on_stderr():
        df = load(path)
    if df.empty:
        raise Refused(f"no results under {path}", 1)
    return df


class Board(NamedTuple):
    """What a folder or shipped file holds (``read_board``): ``runs``, (where, payload) of each run
    that counts as stored, one per run id; ``problems``, one line for each file or line that does
    not and each run id claimed twice; ``foreign``, the ``NotStored`` of the runs of another sweep
    among them; ``notes``, what is named but decides nothing (finish times past the clock)."""

    runs: list
    problems: list
    foreign: list
    notes: list


def read_board(path: str | Path, sweep: str | None = None) -> Board:
    """The runs under ``path`` (a folder or a shipped file) that count as stored (``verified_run``,
    as runs of ``sweep`` when given), one per run id, and one line for each file or line left out,
    warning about none. A run id claimed by files with different contents is left out, every file
    named; the same contents twice are counted once."""
    claims: dict[tuple, list[tuple[Path, dict]]] = {}
    problems, foreign = [], []
    for file, payload in (_files(Path(path), sweep) if Path(path).exists() else []):
        if isinstance(payload, NotStored):
            problems.append(f"skipping {'' if payload.readable else 'unreadable '}results file {file}: {payload.reason}")
            foreign += [payload] if payload.foreign else []
            continue
        claims.setdefault((payload["run"].get("sweep"), payload["run"].get("run_id")), []).append((file, payload))
    runs = []
    for (_, rid), found in claims.items():
        if len({json.dumps(payload, sort_keys=True) for _, payload in found}) > 1:
            problems.append(f"skipping run {rid}: {len(found)} files claim it with different contents "
                            f"({', '.join(str(f) for f, _ in found)}); none is used")
            continue
        problems += [f"skipping duplicate run {rid} in {file} (the same as {found[0][0]})" for file, _ in found[1:]]
        runs.append(found[0])
    return Board(runs, problems, foreign, _future_notes(path, runs))


def _future_notes(path, runs: list) -> list[str]:
    """One line naming the runs under ``path`` whose finish time is past this machine's clock (by
    more than ``FUTURE_SKEW``), or none. Such a time is not trusted, and it decides nothing: no
    reader picks between files or runs by their times (two files claiming one run with different
    contents are both left out, whenever each finished), so the run counts as stored."""
    now = datetime.now(timezone.utc)
    late = [(str(where), stamp) for where, p in runs
            if (when := finish_time(stamp := own_columns(p)["timestamp"][0])) is not None and when > now + FUTURE_SKEW]
    if not late:
        return []
    more = f" and {len(late) - 1} more" if len(late) > 1 else ""
    return [f"{len(late)} run(s) under {path} finished later than this machine's clock says it is now "
            f"({now:%Y-%m-%d %H:%M} UTC): {late[0][0]} at {late[0][1]}{more}; such a finish time is not trusted and "
            "decides nothing (no reader orders runs by it), so they are read as stored"]


def payloads(path: str | Path, sweep: str | None = None) -> list[tuple[Path, dict]]:
    """The stored run payloads under ``path`` (``read_board``), one per run id, as (where,
    payload): what ``load`` reads. Unreadable, foreign or impossible files (``row_problem``,
    ``run_problem``, ``identity_problem``, ``record_problem``, another sweep's run), run ids
    claimed with different contents and finish times past the clock are warned about by name;
    all but the last are left out."""
    board = read_board(path, sweep)
    for line in (*board.problems, *board.notes):
        warnings.warn(line, stacklevel=3)
    return board.runs


@lru_cache(maxsize=None)
def task_headlines(folder: Path = TASKS_DIR) -> dict[str, str]:
    """{task name: the headline metric its class declares}, read from the task files' source (the
    class-level ``name = "..."`` and ``primary_metric = "..."``, the latter possibly inherited), so
    reading stored rows runs no task code."""
    classes: dict[str, tuple[dict, list[str]]] = {}
    for path in package_modules(Path(folder)):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                own = {s.targets[0].id: s.value.value for s in node.body if isinstance(s, ast.Assign)
                       and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Constant)}
                classes[node.name] = (own, [b.id for b in node.bases if isinstance(b, ast.Name)])

    def inherited(cls: str, key: str):
        own, bases = classes.get(cls, ({}, []))
        return own[key] if key in own else next((v for b in bases if (v := inherited(b, key)) is not None), None)

    return {own["name"]: inherited(cls, "primary_metric") for cls, (own, _) in classes.items()
            if isinstance(own.get("name"), str) and isinstance(inherited(cls, "primary_metric"), str)}


def described(rows: list[dict], where="") -> list[dict]:
    """``rows`` with the fields rows stored before they carried them lack (``headline``,
    ``DECLARED``; absent or null) filled from today's declarations: each metric's from ``suite.data.metrics``,
    each task's headline from its class (``task_headlines``). Rows of a task this checkout lacks
    keep no headline, so they rank on no board, and the task is named in a warning."""
    out, unknown = [], set()
    for row in rows:
        # absent, or null where null means nothing (only a measurement's direction is null)
        missing = [key for key in ("headline", *DECLARED) if key not in row or (row[key] is None and key != "higher_is_better")]
        if missing:
            fill = {**declaration(row.get("metric")), "headline": task_headlines().get(row.get("task"))}
            unknown |= {row.get("task")} if fill["headline"] is None and "headline" in missing else set()
            row = {**row, **{key: fill.get(key) for key in missing}}
        out.append(row)
    if unknown:
        warnings.warn(f"{where}: rows of {', '.join(map(str, sorted(unknown)))} name no headline metric and this "
                      "checkout has no such task: they rank on no board", stacklevel=3)
    return out


def load(path: str | Path) -> pd.DataFrame:
    """All rows of the run files under ``path`` (a sweep folder, a whole results folder, or a
    sweep's shipped rows, ``published/<sweep>.jsonl.gz``), each with a ``spec`` column, its run's
    stored spec as JSON (the report names configurations by it), and a ``numeric`` column, the
    label of the machine's numeric signature (``suite.results.signature``).

    Rows stored before rows carried their headline metric and metric declarations get them from
    today's declarations (``described``). Every file that does not count as stored
    (``verified_run``: unreadable, truncated or foreign JSON, a folder or FIFO in a file's place,
    an impossible row (``row_problem``), rows their own spec cannot have produced
    (``run_problem``), another run's file under this run's name (``identity_problem``), rows that
    disagree with their run's record or a record with its spec (``record_problem``), another
    sweep's run (``foreign_sweep``)) is reported by name and skipped. A run id stored twice with the same contents is counted once; stored
    twice with different contents, every file claiming it is named and none is used.
    """
    return frame(payloads(path))


def frame(found: list[tuple[Path, dict]]) -> pd.DataFrame:
    """The rows of stored runs, (where, payload) as ``payloads`` gives them, as ``load`` returns them."""
    frames = []
    for where, payload in found:
        spec, numeric = payload["run"].get("spec"), payload["run"].get("numeric")
        frames.append(pd.DataFrame(described(payload["rows"], where), columns=COLUMNS)
                      .assign(spec=json.dumps(spec, sort_keys=True) if isinstance(spec, dict) else None,
                              numeric=numeric_label(numeric) if isinstance(numeric, dict) else None))
    if not frames:
        return load_empty()
    return pd.concat(frames, ignore_index=True)


def load_empty() -> pd.DataFrame:
    """The frame ``load`` returns for a place with no results."""
    return pd.DataFrame(columns=[*COLUMNS, "spec", "numeric"])
