"""PaTH: positions as accumulated, data-dependent Householder-like transforms.

Yang, Shen, Wen, Tan, Mishra, Ren, Panda & Kim 2025, "PaTH Attention: Position Encoding via
Accumulating Householder Transformations" (arXiv:2505.16381). Each token s of a layer gives a
transform H_s = I - beta_s w_s w_s^T with a unit vector w_s and beta_s in (0, 2) (negative
eigenvalues allowed), both read from the layer's input; query i sees key j through every
transform between them: logit(i, j) = k_j^T (H_{j+1} H_{j+2} ... H_i) q_i / sqrt(d), then a
softmax. Where RoPE turns every pair by a fixed angle per step, PaTH's turn depends on the
tokens passed.

Details follow the reference layer (fla-org/flash-linear-attention, ``fla/layers/path_attn.py``,
``PaTHAttention`` with its defaults): w = l2norm(silu(conv(W2 W1 x))) per head, W1 a rank-32
projection (``w_rank``), conv a causal depthwise convolution over 3 tokens without bias
(``conv_size``, FLA's ``ShortConvolution``), l2norm with eps 1e-6; beta = 2 sigmoid(W_b x + b)
per head; every projection and the convolution drawn as every weight here (``init_normal_``, the
normal FLA's ``_init_weights`` draws), biases 0; no forget gate (``use_forget_gate=False``) and
no QK-norm. There is no other position encoding.

The attention here is the O(T^2 d) reference the paper's equations give: the queries are
carried backward over the keys, q_i <- H_s q_i for s = i, i-1, ..., so the logit with key j reads
H_{j+1} ... H_i q_i (each H is symmetric). It runs on every path (``own_attention``); the
suite's lengths need no chunked kernel. A KV cache that keeps the layer's inputs recomputes w and
beta for every position and gives the same logits.

Its projections and convolution read a layer's input, not a position, and are read alike at
every length: no position-indexed entry (``position_entries``: None, the base class's default).
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

L2_EPS = 1e-6


@dataclass(frozen=True)
class PaTHConfig(PositionConfig):
    """``w_rank``: rank of the projection that gives w (FLA's low-rank ``w_proj``, 32; null: a
    full d_model x d_model projection); ``conv_size``: tokens the causal convolution over w spans
    (FLA's 3; 1 reads the token alone)."""

    w_rank: Optional[int] = 32
    conv_size: int = 3

    def __post_init__(self):
        super().__post_init__()
        if self.w_rank is not None and self.w_rank < 1:
            raise ValueError(f"path.w_rank={self.w_rank}: must be >= 1 (or null for a full-rank projection)")
        if self.conv_size < 1:
            raise ValueError(f"path.conv_size={self.conv_size}: must be >= 1 (1: no mixing across tokens)")


class Householder(nn.Module):
    """One layer's transforms: (B, T, C) -> (B, H, T, D + 1), w (unit per head) then beta."""

    def __init__(self, cfg: PaTHConfig, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        if cfg.w_rank is None:
            self.w_proj = nn.Linear(d_model, d_model, bias=False)
        else:
            self.w_proj = nn.Sequential(nn.Linear(d_model, cfg.w_rank, bias=False), nn.Linear(cfg.w_rank, d_model, bias=False))
        self.conv = nn.Conv1d(d_model, d_model, cfg.conv_size, groups=d_model, padding=cfg.conv_size - 1, bias=False)
        self.beta_proj = nn.Linear(d_model, n_heads, bias=True)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d)):
                init_normal_(module.weight)
        nn.init.zeros_(self.beta_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        w = self.conv(self.w_proj(x).transpose(1, 2))[..., :T]  # (B, C, T): causal, token t reads t-2 .. t
        w = at_least_float32(F.silu(w).view(B, self.n_heads, C // self.n_heads, T).transpose(-2, -1))  # (B, H, T, D)
        w = w * torch.rsqrt((w * w).sum(-1, keepdim=True) + L2_EPS)
        beta = 2 * torch.sigmoid(at_least_float32(self.beta_proj(x))).transpose(1, 2)  # (B, H, T)
        return torch.cat((w, beta.unsqueeze(-1)), dim=-1)


def path_logits(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """q_i . (H_i ... H_{j+1} k_j) for the Tq queries (the last Tq of the Tk positions) and every
    key, (B, H, Tq, Tk), unscaled and unmasked; w (B, H, Tk, D), beta (B, H, Tk). Keys after a
    query get a value that the mask drops."""
    Tq, Tk = q.shape[-2], k.shape[-2]
    at = torch.arange(Tq, device=q.device) + (Tk - Tq)  # each query's position
    carried = q  # row i: H_{j+1} ... H_i q_i for the key j the loop is at
    columns = []
    for j in range(Tk - 1, -1, -1):
        columns.append((carried * k[..., j, None, :]).sum(-1))  # (B, H, Tq)
        if j > 0:  # the next key, j - 1, is seen through H_j as well, by the queries at or after j
            wj = w[..., j, None, :]  # (B, H, 1, D)
            turned = carried - beta[..., j, None, None] * (carried * wj).sum(-1, keepdim=True) * wj
            carried = torch.where((at >= j)[:, None], turned, carried)
    return torch.stack(columns[::-1], dim=-1)


class PaTH(PositionScheme):
    name = "path"
    Config = PaTHConfig
    data_dependent = True
    own_attention = True

    def signal(self) -> nn.Module:
        return Householder(self.cfg, self.dims.d_model, self.dims.n_heads)

    def attend(self, q, k, v, signal, allowed):
        w, beta = signal[..., :-1], signal[..., -1]
        logits = path_logits(at_least_float32(q), at_least_float32(k), w, beta) / math.sqrt(q.shape[-1])
        logits = logits.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(logits, dim=-1).to(v.dtype)
        return probs @ v, logits

    @classmethod
    def pair_floats(cls, head_dim: int, training: bool) -> int:
        # training keeps the carried queries of every key step (head_dim each) for the backward
        # pass; both keep the logits and the probabilities
        return head_dim + 2 if training else 2
