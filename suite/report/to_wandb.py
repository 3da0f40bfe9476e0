"""Log a sweep's leaderboard to Weights & Biases as tables, next to the sweep's runs.

One W&B run per report (``job_type="report"``, grouped with the sweep's runs), holding the long
leaderboard and the MRR ranking as ``wandb.Table``s and each scheme's MRR (out-of-distribution
cells and all cells) in the summary.
Offline by default, like the runs; ``wandb sync`` uploads it later.
"""
from __future__ import annotations

import pandas as pd


def log_report(leaderboard: pd.DataFrame, mrr: pd.DataFrame, sweep: str, *, mode: str = "offline",
               project: str = "posbench", entity: str | None = None, directory: str | None = None) -> str:
    """Returns the W&B run's local directory."""
    import wandb

    run = wandb.init(project=project, entity=entity, mode=mode, group=sweep, job_type="report",
                     name=f"report-{sweep}", tags=["report"], dir=directory, reinit="finish_previous",
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
