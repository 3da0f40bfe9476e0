"""The position-scheme interface: four hooks that default to "do nothing".

Absolute schemes act once, on the embeddings (``embed``); rotary schemes transform q and k in
every layer (``qk``); bias schemes add a (H, Tq, Tk) score bias in every layer (``bias``);
contextual schemes add a term computed from the logits themselves (``logit_term``, with
``needs_logits`` set so attention materializes them; CoPE counts gated keys this way).
Every scheme also takes the optional log-length softmax temperature (``log_scale``).

Data-dependent schemes read each layer's input instead of token indices. ``signal`` gives every
layer that uses the scheme a module of its own that maps the layer's input to a per-token signal
(FoX's forget gates, PaTH's Householder vectors); the signal reaches attention either as a score
bias separable into a query and a key term (``signal_bias``: FoX), or through the scheme's own
attention (``own_attention`` and ``attend``: stick-breaking's stick breaks, PaTH's transformed
keys), for weights that are not a softmax of q·k plus a bias.

A scheme owns its checks: the classmethod ``check(cfg, train_len, eval_lens, dims)`` receives a
layer's config, the training length, every evaluation length and the model's sizes, and returns
the config the run uses (resized to those lengths where the scheme sizes itself by them) or
raises ``ValueError`` naming the bad value and its valid range, a degenerate shape included (a
rotary scheme with no pair to rotate is NoPE under another name). ``suite/config/build.py`` calls
it for every layer before anything trains and reports the error with the layer's index. The
default has no rules; ``learned`` sizes its table and refuses one shorter than the training
length. What a scheme holds beyond the attention scores (a table read per query, CoPE's) it
declares in ``held_floats``, which the memory pre-flight adds up.

A scheme with learned parameters indexed by position (T5's buckets, a learned table's rows,
CoPE's columns) declares in ``position_entries`` which of them attention over a given length
reads; ``untrained_share`` pools them over a model's schemes into the share of the entries read
at an evaluation length that training never read, so never sent a gradient (they hold their
initial values). Evaluation stores it as the ``untrained_positions`` measurement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch
from torch import nn


# the catalogue, name -> scheme class: filled once by the package on import (suite/model/position/__init__.py
# discovers the scheme modules), read here by a scheme that holds another (``randomized``'s base) without
# importing the package that imports it
SCHEMES: dict[str, type["PositionScheme"]] = {}


class LengthUnsupported(Exception):
    """A scheme cannot represent positions this far out (e.g. a learned table that is too short)."""


@dataclass(frozen=True)
class Dims:
    """What a scheme may know about the model it serves."""

    d_model: int
    n_heads: int
    head_dim: int
    train_len: int


@dataclass(frozen=True)
class PositionConfig:
    """Options every scheme has.

    ``log_scale``: multiply query ``i``'s logits by ``max(1, log(i + 1) / log(base))`` so the
    softmax keeps its sharpness past ``base`` tokens (the "scaled softmax" used for NoPE length
    generalization, Wang et al. 2024, and, in a per-position form, by Llama 4's global layers).
    ``log_scale_base`` defaults to the training length.
    """

    log_scale: bool = False
    log_scale_base: Optional[int] = None

    def __post_init__(self):
        if self.log_scale_base is not None and self.log_scale_base < 2:
            raise ValueError(f"log_scale_base={self.log_scale_base}: must be >= 2 (or null for the training length)")


def log_length_scale(pos_q: torch.Tensor, base: int) -> torch.Tensor:
    """Per-query temperature ``max(1, log(i + 1) / log(base))``, shape (Tq, 1)."""
    scale = torch.log(pos_q.to(torch.float32) + 1.0) / math.log(base)
    return scale.clamp(min=1.0).unsqueeze(-1)


def at_least_float32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32, or as it is when already float32 or float64 (a float64 model stays exact)."""
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


class PositionScheme(nn.Module):
    """Base class: subclasses set ``name`` and ``Config`` and override the hooks they need."""

    name: ClassVar[str]
    Config: ClassVar[type] = PositionConfig

    def __init__(self, cfg: PositionConfig, dims: Dims):
        super().__init__()
        self.cfg = cfg
        self.dims = dims

    @classmethod
    def check(cls, cfg: PositionConfig, train_len: int, eval_lens: tuple[int, ...],
              dims: Optional[Dims] = None) -> PositionConfig:
        """``cfg`` as a run with these lengths and sizes (``dims``; None: no shape rules) uses it,
        or ValueError naming the bad value and the valid range. Default: no rules, ``cfg`` unchanged."""
        return cfg

    @classmethod
    def held_floats(cls, cfg: PositionConfig, dims: Dims, batch: int, length: int, training: bool) -> float:
        """Floats one layer of this scheme holds at once for a batch of ``batch`` sequences of
        ``length`` tokens, beyond the attention scores ``pair_floats`` counts (kept for the
        backward pass when ``training``); the memory pre-flight adds them. Default: none."""
        return 0.0

    def position_entries(self, length: int, training: bool = False) -> Optional[frozenset[int]]:
        """The learned position-indexed parameter entries that attention over sequences of up to
        ``length`` tokens can read (``training``: as a training forward reads them, which differs
        from evaluation only where the positions are drawn, ``randomized``), or None for a scheme
        with no learned parameter indexed by position. An entry is an index into the scheme's own
        table (a T5 bucket, a table row, a CoPE column); the set at a length holds the set at
        every shorter one, so training at lengths up to L reads the entries of L. Default: None
        (no such parameter, or learned parameters read alike at every length: KERPLE's slopes,
        FIRE's MLP, PoPE's phases)."""
        return None

    def embed(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return x

    def qk(self, q, k, pos_q, pos_k):
        return q, k

    def bias(self, pos_q: torch.Tensor, pos_k: torch.Tensor) -> Optional[torch.Tensor]:
        """The additive score bias (H, Tq, Tk), or None. Attention only reads it (every path adds
        it out of place), so it may be a tensor the scheme keeps or an ``expand``ed view."""
        return None

    # True for a scheme whose ``logit_term`` reads the logits: attention then runs the reference
    # path (materialized logits) on every implementation, since no fused kernel can supply them
    needs_logits: ClassVar[bool] = False

    def logit_term(self, q: torch.Tensor, logits: torch.Tensor,
                   bias: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
        """A term added to the pre-softmax logits, or None. ``q`` (B, H, Tq, D) the queries as
        attended (after ``qk`` and the temperature); ``logits`` (B, H, Tq, Tk) scaled q·k plus
        the bias, -inf outside the span; ``bias`` the bias already in ``logits``, (H, Tq, Tk) or
        (B, H, Tq, Tk), or None (DAPE's MLP reads q·k and the bias apart). Returns (B, H, Tq, Tk),
        finite, added before the softmax (masked entries stay -inf). Attention passes every key a
        query row can see, never a block of them; a cached decoding step, which holds all earlier
        keys, gets the full rows too."""
        return None

    # True for a scheme whose positions come from the data, not from token indices (FoX,
    # stick-breaking, PaTH): nothing it computes reads ``pos``, so a wrapper that draws token
    # positions (``randomized``) has nothing to act on
    data_dependent: ClassVar[bool] = False

    def signal(self) -> Optional[nn.Module]:
        """A new module for one layer, or None. The model builds one for every layer that uses
        the scheme (each layer its own parameters, as in the papers) and calls it on the layer's
        normed input (B, T, C); it returns the per-token signal (B, H, T, S). A token's signal may
        read earlier tokens (PaTH's short convolution), never later ones, so a KV cache that keeps
        each layer's inputs recomputes it exactly."""
        return None

    def signal_bias(self, signal: torch.Tensor) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
        """A score bias separable into a query and a key term, ``(a, b)``, each (B, H, T) over
        the signal's positions: bias(i, j) = a_i + b_j; or None. Queries are the last Tq of those
        positions. The reference path adds a_i + b_j; the fused paths add only b_j, since a
        constant per query row leaves its softmax unchanged (SDPA takes b_j as one more key
        dimension, so no T x T bias is built; FlexAttention reads it in its score_mod)."""
        return None

    # True for a scheme that computes its layer's attention itself (``attend``): its weights are
    # not a softmax of q·k plus a bias, so no fused kernel computes them
    own_attention: ClassVar[bool] = False

    def attend(self, q, k, v, signal: Optional[torch.Tensor], allowed: torch.Tensor):
        """(out (B, H, Tq, D), logits (B, H, Tq, Tk)) for a scheme with ``own_attention``: q are
        the last Tq of the Tk key positions, ``signal`` (B, H, Tk, S) or None, ``allowed`` the
        span's (Tq, Tk) mask. ``logits`` are what diagnostics read as attention logits: a softmax
        over them gives each key's weight in ``out`` (-inf where a key gets none)."""
        raise NotImplementedError(f"{self.name} computes no attention of its own")

    @classmethod
    def pair_floats(cls, head_dim: int, training: bool) -> int:
        """Floats per batch row, head, query and key that this scheme's attention holds where it
        materializes its scores, kept for the backward pass when ``training`` (the memory
        pre-flight counts them): the logits and the probabilities."""
        return 2

    def score_mod(self, pos: torch.Tensor) -> Optional[Callable]:
        """FlexAttention score_mod adding this scheme's bias for positions ``pos`` (T,), or None
        when it has none. Called once per forward; the indices it receives are token indices."""
        return None

    # FlexAttention ``kernel_options`` for this scheme's score_mod (None: the kernel's defaults)
    flex_kernel_options: ClassVar[Optional[dict]] = None

    def max_length(self) -> Optional[int]:
        """Longest sequence the scheme can represent, or None for no limit."""
        return None

    def temperature(self, pos_q: torch.Tensor) -> Optional[torch.Tensor]:
        """Per-query logit multiplier (Tq, 1) from ``log_scale``, or None."""
        if not self.cfg.log_scale:
            return None
        return log_length_scale(pos_q, self.cfg.log_scale_base or self.dims.train_len)

    def extra_repr(self) -> str:
        return f"{self.name}: {self.cfg}"


class LearnedBias(PositionScheme):
    """A scheme whose ``bias`` is learned (T5, KERPLE, FIRE): one FlexAttention ``score_mod`` for all.

    Training (gradients on) indexes the (H, T, T) bias built once per forward, so each pair's
    gradient lands in its own slot and no atomic adds contend (on an H200, base model, 64 x 1024
    tokens, T5: 240K tokens/s, against 59K when every pair adds into an (H, T) vector by
    distance). Without gradients, and wherever H x T x T would outgrow the kernel's 32-bit
    indexing (12 heads at 16K tokens), the kernel computes the bias itself from the scheme's
    ``kernel_score_mod``, and no T x T tensor is built.
    """

    # A score_mod that gathers a dense learned bias needs more shared memory than the default
    # 128 x 64 tiles leave: compiled on an H200, T5's asked for 245,760 bytes of a 232,448 limit.
    flex_kernel_options = {"BLOCK_M": 64, "BLOCK_N": 64}

    def score_mod(self, pos: torch.Tensor) -> Callable:
        T = pos.shape[0]
        if torch.is_grad_enabled() and self.dims.n_heads * T * T < 2 ** 31:
            bias = self.bias(pos, pos)  # (H, T, T)

            def dense_bias(score, b, h, q_idx, kv_idx):
                return score + bias[h, q_idx, kv_idx]

            return dense_bias
        return self.kernel_score_mod(pos)

    def kernel_score_mod(self, pos: torch.Tensor) -> Callable:
        """The bias computed inside the kernel from the scheme's parameters, for positions ``pos``."""
        raise NotImplementedError


def untrained_share(schemes, length: int, train_len: int) -> Optional[tuple[float, int]]:
    """(share, read) of the position-indexed parameter entries that ``schemes`` (a model's distinct
    scheme objects) read at ``length`` tokens: ``read`` entries in all, pooled over the schemes, and
    the share of them that training at ``train_len`` never read (``position_entries``), so that
    received no gradient and hold their initial values. None when no scheme has such entries."""
    read = untrained = 0
    found = False
    for scheme in schemes:
        at_eval = scheme.position_entries(length)
        if at_eval is None:
            continue
        found = True
        read += len(at_eval)
        untrained += len(at_eval - scheme.position_entries(train_len, training=True))
    if not found or read == 0:
        return None
    return untrained / read, read
