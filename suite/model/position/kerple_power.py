"""KERPLE, power variant: score(i, j) += -r1 * (i - j) ** r2, r1 > 0 and 0 < r2 <= 2 per head.

Chi, Fan, Ramadge & Rudnicky 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
Extrapolation" (NeurIPS 2022), the "power" kernel (r2 = 1 with fixed r1 is ALiBi). As in the
authors' code (github.com/chijames/KERPLE, ``megatron/mpu/layers.py``, ``ParallelKerplePower``,
bias arguments ``ap``): r1 (their ``bias_a``) starts uniform in [0, 1) and r2 (``bias_p``) uniform
in [0, 2) per head; r1 is clamped at 0.01 from below and r2 to [0.01, 2]. As in the log variant
(``kerple.py``) the forward reads the clamped values and the gradient passes straight through to
the stored parameters. Distance 0 reads 0 (0 ** r2 = 0 for r2 > 0); future keys read distance 0,
as in the authors' lower-triangular distance matrix (they are masked).

r1 and r2 are per head, read alike at every distance and length: no position-indexed entry
(``position_entries``: None, the base class's default).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import LearnedBias, PositionConfig
from suite.model.position.kerple import at_least


@dataclass(frozen=True)
class KerplePowerConfig(PositionConfig):
    """``r1_init`` / ``r2_init``: r1 and r2 start uniform in [0, r1_init) and [0, r2_init) (the
    authors' 1 and 2); ``floor``: both are read as at least this value (the authors' 0.01); r2 is
    read as at most 2, the largest power for which -|i - j| ** r2 is a conditionally positive
    definite kernel (the paper's condition)."""

    r1_init: float = 1.0
    r2_init: float = 2.0
    floor: float = 0.01

    def __post_init__(self):
        super().__post_init__()
        for key in ("r1_init", "r2_init", "floor"):
            if not getattr(self, key) > 0:
                raise ValueError(f"kerple_power.{key}={getattr(self, key)}: must be > 0")
        if not self.r2_init <= 2:
            raise ValueError(f"kerple_power.r2_init={self.r2_init}: must be <= 2 (the power is read in (0, 2])")
        if not self.floor < 2:
            raise ValueError(f"kerple_power.floor={self.floor}: must be < 2 (the power is read in [floor, 2])")


def at_most(x: torch.Tensor, ceiling: float) -> torch.Tensor:
    """``x`` clamped above at ``ceiling``, with the gradient of ``x`` itself (straight through)."""
    return torch.where(x > ceiling, x - x.detach() + ceiling, x)


def power_bias(r1: torch.Tensor, r2: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
    """-r1 * distance ** r2 (torch's pow gives 0 ** r2 a zero gradient in r2, not 0 * log 0)."""
    return -r1 * distance ** r2


class KerplePower(LearnedBias):
    name = "kerple_power"
    Config = KerplePowerConfig

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.r1 = nn.Parameter(torch.empty(dims.n_heads).uniform_(0, cfg.r1_init))
        self.r2 = nn.Parameter(torch.empty(dims.n_heads).uniform_(0, cfg.r2_init))

    def strengths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2), each (H,), as the bias reads them: r1 >= floor, floor <= r2 <= 2."""
        return at_least(self.r1, self.cfg.floor), at_most(at_least(self.r2, self.cfg.floor), 2.0)

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk); future keys (masked) read distance 0
        r1, r2 = self.strengths()
        distance = (pos_q[:, None] - pos_k[None, :]).clamp(min=0).to(r1.dtype)
        return power_bias(r1[:, None, None], r2[:, None, None], distance)

    def kernel_score_mod(self, pos):
        """The kernel computes the bias from r1[h] and r2[h]."""
        r1, r2 = self.strengths()
        posf = pos.to(r1.dtype)

        def kerple_power(score, b, h, q_idx, kv_idx):
            distance = (posf[q_idx] - posf[kv_idx]).clamp(min=0)
            return score + power_bias(r1[h], r2[h], distance)

        return kerple_power
