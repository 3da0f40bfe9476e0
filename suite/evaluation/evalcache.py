"""The on-disk cache of evaluation sets (``results/_evalsets/``): a set generated once per hash
(``suite.evaluation.evalsets``) is written atomically and read back by every run that needs it. Storage
only: a cached set holds exactly the examples ``suite.evaluation.evalsets.generate`` makes, so this module is
not part of the code digest that stamps results."""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Optional

from suite.config.codedigest import generator_digest
from suite.evaluation.evalsets import eval_set_hash, generate
from suite.files import write_json_atomic
from tasks.base import Example


def _to_json(ex: Example) -> dict:
    return {"tokens": [int(t) for t in ex.tokens], "answer_spans": [list(s) for s in ex.answer_spans], "meta": ex.meta}


def _from_json(d: dict) -> Example:
    return Example(tokens=d["tokens"], answer_spans=[tuple(s) for s in d["answer_spans"]], meta=d["meta"])


def content_hash(examples: list[dict]) -> str:
    """sha256 of the examples as stored (canonical JSON)."""
    return hashlib.sha256(json.dumps(examples, sort_keys=True).encode()).hexdigest()[:16]


def _read(path: Path, digest: str, n: int) -> list[Example]:
    """The cached set, or ValueError naming what is wrong with the file."""
    payload = json.loads(path.read_text())
    examples = payload["examples"]
    if payload.get("hash") != digest:
        raise ValueError(f"it names set {payload.get('hash')!r}, not {digest!r}")
    if len(examples) != n:
        raise ValueError(f"it holds {len(examples)} examples, not {n}")
    if payload.get("content") != content_hash(examples):
        raise ValueError("its examples do not match their content hash")
    return [_from_json(d) for d in examples]


def eval_set(task_name: str, params: dict, task, length: int, seed: int, n: int,
             cache_dir: Optional[Path] = None) -> tuple[list[Example], str]:
    """(examples, hash); read from ``cache_dir`` when cached there and intact, else generated
    (and cached). A cached file that is unreadable, names another set, holds a different number
    of examples or does not match its content hash is reported and regenerated."""
    digest = eval_set_hash(task_name, params, length, seed, n, generator_digest(type(task).name))
    path = Path(cache_dir) / f"{task_name}-{length}-{digest}.json" if cache_dir else None
    if path is not None and path.exists():
        try:
            return _read(path, digest, n), digest
        except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
            warnings.warn(f"eval-set cache file {path} is damaged ({type(err).__name__}: {err}); regenerating it",
                          stacklevel=2)
    examples = generate(task, length, seed, n)
    if path is not None:
        stored = [_to_json(ex) for ex in examples]
        try:
            write_json_atomic(path, {"hash": digest, "task": task_name, "length": length,
                                     "content": content_hash(stored), "examples": stored})
        except OSError as err:  # the cache only saves time: a run goes on without it
            warnings.warn(f"eval-set cache {path.parent} is not writable ({type(err).__name__}: {err.strerror or err}); "
                          "using the generated set without caching it", stacklevel=2)
    return examples, digest
