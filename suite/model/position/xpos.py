"""xPos: RoPE whose rotated pairs also decay with distance.

Sun et al. 2022, "A Length-Extrapolatable Transformer": q at position n and k at position m are
rotated as in RoPE (the helpers of ``suite.model.position.rope``) and scaled, pair i by one factor on
both of its dimensions,

    q by zeta_i^(+(n - c) / scale_base),   k by zeta_i^(-(m - c) / scale_base),
    zeta_i = (2i/d + scale_constant) / (1 + scale_constant)  (the paper's constant 0.4),

as in the paper's code (torchscale) and x-transformers, which scale cos and sin alike. A scale
shared by a pair commutes with its rotation, so q_n . k_m is the sum over pairs i of
zeta_i^((n - m)/scale_base) times RoPE's term of pair i at offset n - m: a function of n - m
only, decaying for n > m.

The center c cancels in that product and only keeps each factor near 1. x-transformers takes
half the sequence length; here c = train_len // 2, the same value at the training length, fixed
so a position's q and k are the same in every sequence (a key/value cache stays exact). The
largest factor, zeta_0^(-(T - 1)/scale_base) for a query at 0 and a masked key at T - 1, is what
``max_length`` bounds (18,131 tokens at the defaults, zeta_0 = 2/7); longer evaluation lengths
are "unsupported", a longer training length is refused. Pairs are laid out as in Llama
(i, i + d/2); the paper's code pairs (2i, 2i + 1), the same up to a permutation of the
dimensions. The paper's blockwise causal attention at inference is a span, not part of this scheme.

No learned parameter, so no position-indexed entry to train (``position_entries``: None, the
base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from suite.model.position.base import PositionConfig, PositionScheme
from suite.model.position.rope import rope_cos_sin, rope_inv_freq, rotate

FACTOR_BITS = 64  # largest q.k factor allowed: 2^64, leaving 2^64 of float32's 2^128 to |q||k|


@dataclass(frozen=True)
class XposConfig(PositionConfig):
    theta: float = 10000.0
    scale_base: float = 512.0  # positions are divided by this in the decay exponent
    scale_constant: float = 0.4  # zeta_i = (2i/d + scale_constant) / (1 + scale_constant)

    def __post_init__(self):
        super().__post_init__()
        if self.theta <= 1:
            raise ValueError(f"xpos.theta={self.theta}: must be > 1")
        if self.scale_base <= 0:
            raise ValueError(f"xpos.scale_base={self.scale_base}: must be > 0")
        if self.scale_constant <= 0:
            raise ValueError(f"xpos.scale_constant={self.scale_constant}: must be > 0")


def xpos_zeta(head_dim: int, constant: float) -> torch.Tensor:
    """Per-pair decay bases (2i/d + constant) / (1 + constant) for i < d/2, shape (d/2,)."""
    return (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim + constant) / (1 + constant)


class XPos(PositionScheme):
    name = "xpos"
    Config = XposConfig

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """Refuses a head of one dimension: no pair to rotate or decay, NoPE under this name."""
        if dims is not None and dims.head_dim < 2:
            raise ValueError(f"xpos rotates no pair of dimensions: model.d_model={dims.d_model} / "
                             f"model.n_heads={dims.n_heads} is a head of {dims.head_dim}; valid: a head of at least "
                             "2 dimensions; for a model without positions use position=nope")
        return cfg

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.center = dims.train_len // 2
        if dims.train_len > self.max_length():
            raise ValueError(f"xpos.scale_base={cfg.scale_base}: q.k factors overflow float32 past "
                             f"{self.max_length()} tokens, shorter than the training length {dims.train_len}")

    def max_length(self) -> int:
        """Longest sequence whose every q.k factor zeta^((n - m)/scale_base), masked future pairs
        included (a float mask adds -inf to them), is at most 2^FACTOR_BITS."""
        zeta_0 = self.cfg.scale_constant / (1 + self.cfg.scale_constant)
        return 1 + int(FACTOR_BITS * math.log(2) * self.cfg.scale_base / -math.log(zeta_0))

    def qk(self, q, k, pos_q, pos_k):  # q, k: (B, H, T, D)
        inv = rope_inv_freq(self.dims.head_dim, self.cfg.theta).to(pos_q.device)
        log_zeta = torch.log(xpos_zeta(self.dims.head_dim, self.cfg.scale_constant)).to(pos_q.device)
        return self._transform(q, pos_q, inv, log_zeta), self._transform(k, pos_k, inv, -log_zeta)

    def _transform(self, x, pos, inv, log_zeta):
        """x rotated by ``pos`` and pair i scaled by exp(log_zeta_i * (pos - center) / scale_base)."""
        cos, sin = rope_cos_sin(pos, inv, torch.float32)  # (T, D/2), or (B, 1, T, D/2) for (B, T)
        exponent = (pos - self.center).to(torch.float32).unsqueeze(-1) * (log_zeta / self.cfg.scale_base)
        if exponent.dim() == 3:  # per-batch positions, as rope_cos_sin lays them out
            exponent = exponent.unsqueeze(1)
        scale = torch.exp(exponent)
        return rotate(x, (cos * scale).to(x.dtype), (sin * scale).to(x.dtype))
