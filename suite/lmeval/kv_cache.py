"""Incremental decoding of a ``PosBenchLM`` with a key/value cache, for lm-eval generation.

A prompt is fed into a ``suite.model.cache.KVCache`` a block of positions at a time, then each new
token alone; every step is the model's own forward with the cache (``PosBenchLM.forward(tokens,
cache=...)``), so decoding holds no model code of its own and a new position scheme or span
decodes as its full forward computes. ``tests/test_lmeval_kv_cache.py`` holds the steps to the
full forward for every scheme and span.
"""
from __future__ import annotations

import torch

from suite.model.attention import BLOCK
from suite.model.cache import KVCache
from suite.model.lm import PosBenchLM

__all__ = ["extend", "prefill"]


@torch.no_grad()
def extend(model: PosBenchLM, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Run ``tokens`` (B, Tn), the positions after the cached ones, through ``model``; adds them
    to ``cache`` and returns their logits (B, Tn, vocab), equal to the model's forward over the
    cached tokens followed by ``tokens``."""
    return model(tokens, cache=cache)


@torch.no_grad()
def prefill(model: PosBenchLM, tokens: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, KVCache]:
    """(logits of the last position (B, vocab), a cache holding ``tokens`` (B, T)), fed ``block``
    positions at a time so no step holds more than block x T scores per head."""
    cache = KVCache(model.spec.n_layers)
    for s in range(0, tokens.shape[1], block):
        logits = extend(model, tokens[:, s : s + block], cache)
    return logits[:, -1], cache
