"""Entry point: ``python -m suite.run <overrides>`` trains, evaluates and stores one run.

``python -m suite.run -m position=nope,rope,alibi`` is a Hydra multirun. A run whose result
file exists is skipped (its id is the hash of its resolved spec); an interrupted run resumes
from its last checkpoint.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from suite import distributed
from suite import spec as spec_mod
from suite import store
from suite.diagnostics import diagnostic_rows
from suite.evaluate import evaluate
from suite.progress import StepLog, finished_line
from suite.model import PosBenchLM
from suite.resources import ResourceError, check_device, check_memory, check_results_dir
from suite.spec import RunSpec
from suite.tracking import Tracker, wandb_config, wandb_dir, wandb_id
from suite.checkpoint import load_trained, save_trained
from suite.config import CONF_DIR
from suite.identity import diagnostic_examples, run_columns, run_id
from suite.train import TrainResult, train

log = logging.getLogger("posbench")


def execute(spec: RunSpec, *, results_dir="results", logger_cfg: dict | None = None, ckpt_every: int = 0,
            log_every: int = 10, threads: int = 0, progress: bool = True) -> Path | None:
    """Train, evaluate and store one run; returns its result file (None when another process is
    training it now). Finished runs are skipped."""
    rid = run_id(spec)
    out = store.result_path(results_dir, spec.sweep, rid)
    if distributed.active():
        return _execute_distributed(spec, rid, out, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)
    if out.exists():
        log.info("skip %s: already stored at %s", rid, out)
        return out
    check_memory(spec, device=check_device(spec))  # before anything is written
    with store.run_lock(results_dir, spec.sweep, rid) as mine:
        if not mine:
            log.info("skip %s: another process is training it", rid)
            return None
        if out.exists():  # finished while we waited for the lock
            log.info("skip %s: already stored at %s", rid, out)
            return out
        return _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)


def _execute_distributed(spec, rid, out, results_dir, logger_cfg, ckpt_every, log_every, threads, progress):
    """Under torchrun: rank 0 checks the store and holds the run's lock; every rank trains."""
    if not distributed.is_main():
        if distributed.agree(None):
            _train_and_store(spec, rid, results_dir, None, ckpt_every, log_every, threads, False)
        return None
    if out.exists():
        log.info("skip %s: already stored at %s", rid, out)
        distributed.agree(False)
        return out
    with store.run_lock(results_dir, spec.sweep, rid) as mine:
        go = mine and not out.exists()
        distributed.agree(go)
        if not go:
            log.info("skip %s: stored or being trained by another process", rid)
            return out if out.exists() else None
        return _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)


def usable_threads(threads: int) -> int:
    """``threads`` clamped to this machine's cores, with a warning when it asked for more
    (0: leave torch's default)."""
    cores = os.cpu_count() or 1
    if threads > cores:
        warnings.warn(f"threads={threads} is more than this machine's {cores} cores; using {cores}", stacklevel=2)
        return cores
    return threads


def _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress) -> Path:
    device = check_device(spec)
    threads = usable_threads(threads)
    if threads > 0:
        torch.set_num_threads(threads)
    columns = run_columns(spec)
    main_rank = distributed.is_main()
    timing: dict[str, float] = {}  # where the run's wall time goes, stored with the run
    mark = time.perf_counter()
    logger_cfg = (logger_cfg if main_rank else None) or {"name": "none"}
    tracker = Tracker(logger_cfg, name=rid, group=spec.sweep, config=wandb_config(spec, columns),
                      tags=[columns["positions"], columns["spans"], spec.model.pattern, spec.taskset],
                      run_id=wandb_id(spec.sweep, rid), directory=wandb_dir(logger_cfg, results_dir, spec.sweep))
    timing["log_s"] = time.perf_counter() - mark
    try:
        t0 = time.perf_counter()
        torch.manual_seed(spec.seed)
        model = PosBenchLM(spec.model)
        tasks = [(t, t.build()) for t in spec.tasks]
        work = store.work_dir(results_dir, spec.sweep, rid)
        work.mkdir(parents=True, exist_ok=True)
        probe = diagnostic_examples(spec, tasks, results_dir) if spec.eval.diagnostics and main_rank else None
        diag_rows = diagnostic_rows(model, probe[1], "init") if probe else []
        timing["setup_s"] = time.perf_counter() - t0

        def during_training(step: int) -> None:
            every = spec.eval.diagnostics_every
            if probe and every and step % every == 0 and step < spec.train.steps:
                diag_rows.extend(diagnostic_rows(model, probe[1], f"step{step}"))
                model.train()

        finished = None if distributed.active() else load_trained(work, model)
        if finished is not None:  # training ended before evaluation, caching or storing failed
            result, diag_rows = TrainResult(**finished["result"]), finished["diag_rows"]
            log.info("%s: training finished earlier (%s); evaluating the stored model", rid, work / "model.pt")
        else:
            # off a terminal (no tqdm bar) the main process writes a plain progress line per logged step
            log_step = tracker.log if progress or not main_rank else StepLog(rid, spec.train.steps, log.info, tracker.log)
            result = train(model, spec, [task for _, task in tasks], ckpt_path=work / "ckpt.pt", ckpt_every=ckpt_every,
                           log=log_step, log_every=log_every, progress=progress, on_step=during_training)
        timing["batches_s"], timing["train_s"] = result.batch_s, result.wall_s - result.batch_s
        if not main_rank:  # rank 0 evaluates and writes; the others only helped train
            return None
        mark = time.perf_counter()
        if finished is None:
            save_trained(work, model, {"result": dataclasses.asdict(result), "diag_rows": diag_rows})
        timing["store_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        if result.status == "ok":
            rows = evaluate(model, spec, tasks, device, cache_dir=Path(results_dir) / "_evalsets", timing=timing)
            if probe:
                diag_rows += diagnostic_rows(model, probe[1], "trained")
                rows += [{**r, "task": probe[0], "eval_len": spec.train.seq_len, "len_ratio": 1.0,
                          "n": len(probe[1]), "status": "ok"} for r in diag_rows]
                tracker.log({f"diag/{r['metric']}/{r['slice']}": r["value"] for r in diag_rows
                             if r["metric"] in ("recency_gap", "logit_gap")})
        else:
            # the cell stays on the leaderboard, marked diverged, with the step it happened at
            rows = [{"task": t.name, "eval_len": spec.train.seq_len, "len_ratio": 1.0, "slice": "all",
                     "metric": metric, "value": value, "n": 0, "status": result.status}
                    for t, task in tasks
                    for metric, value in [*((m, float("nan")) for m in dict.fromkeys((task.primary_metric, "exact_match"))),
                                          ("diverged_at_step", result.steps_done)]]
        timing["eval_s"] = time.perf_counter() - mark - timing.get("eval_sets_s", 0.0)
        wall = time.perf_counter() - t0
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        rows = [{**row, "wall_s": round(wall, 2), "timestamp": stamp} for row in rows]
        meta = {**columns, "timing": {k: round(v, 3) for k, v in timing.items()}, "wall_s": round(wall, 2), "timestamp": stamp, "train_status": result.status,
                "resumed_from": result.resumed_from, "final_loss": result.final_loss,
                "processes": distributed.world_size() if distributed.active() else 1, "spec": spec.to_dict()}
        path = store.write_run(results_dir, spec.sweep, rid, meta, rows)  # the result first, then what is optional
        (work / "ckpt.pt").unlink(missing_ok=True)
        tracker.log_rows(rows)
        tracker.finish()
        status = result.status if result.status == "ok" else f"{result.status} at step {result.steps_done}"
        log.info("%s -> %s", finished_line(rid, status, meta["wall_s"], rows, tasks, spec.train.seq_len), path)
        return path
    finally:
        tracker.finish()


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        spec = spec_mod.build(cfg)
        device = check_device(spec)
        check_results_dir(cfg.results_dir, spec.sweep)
    except spec_mod.SpecError as err:
        log.error("bad configuration: %s", err)
        sys.exit(2)
    except ResourceError as err:
        log.error("cannot run here: %s", err)
        sys.exit(2)
    logger_cfg = OmegaConf.to_container(cfg.logger, resolve=True)
    distributed.init(device)
    try:
        execute(spec, results_dir=cfg.results_dir, logger_cfg=logger_cfg, ckpt_every=cfg.ckpt_every,
                log_every=cfg.log_every, threads=cfg.get("threads", 0),
                progress=sys.stderr.isatty() and distributed.is_main())
    except ResourceError as err:
        log.error("cannot run here: %s", err)
        sys.exit(2)
    except OSError as err:  # a full disk or a folder made read-only mid-run: what was stored stays
        log.error("could not write %s: %s; what was stored before is kept, and rerunning the same command "
                  "resumes from it", err.filename or "a result file", err.strerror or err)
        sys.exit(1)
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    # Re-import under the package name so launchers that pickle the task (joblib, submitit)
    # find it as suite.run.main, not as a function of __main__.
    from suite.run import main as _main

    _main()
