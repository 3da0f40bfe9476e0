"""Shared evaluation sets: generated from (task config, length, seed, size) and named by a hash.

Every scheme in a sweep is scored on identical examples, and the set's hash is recorded with
the results, so two leaderboard cells can be checked to come from the same data. The hash covers
the task's code as the run's code digest does (``suite.config.codedigest.generator_digest``: the
task's module and the task modules it imports). The cache that keeps generated sets on disk is
``suite.evaluation.evalcache``.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from tasks.base import Example

FORMAT = 2  # part of the hash: bump when the cached file layout changes


def eval_set_hash(task_name: str, params: dict, length: int, seed: int, n: int, generator: str = "") -> str:
    key = {"task": task_name, "params": params, "length": length, "seed": seed, "n": n, "format": FORMAT,
           "generator": generator}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def generate(task, length: int, seed: int, n: int) -> list[Example]:
    """``n`` evaluation examples of ``length`` tokens: the task's ``eval_set(length, seed, n)`` when
    it draws one as a whole (natural text's non-overlapping held-out windows), else ``n`` draws of
    its ``eval_generate(rng, length)`` (``generate`` unless the task evaluates on distributions it
    is not trained on). Training only calls ``generate``."""
    whole = task.eval_set(length, seed, n)
    if whole is not None:
        return whole
    rng = np.random.default_rng([seed, length])
    return [task.eval_generate(rng, length) for _ in range(n)]
