"""T5 relative position bias: a learned scalar per head and relative-position bucket.

Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", section 2.1. Causal bucketing of n = query - key >= 0: the first
``num_buckets // 2`` buckets hold exact offsets; the rest are logarithmically spaced up to
``max_distance``, beyond which all offsets share the last bucket. One table is shared by every
layer that uses the same configuration, as in T5.

``max_distance`` follows the training length by default (null: the training length L, resolved by
``check`` and, for a base built without it, from ``Dims.train_len``). T5 clamps far offsets into
its last bucket so that they read a bias training reached; with ``max_distance`` = L every offset
from L on shares the last bucket, which offset L - 1 already reaches (with 32 buckets, for every L
from 29 up: 32, 64, 128, 512 and 1024 included), so evaluation beyond L reads only buckets a
training length reached. The fixed 128 of T5's code (and this suite's earlier default) leaves at
L = 32 or 64 the buckets 22-31 or 27-31 untrained: every cell beyond L reads biases that never
received a gradient (they stay at the table's zero start). ``max_distance: 128`` keeps that
setting as an arm (``conf/arch/t5_md128.yaml``). At a shorter L the last bucket is not reached,
and at L no more than ``num_buckets // 2`` every offset training sees has an exact bucket, so no
``max_distance`` keeps a longer offset in a trained bucket (the default then resolves to
``num_buckets // 2 + 1``, the smallest the bucketing allows). ``position_entries`` declares the
buckets attention reads, so the untrained share of every evaluation length is measured and
reported (``untrained_positions``), whatever the setting.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from suite.model.position.base import LearnedBias, PositionConfig
from suite.options import LENGTH_MAX, option


def t5_bucket(relative_position: torch.Tensor, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """Causal T5 bucket of ``relative_position = key - query`` (future keys fall in bucket 0)."""
    n = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    scaled = torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (scaled * (num_buckets - max_exact)).to(torch.long)).clamp(max=num_buckets - 1)
    return torch.where(is_small, n, large).to(torch.long)


def default_max_distance(num_buckets: int, train_len: int) -> int:
    """``max_distance`` for a null setting: the training length, at least ``num_buckets // 2 + 1``
    (the log buckets need a range above the exact ones)."""
    return max(train_len, num_buckets // 2 + 1)


@dataclass(frozen=True)
class T5Config(PositionConfig):
    """``num_buckets``: buckets of the causal offset (half exact, half log-spaced); ``max_distance``:
    the offset from which every offset shares the last bucket (null: the training length)."""

    num_buckets: int = 32
    max_distance: Optional[int] = option(None, le=LENGTH_MAX)  # None: the training length (``default_max_distance``)

    def __post_init__(self):
        super().__post_init__()
        if self.num_buckets < 2:
            raise ValueError(f"t5.num_buckets={self.num_buckets}: must be >= 2")
        if self.max_distance is not None and self.max_distance <= self.num_buckets // 2:
            raise ValueError(f"t5.max_distance={self.max_distance}: must exceed num_buckets // 2 = {self.num_buckets // 2} "
                             "(or null for the training length)")


class T5Bias(LearnedBias):
    name = "t5"
    Config = T5Config

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.max_distance = cfg.max_distance or default_max_distance(cfg.num_buckets, dims.train_len)
        self.table = nn.Embedding(cfg.num_buckets, dims.n_heads)
        nn.init.zeros_(self.table.weight)

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """``max_distance: null`` resolved to the training length (``default_max_distance``), so
        the run's spec names the distance its buckets use."""
        if cfg.max_distance is None:
            cfg = dataclasses.replace(cfg, max_distance=default_max_distance(cfg.num_buckets, train_len))
        return cfg

    def position_entries(self, length, training=False):
        """The buckets of the causal offsets 0 .. length - 1 (a future key reads bucket 0, as offset
        0 does): the rows of the table attention over ``length`` tokens reads."""
        offsets = torch.arange(max(length, 1))
        return frozenset(t5_bucket(-offsets, self.cfg.num_buckets, self.max_distance).tolist())

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk)
        buckets = t5_bucket(pos_k[None, :] - pos_q[:, None], self.cfg.num_buckets, self.max_distance)
        return self.table(buckets).permute(2, 0, 1)

    def kernel_score_mod(self, pos):
        """T5's bias depends only on the distance q - k: the kernel reads an (H, T) vector by
        distance. Masked (future) pairs read distance 0."""
        T = pos.shape[0]
        distance = torch.arange(T, device=pos.device)
        by_distance = self.table(t5_bucket(-distance, self.cfg.num_buckets, self.max_distance)).t()  # (H, T)

        def t5(score, b, h, q_idx, kv_idx):
            return score + by_distance[h, (q_idx - kv_idx).clamp(min=0)]

        return t5
