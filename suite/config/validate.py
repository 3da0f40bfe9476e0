"""Hydra callback: validate every job of a multirun before the first one trains, tell the jobs how
many there are (``write_plan``: "run k of N", ``suite.progress.SweepProgress``), and log the sweep's
wall time.

Hydra composes each job only when it launches it, so a bad value in the fifth job of a sweep would
surface after four runs of training. This callback expands the sweep the way the basic sweeper
does, builds every job's spec, and stops the sweep with the offending job's overrides and the
validation message when any of them is invalid.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from suite.config.build import SpecError
from suite.config.preflight import preflight
from suite.config.resources import ResourceError, check_results_dir
from suite.files import append_regular, read_regular, write_atomic

log = logging.getLogger("posbench")


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Every job's override list, as Hydra's basic sweeper launches them: the sweeper's params,
    then the command line's overrides (a later value for a key replaces an earlier one), crossed
    in order with the first key varying slowest."""
    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.get("params") or {}).items()]
    choices: dict[str, list[str]] = {}
    for override in OverridesParser.create().parse_overrides(params + list(config.hydra.overrides.task)):
        key = override.get_key_element()
        if not override.is_sweep_override():
            choices[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            choices[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise HydraException(f"{key}: the basic sweeper takes a list of values (a,b,c), not a {override.value_type.name}")
    return [list(job) for job in itertools.product(*choices.values())]


PLAN = "_progress.json"  # in the sweep's folder (hydra.sweep.dir): its job count and parallelism


def write_plan(sweep_dir, jobs: int, parallel: int) -> Path:
    """The sweep's job count and how many run at once, in ``<sweep_dir>/PLAN``, for its jobs to
    read (``suite.progress.SweepProgress.of_plan``; they append their ends beside it); returns it."""
    path = Path(sweep_dir) / PLAN
    write_atomic(path, json.dumps({"jobs": int(jobs), "parallel": max(1, int(parallel))}))  # over a FIFO too, never waiting
    return path


def sweep_log_path(results_dir, sweep: str) -> Path:
    """One JSON line per multirun invocation of a sweep: start, end, wall time, jobs, parallelism."""
    return Path(results_dir) / sweep / "_sweeps.jsonl"


def append_sweep_log(path: Path, record: dict) -> str | None:
    """Append ``record`` as one line to the sweep log ``path`` (``suite.files.append_regular``: a
    FIFO or a folder there is named, never waited on); None, or the one line saying why not."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        append_regular(path, json.dumps(record) + "\n")
    except OSError as err:
        return f"not recording this multirun's wall time: {err.filename or path}: {err.strerror or err}"
    return None


def read_sweep_log(path: Path) -> list[dict]:
    """The records of the sweep log ``path``, one per whole line (a line cut short by a killed
    process is skipped); [] when there is none. A log that is not a regular file (a FIFO, a
    folder) is an ``OSError`` naming it, raised without waiting (``suite.files.read_regular``)."""
    if not os.path.lexists(path):
        return []
    out = []
    for line in read_regular(path).decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def writable_dir_problem(key: str, folder: str) -> str | None:
    """Why Hydra could not write its ``key`` folder (``hydra.run.dir``, ``hydra.sweep.dir``), or
    None: the folder is created and a probe file written and removed there."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return (f"{key}={folder!r}: cannot write there ({err.strerror or err}); point {key}= at a writable "
                "folder (Hydra keeps each run's config and log in it)")
    return None


def _require_writable(key: str, folder: str) -> None:
    problem = writable_dir_problem(key, folder)
    if problem:
        log.error("cannot run here: %s", problem)
        sys.exit(2)


def parallelism(launcher) -> int:
    """How many jobs the launcher runs at once: joblib's ``n_jobs`` (negative: counted back from the
    cores, as joblib does), submitit's ``array_parallelism``, else 1 (one after another)."""
    n = launcher.get("n_jobs")
    if n is not None:
        n = int(n)
        return n if n > 0 else max(1, (os.cpu_count() or 1) + 1 + n)
    return max(1, int(launcher.get("array_parallelism") or 1))


class ValidateSweep(Callback):
    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        _require_writable("hydra.run.dir", str(config.hydra.run.dir))  # before Hydra creates it

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if "SlurmLauncher" in str(config.hydra.launcher.get("_target_", "")) and shutil.which("srun") is None:
            log.error("cannot run here: launcher=slurm submits each job to SLURM (srun, sbatch) and this machine has no "
                      "srun on its PATH; run the sweep on the cluster's login node, or use launcher=local (this "
                      "machine) or launcher=submitit_local (the SLURM code path without a cluster)")
            sys.exit(2)
        _require_writable("hydra.sweep.dir", str(config.hydra.sweep.dir))
        self._t0, self._started = time.perf_counter(), datetime.now(timezone.utc)
        jobs = sweep_jobs(config)
        self._jobs = len(jobs)
        # Jobs launched on this machine are also checked against its device and memory; a
        # cluster's nodes check their own when each job starts.
        here = "slurm" not in str(config.hydra.launcher.get("_target_", "")).lower()
        sweeps = set()
        for job in jobs:
            try:
                spec, _ = preflight(compose(config_name=config.hydra.job.config_name, overrides=job), here=here)
                sweeps.add(spec.sweep)
            except (SpecError, HydraException, OmegaConfBaseException) as err:
                log.error("bad configuration in sweep job [%s]: %s", " ".join(job), str(err).replace("\n", " "))
                sys.exit(2)
            except ResourceError as err:
                log.error("sweep job [%s] cannot run here: %s", " ".join(job), err)
                sys.exit(2)
        try:
            for sweep in sorted(sweeps):
                check_results_dir(config.results_dir, sweep)
        except ResourceError as err:
            log.error("cannot run here: %s", err)
            sys.exit(2)
        log.info("validated %d sweep jobs", len(jobs))
        write_plan(config.hydra.sweep.dir, len(jobs), min(len(jobs), parallelism(config.hydra.launcher)))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        if not hasattr(self, "_t0"):
            return
        launcher = config.hydra.launcher
        record = {"sweep": config.sweep_name, "started": self._started.isoformat(timespec="seconds"),
                  "ended": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "wall_s": round(time.perf_counter() - self._t0, 2), "jobs": self._jobs,
                  "launcher": str(launcher.get("_target_", "")).rsplit(".", 1)[-1],
                  "parallel": int(launcher.get("n_jobs") or 1)}  # as configured, as the record always held
        if (why := append_sweep_log(sweep_log_path(config.results_dir, config.sweep_name), record)) is not None:
            log.warning("%s", why)
