"""The on-disk cache of evaluation sets (``results/_evalsets/``): a set generated once per hash
(``suite.evalsets``) is written atomically and read back by every run that needs it. Storage
only: a cached set holds exactly the examples ``suite.evalsets.generate`` makes, so this module is
not part of the code digest that stamps results."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from suite.evalsets import eval_set_hash, generate, generator_digest
from suite.store import write_json_atomic
from tasks.base import Example


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
