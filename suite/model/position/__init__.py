"""Position schemes. Each module here holds one scheme; ``SCHEMES`` maps names to classes.

Helpers of one scheme (``apply_rope``, ``alibi_slopes``, ...) are imported from its own module,
so a run's code digest (``suite.config.codedigest``) holds only the schemes it uses.
"""
from __future__ import annotations

import suite.model.position as _pkg
from suite.model.position.base import SCHEMES, Dims, LengthUnsupported, PositionConfig, PositionScheme, log_length_scale
from suite.registry import discover, subclasses_of

SCHEMES.update(discover(_pkg, subclasses_of(PositionScheme)))

__all__ = ["SCHEMES", "Dims", "LengthUnsupported", "PositionConfig", "PositionScheme", "log_length_scale"]
