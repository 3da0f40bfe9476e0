"""Position schemes. Each module here holds one scheme; ``SCHEMES`` maps names to classes."""
from __future__ import annotations

import suite.position as _pkg
from suite.position.alibi import alibi_slopes
from suite.position.base import Dims, LengthUnsupported, PositionConfig, PositionScheme, log_length_scale
from suite.position.rope import apply_rope
from suite.position.sinusoidal import sinusoidal_table
from suite.position.t5 import t5_bucket
from suite.registry import discover

SCHEMES: dict[str, type[PositionScheme]] = discover(_pkg, PositionScheme)

__all__ = [
    "SCHEMES", "Dims", "LengthUnsupported", "PositionConfig", "PositionScheme",
    "alibi_slopes", "apply_rope", "log_length_scale", "sinusoidal_table", "t5_bucket",
]
