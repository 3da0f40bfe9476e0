"""The arm's jobs for ``posbench rank`` (``suite.commands.rank``): a board's sweep expanded as Hydra's
basic sweeper expands it (``suite.config.validate.sweep_jobs``), the scheme axis (``+arch`` or
``position``) replaced by the arm's overrides, every other axis kept (or cut to ``--seeds`` and
``--tasks``), each job composed and checked (``preflight``) before any trains; then trained in this
process by the run's own ``execute`` (a stored run is skipped)."""
from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from suite.commandline import Refused

SCHEME_AXES, TASK_AXES = ("arch", "position"), ("task", "family", "taskset")


@dataclass(frozen=True)
class Grid:
    """The arm's runs, ``(run id, spec, composed config)`` in the sweep's order; the tasks and seeds
    they cover; ``subset``: the sentence that says the arm covers part of the board's grid, or None."""

    runs: list
    tasks: set
    seeds: set
    subset: str | None


def _axis(params: dict, names) -> str | None:
    return next((k for k in params if k.lstrip("+~") in names), None)


def _chosen(prog: str, option: str, given: list[str] | None, params: dict, key: str | None, what: str):
    """The values of axis ``key`` kept (all without ``given``); ``Refused`` naming a value the
    board does not run, with those it does."""
    if given is None:
        return None
    if key is None:
        raise Refused(f"{prog}: error: {option}: the board's sweep has no {what} axis to choose from")
    valid = [v.strip() for v in str(params[key]).split(",")]
    if bad := [g for g in given if g not in valid]:
        raise Refused(f"{prog}: error: {option} {','.join(bad)}: not a {what} of the board; valid: {', '.join(valid)}")
    return set(given)


def _hydra_text(err: Exception) -> str:
    """Hydra's message on one line, its list of available options joined by commas."""
    text = str(err).split("Config search path")[0].strip()
    head, _, options = text.partition("\n\nAvailable options in")
    if options:
        group, _, names = options.partition(":")
        return f"{head.strip()}; valid{group.strip()}: {', '.join(n.strip() for n in names.split() if n.strip())}"
    return " ".join(text.split())


def _compose(overrides: list[str]):
    from hydra import compose

    return compose("config", overrides=overrides, return_hydra_config=True)


def _jobs(cfg, keys: dict, keep: dict) -> list[list[str]]:
    """Every job of the board's sweep less its scheme axis, cut to ``keep`` ({axis: values or
    None}), each job once, in the sweep's order."""
    from suite.config.validate import sweep_jobs

    out = []
    for job in sweep_jobs(cfg):
        parts = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in job}
        if any(v is not None and parts.get(k) not in v for k, v in keep.items() if k):
            continue
        job = [o for o in job if o.split("=", 1)[0] != keys["scheme"]]
        if job not in out:
            out.append(job)
    return out


def arm_jobs(prog: str, sweep_file: Path, board: str, overrides: list[str], seeds, tasks, fixed: list[str]) -> Grid:
    """The arm's ``Grid`` on the board of ``sweep_file``: each job composed with the arm's
    ``overrides`` and ``fixed`` (its sweep name, results folder, logger), and checked; ``Refused``
    (exit 2) for a bad subset value or a job that does not compose or fit, before any trains."""
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from suite.config import schema
    from suite.config.build import SpecError
    from suite.config.compose import CONF_DIR
    from suite.config.preflight import preflight
    from suite.config.resources import ResourceError
    from suite.results.identity import run_id
    from suite.run import skip_reason

    schema.register()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sweep").mkdir()
        shutil.copy(sweep_file, Path(tmp) / "sweep" / f"rank-{board}.yaml")
        base = [f"+sweep=rank-{board}", f"hydra.searchpath=[file://{tmp}]"]
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            try:
                cfg = _compose(base)
                params = dict(cfg.hydra.sweeper.get("params") or {})
                keys = {"scheme": _axis(params, SCHEME_AXES), "task": _axis(params, TASK_AXES),
                        "seed": _axis(params, ("seed",))}
                if keys["scheme"] is None:
                    raise Refused(f"{prog}: error: {sweep_file} has no scheme axis ({', '.join(SCHEME_AXES)}) "
                                  "to replace")
                keep = {keys["task"]: _chosen(prog, "--tasks", tasks, params, keys["task"], "task"),
                        keys["seed"]: _chosen(prog, "--seeds", seeds, params, keys["seed"], "seed")}
                runs = []
                for job in _jobs(cfg, keys, keep):
                    job_cfg = _compose([*job, *overrides, *fixed, base[1]])
                    if skip_reason(job_cfg.get("skip"), dict(job_cfg.hydra.runtime.choices)) is None:
                        spec, _ = preflight(job_cfg)
                        runs.append((run_id(spec), spec, job_cfg))
            except (HydraException, OmegaConfBaseException, SpecError) as err:
                raise Refused(f"{prog}: error: bad configuration {' '.join(overrides)}: {_hydra_text(err)}") from None
            except ResourceError as err:
                raise Refused(f"{prog}: error: cannot run here: {err}") from None
    return Grid(runs, {t.name for _, s, _ in runs for t in s.tasks}, {s.seed for _, s, _ in runs},
                _subset_note(board, params, keys, keep))


def _subset_note(board: str, params: dict, keys: dict, keep: dict) -> str | None:
    """'ranked on a subset of the <board> board's grid (...)', or None for the whole grid."""
    cut = [f"{'tasks' if k == keys['task'] else 'seeds'} {', '.join(sorted(v))} of {params[k]}"
           for k, v in keep.items() if k and v is not None]
    if not cut:
        return None
    return (f"Ranked on a subset of the {board} board's grid ({'; '.join(cut)}), every published scheme on the same "
            "subset: not like for like with the board's full grid or its published MRR.")


def unlike_refusal(prog: str, args, unlike: dict) -> str:
    """The refusal of arm runs unlike the board's: what differs, once per distinct difference."""
    seen: dict[tuple, int] = {}
    for d in unlike.values():
        seen[tuple(d)] = seen.get(tuple(d), 0) + 1
    what = "; ".join(f"{n} run{'s' * (n != 1)}: {', '.join(d)}" for d, n in seen.items())
    return (f"{prog}: error: {' '.join(args.overrides)} is not like for like with the {args.board} board ({what}). "
            "Nothing was trained; pass --unlike ok to train them and report them apart, unranked")


def train(grid: Grid, results: Path, name: str) -> None:
    """Train each run of ``grid`` not stored under ``results/<name>`` (``suite.run.execute``)."""
    from omegaconf import OmegaConf

    from suite.config.resources import ResourceError, check_results_dir
    from suite.run import execute

    try:
        check_results_dir(results, name)
        for i, (rid, spec, cfg) in enumerate(grid.runs, 1):
            print(f"{name}: run {i} of {len(grid.runs)}: {rid}", file=sys.stderr, flush=True)
            execute(spec, results_dir=results, logger_cfg=OmegaConf.to_container(cfg.logger, resolve=True),
                    threads=cfg.get("threads", 0), progress=False)
    except ResourceError as err:
        raise Refused(f"cannot run here: {err}") from None
