"""KERPLE, logarithmic variant: score(i, j) += -r1 * log(1 + r2 * (i - j)), r1, r2 > 0 per head.

Chi, Fan, Ramadge & Rudnicky 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
Extrapolation" (NeurIPS 2022), the "log" kernel. As in the authors' code (github.com/chijames/KERPLE,
``megatron/mpu/layers.py``, ``ParallelKerpleLog``): r1 starts uniform in [0, 2) and r2 uniform in
[0, 1) per head, and positivity comes from clamping both at 0.01, not from a softplus or exp
parametrization. Their code clamps the stored parameters in place before each use (a projected
gradient step); here the forward reads the clamped value and the gradient, taken at that value,
passes to the stored parameter unchanged, so a head pushed below the floor is not frozen there.
Future keys read distance 0, as in the authors' lower-triangular distance matrix (they are masked).
One pair (r1, r2) per head serves every layer that uses the same configuration, as one module
serves every layer in the authors' model (``megatron/model/gpt2_model.py``).

r1 and r2 are per head, read alike at every distance and length: no position-indexed
entry (``position_entries``: None, the base class's default).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import LearnedBias, PositionConfig


@dataclass(frozen=True)
class KerpleConfig(PositionConfig):
    """``r1_init`` / ``r2_init``: r1 and r2 start uniform in [0, r1_init) and [0, r2_init) (the
    authors' 2 and 1); ``floor``: both are read as at least this value (the authors' 0.01)."""

    r1_init: float = 2.0
    r2_init: float = 1.0
    floor: float = 0.01

    def __post_init__(self):
        super().__post_init__()
        for key in ("r1_init", "r2_init", "floor"):
            if not getattr(self, key) > 0:
                raise ValueError(f"kerple.{key}={getattr(self, key)}: must be > 0")


def at_least(x: torch.Tensor, floor: float) -> torch.Tensor:
    """``x`` clamped below at ``floor``, with the gradient of ``x`` itself (straight through)."""
    return torch.where(x < floor, x - x.detach() + floor, x)


class Kerple(LearnedBias):
    name = "kerple"
    Config = KerpleConfig

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.r1 = nn.Parameter(torch.empty(dims.n_heads).uniform_(0, cfg.r1_init))
        self.r2 = nn.Parameter(torch.empty(dims.n_heads).uniform_(0, cfg.r2_init))

    def strengths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2), each (H,), as the bias reads them: at least ``floor``."""
        return at_least(self.r1, self.cfg.floor), at_least(self.r2, self.cfg.floor)

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk); future keys (masked) read distance 0
        r1, r2 = self.strengths()
        distance = (pos_q[:, None] - pos_k[None, :]).clamp(min=0).to(r1.dtype)
        return -r1[:, None, None] * torch.log1p(r2[:, None, None] * distance)

    def kernel_score_mod(self, pos):
        """The kernel computes the bias from r1[h] and r2[h]."""
        r1, r2 = self.strengths()
        posf = pos.to(r1.dtype)

        def kerple(score, b, h, q_idx, kv_idx):
            distance = (posf[q_idx] - posf[kv_idx]).clamp(min=0)
            return score - r1[h] * torch.log1p(r2[h] * distance)

        return kerple
