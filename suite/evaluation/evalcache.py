"""The on-disk cache of evaluation sets (``results/_evalsets/``): a set generated once per hash
(``suite.evaluation.evalsets``) is written atomically and read back by every run that needs it. Storage
only: a cached set holds exactly the examples ``suite.evaluation.evalsets.generate`` makes, so this module is
not part of the code digest that stamps results.

A cached set is trusted only when regenerating it from its seed gives the same examples. A file's
own ``content`` hash proves nothing (anyone who edits the examples can recompute it), so the first
time a process uses a set it regenerates the set in full and compares content hashes; the honest
hash is remembered for the rest of the process (``_HONEST``), so later uses only read the file
and compare. A cached file that is unreadable, names another set, holds another number of
examples, or holds examples its seed does not generate (or is no regular file: a FIFO or a folder,
named and never waited on) is named in a warning, set aside
(``suite.files.set_aside``: ``_evalsets/_set_aside/<name>.damaged-<n>``, never deleted) and
written again from the regenerated set, and the run is scored on the regenerated examples.

What it costs (one CPU core, 100 examples of 256 tokens, the median of repeated calls): generating
copy takes about 1 ms, niah_single 10 to 20 ms, mqar 12 to 24 ms, the slowest task (permutation)
24 ms; reading and hashing the cached file takes 6 to 8 ms. At 2,048 tokens niah_single takes 45 ms
to generate and 49 ms to read. So a full regeneration on first use adds at most tens of
milliseconds per (task, length) to a run, against seconds to minutes of training; checking a
sample instead would leave the other examples unverified for no saving worth having.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Optional

from suite.config.codedigest import generator_digest
from suite.evaluation.evalsets import eval_set_hash, generate
from suite.files import read_regular, set_aside, write_json_atomic
from tasks.base import Example

_HONEST: dict[str, str] = {}  # eval-set hash -> content hash of the set regenerated from its seed in this process


def _to_json(ex: Example) -> dict:
    return {"tokens": [int(t) for t in ex.tokens], "answer_spans": [list(s) for s in ex.answer_spans], "meta": ex.meta}


def _from_json(d: dict) -> Example:
    return Example(tokens=d["tokens"], answer_spans=[tuple(s) for s in d["answer_spans"]], meta=d["meta"])


def content_hash(examples: list[dict]) -> str:
    """sha256 of the examples as stored (canonical JSON)."""
    return hashlib.sha256(json.dumps(examples, sort_keys=True).encode()).hexdigest()[:16]


def _read(path: Path, digest: str, n: int) -> tuple[list[Example], str]:
    """(the cached set, its content hash), or ValueError naming what is wrong with the file."""
    payload = json.loads(read_regular(path))  # a FIFO or a folder is named, never waited on
    examples = payload["examples"]
    if payload.get("hash") != digest:
        raise ValueError(f"it names set {payload.get('hash')!r}, not {digest!r}")
    if len(examples) != n:
        raise ValueError(f"it holds {len(examples)} examples, not {n}")
    content = content_hash(examples)
    if payload.get("content") != content:
        raise ValueError("its examples do not match their content hash")
    return [_from_json(d) for d in examples], content


def _generated(task, length: int, seed: int, n: int, digest: str) -> tuple[list[Example], list[dict]]:
    """(the set generated from its seed, as stored); its content hash is remembered as the honest one."""
    examples = generate(task, length, seed, n)
    stored = [_to_json(ex) for ex in examples]
    _HONEST[digest] = content_hash(stored)
    return examples, stored


def eval_set(task_name: str, params: dict, task, length: int, seed: int, n: int,
             cache_dir: Optional[Path] = None) -> tuple[list[Example], str]:
    """(examples, hash); read from ``cache_dir`` when cached there, intact and the set its seed
    generates (checked by regenerating it on first use in this process), else generated (and
    cached). Any other cached file is named in a warning and set aside."""
    digest = eval_set_hash(task_name, params, length, seed, n, generator_digest(type(task).name))
    path = Path(cache_dir) / f"{task_name}-{length}-{digest}.json" if cache_dir else None
    fresh = None
    if path is not None and os.path.lexists(path):
        try:
            cached, content = _read(path, digest, n)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as err:
            problem = f"is damaged ({type(err).__name__}: {err})"
        else:
            if digest not in _HONEST:
                fresh = _generated(task, length, seed, n, digest)
            if content == _HONEST[digest]:
                return (fresh[0] if fresh else cached), digest
            problem = (f"does not hold the examples its seed generates (content {content}, regenerated "
                       f"{_HONEST[digest]})")
        try:
            moved = f"set aside as {set_aside(path)}"
        except OSError as err:
            moved = f"could not be set aside ({err.strerror or err})"
        warnings.warn(f"eval-set cache file {path} {problem}: {moved}; regenerating it", stacklevel=2)
    examples, stored = fresh or _generated(task, length, seed, n, digest)
    if path is not None:
        try:
            write_json_atomic(path, {"hash": digest, "task": task_name, "length": length,
                                     "content": content_hash(stored), "examples": stored})
        except OSError as err:  # the cache only saves time: a run goes on without it
            warnings.warn(f"eval-set cache {path.parent} is not writable ({type(err).__name__}: {err.strerror or err}); "
                          "using the generated set without caching it", stacklevel=2)
    return examples, digest
