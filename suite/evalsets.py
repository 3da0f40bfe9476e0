"""Shared evaluation sets: generated once per (task config, length, seed, size), cached by hash.

Every scheme in a sweep is scored on identical examples, and the set's hash is recorded with
the results, so two leaderboard cells can be checked to come from the same data.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np

from suite.store import write_json_atomic
import tasks.base as tasks_base
from tasks.base import Example

FORMAT = 2  # bump when the cached file layout changes


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
    rng = np.random.default_rng([seed, length])
    return [task.generate(rng, length) for _ in range(n)]


def _to_json(ex: Example) -> dict:
    return {"tokens": [int(t) for t in ex.tokens], "answer_spans": [list(s) for s in ex.answer_spans], "meta": ex.meta}


def _from_json(d: dict) -> Example:
    return Example(tokens=d["tokens"], answer_spans=[tuple(s) for s in d["answer_spans"]], meta=d["meta"])


def eval_set(task_name: str, params: dict, task, length: int, seed: int, n: int,
             cache_dir: Optional[Path] = None) -> tuple[list[Example], str]:
    """(examples, hash); read from ``cache_dir`` when cached there, else generated (and cached)."""
    digest = eval_set_hash(task_name, params, length, seed, n, generator_digest(type(task)))
    path = Path(cache_dir) / f"{task_name}-{length}-{digest}.json" if cache_dir else None
    if path is not None and path.exists():
        try:
            return [_from_json(d) for d in json.loads(path.read_text())["examples"]], digest
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file is regenerated below
    examples = generate(task, length, seed, n)
    if path is not None:
        write_json_atomic(path, {"hash": digest, "task": task_name, "length": length,
                                 "examples": [_to_json(ex) for ex in examples]})
    return examples, digest
