"""Hydra callback: validate every job of a multirun before the first one trains.

Hydra composes each job only when it launches it, so a bad value in the fifth job of a sweep would
surface after four runs of training. This callback expands the sweep the way the basic sweeper
does, builds every job's spec, and stops the sweep with the offending job's overrides and the
validation message when any of them is invalid.
"""
from __future__ import annotations

import logging
import sys

from hydra import compose
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from suite.spec import SpecError, build

log = logging.getLogger("posbench")


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Every job's override list, as the basic sweeper will launch them."""
    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.get("params") or {}).items()]
    parser = OverridesParser.create()
    overrides = parser.parse_overrides(params + list(config.hydra.overrides.task))
    batches = BasicSweeper.split_arguments(overrides, None)
    return [job for batch in batches for job in batch]


class ValidateSweep(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        jobs = sweep_jobs(config)
        for job in jobs:
            try:
                build(compose(config_name=config.hydra.job.config_name, overrides=job))
            except SpecError as err:
                log.error("bad configuration in sweep job [%s]: %s", " ".join(job), err)
                sys.exit(2)
        log.info("validated %d sweep jobs", len(jobs))
