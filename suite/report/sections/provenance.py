"""Provenance: where the report's numbers come from (commits, code digests and whether this
checkout's code gives them, runs, how they were trained, seeds, wall time, numeric signatures, the
rows' source) and the runs by commit and code status. Nothing in it depends on when or where the
report is built, so the same rows always give the same files."""
from __future__ import annotations

import pandas as pd

from suite.report.blocks import Heading, Items, Table
from suite.report.code_status import code_groups, code_status
from suite.report.sections.base import Section


class Provenance(Section):
    name, order = "provenance", 120

    def build(self, ctx):
        return {"facts": provenance(ctx.df, ctx.source), "code_groups": code_groups(ctx.df)}

    def blocks(self, built, ctx):
        return [Heading("Provenance"), Items(tuple(f"{k}: {v}" for k, v in built["facts"].items())),
                Table(built["code_groups"], index=False, floatfmt="g")]


def provenance(df: pd.DataFrame, source: str | None = None) -> dict:
    """Where the report's numbers come from. Nothing in it depends on when or where the report is
    built, so the same rows always give the same files."""
    runs = df.drop_duplicates("run_id")
    stamps = pd.to_datetime(runs.timestamp, errors="coerce", utc=True)
    return {
        "git commit": ", ".join(sorted(str(s) for s in runs.git_sha.dropna().unique())),
        "code digests": f"{runs.code_digest.nunique()} (each covers the shared code and the scheme, span and "
                        "task files its run uses)",
        "runs whose digest this checkout's code gives": _checkout_code(df),
        "runs": int(runs.run_id.nunique()),
        "training": _training(df),
        "seeds": ", ".join(str(int(s)) for s in sorted(runs.seed.dropna().unique())),
        "run wall time (sum)": f"{runs.wall_s.sum():.0f} s",
        "first / last run finished": (f"{stamps.min():%Y-%m-%d %H:%M} / {stamps.max():%Y-%m-%d %H:%M} UTC"
                                      if stamps.notna().any() else "not recorded"),
        "numeric signature (runs)": _numeric(runs),
        "rows read from": source or "not recorded",
    }


def _checkout_code(df: pd.DataFrame) -> str:
    """How many runs this checkout's code would compute as they are (``code_status``)."""
    status = code_status(df)
    current = int((status == "current").sum())
    verdict = ("the runs were computed by this code" if current == len(status)
               else "rerun the sweep to refresh the others")
    return f"{current} of {len(status)} runs ({verdict})"


def _training(df: pd.DataFrame) -> str:
    """How the sweep's models were trained: one per task, or on a mixture of tasks."""
    per_run = df.groupby("run_id").task.nunique()
    steps = ", ".join(str(int(x)) for x in sorted(df.steps.dropna().unique()))
    lengths = ", ".join(str(int(x)) for x in sorted(df.train_len.dropna().unique()))
    kind = "one model per task" if per_run.max() == 1 else f"each model on a mixture of {per_run.max()} tasks"
    return f"{kind}; {steps} steps; training length {lengths} tokens"


def _numeric(runs: pd.DataFrame) -> str:
    """Each numeric signature the runs computed under, with its run count: floats are bit-identical
    only between runs of one signature (``suite.results.signature``)."""
    if "numeric" not in runs or runs.numeric.isna().all():
        return "not recorded"
    counts = runs.numeric.fillna("not recorded").value_counts()
    return "; ".join(f"{label} ({n})" for label, n in sorted(counts.items()))
