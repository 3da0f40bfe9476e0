"""Report sections. Each module here holds one section; ``SECTIONS`` maps names to classes."""
from __future__ import annotations

import suite.report.sections as _pkg
from suite.registry import discover, subclasses_of
from suite.report.sections.base import SECTIONS, Section, ordered

SECTIONS.update(discover(_pkg, subclasses_of(Section)))

__all__ = ["SECTIONS", "Section", "ordered"]
