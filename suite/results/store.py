"""The results store: one JSON file per run under ``results/<sweep>/``, long-format rows.

One row per run x task x eval length x metric (x slice), with the columns below; eval length
is a column, never part of a metric name. Files are written atomically (temporary file, then
rename), so parallel workers never corrupt each other and a killed run leaves no half file.
The store is the source of truth; W&B only mirrors it.
"""
from __future__ import annotations

import json
import re
import warnings
from functools import lru_cache
from pathlib import Path

import pandas as pd

from suite.files import result_path, write_json_atomic

COLUMNS = [
    "run_id", "sweep", "spec_hash", "config_hash", "code_digest", "git_sha", "seed", "model", "n_layers", "d_model", "n_heads",
    "pattern", "positions", "spans", "window", "chunk", "train_len", "steps", "task", "eval_len", "len_ratio",
    "slice", "metric", "value", "n", "status", "wall_s", "timestamp", "eval_set",
]
SCHEMA = "posbench.run/1"
STATUSES = ("ok", "diverged", "unsupported")
# metrics whose value is a share or a score in [0, 1]; NaN is stored only for a run that is not ok
BOUNDED = ("exact_match", "token_accuracy", "string_match_all", "string_match_part", "reciprocal_rank")
# every other metric a run writes: the loss, the step a run diverged at, and the diagnostics
# (attn_mass holds shares and, in its ``segment=entropy`` slice, the attention entropy in nats)
UNBOUNDED = ("loss", "diverged_at_step", "recency_cos", "recency_gap", "logit_profile", "logit_gap", "attn_mass")
REQUIRED = ("run_id", "task", "eval_len", "slice", "metric", "value", "status")
# the folders W&B writes a run's files in (its JSON files are not results): offline-run-<time>-<id>, run-<time>-<id>
WANDB_RUN_FOLDER = re.compile(r"(offline-)?run-\d{8}_\d{6}-.+|latest-run")


def write_run(results_dir, sweep: str, run_id: str, run: dict, rows: list[dict]) -> Path:
    """Write one run's rows (each completed with the run's columns) atomically; returns the path."""
    full = [{col: {**run, **row}.get(col) for col in COLUMNS} for row in rows]
    path = result_path(results_dir, sweep, run_id)
    write_json_atomic(path, {"schema": SCHEMA, "run": run, "rows": full})
    return path


def read_run(path: str | Path) -> dict:
    with open(path) as fh:
        payload = json.load(fh)
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA or not isinstance(payload.get("rows"), list):
        raise ValueError(f"{path} is not a PosBench run file (schema {SCHEMA})")
    return payload


@lru_cache(maxsize=1)
def bounded_metrics() -> tuple[str, ...]:
    """``BOUNDED`` plus every task's declared headline metric (a score in [0, 1])."""
    from tasks import TASKS

    return tuple(dict.fromkeys(BOUNDED + tuple(cls.primary_metric for cls in TASKS.values())))


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def row_problem(row) -> str | None:
    """What makes a stored row impossible, or None: a missing key, a value that is not a number,
    an unknown metric or status, a bounded metric outside [0, 1], NaN in a run that is ok, or an
    eval length that is not a positive whole number."""
    if not isinstance(row, dict):
        return f"a row is a {type(row).__name__}, not an object"
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        return f"row without {', '.join(missing)}"
    metric, value, status = row["metric"], row["value"], row["status"]
    bounded = bounded_metrics()
    if status not in STATUSES:
        return f"status {status!r} (valid: {', '.join(STATUSES)})"
    if metric not in bounded + UNBOUNDED:
        return f"unknown metric {metric!r} (known: {', '.join(bounded + UNBOUNDED)})"
    if value is None:
        value = float("nan")
    if not _is_number(value):
        return f"{metric} value {value!r} is not a number"
    if not _is_number(row["eval_len"]) or row["eval_len"] <= 0 or row["eval_len"] != int(row["eval_len"]):
        return f"eval_len {row['eval_len']!r} is not a positive whole number"
    if value != value:
        return f"{metric} is NaN in a run that is ok" if status == "ok" and metric in bounded else None
    if metric in bounded and not 0.0 <= value <= 1.0:
        return f"{metric} = {value} is outside [0, 1]"
    return None


def load(path: str | Path) -> pd.DataFrame:
    """All rows of the run files under ``path`` (a sweep folder or a whole results folder), each
    with a ``spec`` column: its run's stored spec as JSON (the report names configurations by it).

    Unreadable, truncated or foreign JSON files, and files holding an impossible row
    (``row_problem``), are reported by name and skipped; a run id seen twice is counted once.
    """
    frames, seen = [], set()
    for file in sorted(Path(path).rglob("*.json")):
        parts = file.relative_to(path).parts
        if any(part.startswith("_") for part in parts) or any(WANDB_RUN_FOLDER.fullmatch(part) for part in parts[:-1]):
            continue  # checkpoints, cached eval sets, W&B's files
        try:
            payload = read_run(file)
        except (OSError, ValueError) as err:
            warnings.warn(f"skipping unreadable results file {file}: {err}", stacklevel=2)
            continue
        problem = next(((i, p) for i, row in enumerate(payload["rows"]) if (p := row_problem(row))), None)
        if problem is None and not isinstance(payload.get("run"), dict):
            problem = ("-", "no run record")
        if problem is not None:
            warnings.warn(f"skipping results file {file}: row {problem[0]}: {problem[1]}", stacklevel=2)
            continue
        key = (payload["run"].get("sweep"), payload["run"].get("run_id"))
        if key in seen:
            warnings.warn(f"skipping duplicate run {key[1]} in {file}", stacklevel=2)
            continue
        seen.add(key)
        spec = payload["run"].get("spec")
        frames.append(pd.DataFrame(payload["rows"], columns=COLUMNS)
                      .assign(spec=json.dumps(spec, sort_keys=True) if isinstance(spec, dict) else None))
    if not frames:
        return pd.DataFrame(columns=[*COLUMNS, "spec"])
    return pd.concat(frames, ignore_index=True)


def summary(df: pd.DataFrame, metric: str = "exact_match") -> pd.DataFrame:
    """Mean ``metric`` by (positions, pattern, task) x eval length over seeds; NaN where not ok."""
    d = df[(df.metric == metric) & (df.slice == "all")].copy()
    d.loc[d.status != "ok", "value"] = float("nan")
    return d.pivot_table(index=["task", "pattern", "positions"], columns="eval_len", values="value",
                         aggfunc="mean", dropna=False)


if __name__ == "__main__":
    import sys

    folder = sys.argv[1] if len(sys.argv) > 1 else "results"
    frame = load(folder)
    if frame.empty:
        print(f"no results under {folder}")
    else:
        print(f"exact match by eval length ({frame.run_id.nunique()} runs in {folder}):")
        print(summary(frame).round(3).to_string())
