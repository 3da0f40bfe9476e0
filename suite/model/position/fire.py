"""FIRE: score(i, j) += f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1).

Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
Transformers" (arXiv:2310.04418, ICLR 2024). f is a two-layer MLP (``mlp_width`` hidden units,
ReLU) from that scalar to one bias per head; c and the threshold L are learned. Dividing by psi
of the query position maps every causal distance into [0, 1] (progressive interpolation); the
threshold keeps the queries of a short prefix from spreading their few distances over the whole
range. Positions count from 0.

Initial values and parametrization follow the public re-implementation of the paper's module
(github.com/mcleish7/arithmetic, ``cramming/architectures/embeddings.py``, class ``FIRE``): c
starts at 0.1 and is read as |c|; L = |s * init_threshold| with init_threshold 512 and a learned
multiplier s that starts at 1; 1e-6 is added to the normalizer; the MLP keeps PyTorch's default
initialization. (That file also samples random position subsets in training; that is a separate
technique and is left out.) One module serves every layer that uses the same configuration.

The MLP, c and L are read at a normalized distance, alike at every length: no position-indexed
entry (``position_entries``: None, the base class's default). Past the training length its input
may leave the range training saw (while a query lies below the learned threshold its normalizer
is fixed, so a longer distance is a larger input): an extrapolation of a continuous function, not
an entry that never received a gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import LearnedBias, PositionConfig

EPS = 1e-6  # added to psi(max(L, i)), as in the re-implementation


@dataclass(frozen=True)
class FireConfig(PositionConfig):
    """``mlp_width``: hidden units of f (the paper's 32); ``init_c``: c's initial value (0.1);
    ``init_threshold``: L's initial value (512), scaled by a learned multiplier that starts at 1."""

    mlp_width: int = 32
    init_c: float = 0.1
    init_threshold: float = 512.0

    def __post_init__(self):
        super().__post_init__()
        if self.mlp_width < 1:
            raise ValueError(f"fire.mlp_width={self.mlp_width}: must be >= 1")
        for key in ("init_c", "init_threshold"):
            if not getattr(self, key) > 0:
                raise ValueError(f"fire.{key}={getattr(self, key)}: must be > 0")


def fire_input(i: torch.Tensor, j: torch.Tensor, c: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """psi(i - j) / (psi(max(L, i)) + EPS) for query positions ``i`` and key positions ``j``
    (float tensors that broadcast); future keys (masked) read distance 0."""
    return torch.log1p(c * (i - j).clamp(min=0)) / (torch.log1p(c * torch.maximum(i, threshold)) + EPS)


class Fire(LearnedBias):
    name = "fire"
    Config = FireConfig

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.mlp = nn.Sequential(nn.Linear(1, cfg.mlp_width), nn.ReLU(), nn.Linear(cfg.mlp_width, dims.n_heads))
        self.c = nn.Parameter(torch.tensor(cfg.init_c))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))

    def constants(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(c, L) as the bias reads them: |c| and |s * init_threshold|, 0-dimensional."""
        return self.c.abs(), (self.threshold_scale * self.cfg.init_threshold).abs()

    def bias(self, pos_q, pos_k):  # -> (H, Tq, Tk), through a (Tq, Tk, mlp_width) hidden layer
        c, threshold = self.constants()
        i, j = pos_q.to(c.dtype)[:, None], pos_k.to(c.dtype)[None, :]
        return self.mlp(fire_input(i, j, c, threshold).unsqueeze(-1)).permute(2, 0, 1)

    def kernel_score_mod(self, pos):
        """The kernel evaluates f itself, one hidden unit at a time."""
        c, threshold = self.constants()
        posf = pos.to(c.dtype)
        w1, b1 = self.mlp[0].weight[:, 0], self.mlp[0].bias
        w2, b2 = self.mlp[2].weight, self.mlp[2].bias

        def fire(score, b, h, q_idx, kv_idx):
            u = fire_input(posf[q_idx], posf[kv_idx], c, threshold)
            for unit in range(w1.shape[0]):
                score = score + w2[h, unit] * torch.relu(w1[unit] * u + b1[unit])
            return score + b2[h]

        return fire
