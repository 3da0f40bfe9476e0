"""Where a sweep's wall time goes: task generation, training, evaluation, logging, storing, and
what lies outside the runs (process start-up, imports, Hydra, idle workers at the end).

Each run stores its own phase times (``run.timing`` in its result file); the sweep callback logs
each multirun's wall time and parallelism in ``results/<sweep>/_sweeps.jsonl``. The worker time a
multirun had is its wall time times its parallel jobs; what the runs do not account for is the
overhead.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Optional

import pandas as pd

from suite.config.validate import sweep_log_path

PHASES = {  # phase -> keys of run.timing
    "task generation": ["batches_s", "eval_sets_s"],
    "training": ["train_s"],
    "evaluation": ["eval_s"],
    "logging (W&B)": ["log_s"],
    "model set-up and storing": ["setup_s", "store_s"],
}


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def latest_multirun(results_dir: str | Path, sweep: str) -> Optional[tuple[dict, list[dict]]]:
    """(the multirun's log record, the stored ``run`` records it wrote) for the latest multirun of
    ``sweep`` that trained runs with stored timings, or None when there is none."""
    log = sweep_log_path(results_dir, sweep)
    if not log.exists():
        return None
    runs = []
    for file in (Path(results_dir) / sweep).glob("*.json"):
        try:
            run = json.loads(file.read_text())["run"]
        except (OSError, ValueError, KeyError):
            continue
        if "timing" in run and "timestamp" in run:
            runs.append(run)
    for record in reversed([json.loads(line) for line in log.read_text().splitlines() if line.strip()]):
        start, end = _when(record["started"]), _when(record["ended"])
        mine = [r for r in runs if start <= _when(r["timestamp"]) <= end]
        if mine:
            return record, mine
    return None


def breakdown(results_dir: str | Path, sweep: str) -> Optional[tuple[pd.DataFrame, dict]]:
    """(table of phase, seconds, share of worker time; the multirun's log record) for the latest
    multirun of ``sweep`` that trained runs with stored timings, or None when there is none."""
    found = latest_multirun(results_dir, sweep)
    if found is None:
        return None
    record, mine = found
    worker_s = record["wall_s"] * record["parallel"]
    rows = [{"phase": phase, "seconds": sum(r["timing"].get(k, 0.0) for r in mine for k in keys)}
            for phase, keys in PHASES.items()]
    inside = sum(row["seconds"] for row in rows)
    rows.append({"phase": "outside the runs (start-up, imports, Hydra, idle workers)",
                 "seconds": max(0.0, worker_s - inside)})
    table = pd.DataFrame(rows)
    table["share"] = table.seconds / worker_s
    return table, {**record, "runs": len(mine), "worker_s": worker_s}
