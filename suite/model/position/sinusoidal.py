"""Fixed sinusoidal absolute positions, added once to the token embeddings.

Vaswani et al. 2017, "Attention Is All You Need", section 3.5:
PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
The table (RMS 1/sqrt(2)) is scaled to RMS ``rms``, by default the token embeddings' initial
standard deviation (``suite.model.init.INIT_STD``), so that after normalization neither swamps the other; the paper
balanced the two by multiplying the embeddings by sqrt(d) instead.

The table is computed, not learned, so no position-indexed entry to train (``position_entries``:
None, the base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from suite.model.init import INIT_STD
from suite.model.position.base import PositionConfig, PositionScheme


def sinusoidal_frequencies(d_model: int) -> torch.Tensor:
    """1 / 10000^(2i/d) for i < d/2, shape (ceil(d/2),)."""
    return torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))


def sinusoidal_encoding(pos: torch.Tensor, d_model: int) -> torch.Tensor:
    """(T, d_model) encodings of positions ``pos`` (T,): sin on even dimensions, cos on odd ones.
    Computed from the positions themselves: no table to size, so no read of ``pos.max()``."""
    angles = pos.to(torch.float32).unsqueeze(1) * sinusoidal_frequencies(d_model).to(pos.device)  # (T, ceil(d/2))
    out = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # sin, cos interleaved
    return out[:, :d_model]


def sinusoidal_table(n_positions: int, d_model: int) -> torch.Tensor:
    """(n_positions, d_model) table of positions 0 .. n_positions - 1."""
    return sinusoidal_encoding(torch.arange(n_positions), d_model)


@dataclass(frozen=True)
class SinusoidalConfig(PositionConfig):
    rms: float = INIT_STD

    def __post_init__(self):
        super().__post_init__()
        if self.rms <= 0:
            raise ValueError(f"sinusoidal.rms={self.rms}: must be > 0")


class Sinusoidal(PositionScheme):
    name = "sinusoidal"
    Config = SinusoidalConfig

    def embed(self, x, pos):  # x: (B, T, C), pos: (T,)
        return x + sinusoidal_encoding(pos, x.shape[-1]).to(x.dtype) * (self.cfg.rms * math.sqrt(2.0))
