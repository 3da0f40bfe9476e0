"""Token mixers. Each module here holds one mixer; ``MIXERS`` maps names to classes."""
from __future__ import annotations

import suite.model.mixer as _pkg
from suite.model.mixer.base import Mixer, MixerConfig
from suite.registry import discover, subclasses_of

MIXERS: dict[str, type[Mixer]] = discover(_pkg, subclasses_of(Mixer))

__all__ = ["MIXERS", "Mixer", "MixerConfig"]
