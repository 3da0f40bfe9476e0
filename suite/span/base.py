"""The attention-span interface: which keys a query may see. A span is a mask, never a copy.

``allowed(pos_q, pos_k)`` is the reference (Tq, Tk) boolean mask; ``mask_mod`` is the same rule
as a FlexAttention mask function; ``reach`` bounds how far back any query looks (None: no bound),
which the blockwise paths use to skip key blocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch


@dataclass(frozen=True)
class SpanConfig:
    pass


class Span:
    name: ClassVar[str]
    Config: ClassVar[type] = SpanConfig
    is_full: ClassVar[bool] = False

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
        """The window or chunk size, for tables and results (None for full attention)."""
        return None

    def __repr__(self) -> str:
        return f"{self.name}({self.cfg})"
