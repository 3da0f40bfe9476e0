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


def _origin(runs: pd.DataFrame) -> str:
    """'git abc1234, def5678; run 2026-12-03 to 2026-12-05': the commits (at most three named) and the
    days that computed ``runs``, from what each run stored; '' when they stored neither."""
    def column(name):
        return runs[name].dropna().astype(str) if name in runs else pd.Series([], dtype=object)

    shas, days = sorted(set(column("git_sha").str[:7])), sorted(set(column("timestamp").str[:10]))
    parts = []
    if shas:
        parts.append("git " + ", ".join(shas[:3]) + (f" and {len(shas) - 3} more" if len(shas) > 3 else ""))
    if days:
        parts.append("run " + (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"))
    return "; ".join(parts)


def stale_code_warning(df: pd.DataFrame) -> str | None:
    """A warning line when some runs were computed by code that differs from this checkout's, naming
    the commits and days that computed them (whose protocol they carry), else None."""
    status = code_status(df)
    stale = status.index[status == "stale"]
    if not len(stale):
        return None
    origin = _origin(df.drop_duplicates("run_id").set_index("run_id").loc[stale])
    return (f"{len(stale)} of {len(status)} runs were computed by other code than this checkout holds"
            f"{f' ({origin})' if origin else ''}: they carry that code's protocol, and their numbers may not be "
            "what this code gives; rerun the sweep")
