"""Attention spans. Each module here holds one span; ``SPANS`` maps names to classes."""
from __future__ import annotations

import suite.model.span as _pkg
from suite.registry import discover, subclasses_of
from suite.model.span.base import KINDS, Span, SpanConfig

SPANS: dict[str, type[Span]] = discover(_pkg, subclasses_of(Span))

__all__ = ["KINDS", "SPANS", "Span", "SpanConfig"]
