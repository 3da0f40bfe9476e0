"""CoPE, contextual position encoding: positions count the keys a query's gates let through.

Golovneva et al. 2024, "Contextual Position Encoding: Learning to Count What's Important"
(arXiv:2405.18719). Per head, with a_ij the scaled and masked logit of query i and
key j: gate g_ij = sigmoid(a_ij) (0 outside the span, where a_ij = -inf); position
p_ij = sum_{t=j..i} g_it, capped at ``npos_max - 1``; the position's vector e[p_ij] is linearly
interpolated between the table columns e[floor p_ij] and e[ceil p_ij], and q_i . e[p_ij] joins
the logit before the softmax.

Details follow the authors' code (facebookresearch/RAM, projects/cope/src/cope/context_position.py,
``ContextPosSelfAttn`` with its defaults): the gates read q·k already divided by sqrt(head_dim);
q·e[p] is added to the undivided q·k and the sum is divided by sqrt(head_dim) (``--cope-nodiv``,
off by default, would add it after), so the term added to the scaled logits here is
q·e[p] / sqrt(head_dim); the table (head_dim x npos) starts at zeros, so an untrained model
attends as NoPE; positions are clamped to npos - 1; one table serves every head of a layer.
Two differences: the reference keeps one table per layer, here the layers that use the same
configuration share one (as every scheme in this suite is shared, and as T5 shares its bias);
as in the reference, the table has the training length + 1 columns by default (its ``npos``
defaults to the block size + 1), so a count past the training length takes the last column a
training-length sequence can reach and any length runs; ``npos_max`` sets the columns
explicitly. ``position_entries`` declares the columns a length can read (0 .. min(n, npos - 1):
n gates, each below 1, count less than n, and the interpolation reads the ceiling), so the share of
them a training length never reaches is measured (``untrained_positions``): 0 with the default,
above 0 past L with a larger ``npos_max``. With ``log_scale`` the tempered
queries make both the gates and the term. The term needs the materialized logits, so this
scheme runs on the reference attention path whatever the implementation asked for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import PositionConfig, PositionScheme
from suite.options import LENGTH_MAX, option


@dataclass(frozen=True)
class CoPEConfig(PositionConfig):
    """``npos_max``: columns of the position table; positions run 0 .. npos_max - 1, larger counts
    are capped there. None (the default): the training length + 1, as in the reference, so every
    column is one that counts at the training length (at most L) can read, and a longer
    sequence's larger counts read the last of them, never an untrained column."""

    npos_max: int | None = option(None, le=LENGTH_MAX)

    def __post_init__(self):
        super().__post_init__()
        if self.npos_max is not None and self.npos_max < 2:
            raise ValueError(f"cope.npos_max={self.npos_max}: must be >= 2 (positions 0 .. npos_max - 1)")


class CoPE(PositionScheme):
    name = "cope"
    Config = CoPEConfig
    needs_logits = True

    @classmethod
    def held_floats(cls, cfg, dims, batch, length, training):
        """q . e[n] for every query and table column, (B, H, T, npos), and in training the gradient
        the two gathers scatter into it: the table's cost, which grows with ``npos_max``."""
        npos = cfg.npos_max if cfg.npos_max is not None else dims.train_len + 1
        return (2.0 if training else 1.0) * batch * dims.n_heads * length * npos

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.npos = cfg.npos_max if cfg.npos_max is not None else dims.train_len + 1
        self.table = nn.Parameter(torch.zeros(dims.head_dim, self.npos))  # column n: position n's vector

    def position_entries(self, length, training=False):
        """Columns 0 .. min(length, npos - 1): a query of a ``length``-token sequence counts at most
        ``length`` gates, each below 1, so its counts stay below ``length``; the interpolation reads
        their floor and ceiling, and the cap keeps them at most ``npos - 1``."""
        return frozenset(range(min(length, self.npos - 1) + 1))

    def positions(self, logits: torch.Tensor) -> torch.Tensor:
        """p_ij = sum_{t=j..i} sigmoid(a_it), capped at npos - 1, (B, H, Tq, Tk). Keys outside
        the span have a = -inf, a gate of 0, and add nothing to the count."""
        gates = torch.sigmoid(logits.float())
        counts = gates.flip(-1).cumsum(-1).flip(-1)  # sum over keys t >= j; keys after i have gate 0
        return counts.clamp(max=self.npos - 1)

    def logit_term(self, q, logits, bias=None):  # q (B, H, Tq, D), logits (B, H, Tq, Tk) -> (B, H, Tq, Tk)
        p = self.positions(logits)
        at_columns = (q.float() @ self.table) / math.sqrt(q.shape[-1])  # (B, H, Tq, npos): q . e[n]
        floor = p.floor()
        low = at_columns.gather(-1, floor.long())
        high = at_columns.gather(-1, p.ceil().long())
        frac = p - floor  # the gradient reaches the gates through this weight
        return (high * frac + low * (1 - frac)).to(logits.dtype)
