"""Fixed sinusoidal absolute positions, added once to the token embeddings.

Vaswani et al. 2017, "Attention Is All You Need", section 3.5:
PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
"""
from __future__ import annotations

import math

import torch

from suite.position.base import PositionScheme


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """(n_positions, d_model) table: sin on even dimensions, cos on odd ones."""
    pos = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div[: d_model // 2])
    return table


class Sinusoidal(PositionScheme):
    name = "sinusoidal"

    def embed(self, x, pos):  # x: (B, T, C), pos: (T,)
        table = sinusoidal_table(int(pos.max()) + 1, x.shape[-1]).to(x.device, x.dtype)
        return x + table[pos]
