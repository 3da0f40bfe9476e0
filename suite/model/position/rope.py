"""Rotary position embedding (RoPE) with partial rotary and eval-time context scaling.

Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding": pairs of
query/key dimensions are rotated by ``pos * theta^(-2i/d)``, so q·k depends only on the offset.

* ``layout="interleaved"`` pairs dimensions (2i, 2i+1) as in RoFormer; ``layout="half"`` pairs
  (i, i + d/2) as in GPT-NeoX, Llama and Hugging Face. They are the same rotation up to the
  permutation that sends interleaved dimension 2i to i and 2i+1 to i + d/2.
* ``fraction`` < 1 rotates only the first ``fraction`` of each head's dimensions (GPT-NeoX's
  partial rotary); the rest pass through position-free.
* ``drop_low`` > 0 is p-RoPE (Barbero et al. 2024, "Round and Round We Go! What makes Rotary
  Positional Encodings useful?", arXiv 2410.06205, with p = 1 - drop_low): every pair keeps its
  place and its frequency theta^(-2i/d) over the whole head, but only the floor(p * d/2)
  highest-frequency pairs rotate; the others get frequency 0 and pass unrotated (the paper's
  code: ``rope_angles = int(p * head_dim // 2)``, then ``head_dim // 2 - rope_angles`` pairs
  without rotation). drop_low=1 is NoPE. It composes with either layout and with every
  eval-time scaling (the dropped frequencies stay 0; yarn's logit scale covers the whole head,
  as it does with ``fraction``); with ``fraction`` < 1 it is refused: two partial-rotary rules.
* Eval-time ``scaling`` (only when the model is not training): ``linear`` position
  interpolation (Chen et al. 2023), ``ntk``-aware base change (bloc97 2023;
  theta' = theta * s^(d/(d-2))), ``yarn`` (Peng et al. 2023: per-frequency interpolation ramp
  between ``yarn_alpha`` and ``yarn_beta`` rotations per training context, plus logits scaled
  by (0.1 ln s + 1)^2). ``factor: null`` is dynamic: s = max(1, T / train_len).

No learned parameter, so no position-indexed entry to train (``position_entries``: None, the
base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from suite.model.position.base import PositionConfig, PositionScheme

LAYOUTS = ("half", "interleaved")
SCALINGS = ("none", "linear", "ntk", "yarn")


def rotary_dims(head_dim: int, fraction: float) -> int:
    """Number of rotated dimensions: the fraction of the head, rounded down to an even count."""
    return int(head_dim * fraction) // 2 * 2


def p_rope_pairs(head_dim: int, drop_low: float) -> int:
    """Pairs p-RoPE rotates: floor(p * d/2) with p = 1 - drop_low, counted as d/2 - ceil(drop_low
    * d/2) with float noise rounded off (0.28 * 25 is 7.000000000000001 in floats: drop_low=0.28
    of 25 pairs drops 7, as p=0.72 keeps 18)."""
    half = head_dim // 2
    return half - math.ceil(round(drop_low * half, 9))


def rope_inv_freq(rot_dim: int, theta: float) -> torch.Tensor:
    """Rotation frequencies theta^(-2i/d) for i < d/2, shape (rot_dim/2,)."""
    return 1.0 / (theta ** (torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim))


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    theta: float = 10000.0,
    fraction: float = 1.0,
    layout: str = "half",
    inv_freq: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Rotate x (B, H, T, D) by ``positions`` (T,) or (B, T); returns a tensor of x's shape."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown rope layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    rot = rotary_dims(x.shape[-1], fraction)
    if rot == 0:
        return x
    if inv_freq is None:
        inv_freq = rope_inv_freq(rot, theta)
    cos, sin = rope_cos_sin(positions, inv_freq.to(x.device), x.dtype)
    return rotate(x, cos, sin, layout)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, (T, rot/2) for positions (T,), (B, 1, T, rot/2) for (B, T)."""
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # (..., T, rot/2)
    if angles.dim() == 3:  # per-batch positions: (B, T, r) -> (B, 1, T, r)
        angles = angles.unsqueeze(1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` channels of x by the given angles; the rest pass."""
    rot = 2 * cos.shape[-1]
    xr, rest = x[..., :rot], x[..., rot:]
    if layout == "half":
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2 :]
        out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1) if rest.shape[-1] else out


@dataclass(frozen=True)
class RopeConfig(PositionConfig):
    theta: float = 10000.0
    fraction: float = 1.0
    layout: str = "half"
    scaling: str = "none"
    factor: Optional[float] = None  # eval-time scale factor; None = dynamic max(1, T / train_len)
    yarn_alpha: float = 1.0
    yarn_beta: float = 32.0
    drop_low: float = 0.0  # p-RoPE: fraction of the lowest frequencies that do not rotate

    def __post_init__(self):
        super().__post_init__()
        if self.theta <= 1:
            raise ValueError(f"rope.theta={self.theta}: must be > 1")
        if not 0 <= self.fraction <= 1:
            raise ValueError(f"rope.fraction={self.fraction}: must be in [0, 1]")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown rope.layout {self.layout!r}; valid: {', '.join(LAYOUTS)}")
        if self.scaling not in SCALINGS:
            raise ValueError(f"unknown rope.scaling {self.scaling!r}; valid: {', '.join(SCALINGS)}")
        if self.factor is not None and self.factor < 1:
            raise ValueError(f"rope.factor={self.factor}: must be >= 1 (or null for dynamic)")
        if not 0 <= self.drop_low <= 1:
            raise ValueError(f"rope.drop_low={self.drop_low}: must be in [0, 1]")
        if self.drop_low > 0 and self.fraction < 1:
            raise ValueError(f"rope.drop_low={self.drop_low} with rope.fraction={self.fraction}: "
                             "two partial-rotary rules at once; set one of them")


class RoPE(PositionScheme):
    name = "rope"
    Config = RopeConfig

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """Refuses a shape with no pair to rotate (a head of one dimension, a ``fraction`` or
        ``drop_low`` that leaves no pair): its losses are NoPE's, stored under this scheme's name."""
        if dims is not None and p_rope_pairs(rotary_dims(dims.head_dim, cfg.fraction), cfg.drop_low) == 0:
            raise ValueError(
                f"rope rotates no pair of dimensions: model.d_model={dims.d_model} / model.n_heads={dims.n_heads} "
                f"is a head of {dims.head_dim}, position.fraction={cfg.fraction} of it rotates "
                f"{rotary_dims(dims.head_dim, cfg.fraction)} dimensions, position.drop_low={cfg.drop_low} keeps "
                f"{p_rope_pairs(rotary_dims(dims.head_dim, cfg.fraction), cfg.drop_low)} of their pairs; valid: at "
                "least one rotated pair (a head of at least 2 dimensions, fraction * head size >= 2, drop_low below "
                "1 - 1/(pairs)); for a model without positions use position=nope")
        return cfg

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.rot = rotary_dims(dims.head_dim, cfg.fraction)
        self.kept = p_rope_pairs(self.rot, cfg.drop_low)  # pairs that rotate: rot / 2 unless drop_low
        self._memo = None

    def _scale_factor(self, length: int) -> float:
        if self.training or self.cfg.scaling == "none":
            return 1.0
        if self.cfg.factor is not None:
            return float(self.cfg.factor)
        return max(1.0, length / self.dims.train_len)

    def frequencies(self, length: int) -> tuple[torch.Tensor, float, float]:
        """(inv_freq, position divisor, q/k multiplier) for a sequence of ``length`` tokens; p-RoPE
        zeroes the lowest frequencies after the scaling (ntk recomputes them from a new base)."""
        inv, divisor, mscale = self._scaled_frequencies(length)
        if self.kept < inv.shape[0]:
            inv = torch.cat((inv[: self.kept], inv.new_zeros(inv.shape[0] - self.kept)))
        return inv, divisor, mscale

    def _scaled_frequencies(self, length: int) -> tuple[torch.Tensor, float, float]:
        s = self._scale_factor(length)
        inv = rope_inv_freq(self.rot, self.cfg.theta)
        if s == 1.0:
            return inv, 1.0, 1.0
        if self.cfg.scaling == "linear":
            return inv, s, 1.0
        if self.cfg.scaling == "ntk":  # one rotated pair turns at theta^0 = 1 whatever the base: unchanged
            return (inv if self.rot <= 2 else rope_inv_freq(self.rot, self.cfg.theta * s ** (self.rot / (self.rot - 2))),
                    1.0, 1.0)
        # yarn: rotations per training context r = L / wavelength; ramp from interpolated to kept.
        r = self.dims.train_len * inv / (2 * math.pi)
        keep = ((r - self.cfg.yarn_alpha) / (self.cfg.yarn_beta - self.cfg.yarn_alpha)).clamp(0, 1)
        inv = (1 - keep) * inv / s + keep * inv
        return inv, 1.0, 0.1 * math.log(s) + 1.0

    def _rotation(self, pos_q, pos_k, dtype):
        """(cos, sin for q, cos, sin for k, mscale), computed once per forward: every layer of a
        forward passes the same position tensors."""
        key = (self.training, dtype, pos_q.shape, pos_k.shape)
        hit = None if torch.compiler.is_compiling() else self._memo  # a compiled graph dedupes on its own
        if hit is not None and hit[0] is pos_q and hit[1] is pos_k and hit[2] == key:
            return hit[3]
        dynamic = not self.training and self.cfg.scaling != "none" and self.cfg.factor is None
        # only a dynamic eval-time factor reads the length (a host sync, and a graph break under compile)
        length = int(max(pos_q.max(), pos_k.max())) + 1 if dynamic else self.dims.train_len
        inv, divisor, mscale = self.frequencies(length)
        inv = inv.to(pos_q.device)
        cq = rope_cos_sin(pos_q / divisor, inv, dtype)
        ck = cq if pos_k is pos_q else rope_cos_sin(pos_k / divisor, inv, dtype)
        value = (*cq, *ck, mscale)
        if not torch.compiler.is_compiling():
            self._memo = (pos_q, pos_k, key, value)  # holds the tensors, so their ids stay theirs
        return value

    def qk(self, q, k, pos_q, pos_k):  # q, k: (B, H, T, D)
        if self.kept == 0:
            return q, k
        cos_q, sin_q, cos_k, sin_k, mscale = self._rotation(pos_q, pos_k, q.dtype)
        q, k = rotate(q, cos_q, sin_q, self.cfg.layout), rotate(k, cos_k, sin_k, self.cfg.layout)
        if mscale != 1.0:
            q, k = q * mscale, k * mscale
        return q, k
