"""NoPE: no position encoding at all; causal masking alone carries order.

Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
Transformers" (NeurIPS): decoder-only models without position encoding learn position implicitly.

No learned parameter, so no position-indexed entry to train (``position_entries``: None, the
base class's default).
"""
from suite.model.position.base import PositionScheme


class NoPE(PositionScheme):
    name = "nope"
