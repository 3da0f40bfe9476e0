"""PoPE: polar coordinate position embeddings, RoPE with the content's phase taken out.

Gopalakrishnan, Csordás, Schmidhuber & Mozer 2025, "Decoupling the 'What' and 'Where' With Polar
Coordinate Positional Embeddings" (arXiv 2509.10534). Checked against the x-transformers code the
issue names (github.com/lucidrains/x-transformers, ``x_transformers/x_transformers.py``:
``PolarEmbedding`` and ``apply_polar_pos_emb``; ``Attention`` and ``x_transformers/attend.py``
for the softmax scale).

Each of a head's d dimensions is one complex component c with frequency
theta_c = theta^(-c/d), c = 0 .. d-1 (d frequencies, not RoPE's d/2; the reference's
``inv_freq``). The content sets only the magnitude, softplus(q_c) and softplus(k_c); the phase is
the position's alone: i * theta_c for the query at i, j * theta_c + delta_c for the key at j,
with delta a learned phase per head and frequency, read clamped to [-2 pi, 0]. q and k become
2d-dimensional, the cos parts then the sin parts, so

    q'_i . k'_j = sum_c softplus(q_c) softplus(k_c) cos((i - j) theta_c - delta_c),

a function of i - j for fixed content. The values keep their d dimensions (the fused SDPA
paths pad them to 2d for the kernel and cut the output back: ``suite.model.attention.sdpa``).

Softmax scale: the reference scales the logits by dim_head^-1/2 = d^-1/2 (``Attention.scale``,
passed to ``Attend``, which rescales q against SDPA's default 1/sqrt(q.shape[-1]) = (2d)^-1/2).
Every attention path here divides by sqrt(q.shape[-1]) = sqrt(2d), so ``qk`` multiplies q' by
sqrt(2): the logits are d^-1/2 sum_c ..., the reference's.

As in the reference:

* one module (and one phase table) serves every layer that uses the same configuration
  (``PosBenchLM`` shares a scheme between such layers; x-transformers builds one
  ``PolarEmbedding`` per layer stack);
* the phase starts at 0 (``phase_init: zero``, the reference default) or uniform in
  [-2 pi, 0] (``phase_init: uniform``, its ``polar_bias_uniform_init``);
* the clamp is ``torch.clamp``: a phase at -2 pi or 0 still gets its gradient (so the zero start
  trains), one past either end gets none (only the optimizer's momentum still moves it);
* q and k are transformed in float32 (the reference disables autocast; a float64 model stays in
  float64) and returned in the input's dtype.

Departures: the phase is stored flat, (H * d,), and read as (H, d): the suite's AdamW decays
every parameter of two or more dimensions (``suite/training/loop.py``), and decaying an angle
towards 0 is a pull the reference's training (plain Adam, ``train_length_extrapolate.py``) does
not have; a flat vector is not decayed, as KERPLE's per-head slopes are not. Positions are token
indices at every length (no eval-time scaling: the paper extrapolates zero-shot).

The learned phase delta is per head and frequency, read alike at every position: no
position-indexed entry (``position_entries``: None, the base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from suite.model.position.base import PositionConfig, PositionScheme, at_least_float32
from suite.options import option

PHASE_INITS = ("zero", "uniform")
PHASE_MIN, PHASE_MAX = -2 * math.pi, 0.0  # the key phase delta is read clamped to this range
Q_SCALE = math.sqrt(2.0)  # attention divides by sqrt(2d); the reference's logits are over sqrt(d)


@dataclass(frozen=True)
class PopeConfig(PositionConfig):
    """``theta``: frequency base, theta_c = theta^(-c/d) (the reference's 10000); ``phase_init``:
    the learned key phase starts at ``zero`` (the reference default) or ``uniform`` in [-2 pi, 0]."""

    theta: float = option(10000.0, gt=1, doc="frequency base: theta_c = theta^(-c/d), c < d")
    phase_init: str = option("zero", choices=PHASE_INITS, doc="key phase start: zero, or uniform in [-2 pi, 0]")

    def __post_init__(self):
        super().__post_init__()
        if not self.theta > 1:
            raise ValueError(f"pope.theta={self.theta}: must be > 1")
        if self.phase_init not in PHASE_INITS:
            raise ValueError(f"unknown pope.phase_init {self.phase_init!r}; valid: {', '.join(PHASE_INITS)}")


def pope_inv_freq(head_dim: int, theta: float, dtype=torch.float32, device=None) -> torch.Tensor:
    """The d frequencies theta^(-c/d) for c < d, shape (head_dim,)."""
    return 1.0 / (theta ** (torch.arange(head_dim, dtype=dtype, device=device) / head_dim))


def polar(magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """(..., d) magnitudes and angles -> (..., 2d): the cos parts, then the sin parts."""
    return torch.cat((magnitude * angle.cos(), magnitude * angle.sin()), dim=-1)


class PoPE(PositionScheme):
    name = "pope"
    Config = PopeConfig

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """No shape rule: every head dimension is a frequency of its own, theta^(-c/d) > 0, so a
        head of any size (one dimension included: frequency 1) keeps its positions."""
        return cfg

    @classmethod
    def held_floats(cls, cfg, dims, batch, length, training):
        """Floats per token beyond what the pre-flight counts for any scheme, C = H x d: q and k
        leave ``qk`` 2d wide (4 C), and the fused paths pad v to that width and cut their 2d-wide
        output back (4 C; ``suite.model.attention.sdpa``): 8 C per token without gradients;
        training also keeps the softplus magnitudes (2 C per token) and the keys' cos and sin
        per head (2 x H x length x d = 2 C per position, shared by the batch)."""
        width = dims.n_heads * dims.head_dim
        if not training:
            return 8.0 * batch * length * width
        return 10.0 * batch * length * width + 2.0 * length * width

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        phase = torch.zeros(dims.n_heads * dims.head_dim)
        if cfg.phase_init == "uniform":
            phase.uniform_(PHASE_MIN, PHASE_MAX)
        self.phase = nn.Parameter(phase)  # (H * d,), read as (H, d)

    def key_phase(self) -> torch.Tensor:
        """delta, (H, d): the learned phase clamped to [-2 pi, 0]."""
        return self.phase.view(self.dims.n_heads, self.dims.head_dim).clamp(PHASE_MIN, PHASE_MAX)

    def _angles(self, pos: torch.Tensor, dtype) -> torch.Tensor:
        """pos * theta_c: (T, d) for positions (T,), (B, 1, T, d) for (B, T)."""
        inv_freq = pope_inv_freq(self.dims.head_dim, self.cfg.theta, dtype, pos.device)
        angles = pos.to(dtype).unsqueeze(-1) * inv_freq
        return angles.unsqueeze(1) if angles.dim() == 3 else angles

    def qk(self, q, k, pos_q, pos_k):  # q, k: (B, H, T, d) -> (B, H, T, 2d)
        work = at_least_float32(q).dtype  # float32, or float64 for a float64 model
        delta = self.key_phase().to(work).unsqueeze(-2)  # (H, 1, d)
        q_out = polar(F.softplus(q.to(work)), self._angles(pos_q, work)) * Q_SCALE
        k_out = polar(F.softplus(k.to(work)), self._angles(pos_k, work) + delta)
        return q_out.to(q.dtype), k_out.to(k.dtype)
