"""Weights & Biases mirror of a run: config, training curve, eval metrics.

Offline by default (no account, no network; ``wandb sync`` uploads later), ``logger=none``
turns it off. W&B is never the source of truth, and its failures are never fatal: the first
error is reported once and the run goes on writing its local results.

Where and as what a run is logged:

* its files go in ``logger.dir``, by default ``<results_dir>/<sweep>/wandb`` beside the sweep's
  results (``wandb_dir``), never in the folder the command was started from;
* its W&B id is derived from the sweep and the run id (``wandb_id``) and it is opened with
  ``resume="allow"``, so a run killed and restarted from its checkpoint continues the same W&B
  run, its history going on from the checkpoint's step;
* its config is the nested resolved spec with the run id, spec hash and code digest, and
  top-level ``position``, ``span``, ``pattern``, ``task`` and ``seed`` to filter by (``wandb_config``).
"""
from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path
from typing import Optional

from suite.config.schema import WANDB_FOLDER, dir_problem

MAX_ID = 128
UNSAFE_ID = re.compile(r"[^A-Za-z0-9._-]")


def wandb_dir(logger_cfg: dict, results_dir, sweep: str) -> Path:
    """The folder a run's (or a report's) W&B files go in: ``logger.dir``, else
    ``<results_dir>/<sweep>/wandb``. Raises ``ValueError`` for a ``logger.dir`` not named wandb."""
    given = logger_cfg.get("dir")
    problem = dir_problem(given)
    if problem:
        raise ValueError(problem)
    return Path(str(given)).expanduser() if given is not None else Path(results_dir) / sweep / WANDB_FOLDER


def wandb_id(sweep: str, run_id: str) -> str:
    """The W&B run id of run ``run_id`` in ``sweep``: the same on every restart of the run, and
    distinct across sweeps (a spec run in two sweeps is two W&B runs). Characters W&B or a URL
    could reject become '_'; an id longer than ``MAX_ID`` keeps its start and a hash of the whole."""
    raw = f"{sweep}-{run_id}"
    safe = UNSAFE_ID.sub("_", raw)
    if len(safe) <= MAX_ID:
        return safe
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    return f"{safe[:MAX_ID - len(digest) - 1]}-{digest}"


def _plain(value):
    """Tuples as lists, all the way down (W&B shows a list; a tuple of pairs reads as a table)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def wandb_config(spec, columns: dict) -> dict:
    """The W&B config of a run: its ids (run id, sweep, spec hash, config hash, code digest, git
    sha) and the nested resolved spec, each task's parameters a mapping under its name."""
    body = spec.to_dict()
    body.pop("code", None)  # the code digest, under its own name below
    body["tasks"] = {task.name: _plain(dict(task.params)) for task in spec.tasks}
    ids = {key: columns[key] for key in ("run_id", "sweep", "spec_hash", "config_hash", "code_digest", "git_sha")}
    return {**ids, **filter_keys(spec), **_plain(body)}


def filter_keys(spec) -> dict:
    """Top-level keys to filter runs by in the W&B UI: ``position`` and ``span`` (the layers'
    distinct schemes and spans in layer order, '/'-joined: 'rope', 'rope/nope'), ``pattern``, ``task`` (the
    task, or the taskset's name: 'core') and ``seed``."""
    layers = spec.model.layers
    return {"position": "/".join(dict.fromkeys(layer.position for layer in layers)),
            "span": "/".join(dict.fromkeys(layer.span for layer in layers)),
            "pattern": spec.model.pattern, "task": spec.taskset, "seed": spec.seed}


class Tracker:
    """One W&B run, or nothing when ``logger.name`` is none or ``logger.mode`` is disabled.

    ``run_id`` is the W&B id (``wandb_id``), opened with ``resume="allow"``; ``directory`` is the
    folder the W&B files go in (``wandb_dir``)."""

    def __init__(self, logger_cfg: dict, *, name: str, group: str, config: dict, tags: list[str],
                 run_id: Optional[str] = None, directory: Optional[Path] = None):
        self.run = None
        self._warned = False
        if logger_cfg.get("name", "none") == "none" or logger_cfg.get("mode") == "disabled":
            return
        try:
            import wandb

            root = None
            if directory is not None:
                Path(directory).mkdir(parents=True, exist_ok=True)
                root = str(Path(directory).resolve().parent)
            self.run = wandb.init(
                project=logger_cfg.get("project", "posbench"), entity=logger_cfg.get("entity"),
                mode=logger_cfg.get("mode", "offline"), name=name, group=group, config=config,
                tags=tags, reinit="finish_previous", dir=root, id=run_id, resume="allow" if run_id else None,
                settings=wandb.Settings(silent=bool(logger_cfg.get("silent", True)), console="off"),
            )
        except Exception as err:  # noqa: BLE001 - a tracking failure must not end the run
            self._warn(err)

    def _warn(self, err: Exception) -> None:
        if not self._warned:
            warnings.warn(f"W&B logging disabled for this run: {type(err).__name__}: {err}", stacklevel=3)
            self._warned = True
        self.run = None

    def log(self, metrics: dict, step: Optional[int] = None) -> None:
        if self.run is None:
            return
        try:
            self.run.log(metrics, step=step)
        except Exception as err:  # noqa: BLE001
            self._warn(err)

    def log_rows(self, rows: list[dict]) -> None:
        """Eval rows as a wandb.Table plus summary scalars ``eval/<task>/<metric>@<len>``."""
        if self.run is None or not rows:
            return
        try:
            import wandb

            cols = ["task", "eval_len", "len_ratio", "slice", "metric", "value", "n", "status"]
            self.run.log({"eval/table": wandb.Table(columns=cols, data=[[r.get(c) for c in cols] for r in rows])})
            for r in rows:
                if r["slice"] == "all" and r["status"] == "ok":
                    self.run.summary[f"eval/{r['task']}/{r['metric']}@{r['eval_len']}"] = r["value"]
        except Exception as err:  # noqa: BLE001
            self._warn(err)

    def finish(self) -> None:
        if self.run is None:
            return
        try:
            self.run.finish()
        except Exception as err:  # noqa: BLE001
            self._warn(err)
        self.run = None
