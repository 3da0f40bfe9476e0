"""The attention plan: which path a layer's attention runs and what it materializes, decided once.

``Attention._attend`` (``suite/model/attention.py``) runs the path ``plan`` names, and the memory
pre-flight (``suite/config/resources.py``) counts the tensors the same plan says are built, so the
two cannot disagree. The inputs are plain facts about the layer (its scheme's flags, its span's
``reach`` and ``is_full``, the length, whether gradients are on); the model reads them from the
tensors it holds, the pre-flight from the run spec.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

BLOCK = 128  # queries per block on the blockwise path

PATHS = ("own", "reference", "flex", "blockwise", "causal", "masked")


@dataclass(frozen=True)
class Plan:
    """A layer's attention path (one of ``PATHS``) and what it builds, for T queries.

    ``block``: queries per block on the blockwise path (None: all T at once); ``keys``: the keys a
    query row is materialized against (T, or a block's ``block + reach - 1``); ``logits``: the
    (B, H, T, keys) scores (what ``pair_floats`` declares: logits and probabilities) are built for
    the layer and kept for the backward pass; ``shared``: one (H, T, T) tensor built once per
    forward for the layers of a scheme (and span): the bias the reference path adds, SDPA's float
    mask, or the dense learned bias FlexAttention gathers while training
    (``LearnedBias.score_mod``); ``dense``: a data-dependent bias a_i + b_j built as a
    (B, H, T, keys) tensor."""

    path: str
    keys: int
    block: Optional[int] = None
    logits: bool = False
    shared: bool = False
    dense: bool = False


def bias_kind(bias: Optional[torch.Tensor]) -> str:
    """"none", "fixed" or "learned" (a bias that requires grad) for a scheme's bias tensor or None."""
    return "none" if bias is None else "learned" if bias.requires_grad else "fixed"


def plan(impl: str, device_type: str, *, own_attention: bool, needs_logits: bool, bias: str, data_bias: bool,
         reach: Optional[int], full: bool, length: int, want_logits: bool, grad: bool, below_fp32: bool) -> Plan:
    """The path for ``impl`` ("auto": FlexAttention on CUDA, SDPA elsewhere) on ``device_type``.

    ``bias``: the scheme's score bias, "none", "fixed" or "learned" (parameters shape it: the model
    reads a bias that requires grad, the estimate a scheme with parameters); ``grad``: gradients
    are on, so a learned bias trains; ``data_bias``: a data-dependent separable bias
    (``signal_bias``: FoX); ``reach``: how far back the span looks (None: unbounded); ``full``:
    the span is full causal attention; ``below_fp32``: q is narrower than float32, where SDPA adds a
    data-dependent bias as a dense mask (``attention.sdpa``). A scheme with its own attention or
    whose term reads the logits, the logits asked for, or a learned bias training through SDPA
    run the reference path; SDPA past ``2 x BLOCK`` tokens on a bounded span goes block by block."""
    T = length
    if own_attention:  # weights that are no softmax of q·k plus a bias: no fused kernel has them
        return Plan("own", T, logits=True)  # (B, H, T, T) x pair_floats
    impl = ("flex" if device_type == "cuda" else "sdpa") if impl == "auto" else impl
    if needs_logits and impl in ("sdpa", "flex"):  # its term reads logits no fused kernel has
        impl = "reference"
    trains = bias == "learned" and grad
    if impl == "flex" and not want_logits:
        return Plan("flex", T, shared=trains)  # a learned bias under grad: (H, T, T) gathered
    if impl == "sdpa" and not want_logits and reach is not None and length > 2 * BLOCK:
        keys = min(T, BLOCK + reach - 1)  # per block: (B, H, BLOCK, keys), never T x T
        return Plan("blockwise", keys, BLOCK, logits=trains, dense=data_bias and (trains or below_fp32))
    if impl == "reference" or want_logits or (impl == "sdpa" and trains):
        return Plan("reference", T, logits=True, shared=bias != "none", dense=data_bias)  # (B, H, T, T)
    if impl != "sdpa":
        raise ValueError(f"unknown attention implementation {impl!r}; valid: auto, reference, sdpa, flex")
    if bias == "none" and full:
        return Plan("causal", T, dense=data_bias and below_fp32)  # is_causal: no mask
    return Plan("masked", T, shared=True, dense=data_bias and below_fp32)  # one (1, H, T, T) float mask
