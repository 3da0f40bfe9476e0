"""Shared evaluation sets: generated from (task config, length, seed, size) and named by a hash.

Every scheme in a sweep is scored on identical examples, and the set's hash is recorded with
the results, so two leaderboard cells can be checked to come from the same data. The cache that
keeps generated sets on disk is ``suite.evaluation.evalcache``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

import tasks.base as tasks_base
from tasks.base import Example

FORMAT = 2  # part of the hash: bump when the cached file layout changes


@lru_cache(maxsize=None)
def generator_digest(task_cls: type) -> str:
    """Hash of the task's source and of the shared vocabulary: editing a generator changes the
    eval-set hash, so a stale cached set is never read for a changed task."""
    files = [inspect.getsourcefile(task_cls), inspect.getsourcefile(tasks_base)]
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


def eval_set_hash(task_name: str, params: dict, length: int, seed: int, n: int, generator: str = "") -> str:
    key = {"task": task_name, "params": params, "length": length, "seed": seed, "n": n, "format": FORMAT,
           "generator": generator}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def generate(task, length: int, seed: int, n: int) -> list[Example]:
    """``n`` evaluation examples of ``length`` tokens: from the task's ``eval_generate(rng, length)``
    when it defines one, else from ``generate``. Training only calls ``generate``, so the optional
    ``eval_generate`` lets a task be evaluated on distributions it is not trained on."""
    rng = np.random.default_rng([seed, length])
    make = getattr(task, "eval_generate", task.generate)
    return [make(rng, length) for _ in range(n)]
