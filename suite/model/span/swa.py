"""Sliding-window attention: each query sees the ``window`` most recent keys, itself included.

Beltagy et al. 2020 (Longformer), Child et al. 2019 (sparse transformers); used in local layers
of Mistral, Gemma and Command A. Key j is visible from query i iff 0 <= i - j < window.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from suite.model.span.base import Span, SpanConfig


@dataclass(frozen=True)
class WindowConfig(SpanConfig):
    window: Optional[int] = None

    def __post_init__(self):
        if self.window is None or self.window <= 0:
            raise ValueError(f"swa window={self.window}: must be a positive number of keys (for example 32)")


class SlidingWindow(Span):
    name = "swa"
    Config = WindowConfig
    kind = "window"

    def allowed(self, pos_q, pos_k):
        d = pos_q[:, None] - pos_k[None, :]
        return (d >= 0) & (d < self.cfg.window)

    def mask_mod(self):
        w = self.cfg.window
        return lambda b, h, q_idx, kv_idx: (kv_idx <= q_idx) & (q_idx - kv_idx < w)

    @property
    def reach(self):
        return self.cfg.window

    @property
    def size(self):
        return self.cfg.window
