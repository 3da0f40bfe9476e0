"""FoX, Forgetting Attention: softmax attention with a data-dependent forget gate.

Lin, Nikishin, He & Courville 2025, "Forgetting Transformer: Softmax Attention with a Forget
Gate" (ICLR 2025). Each layer has a scalar forget gate per head, f_t = sigmoid(w · x_t + b),
read from the layer's input x_t; logit (i, j) gains sum_{l=j+1..i} log f_l = c_i - c_j, with c
the cumulative sum of log f over the sequence: an ALiBi whose slope each token sets. There is
no other position encoding (the paper's FoX is NoPE plus the gate).

Details follow the authors' code (zhixuan-lin/forgetting-transformer,
``ForgettingAttentionLayer`` with ``fgate_type="full"``): the gate is a ``Linear(d_model,
n_heads)`` with a bias that reads the normed layer input, as the layer's other projections do,
drawn like every projection (``init_normal_``, bias 0, so f starts near 1/2); log f is
``logsigmoid`` of the gate's output in float32, and its cumulative sum gives the bias. The
paper's "Pro" block (output gate, QK-norm, key/value shift, output norm) is not built here: it
changes the layer around attention, not the position signal this suite compares.

``decay_time_min`` / ``decay_time_max`` start the gate's bias with the authors' decay-time
initialization instead (their ``fgate_bias_init``, written for their data-independent gates):
head h's bias is b_h = -log(expm1(1 / tau_h)), so a key's weight falls by 1/e over tau_h tokens,
with tau log-spaced from the minimum to the maximum over the heads. A gate that starts near 1/2
halves a key's weight with every token, and a short run (the CPU recipe's 1750 steps at a
learning rate of 1e-3) moves the bias too little for a task that reads 20 tokens back; the
decay-time start gives the heads that reach from the first step.

As a bias c_i - c_j is separable (``signal_bias``), so every attention path carries it: the
reference and a KV cache add it, SDPA takes -c_j as one more key dimension and FlexAttention
reads it in its score_mod; neither builds a T x T bias.

Its forget-gate projection reads a layer's input, not a position, and is read alike at every
length: no position-indexed entry (``position_entries``: None, the base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from suite.model.init import init_normal_
from suite.model.position.base import PositionConfig, PositionScheme, at_least_float32


@dataclass(frozen=True)
class FoXConfig(PositionConfig):
    """``decay_time_min`` / ``decay_time_max``: null (both), the gate's bias starts at 0 as in the
    authors' code; set (both), it starts at the decay-time initialization, tau log-spaced over the
    heads from the minimum to the maximum, in tokens."""

    decay_time_min: Optional[float] = None
    decay_time_max: Optional[float] = None

    def __post_init__(self):
        super().__post_init__()
        lo, hi = self.decay_time_min, self.decay_time_max
        if (lo is None) != (hi is None):
            raise ValueError(f"fox.decay_time_min={lo}, fox.decay_time_max={hi}: set both (tokens) or neither")
        if lo is not None and not 0 < lo <= hi:
            raise ValueError(f"fox.decay_time_min={lo}, fox.decay_time_max={hi}: need 0 < min <= max")


def decay_time_bias(lo: float, hi: float, n_heads: int) -> torch.Tensor:
    """Per-head gate biases b = -log(expm1(1 / tau)), tau log-spaced from ``lo`` to ``hi``: then
    -1 / log sigmoid(b) = tau, the tokens over which a key's weight falls by 1/e."""
    tau = torch.exp(torch.linspace(math.log(lo), math.log(hi), n_heads, dtype=torch.float64, device="cpu"))
    return (-torch.log(torch.expm1(1 / tau))).float()


class ForgetGate(nn.Module):
    """One layer's forget gates: (B, T, C) -> log f (B, H, T, 1), in float32 at least."""

    def __init__(self, cfg: FoXConfig, d_model: int, n_heads: int):
        super().__init__()
        self.proj = nn.Linear(d_model, n_heads, bias=True)
        init_normal_(self.proj.weight)
        if cfg.decay_time_min is None:
            nn.init.zeros_(self.proj.bias)
        else:
            with torch.no_grad():
                self.proj.bias.copy_(decay_time_bias(cfg.decay_time_min, cfg.decay_time_max, n_heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.logsigmoid(at_least_float32(self.proj(x))).transpose(1, 2).unsqueeze(-1)  # (B, H, T, 1)


class FoX(PositionScheme):
    name = "fox"
    Config = FoXConfig
    data_dependent = True

    def signal(self) -> nn.Module:
        return ForgetGate(self.cfg, self.dims.d_model, self.dims.n_heads)

    def signal_bias(self, signal):  # signal (B, H, T, 1): log f -> (c, -c), each (B, H, T)
        c = signal[..., 0].cumsum(-1)  # c_t = sum_{l <= t} log f_l
        return c, -c
