"""How many runs a sweep declares, and how many a board already written under ``--out`` holds:
what a report compares its own run count with before it says "k of N runs" or replaces a board.

The declared count N of sweep ``<name>`` is the number of distinct runs its file
``conf/sweep/<name>.yaml`` launches: the jobs Hydra's basic sweeper makes of its
``hydra.sweeper.params`` (the cartesian product of every listed value, ``+arch`` lists included,
``suite.config.validate.sweep_jobs``), less the jobs its ``skip`` list leaves out
(``suite.run.skip_reason``, matched on each job's config-group choices as the run itself matches
them), each built into its spec, counted once per run id. Jobs that
build one spec are one run: in ``windows``, ``++pattern.window: 4,8,16`` crossed with an ``+arch``
that has no window (nope) is one run per seed, not three, so that sweep declares 27 runs, not 45.
Each configuration (a job less its ``seed=``) is built once, about 0.15 s each, and only when a
board holds fewer runs than the cartesian product (a board with as many holds the whole sweep). A sweep named by no file
under conf/sweep/ (a ``sweep_name=`` of your own), or one whose jobs this checkout cannot build,
declares no count. Overrides given to ``make sweep ARGS=...`` are not part of the declaration.
"""
from __future__ import annotations

import re
from pathlib import Path

RUNS_LINE = re.compile(r"^- runs: (\d+)$", re.MULTILINE)  # the Provenance line of index.md (sections/provenance.py)


def sweep_file(sweep: str) -> Path:
    from suite.config.compose import CONF_DIR

    return CONF_DIR / "sweep" / f"{sweep}.yaml"


def _jobs(sweep: str) -> list[list[str]]:
    from hydra import compose, initialize_config_dir

    from suite.config.compose import CONF_DIR
    from suite.config.validate import sweep_jobs

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return sweep_jobs(compose("config", overrides=[f"+sweep={sweep}"], return_hydra_config=True))


SEED = "seed="  # the override a sweep lists its seeds in: two seeds of one configuration are two runs


def _distinct_runs(jobs: list[list[str]]) -> int:
    """The runs ``jobs`` make: each configuration (a job less its seed) built once, and the seeds of
    every job whose configuration builds the same spec counted once each; a configuration the
    sweep's ``skip`` list leaves out makes none."""
    from hydra import compose, initialize_config_dir

    from suite.config.build import build
    from suite.config.compose import CONF_DIR
    from suite.run import skip_reason

    seeds: dict[tuple[str, ...], set[str]] = {}
    for job in jobs:
        seeds.setdefault(tuple(o for o in job if not o.startswith(SEED)), set()).update(o for o in job if o.startswith(SEED))
    runs: dict[str, set[str]] = {}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for config, its_seeds in seeds.items():
            cfg = compose("config", overrides=list(config), return_hydra_config=True)
            if skip_reason(cfg.get("skip"), dict(cfg.hydra.runtime.choices)) is not None:
                continue
            runs.setdefault(build(cfg).run_id, set()).update(its_seeds or {""})
    return sum(len(s) for s in runs.values())


def declared_runs(sweep: str, have: int = 0) -> int | None:
    """The runs ``conf/sweep/<sweep>.yaml`` declares (module docstring), or None when no such
    file declares any; ``have``: the runs a board holds; when they reach the cartesian product of
    the sweep's params, that product is returned without building a job (the board is whole)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        if not sweep_file(sweep).is_file():
            return None
        jobs = _jobs(sweep)
    except (HydraException, OmegaConfBaseException, ValueError, ImportError):  # no config or its code here
        return None
    if have >= len(jobs):
        return len(jobs)
    try:  # building the jobs needs the model and task code; a checkout without it declares nothing
        from suite.config.build import SpecError
    except ImportError:
        return None
    print(f"counting the runs conf/sweep/{sweep_file(sweep).name} declares ({len(jobs)} jobs) ...", flush=True)
    try:
        return _distinct_runs(jobs)
    except (HydraException, OmegaConfBaseException, SpecError, ValueError):
        return None


def held(have: int, declared: int | None) -> str:
    """'2 of 36 runs' for a board short of the runs its sweep declares, else '36 runs'."""
    return f"{have} of {declared} runs" if declared is not None and have < declared else f"{have} runs"


def coverage(sweep: str, have: int, declared: int | None) -> str | None:
    """'2 of 36 runs: ...', the line at the top of a board whose ``have`` runs are fewer than the
    ``declared`` runs of its sweep (``declared_runs``), else None."""
    if declared is None or have >= declared:
        return None
    return (f"{held(have, declared)}: this board holds part of the sweep conf/sweep/{sweep}.yaml declares; "
            f"its cells and ranking may change when the other {declared - have} runs are in")


def written_runs(out_dir: Path) -> int | None:
    """The runs of the board already written at ``out_dir`` (its index.md's Provenance line
    '- runs: N'), or None when there is none."""
    index = Path(out_dir) / "index.md"
    if not index.is_file():
        return None
    found = RUNS_LINE.search(index.read_text(errors="replace"))
    return int(found.group(1)) if found else None
