"""Fixed sinusoidal absolute positions, added once to the token embeddings.

Vaswani et al. 2017, "Attention Is All You Need", section 3.5:
PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
The table (RMS 1/sqrt(2)) is scaled to RMS ``rms``, by default the token embeddings' initial
standard deviation (0.02), so that after normalization neither swamps the other; the paper
balanced the two by multiplying the embeddings by sqrt(d) instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from suite.position.base import PositionConfig, PositionScheme


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """(n_positions, d_model) table: sin on even dimensions, cos on odd ones."""
    pos = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(pos * div)
    table[:, 1::2] = torch.cos(pos * div[: d_model // 2])
    return table


@dataclass(frozen=True)
class SinusoidalConfig(PositionConfig):
    rms: float = 0.02

    def __post_init__(self):
        super().__post_init__()
        if self.rms <= 0:
            raise ValueError(f"sinusoidal.rms={self.rms}: must be > 0")


class Sinusoidal(PositionScheme):
    name = "sinusoidal"
    Config = SinusoidalConfig

    def embed(self, x, pos):  # x: (B, T, C), pos: (T,)
        table = sinusoidal_table(int(pos.max()) + 1, x.shape[-1]).to(x.device, x.dtype)
        return x + table[pos] * (self.cfg.rms * math.sqrt(2.0))
