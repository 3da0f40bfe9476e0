"""Attention spans. Each module here holds one span; ``SPANS`` maps names to classes."""
from __future__ import annotations

import suite.span as _pkg
from suite.registry import discover
from suite.span.base import KINDS, Span, SpanConfig

SPANS: dict[str, type[Span]] = discover(_pkg, Span)

__all__ = ["KINDS", "SPANS", "Span", "SpanConfig"]
