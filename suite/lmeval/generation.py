"""Greedy generation for the ``posbench`` lm-eval model: batches of equal-length contexts decoded
with a key/value cache (``suite.lmeval.kv_cache``: the model's own forward with a ``KVCache``).

Contexts of the same length are decoded together, so every row of a batch sits at the same
positions and the position hooks see one position tensor. A row leaves the batch (and the
cache) when it is finished: ``</s>``, its ``limit`` of new tokens, or one of its ``until``
strings in the decoded text.

Two cases recompute the whole forward instead of extending the cache, each exactly what greedy
decoding with the model's own forward would compute: a sequence that outgrows the model's
``max_length`` (learned positions) is cut to its last ``max_length`` tokens at each step, so its
positions move; and a model whose position hooks change with the sequence length
(``suite.model.cache.length_invariant``: RoPE with dynamic eval-time scaling past its training length)
changes the hidden states of every earlier token as the sequence grows.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import torch

from suite.lmeval.kv_cache import extend, prefill
from suite.model.cache import length_invariant
from suite.model.lm import PosBenchLM
from tasks.base import EOS_ID, decode


@dataclass
class Generation:
    """One greedy generation: its input ``tokens`` (extended as it goes), at most ``limit`` new
    tokens, the ``until`` strings that end it, and the ``generated`` tokens."""

    tokens: list[int]
    limit: int
    until: list[str]
    generated: list[int] = field(default_factory=list)

    def finished(self) -> bool:
        if not self.generated:
            return self.limit <= 0
        if self.generated[-1] == EOS_ID or len(self.generated) >= self.limit:
            return True
        text = decode(self.generated)
        return any(stop and stop in text for stop in self.until)


def decode_greedy(model: PosBenchLM, jobs: list[Generation], batch_size: int, max_length: int | None = None,
                  done: Callable[[int], object] | None = None) -> None:
    """Run every job to its end; the model reads the last ``max_length`` tokens of a sequence
    (all of them when None). ``done(n)`` is called as ``n`` more jobs finish (a progress bar's
    ``update``)."""
    done = done or (lambda n: None)

    def window(ids: list[int]) -> list[int]:
        return ids[-max_length:] if max_length is not None and len(ids) > max_length else ids

    by_length: dict[int, list[Generation]] = defaultdict(list)
    for job in jobs:
        if not job.finished():
            by_length[len(job.tokens)].append(job)
    if (finished := len(jobs) - sum(map(len, by_length.values()))):
        done(finished)
    if not by_length:
        return
    longest = max(len(j.tokens) + j.limit for group in by_length.values() for j in group)
    cached = length_invariant(model, min(longest, max_length or longest))
    for length in sorted(by_length):
        group = by_length[length]
        for start in range(0, len(group), batch_size):
            _decode_batch(model, group[start : start + batch_size], window, cached, done)


@torch.no_grad()
def _decode_batch(model: PosBenchLM, active: list[Generation], window, cached: bool, done) -> None:
    """Greedy decoding of jobs whose token lists have one length."""
    device = next(model.parameters()).device

    def restart(rows: list[Generation]):
        batch = torch.tensor([window(job.tokens) for job in rows], device=device)
        return prefill(model, batch) if cached else (model(batch)[:, -1], None)

    logits, cache = restart(active)
    while True:
        for job, token in zip(active, logits.float().argmax(-1).tolist()):
            job.tokens.append(token)
            job.generated.append(token)
        keep = [r for r, job in enumerate(active) if not job.finished()]
        if len(keep) < len(active):
            done(len(active) - len(keep))
        if not keep:
            return
        active = [active[r] for r in keep]
        if cache is None or len(window(active[0].tokens)) < len(active[0].tokens):
            logits, cache = restart(active)
            continue
        cache.keep(torch.tensor(keep, device=device))
        last = torch.tensor([[job.tokens[-1]] for job in active], device=device)
        logits = extend(model, last, cache)[:, -1]
