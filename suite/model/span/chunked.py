"""Chunked attention: queries see only the earlier keys of their own fixed-size chunk.

Llama 4's local layers ("iRoPE", Meta 2025): the sequence is cut into chunks of ``chunk``
tokens; key j is visible from query i iff j <= i and j // chunk == i // chunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from suite.model.span.base import Span, SpanConfig


@dataclass(frozen=True)
class ChunkConfig(SpanConfig):
    chunk: Optional[int] = None

    def __post_init__(self):
        if self.chunk is None or self.chunk <= 0:
            raise ValueError(f"chunked chunk={self.chunk}: must be a positive number of tokens (for example 32)")


class Chunked(Span):
    name = "chunked"
    Config = ChunkConfig
    kind = "chunk"

    def allowed(self, pos_q, pos_k):
        c = self.cfg.chunk
        return (pos_k[None, :] <= pos_q[:, None]) & (pos_k[None, :] // c == pos_q[:, None] // c)

    def mask_mod(self):
        c = self.cfg.chunk
        return lambda b, h, q_idx, kv_idx: (kv_idx <= q_idx) & (kv_idx // c == q_idx // c)

    @property
    def reach(self):
        return self.cfg.chunk

    @property
    def size(self):
        return self.cfg.chunk
