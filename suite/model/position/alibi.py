"""ALiBi: attention with linear biases, score(i, j) += -m_h * (i - j).

Press, Smith & Lewis 2022, "Train Short, Test Long: Attention with Linear Biases Enables Input
Length Extrapolation". Head slopes form the geometric sequence 2^(-8/n), 2^(-16/n), ... for n a
power of two; otherwise the slopes of the closest lower power of two 2^k, followed by every
other slope of 2^(k+1) heads until n are filled (for 12 heads: 2^-1 .. 2^-8, then 2^-0.5,
2^-1.5, 2^-2.5, 2^-3.5).

No learned parameter (the slopes are fixed), so no position-indexed entry to train
(``position_entries``: None, the base class's default).
"""
from __future__ import annotations

import math

import torch

from suite.model.position.base import PositionScheme


def _power_of_two_slopes(n: int) -> list[float]:
    start = 2.0 ** (-8.0 / n)
    return [start ** (i + 1) for i in range(n)]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The paper's per-head slopes, shape (n_heads,)."""
    if n_heads < 1:
        raise ValueError(f"n_heads={n_heads}: must be >= 1")
    if math.log2(n_heads).is_integer():
        return torch.tensor(_power_of_two_slopes(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = _power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(_power_of_two_slopes(closest) + extra)


class ALiBi(PositionScheme):
    name = "alibi"

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.register_buffer("slopes", alibi_slopes(dims.n_heads), persistent=False)

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk)
        distance = (pos_q[:, None] - pos_k[None, :]).to(self.slopes.dtype)
        return -self.slopes[:, None, None] * distance

    def score_mod(self, pos):
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)

        return alibi
