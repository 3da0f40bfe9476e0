"""The attention-span interface: which keys a query may see. A span is a mask, never a copy.

``allowed(pos_q, pos_k)`` is the reference (Tq, Tk) boolean mask; ``mask_mod`` is the same rule
as a FlexAttention mask function; ``reach`` bounds how far back any query looks (None: no bound),
which the blockwise paths use to skip key blocks.

A span owns its facts. ``kind`` names what bounds it, one of ``KINDS`` ("window": a sliding
window of recent keys, "chunk": fixed chunks), or None for full attention; ``size`` is that bound
in tokens, read from the span's own config, and is None exactly when ``kind`` is. Each kind is a
per-run result column (``suite.results.identity.run_columns``: the smallest size of that kind over the
layers) and a short label (``w=16``, ``c=16``) in tables and reports, so a new span of an existing
kind needs no edit outside its file; a new kind needs its entry in ``suite.model.span_kinds``, which
gives it its results column.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch

from suite.model.span_kinds import KINDS  # span kind -> its short label in tables ("w=16"); each a results column


@dataclass(frozen=True)
class SpanConfig:
    pass


class Span:
    name: ClassVar[str]
    Config: ClassVar[type] = SpanConfig
    is_full: ClassVar[bool] = False
    kind: ClassVar[Optional[str]] = None  # a key of KINDS, or None when nothing bounds the span

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.kind is not None and cls.kind not in KINDS:
            raise TypeError(f"span {cls.__name__} kind={cls.kind!r}; valid: {', '.join(KINDS)} or None")

    def __init__(self, cfg: SpanConfig):
        self.cfg = cfg

    def allowed(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def mask_mod(self) -> Callable:
        raise NotImplementedError

    @property
    def reach(self) -> Optional[int]:
        return None

    @property
    def size(self) -> Optional[int]:
        """The bound ``kind`` names, in tokens, from this span's config (None when ``kind`` is None)."""
        return None

    @property
    def label(self) -> str:
        """'w=16' or 'c=16': the kind's short label and the size; '' for an unbounded span."""
        return f"{KINDS[self.kind]}={self.size}" if self.kind else ""

    def __repr__(self) -> str:
        return f"{self.name}({self.cfg})"
