"""Whether a board's runs were computed by the code this checkout holds: each run's stored code
digest against the one this checkout gives its stored spec (``suite.config.codedigest``).
"""
from __future__ import annotations

import pandas as pd

from suite.config.codedigest import spec_digest


def code_status(df: pd.DataFrame) -> pd.Series:
    """Per run id: ``current`` when its stored code digest is the one this checkout gives its spec
    (``suite.config.codedigest.spec_digest``: the core plus the schemes, spans and tasks it uses),
    ``stale`` when it differs, ``unknown`` for a run stored without its spec."""
    runs = df.drop_duplicates("run_id").set_index("run_id")
    spec = runs["spec"] if "spec" in runs else pd.Series(None, index=runs.index, dtype=object)

    def status(run_id):
        if not isinstance(spec[run_id], str):
            return "unknown"
        return "current" if spec_digest(spec[run_id]) == str(runs.code_digest[run_id]) else "stale"

    return pd.Series({run_id: status(run_id) for run_id in runs.index}, dtype=object, name="code")


def code_groups(df: pd.DataFrame) -> pd.DataFrame:
    """Runs counted by the commit that ran them and whether this checkout's code gives the same
    digest: ``git_sha, code, runs``."""
    runs = df.drop_duplicates("run_id").set_index("run_id")[["git_sha"]].fillna("unknown").astype(str)
    runs["code"] = code_status(df)
    return runs.value_counts().rename("runs").reset_index().sort_values(["git_sha", "code"], ignore_index=True)


def stale_code_warning(df: pd.DataFrame) -> str | None:
    """A warning line when some runs were computed by code that differs from this checkout's, else None."""
    status = code_status(df)
    stale = int((status == "stale").sum())
    if not stale:
        return None
    return (f"{stale} of {len(status)} runs were computed by other code than this checkout holds: "
            "their numbers may not be what this code gives; rerun the sweep")
