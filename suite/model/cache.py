"""The key/value cache of incremental decoding: what each layer keeps of the tokens seen so far.

``PosBenchLM.forward(tokens, cache=cache)`` runs only the new tokens through the network: each
layer (``Attention.forward``) appends their keys and values to its ``LayerCache`` and attends
from them to every cached position, with the same position and span hooks as the full forward,
so a step's logits are the full forward's rows for those tokens. Nothing here knows a scheme or
a span: a new one decodes with a cache as soon as its full forward runs.

* Keys are kept before the scheme's ``qk`` hook, and the hook transforms all of them at every
  step with the step's query positions and every key position. That keeps the cache exact for a
  transform that reads the whole length (RoPE's dynamic eval-time scaling reads the longest
  position), at O(T) extra work per step, the order of attending to T keys anyway.
* A layer whose scheme reads the data (``PositionScheme.signal``: FoX's forget gates, PaTH's
  transforms) also keeps its normed inputs, and each step recomputes the signal over every
  position: a token's signal may read the tokens before it (PaTH's convolution), and FoX's bias
  sums over all of them, so recomputing keeps the step equal to the full forward at O(T) work.
* A gated linear layer (``suite.model.mixer``) keeps no keys: its recurrent state (B, H, Dk, Dv)
  and the last ``conv_size - 1`` inputs of its short convolution (B, K - 1, 3C) hold all it
  reads of the past, and a step runs the recurrence from them (``LayerCache.advance``).
* A step attends on the reference path (``suite.model.attention.reference_attention``): its query
  rows see every cached key, so a term computed from a row's logits (CoPE's gated counts) is that
  row of the full computation.

Whether a cache stays exact as the sequence grows is a property of the model's hooks
(``length_invariant``); where it is not, a decoder recomputes the full forward instead.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class LayerCache:
    """One attention layer's keys (before the scheme's ``qk``) and values of the positions seen so
    far, each (B, H, length, D), and its normed inputs (B, length, C) when its scheme has a signal;
    or one gated linear layer's recurrent state and convolution inputs, and how many positions
    they hold."""

    def __init__(self):
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None
        self.inputs: Optional[torch.Tensor] = None
        self.state: Optional[torch.Tensor] = None  # (B, H, Dk, Dv) a gated linear layer's state
        self.conv: Optional[torch.Tensor] = None  # (B, K - 1, 3C) its convolution's last inputs
        self.seen = 0  # positions a gated linear layer's state holds

    @property
    def length(self) -> int:
        """Positions this layer's cache holds."""
        return self.keys.shape[-2] if self.keys is not None else self.seen

    def advance(self, state: torch.Tensor, conv: torch.Tensor, new: int) -> None:
        """A gated linear layer's state and convolution inputs after ``new`` more positions."""
        self.state, self.conv, self.seen = state, conv, self.seen + new

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' k, v (B, H, Tn, D); returns all of them, (B, H, length, D)."""
        if self.keys is not None:
            k, v = torch.cat((self.keys, k), dim=-2), torch.cat((self.values, v), dim=-2)
        self.keys, self.values = k, v
        return k, v

    def append_input(self, x: torch.Tensor) -> torch.Tensor:
        """Add the new positions' normed inputs x (B, Tn, C); returns all of them, (B, length, C)."""
        if self.inputs is not None:
            x = torch.cat((self.inputs, x), dim=-2)
        self.inputs = x
        return x

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows ``rows`` (a 1-D index tensor), in that order."""
        self.keys, self.values, self.inputs, self.state, self.conv = (
            None if t is None else t.index_select(0, rows)
            for t in (self.keys, self.values, self.inputs, self.state, self.conv))


class KVCache:
    """The caches of a model's ``n_layers`` layers, holding the first ``length`` positions of a batch."""

    def __init__(self, n_layers: int):
        self.layers = [LayerCache() for _ in range(n_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows ``rows`` (a 1-D index tensor), in that order."""
        for layer in self.layers:
            layer.keep(rows)


PROBE_QUERIES = 8  # query positions the bias check looks at


@torch.no_grad()
def length_invariant(model: nn.Module, length: int) -> bool:
    """Whether every position hook and span of ``model`` (a ``PosBenchLM``) gives the first
    ``length // 2`` positions the same values in a sequence of ``length // 2`` tokens as in one of
    ``length`` (q/k transforms, embeddings, biases, the per-query temperature, spans): then a cache filled over a shorter sequence stays exact up to ``length`` tokens.
    RoPE with dynamic eval-time scaling past its training length is not."""
    short = length // 2
    if short < 1:
        return True
    spec, device = model.spec, model.head.weight.device
    gen = torch.Generator().manual_seed(0)
    pos = torch.arange(length, device=device)
    qk_in = torch.randn(1, spec.n_heads, length, spec.head_dim, generator=gen).to(device)  # (1, H, T, D)
    emb_in = torch.randn(1, length, spec.d_model, generator=gen).to(device)  # (1, T, C)
    pos_q = pos[max(0, short - PROBE_QUERIES) : short]
    pairs = []
    for scheme in model.active_schemes():  # those of the phase the model is set to (a schedule's last, once trained)
        q_short, k_short = scheme.qk(qk_in[..., :short, :], qk_in[..., :short, :], pos[:short], pos[:short])
        q_long, k_long = scheme.qk(qk_in[..., :short, :], qk_in, pos[:short], pos)
        pairs += [(q_short, q_long), (k_short, k_long[..., :short, :]),
                  (scheme.embed(emb_in[:, :short], pos[:short]), scheme.embed(emb_in, pos)[:, :short])]
        temp_short, temp_long = scheme.temperature(pos[:short]), scheme.temperature(pos)  # (T, 1) or None
        if (temp_short is None) != (temp_long is None):
            return False
        if temp_short is not None:  # a temperature read from the whole length (not the query's) moves the cache
            pairs.append((temp_short, temp_long[:short]))
        bias_short, bias_long = scheme.bias(pos_q, pos[:short]), scheme.bias(pos_q, pos)
        if (bias_short is None) != (bias_long is None):
            return False
        if bias_short is not None:
            pairs.append((bias_short, bias_long[..., :short]))
    for block in model.blocks:
        pairs.append((block.span.allowed(pos_q, pos[:short]), block.span.allowed(pos_q, pos)[:, :short]))
    return all(a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6) for a, b in pairs)
