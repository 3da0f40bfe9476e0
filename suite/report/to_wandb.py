"""Log a sweep's leaderboard to Weights & Biases as tables, next to the sweep's runs.

One W&B run per sweep's report (``job_type="report"``, id ``report_id``: a rebuild updates it, grouped with the sweep's runs), holding the long
leaderboard and the MRR ranking as ``wandb.Table``s and each scheme's MRR (out-of-distribution
cells and all cells) in the summary.
Offline by default, like the runs; ``wandb sync`` uploads it later.

Where it goes follows the runs: the project, entity and folder are the composed config's
``logger.project``, ``logger.entity`` and ``logger.dir`` (suite/config/schema.py, conf/logger/wandb.yaml),
so with no flags the report lands beside runs launched with no logger overrides, its files in
``<results>/<sweep>/wandb``. ``python -m suite.report --project/--entity`` match runs launched
with ``logger.project=`` or ``logger.entity=``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.config.compose import compose_config
from suite.tracking import wandb_dir, wandb_id


def logger_settings(results_dir, sweep: str, project: str | None = None, entity: str | None = None) -> dict:
    """``{"project", "entity", "dir"}`` for the report's W&B run: the composed ``logger`` config's
    values, ``project`` and ``entity`` overriding them when given; ``dir`` by ``wandb_dir``'s rule."""
    logger = compose_config(["logger=wandb"]).logger
    return {"project": project if project is not None else logger.project,
            "entity": entity if entity is not None else logger.entity,
            "dir": wandb_dir({"dir": logger.dir}, results_dir, sweep)}


def report_id(sweep: str) -> str:
    """The report's W&B run id: one per sweep, so a rebuild updates that run (``resume="allow"``)."""
    return wandb_id(sweep, "report")


def log_report(leaderboard: pd.DataFrame, mrr: pd.DataFrame, sweep: str, *, mode: str = "offline",
               project: str | None = None, entity: str | None = None, results_dir="results") -> str:
    """Returns the W&B run's local directory."""
    import wandb

    where = logger_settings(results_dir, sweep, project, entity)
    folder = Path(where["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=where["project"], entity=where["entity"], mode=mode, group=sweep, job_type="report",
                     name=f"report-{sweep}", tags=["report"], id=report_id(sweep), resume="allow", dir=str(folder.resolve().parent), reinit="finish_previous",
                     settings=wandb.Settings(silent=True, console="off"))
    try:
        run.log({"leaderboard": wandb.Table(dataframe=leaderboard.reset_index(drop=True)),
                 "mrr": wandb.Table(dataframe=mrr.reset_index(drop=True))})
        for row in mrr.itertuples(index=False):
            run.summary[f"mrr_ood/{row.scheme}"] = float(row.mrr_ood)
            run.summary[f"mrr_all/{row.scheme}"] = float(row.mrr_all)
        return run.dir
    finally:
        run.finish()
