"""T5 relative position bias: a learned scalar per head and relative-position bucket.

Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", section 2.1. Causal bucketing of n = query - key >= 0: the first
``num_buckets // 2`` buckets hold exact offsets; the rest are logarithmically spaced up to
``max_distance``, beyond which all offsets share the last bucket. One table is shared by every
layer that uses the same configuration, as in T5.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class T5Config(PositionConfig):
    num_buckets: int = 32
    max_distance: int = option(128, le=LENGTH_MAX)

    def __post_init__(self):
        super().__post_init__()
        if self.num_buckets < 2:
            raise ValueError(f"t5.num_buckets={self.num_buckets}: must be >= 2")
        if self.max_distance <= self.num_buckets // 2:
            raise ValueError(f"t5.max_distance={self.max_distance}: must exceed num_buckets // 2 = {self.num_buckets // 2}")


class T5Bias(LearnedBias):
    name = "t5"
    Config = T5Config

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.table = nn.Embedding(cfg.num_buckets, dims.n_heads)
        nn.init.zeros_(self.table.weight)

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk)
        buckets = t5_bucket(pos_k[None, :] - pos_q[:, None], self.cfg.num_buckets, self.cfg.max_distance)
        return self.table(buckets).permute(2, 0, 1)

    def kernel_score_mod(self, pos):
        """T5's bias depends only on the distance q - k: the kernel reads an (H, T) vector by
        distance. Masked (future) pairs read distance 0."""
        T = pos.shape[0]
        distance = torch.arange(T, device=pos.device)
        by_distance = self.table(t5_bucket(-distance, self.cfg.num_buckets, self.cfg.max_distance)).t()  # (H, T)

        def t5(score, b, h, q_idx, kv_idx):
            return score + by_distance[h, (q_idx - kv_idx).clamp(min=0)]

        return t5
