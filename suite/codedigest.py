"""The digest of the code that computes a run's numbers, part of every run id.

A run id is a hash of the resolved spec plus this digest, so a change to the model, attention,
position schemes, spans, batching, training, evaluation or task generators gives every run a new
id: the changed code retrains, and a number it could change is never read from an old file.
Reports, logging, launch code and storage (checkpoint files, ``suite.checkpoint``; the eval-set
cache, ``suite.evalcache``: each restores exactly what was saved) are left out, so editing them
keeps finished runs.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMERIC_CODE = (
    "suite/model.py", "suite/attention.py", "suite/position", "suite/span", "suite/batch.py",
    "suite/step.py", "suite/train.py", "suite/evaluate.py", "suite/evalsets.py", "suite/diagnostics.py", "tasks",
)


def numeric_files(root: Path = ROOT) -> list[Path]:
    """The Python files under ``NUMERIC_CODE``, in a fixed order."""
    files = []
    for entry in NUMERIC_CODE:
        path = root / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


@lru_cache(maxsize=None)
def code_digest(root: Path = ROOT) -> str:
    """12 hex digits of SHA-256 over each numeric file's path (relative to ``root``) and bytes."""
    h = hashlib.sha256()
    for f in numeric_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:12]
