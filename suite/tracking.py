"""Weights & Biases mirror of a run: config, training curve, eval metrics.

Offline by default (no account, no network; ``wandb sync`` uploads later), ``logger=none``
turns it off. W&B is never the source of truth, and its failures are never fatal: the first
error is reported once and the run goes on writing its local results.
"""
from __future__ import annotations

import warnings
from typing import Optional


class Tracker:
    def __init__(self, logger_cfg: dict, *, name: str, group: str, config: dict, tags: list[str]):
        self.run = None
        self._warned = False
        if logger_cfg.get("name", "none") == "none" or logger_cfg.get("mode") == "disabled":
            return
        try:
            import wandb

            self.run = wandb.init(
                project=logger_cfg.get("project", "posbench"), entity=logger_cfg.get("entity"),
                mode=logger_cfg.get("mode", "offline"), name=name, group=group, config=config,
                tags=tags, reinit="finish_previous",
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
