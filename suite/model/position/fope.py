"""FoPE, Fourier position embedding: RoPE whose every pair turns by a Fourier series, not one frequency.

Hua et al. 2025 (ICML), "Fourier Position Embedding: Enhancing Attention's Periodic Extension for
Length Generalization" (arXiv 2412.17739). Checked against the authors' code,
github.com/yiju-zhao/Fourier-Position-Embedding, ``olmo/model.py`` (``RotaryEmbedding.get_inv_freq``
for the floor, ``FourierEmbedding`` for the series and its initialization) with the options of its
paper configs (``configs/c4/length-512/ce-fourier/OLMo-60M-...yaml``: ``rope_clamp_floor_freq``,
``rope_clamp_floor_to_zero``, ``fourier_init: eye_xavier_norm``, ``fourier_separate_basis``,
``fourier_separate_head``, ``fourier_ignore_zero``, the other options at their defaults).

For a head of D dimensions (P = D/2 pairs), RoPE's frequencies w_j = theta^(-2j/D), j < P:

1. The floor. A frequency below ``floor_freq_ratio`` * 2 pi / L (L the training length: a period
   longer than L tokens is never seen whole in training) is zeroed and leaves the basis (the
   reference's ``inv_freq[inv_freq < floor_freq] = 0``, then ``fourier_ignore_zero``). The basis is
   the I frequencies w_0 .. w_{I-1} left (they fall with j). ``floor_freq_ratio=0``: no floor.
2. The series. M = min(I, floor(``pair_fraction`` * P)) pairs carry position (the reference's
   ``output_dim = min(input_dim, head_dim // 4)``: ``pair_fraction`` 0.5). Per head h and pair
   m < M, at position n::

       C[h, m](n) = sum_i A[h, i, m] cos(w_i n)        S[h, m](n) = sum_i B[h, i, m] sin(w_i n)

   with separate cosine and sine coefficients per head (``fourier_separate_basis``,
   ``fourier_separate_head``), each drawn once: a 1 at (i = m * s, m) where m * s < I, with
   s = ceil(I / M) (the reference's ``get_step_eye``; s = 1 when every basis frequency has a pair),
   plus Xavier-normal noise of gain ``sigma`` over the (H, I, M) tensor, so each coefficient's
   standard deviation is sigma * sqrt(2 / (M (I + H))) (``fourier_init="eye_xavier_norm"``,
   ``fourier_init_norm_gain``). ``sigma=0``: each pair keeps its own frequency alone.
3. The rotation. Pair m of q (and of k), at position n, becomes
   (x1 C - x2 S, x1 S + x2 C), RoPE's rotation with cos and sin replaced by the two series; the
   pairs m >= M get frequency 0 and pass unchanged (position-free). Pairs are (m, m + P), the
   reference's ``rotate_half`` (``layout="half"``); ``layout="interleaved"`` pairs (2m, 2m + 1).

``sigma=0`` and ``floor_freq_ratio=0`` with ``pair_fraction=1`` is RoPE (``position=rope``) exactly;
with a floor, it is RoPE with the floored frequencies at 0. With ``sigma`` > 0, C and S mix
frequencies and differ, so q.k depends on both positions, not only on their offset (in the
paper's terms: the cross-frequency terms of two Fourier series); the pairs past M stay
position-free whatever ``sigma``. How many carry position depends on the head and the training
length: 16 of 32 at the paper's 60M setting (head of 64, L = 512, theta 1e4), 2 of 8 at this
suite's CPU recipe (head of 16, L = 32), 16 of 32 at its GPU recipe (head of 64, L = 1024, where
18 frequencies pass the floor and the cap binds).

Where this departs from the reference, and why:

* The position-free pairs get cos 1 and sin 0 (frequency 0: the paper's "zero-out"). The
  reference pads both its cos and its sin with 1 (``F.pad(..., value=1)``), which maps such a pair
  (x1, x2) to (x1 - x2, x1 + x2), the same for q and k at every position: still position-free,
  but their part of q.k doubled, a constant the q and k projections absorb.
* One coefficient draw serves every layer that uses the same configuration (as every scheme of
  this suite is shared across layers); the reference draws one per layer (one
  ``FourierEmbedding`` per block).
* The cos and sin series are computed in float32 or better, outside autocast, as the reference does
  (``torch.autocast(enabled=False)``, ``rope_full_precision``), and in float64 for a float64 model.
* The reference's other switches (shared or normalized coefficients, other initializations,
  length-extrapolation methods stacked on FoPE) keep their paper-config values and are no
  options here. ``learnable`` (the reference's ``fourier_learnable``, off by default as there)
  trains the coefficients; off, they are a buffer, saved with the model.

Its coefficients (with ``learnable``) are indexed by head, basis frequency and pair, not by
position, and every position reads all of them alike: no position-indexed entry
(``position_entries``: None, the base class's default).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import PositionConfig, PositionScheme
from suite.model.position.rope import LAYOUTS, rotate
from suite.options import option, range_errors


@dataclass(frozen=True)
class FoPEConfig(PositionConfig):
    """FoPE's options, each at the value of the authors' paper configs (see the module docstring)."""

    theta: float = option(10000.0, gt=1, doc="RoPE base: frequencies theta^(-2j/D)")
    floor_freq_ratio: float = option(1.0, ge=0, doc="frequencies below this x 2 pi / training length are "
                                                     "zeroed and leave the basis; 0: no floor")
    sigma: float = option(0.3, ge=0, le=100, doc="gain of the Xavier-normal noise added to the coefficients "
                                                  "(the reference's fourier_init_norm_gain); 0: plain frequencies")
    pair_fraction: float = option(0.5, gt=0, le=1, doc="at most floor(this x D/2) pairs carry position "
                                                         "(the reference's head_dim // 4)")
    learnable: bool = option(False, doc="train the coefficients (the reference: fixed at their draw)")
    layout: str = option("half", choices=LAYOUTS, doc="pairs (m, m + D/2) as the reference, or (2m, 2m + 1)")

    def __post_init__(self):
        super().__post_init__()
        errors = range_errors(dataclasses.asdict(self), type(self), "fope")
        if errors:
            raise ValueError("; ".join(errors))


def fope_shape(head_dim: int, train_len: int, cfg: FoPEConfig) -> tuple[int, int]:
    """(I, M): the basis frequencies at or above the floor, and the pairs that carry position."""
    pairs = head_dim // 2
    floor = cfg.floor_freq_ratio * 2 * math.pi / train_len
    basis = sum(1 for j in range(pairs) if inv_freq(j, pairs, cfg.theta) >= floor)
    return basis, min(basis, int(cfg.pair_fraction * pairs))


def inv_freq(j, pairs: int, theta: float):
    """RoPE's frequency of pair ``j`` (an int, or a tensor of them) of ``pairs``: theta^(-2j/D),
    computed as ``rope_inv_freq`` computes it, so a float32 FoPE without noise is RoPE to the bit."""
    return 1.0 / (theta ** (j * 2 / (2 * pairs)))


class FoPE(PositionScheme):
    name = "fope"
    Config = FoPEConfig

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """Refuses a shape where no pair carries position (a head of one dimension, a floor above
        every frequency, a ``pair_fraction`` of less than one pair): NoPE under this name."""
        if dims is not None:
            basis, pairs = fope_shape(dims.head_dim, train_len, cfg)
            if pairs == 0:
                raise ValueError(
                    f"fope gives no pair of dimensions a position: model.d_model={dims.d_model} / "
                    f"model.n_heads={dims.n_heads} is a head of {dims.head_dim} ({dims.head_dim // 2} pairs); "
                    f"position.floor_freq_ratio={cfg.floor_freq_ratio} at training length {train_len} leaves "
                    f"{basis} frequencies; position.pair_fraction={cfg.pair_fraction} allows "
                    f"{int(cfg.pair_fraction * (dims.head_dim // 2))} pairs; valid: at least one of each (a head of at "
                    "least 2 dimensions, floor_freq_ratio below train_len / (2 pi), pair_fraction x pairs >= 1); "
                    "for a model without positions use position=nope")
        return cfg

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.pairs = dims.head_dim // 2  # P
        self.basis, self.kept = fope_shape(dims.head_dim, dims.train_len, cfg)  # I, M
        shape = (dims.n_heads, self.basis, self.kept)  # (H, I, M)
        cos_coef, sin_coef = self._draw(shape), self._draw(shape)
        if cfg.learnable:
            self.cos_coef, self.sin_coef = nn.Parameter(cos_coef), nn.Parameter(sin_coef)
        else:
            self.register_buffer("cos_coef", cos_coef)
            self.register_buffer("sin_coef", sin_coef)

    def _draw(self, shape: tuple[int, int, int]) -> torch.Tensor:
        """Coefficients (H, I, M): the step identity plus Xavier-normal noise of gain ``sigma``
        (in place, so a model built for its shapes only draws nothing)."""
        coef = torch.empty(shape)
        if self.cfg.sigma > 0:
            nn.init.xavier_normal_(coef, gain=self.cfg.sigma)
        else:
            coef.zero_()
        H, I, M = shape
        step = math.ceil(I / M) if M else 1
        ones = [(h, m * step, m) for h in range(H) for m in range(M) if m * step < I]  # (head, basis, pair)
        if ones:
            coef.index_put_(tuple(torch.tensor(list(axis)) for axis in zip(*ones)), torch.ones(len(ones)), accumulate=True)
        return coef

    def series(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(C, S) for every pair, (H, T, P) for positions (T,), (B, H, T, P) for (B, T): the two
        Fourier series on the first M pairs, cos 1 and sin 0 on the rest."""
        with torch.autocast(pos.device.type, enabled=False):
            inv = inv_freq(torch.arange(self.basis, device=pos.device, dtype=dtype), self.pairs, self.cfg.theta)  # (I,)
            angles = (pos.to(dtype).unsqueeze(-1) * inv).unsqueeze(-3)  # (1, T, I) or (B, 1, T, I)
            c = angles.cos() @ self.cos_coef.to(dtype)  # (H, T, M) or (B, H, T, M)
            s = angles.sin() @ self.sin_coef.to(dtype)
            rest = self.pairs - self.kept
            if rest:
                c = torch.cat((c, c.new_ones(*c.shape[:-1], rest)), dim=-1)
                s = torch.cat((s, s.new_zeros(*s.shape[:-1], rest)), dim=-1)
        return c, s

    def qk(self, q, k, pos_q, pos_k):  # q (B, H, Tq, D), k (B, H, Tk, D)
        dtype = q.dtype if q.dtype == torch.float64 else torch.float32
        cq, sq = self.series(pos_q, dtype)
        ck, sk = (cq, sq) if pos_k is pos_q else self.series(pos_k, dtype)
        layout = self.cfg.layout
        return (rotate(q.to(dtype), cq, sq, layout).to(q.dtype), rotate(k.to(dtype), ck, sk, layout).to(k.dtype))
