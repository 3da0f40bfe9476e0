"""DAPE, data-adaptive positional encoding: a small MLP over the logits and the static bias.

Zheng et al. 2024 (NeurIPS), "DAPE: Data-Adaptive Positional Encoding for Length Extrapolation"
(arXiv:2405.14722). The pre-softmax scores of query i and key j in head h become

    A_h(i, j) + B_h(i, j) + f([A_1(i, j) .. A_H(i, j), B_1(i, j) .. B_H(i, j)])_h

with A the scaled q·k logits, B the static bias of a base scheme (ALiBi, KERPLE, FIRE, T5, ...)
and f a two-layer MLP applied to every (query, key) pair across the head dimension: 2H inputs
(every head's A, then every head's B), ``mlp_width`` hidden units, LeakyReLU, H outputs, one
per head. The wrapper holds the base (``base``) and hands every hook that takes positions to
it (``embed``, ``qk``, ``bias``, ``temperature``, ``max_length``); the term reads the
materialized logits (``needs_logits``), so attention runs the reference path on every
implementation and the base's bias reaches ``logit_term`` beside the logits.

Checked against the authors' code (github.com/chuanyang-Zheng/DAPE: ``DAPE.py`` ``AliBi_DAPE`` and
``ParallelKerpleLog_DAPE``, the classes ``AliBi_C``, ``ParallelKerpleLog_C``, ``FIRE_C``,
``Nope_C`` and ``DAPEV1`` in ``megatron/model/positional_embeddings.py``, called from
``ParallelSelfAttention.attention`` in ``megatron/model/transformer.py``, configs
``configs/125M/512/125M_{alibi,kerple}_c.yml``):

* Scale: A is q·k divided by sqrt(head_dim) (``baddbmm`` with ``alpha=1/norm_factor``) before the
  MLP reads it, as here; with ``log_scale`` the tempered queries make A.
* MLP: ``nn.Linear(2H, mlp_width)``, ``nn.LeakyReLU()`` (negative slope 0.01), ``nn.Linear(mlp_width,
  H)``, both with biases and PyTorch's default initialization (none of the authors' init methods
  reaches these modules); ``mlp_width`` 32 in every published config. Channel order [A, B].
* Bias-free bases: for NoPE and RoPE (``Nope_C``, ``DAPEV1``) the authors' MLP reads A alone, H
  inputs, and the scores are A + f(A); here too: a base without a ``bias`` hook gets an H-input MLP.
* Mask: the authors run the MLP on the unmasked scores (future keys read their raw q·k and a B
  of 0) and apply the causal mask afterwards, in the softmax. The MLP maps each pair by itself,
  so a masked pair's term never reaches an allowed one and the order cannot change an allowed
  score; what matters is that a masked entry fed to the MLP is finite. Here attention masks first
  (-inf outside the span), so the term reads A = 0 at masked pairs and its output there is
  dropped by the -inf it is added to. Any span (window, chunks) masks the same way.
* Departure: one MLP serves every layer that uses the same configuration, as every scheme of the
  suite (and its KERPLE and FIRE) is shared between layers; the authors build one per layer.
* Departure: A is recovered as the biased logits minus B (attention adds the bias before the
  term reads the logits); exact up to one rounding of the sum. The authors add B to A after
  the MLP reads both, so their A is not rounded; under bf16 autocast the difference is the
  rounding already present in every biased logit.

Learned position-indexed entries are the base's (``position_entries``: T5's buckets under DAPE
over T5); the MLP itself reads the logits and the bias, no position, and is read alike at every
length.

Valid bases: every scheme of the catalogue but a wrapper (a scheme with a ``base``: itself,
``randomized``), one whose positions are read from the logits or the data (``needs_logits``,
``data_dependent``, ``own_attention``: CoPE, FoX, stick-breaking, PaTH; they have no static bias
to hand the MLP) and one with a position table sized by the run's lengths (``max_positions``:
``learned``; the base keeps its defaults, which would size it to the training length). The base
takes its own defaults, with the wrapper's ``log_scale`` and ``log_scale_base``; a run's code
digest reads the base through the ``base`` field (``suite.config.codedigest.pieces_of``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from suite.model.position.base import SCHEMES, PositionConfig, PositionScheme
from suite.options import option

MLP_WIDTH_MAX = 1024  # hidden units per (query, key) pair: the MLP's memory grows with them


def _is_wrapper(cls: type[PositionScheme]) -> bool:
    return "base" in {f.name for f in dataclasses.fields(cls.Config)}


def bases() -> list[str]:
    """The schemes DAPE can hold (module docstring). The catalogue (``base.SCHEMES``) is filled
    once the package has imported every scheme."""
    return sorted(name for name, cls in SCHEMES.items()
                  if not _is_wrapper(cls) and not cls.needs_logits and not cls.data_dependent
                  and not cls.own_attention
                  and "max_positions" not in {f.name for f in dataclasses.fields(cls.Config)})


@dataclass(frozen=True)
class DapeConfig(PositionConfig):
    """``base``: the scheme whose bias B the MLP reads (its own defaults); ``mlp_width``: hidden
    units of the MLP (the authors' 32)."""

    base: str = "alibi"
    mlp_width: int = option(32, ge=1, le=MLP_WIDTH_MAX)

    def __post_init__(self):
        super().__post_init__()
        if self.base not in bases():
            raise ValueError(f"unknown dape.base {self.base!r} (or a wrapper, a scheme whose positions come from "
                             f"the logits or the data, or one with a position table); valid: {', '.join(bases())}")
        if not 1 <= self.mlp_width <= MLP_WIDTH_MAX:
            raise ValueError(f"dape.mlp_width={self.mlp_width}: must be in [1, {MLP_WIDTH_MAX}]")


def _base_config(cfg: DapeConfig) -> PositionConfig:
    """The base's config: its defaults, with the wrapper's log-length temperature."""
    return SCHEMES[cfg.base].Config(log_scale=cfg.log_scale, log_scale_base=cfg.log_scale_base)


def _has_bias(cls: type[PositionScheme]) -> bool:
    return cls.bias is not PositionScheme.bias


class Dape(PositionScheme):
    name = "dape"
    Config = DapeConfig
    needs_logits = True

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """The base's own check passed on its config (a rotary base with no pair to rotate is
        refused as the base would be); ``cfg`` unchanged."""
        if dims is not None:
            try:
                SCHEMES[cfg.base].check(_base_config(cfg), train_len, eval_lens, dims)
            except ValueError as err:
                raise ValueError(f"dape.base={cfg.base!r}: {err}") from None
        return cfg

    @classmethod
    def held_floats(cls, cfg, dims, batch, length, training):
        """The MLP's tensors per (batch row, query, key): its input (2H, or H without a bias),
        the hidden units before and after the LeakyReLU, its output and the logits with the term
        (H each). Training keeps them all for the backward pass; without gradients the input,
        hidden and output exist at once."""
        inputs = (2 if _has_bias(SCHEMES[cfg.base]) else 1) * dims.n_heads
        per_pair = inputs + 2 * cfg.mlp_width + (2 if training else 1) * dims.n_heads
        return float(per_pair) * batch * length * length

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.base = SCHEMES[cfg.base](_base_config(cfg), dims)
        H = dims.n_heads
        inputs = 2 * H if _has_bias(type(self.base)) else H
        self.mlp = nn.Sequential(nn.Linear(inputs, cfg.mlp_width), nn.LeakyReLU(), nn.Linear(cfg.mlp_width, H))

    def embed(self, x, pos):
        return self.base.embed(x, pos)

    def qk(self, q, k, pos_q, pos_k):
        return self.base.qk(q, k, pos_q, pos_k)

    def bias(self, pos_q, pos_k):
        return self.base.bias(pos_q, pos_k)

    def temperature(self, pos_q):
        return self.base.temperature(pos_q)

    def max_length(self):
        return self.base.max_length()

    def position_entries(self, length, training=False):
        """The base's: the MLP reads no position-indexed entry."""
        return self.base.position_entries(length, training)

    def logit_term(self, q, logits, bias=None):
        """f([A, B]) for every (query, key) pair, (B, H, Tq, Tk). ``logits`` (B, H, Tq, Tk) are A + B,
        -inf outside the span; ``bias`` (H, Tq, Tk) or (B, H, Tq, Tk) is B (None: a base without
        one; the MLP reads A alone). A masked pair reads A = 0; its term joins a -inf."""
        masked = torch.isneginf(logits)
        a = logits if bias is None else logits - bias.to(logits.dtype)
        a = a.masked_fill(masked, 0.0)
        features = a if bias is None else torch.cat((a, bias.to(a.dtype).expand_as(a)), dim=1)  # (B, 2H, Tq, Tk)
        return self.mlp(features.movedim(1, -1)).movedim(-1, 1).to(logits.dtype)  # (B, H, Tq, Tk)
