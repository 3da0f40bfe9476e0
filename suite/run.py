"""Entry point: ``python -m suite.run <overrides>`` trains, evaluates and stores one run.

``python -m suite.run -m position=nope,rope,alibi`` is a Hydra multirun. A run whose result
file is stored (``suite.results.store.verified_run``: it parses, passes the store's checks and
holds this run) is skipped (its id is the hash of its resolved spec); anything else at its name
is set aside (``files.set_aside``) and the run is done again; a run another sweep under the
same results folder already stored is copied, not trained again, and an interrupted run resumes
from its last checkpoint.
"""
from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from pathlib import Path

from suite.commandline import Refused, check_working_folder

if __name__ == "__main__":  # before torch loads: in a folder that no longer exists it fails to load, saying nothing of why
    try:
        check_working_folder("python -m suite.run")
    except Refused as refusal:
        print(refusal, file=sys.stderr)
        sys.exit(refusal.code)

import hydra  # noqa: E402
import torch  # noqa: E402
from omegaconf import DictConfig, OmegaConf

from suite import files
from suite.training import distributed
from suite.config import build as spec_mod
from suite.config.preflight import preflight
from suite.config.resources import ResourceError, check_device, check_memory, check_results_dir
from suite.config.run_spec import RunSpec
from suite.config.compose import CONF_DIR
from suite.results import store
from suite.results.identity import run_columns, run_id
from suite.lifecycle import RunLifecycle
from suite.progress import SweepProgress, run_label

log = logging.getLogger("posbench")


def execute(spec: RunSpec, *, results_dir="results", logger_cfg: dict | None = None, ckpt_every: int = 0,
            log_every: int = 10, threads: int = 0, progress: bool = True, outcome: dict | None = None) -> Path | None:
    """Train, evaluate and store one run; returns its result file (None when another process is
    training it now). Stored runs (``stored``) are skipped; anything else at the result file's
    name is set aside and the run is done again. ``outcome["trained"]`` (when given) says whether
    this call trained or evaluated the run, rather than finding it stored or copying it."""
    rid = run_id(spec)
    out = files.result_path(results_dir, spec.sweep, rid)
    outcome = {} if outcome is None else outcome
    outcome["trained"] = False
    if distributed.active():
        return _execute_distributed(spec, rid, out, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)
    if stored(out, rid, spec.run_id, set_aside=False):
        log.info("skip %s: already stored at %s", rid, out)
        return out
    check_memory(spec, device=check_device(spec))  # before anything is written
    with files.run_lock(results_dir, spec.sweep, rid) as mine:
        if not mine:
            log.info("skip %s: another process is training it", rid)
            return None
        if stored(out, rid, spec.run_id):  # finished while we waited for the lock
            log.info("skip %s: already stored at %s", rid, out)
            return out
        if (copied := store.copy_from_sibling(results_dir, spec.sweep, rid, spec.run_id)) is not None:
            log.info("skip %s: the same run is stored in another sweep; copied to %s", rid, copied)
            return copied
        outcome["trained"] = True
        return _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)


def stored(out: Path, rid: str, spec_hash: str, set_aside: bool = True) -> bool:
    """Whether run ``rid`` (spec hash ``spec_hash``) is stored at ``out``: the store's one test,
    ``store.verified_run``. Anything else there (a damaged file, another run's, a folder, a FIFO)
    is, with ``set_aside`` (the caller holds the run's lock), moved aside by ``files.set_aside``
    and named in a one-line warning, so the run is done again."""
    if not os.path.lexists(out):
        return False
    try:
        store.verified_run(out, rid, spec_hash)
        return True
    except store.NotStored as err:
        if set_aside:
            moved = files.set_aside(out)
            warnings.warn(f"{err}; set aside as {moved}, and the run is done again", stacklevel=2)
        return False


def _execute_distributed(spec, rid, out, results_dir, logger_cfg, ckpt_every, log_every, threads, progress):
    """Under torchrun: rank 0 checks the store and holds the run's lock; every rank trains."""
    if not distributed.is_main():
        if distributed.agree(None):
            _train_and_store(spec, rid, results_dir, None, ckpt_every, log_every, threads, False)
        return None
    if stored(out, rid, spec.run_id, set_aside=False):
        log.info("skip %s: already stored at %s", rid, out)
        distributed.agree(False)
        return out
    with files.run_lock(results_dir, spec.sweep, rid) as mine:
        go = mine and not stored(out, rid, spec.run_id)
        distributed.agree(go)
        if not go:
            log.info("skip %s: stored or being trained by another process", rid)
            return out if mine else None
        return _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress)


def usable_threads(threads: int) -> int:
    """``threads`` clamped to this machine's cores, with a warning when it asked for more
    (0: leave torch's default)."""
    cores = os.cpu_count() or 1
    if threads > cores:
        warnings.warn(f"threads={threads} is more than this machine's {cores} cores; using {cores}", stacklevel=2)
        return cores
    return threads


def _train_and_store(spec, rid, results_dir, logger_cfg, ckpt_every, log_every, threads, progress) -> Path | None:
    """Set up, train (or restore), save, evaluate, store: the run's life under its lock."""
    device = check_device(spec)
    threads = usable_threads(threads)
    if threads > 0:
        torch.set_num_threads(threads)
    run = RunLifecycle(spec, rid, results_dir, logger_cfg, device)
    try:
        run.setup()
        result, trained_now = run.train_or_restore(ckpt_every, log_every, progress)
        if not run.main_rank:  # rank 0 evaluates and writes; the others only helped train
            return None
        if trained_now:
            run.save(result)
        return run.store(result, run.score(result))
    finally:
        run.tracker.finish()


MULTIRUN = ("-m", "--multirun")


def flag_placement_problem(argv: list[str]) -> str | None:
    """Why Hydra's parser would not read ``argv`` as meant, or None: it takes its flags
    (``-m``/``--multirun``, ``--cfg job``, ...) before the overrides, so overrides after a flag that
    follows an override are ``unrecognized arguments``; ``-m`` after the overrides is refused even
    where this Python's argparse reads it (whether it does differs between Python versions). Said
    with the command reordered, flags first (``python -m suite.run -m seed=0,1``)."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:  # another Hydra: its own message stands
        return None
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    if not overrides:
        return None
    _, left = get_args_parser().parse_known_args(argv)
    late = [a for a in argv[argv.index(overrides[0]):] if a.startswith("-")]
    if not any(a in overrides for a in left) and not any(a in MULTIRUN for a in late):
        return None
    named = "-m/--multirun" if any(a in MULTIRUN for a in late) else "/".join(dict.fromkeys(late))
    prog = "posbench run" if Path(sys.argv[0]).name == "posbench" else "python -m suite.run"
    ordered = [a for a in argv if a not in overrides] + overrides
    return f"{prog}: error: {named} must come before the overrides: {prog} {' '.join(ordered)}"


def override_problem(argv: list[str]) -> str | None:
    """Why Hydra cannot parse ``argv``, said plainly, or None: a Hydra flag placed among the
    overrides (``flag_placement_problem``), or an override Hydra cannot parse, said as a bad
    configuration (Hydra's own message is a bare lexer error). ``sweep_name`` is held to the
    sweep-name rule (``files.sweep_name_problem``); any other value is told how to quote."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    if (placement := flag_placement_problem(argv)) is not None:
        return placement
    parser = OverridesParser.create()
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue  # Hydra's flags and their values
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as err:
            key, value = arg.split("=", 1)
            if key.lstrip("+~") == "sweep_name" and (problem := files.sweep_name_problem(value)) is not None:
                return f"bad configuration: sweep_name={problem}"
            first = next((line for line in str(err).splitlines() if line.strip() and not line.startswith("Error parsing")), "")
            return (f"bad configuration: {arg}: Hydra cannot parse this override ({first}); quote a value that holds "
                    f"spaces, brackets or letters outside ASCII: {key}='{value}'")
    return None


def skip_reason(skip, choices: dict) -> str | None:
    """Why this job is one a sweep's ``skip`` list leaves out, or None. Each entry maps config groups
    to options (``{family: copy, setting: tiny_L128, why: ...}``); a job whose group ``choices``
    (Hydra's ``runtime.choices``) hold every one of them is skipped, with the entry's ``why``. An
    entry naming a group with no folder under conf/, or an option that group has no file for, is a
    bad configuration: a misspelt entry would otherwise skip nothing, silently."""
    for entry in skip or ():
        entry = dict(entry)
        why = entry.pop("why", None)
        if not entry:
            raise spec_mod.SpecError(f"skip entry {dict(entry, why=why)} names no config group")
        for group, option in entry.items():
            folder = CONF_DIR / group
            if not folder.is_dir():
                groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
                raise spec_mod.SpecError(f"skip entry names group {group!r}, not a config group; valid: {', '.join(groups)}")
            if not (folder / f"{option}.yaml").is_file():
                options = sorted(p.stem for p in folder.glob("*.yaml"))
                raise spec_mod.SpecError(f"skip entry names {group}={option!r}, not an option of {group}; valid: "
                                         f"{', '.join(options)}")
        if all(str(choices.get(group)) == str(option) for group, option in entry.items()):
            named = ", ".join(f"{g}={o}" for g, o in entry.items())
            return f"the sweep leaves out {named}" + (f": {why}" if why else "")
    return None


def sweep_progress() -> SweepProgress | None:
    """This job's place in its multirun ("run k of N", the time left), or None outside one: the
    job's number is Hydra's ``hydra.job.num`` and the count is the one the sweep's callback wrote
    to the sweep's folder (``suite.config.validate.write_plan``), so worker processes know it too."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from suite.config.validate import PLAN

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    return SweepProgress.of_plan(Path(hc.sweep.dir) / PLAN, hc.job.num)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        if cfg.get("skip"):
            from hydra.core.hydra_config import HydraConfig

            if (why := skip_reason(cfg.skip, dict(HydraConfig.get().runtime.choices))) is not None:
                log.info("skip %s: %s", " ".join(HydraConfig.get().overrides.task), why)
                if (sweep := sweep_progress()) is not None:
                    log.info("%s", sweep.finish(False, 0.0, left_out=True))
                return
        spec, device = preflight(cfg)
        check_results_dir(cfg.results_dir, spec.sweep)
    except spec_mod.SpecError as err:
        log.error("bad configuration: %s", err)
        sys.exit(2)
    except ResourceError as err:
        log.error("cannot run here: %s", err)
        sys.exit(2)
    logger_cfg = OmegaConf.to_container(cfg.logger, resolve=True)
    distributed.init(device)
    sweep = sweep_progress() if distributed.is_main() else None
    if sweep is not None:
        log.info("%s", sweep.start_line(run_label(run_columns(spec), spec.taskset)))
    try:
        t0, outcome = time.perf_counter(), {}
        execute(spec, results_dir=cfg.results_dir, logger_cfg=logger_cfg, ckpt_every=cfg.ckpt_every,
                log_every=cfg.log_every, threads=cfg.get("threads", 0),
                progress=sys.stderr.isatty() and distributed.is_main(), outcome=outcome)
        if sweep is not None:
            log.info("%s", sweep.finish(outcome["trained"], time.perf_counter() - t0))
    except ResourceError as err:
        log.error("cannot run here: %s", err)
        sys.exit(2)
    except OSError as err:  # a full disk or a folder made read-only mid-run: what was stored stays
        log.error("could not write %s: %s; what was stored before is kept, and rerunning the same command "
                  "resumes from it", err.filename or "a result file", err.strerror or err)
        sys.exit(1)
    except KeyboardInterrupt:
        log.error("interrupted: what was stored is kept; rerunning the same command resumes from the last checkpoint")
        sys.exit(130)
    except Exception as err:  # a failure in one job: said when it happens, not only when a long sweep ends
        log.error("%s failed: %s: %s", run_label(run_columns(spec), spec.taskset), type(err).__name__, err)
        raise
    finally:
        distributed.shutdown()


if __name__ == "__main__":
    # Re-import under the package name so launchers that pickle the task (joblib, submitit)
    # find it as suite.run.main, not as a function of __main__.
    from suite.run import main as _main, override_problem

    if (_problem := override_problem(sys.argv[1:])) is not None:
        print(_problem, file=sys.stderr)
        sys.exit(2)
    _main()
