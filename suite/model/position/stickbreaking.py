"""Stick-breaking attention: each key in turn, nearest first, takes a share of what is left.

Tan, Shen, Peng, Courville & Panda 2025, "Scaling Stick-Breaking Attention: An Efficient
Implementation and In-depth Study" (ICLR 2025). With z_ij = q_i · k_j / sqrt(d) and
beta_ij = sigmoid(z_ij), key j < i receives A_ij = beta_ij * prod_{j<k<i} (1 - beta_ik): the
nearest key breaks the stick first, so recency comes from the weights themselves and there is no
softmax and no position encoding. The part of the stick no earlier key took,
prod_{k<i} (1 - beta_ik), goes to the current token's value.

Details follow the authors' reference (shawntan/stickbreaking-attention, ``sb_ref.stickbreaking``
with its tests' ``o + rem * v``; ``attend_current=False``): computed in log space, log A_ij =
logsigmoid(z_ij) + sum_{j<k<i} logsigmoid(-z_ik), the sum a reverse cumulative sum over keys, in
float32. A key outside the layer's span takes nothing and breaks nothing (beta = 0), so sliding
windows and chunks are defined: the stick is shared among the keys the span shows.

The weights are no softmax, so this scheme computes its own attention (``own_attention``) on
every path, an O(T^2) reference: the suite's lengths need no fused kernel. Its logits for
diagnostics are log A_ij and, at the query's own position, the log of the remainder: their
softmax is the weights exactly, which sum to 1.

No learned parameter of its own (the stick breaks are the logits), so no position-indexed entry
(``position_entries``: None, the base class's default).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from suite.model.position.base import PositionScheme, at_least_float32


def stick_breaking_weights(z: torch.Tensor, earlier: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log A (B, H, Tq, Tk), log remainder (B, H, Tq)) from logits ``z`` (float32 or wider) and the
    (Tq, Tk) mask of the keys that may take a share (inside the span, before the query)."""
    log_beta = F.logsigmoid(z).masked_fill(~earlier, float("-inf"))
    log_keep = F.logsigmoid(-z).masked_fill(~earlier, 0.0)  # log(1 - beta); 0 breaks nothing
    later = log_keep.flip(-1).cumsum(-1).flip(-1) - log_keep  # sum over keys k > j (up to the query)
    return log_beta + later, log_keep.sum(-1)


class StickBreaking(PositionScheme):
    name = "stickbreaking"
    data_dependent = True
    own_attention = True

    def attend(self, q, k, v, signal, allowed):  # q (B, H, Tq, D): the last Tq of the Tk keys
        Tq, Tk = q.shape[-2], k.shape[-2]
        z = at_least_float32(q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
        own = torch.arange(Tq, device=q.device) + (Tk - Tq)  # each query's own key index
        keys = torch.arange(Tk, device=q.device)
        earlier = allowed & (keys[None, :] < own[:, None])  # (Tq, Tk)
        log_weights, log_rest = stick_breaking_weights(z, earlier)
        out = log_weights.exp().to(v.dtype) @ v + log_rest.exp().to(v.dtype)[..., None] * v[..., Tk - Tq:, :]
        is_own = keys[None, :] == own[:, None]  # (Tq, Tk)
        logits = torch.where(is_own, log_rest[..., None], log_weights)  # softmax(logits) = the weights
        return out, logits

    @classmethod
    def pair_floats(cls, head_dim: int, training: bool) -> int:
        # z, log beta, log(1 - beta), the reverse cumulative sum, log A and A
        return 6
