"""Incremental decoding of a ``PosBenchLM`` with a key/value cache.

Built from the model's public submodules (embedding, blocks, norms, head) and the position and
span hooks (``scheme.embed``, ``scheme.qk``, ``scheme.temperature``, ``scheme.bias``,
``scheme.logit_term``, ``scheme.signal_bias``, ``scheme.attend``, ``span.allowed``), so it computes the model's own forward one step at a time: each layer keeps
the keys and values of the tokens seen so far, and a step runs only the new tokens through the
network, attending to the cached ones.

A layer whose scheme reads the data (``PositionScheme.signal``: FoX's forget gates, PaTH's
transforms) also keeps its normed inputs, and each step recomputes the signal over every
position: a token's signal may read the tokens before it (PaTH's convolution), and FoX's bias
sums over all of them, so recomputing keeps the step equal to the full forward at O(T) work.

Keys are cached before the scheme's ``qk`` hook and the hook is applied to all of them at every
step, with the step's query positions and every key position. That keeps the cache exact for
schemes whose transform depends on the whole length (RoPE's dynamic eval-time scaling reads the
longest position), at O(T) extra work per step, the order of attending to T keys anyway.
Attention is ``suite.model.attention.reference_attention`` with the span's mask, the scheme's bias
and its ``logit_term``: a step's query rows see every cached key, so a term computed from a
row's logits (CoPE's gated counts) is that row of the full computation.

``tests/test_lmeval_kv_cache.py`` holds it to ``PosBenchLM.forward`` for every scheme and span.
"""
from __future__ import annotations

import torch

from suite.model.attention import BLOCK, reference_attention, with_terms
from suite.model.lm import PosBenchLM


class KVCache:
    """Per-layer keys (before the scheme's ``qk``) and values of the first ``length`` positions
    of a batch, each (B, H, length, D)."""

    def __init__(self, n_layers: int):
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.inputs: list[torch.Tensor | None] = [None] * n_layers  # (B, length, C), layers with a signal only

    @property
    def length(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[-2]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' k, v (B, H, Tn, D) to ``layer``; returns all of that layer's."""
        if self.keys[layer] is not None:
            k, v = torch.cat((self.keys[layer], k), dim=-2), torch.cat((self.values[layer], v), dim=-2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def append_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """Add the new positions' normed inputs h (B, Tn, C) to ``layer``; returns all of them."""
        if self.inputs[layer] is not None:
            h = torch.cat((self.inputs[layer], h), dim=-2)
        self.inputs[layer] = h
        return h

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows ``rows`` (a 1-D index tensor), in that order."""
        self.keys = [None if k is None else k.index_select(0, rows) for k in self.keys]
        self.values = [None if v is None else v.index_select(0, rows) for v in self.values]
        self.inputs = [None if h is None else h.index_select(0, rows) for h in self.inputs]


@torch.no_grad()
def extend(model: PosBenchLM, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Run ``tokens`` (B, Tn), the positions after the cached ones, through ``model``; adds them
    to ``cache`` and returns their logits (B, Tn, vocab), equal to the model's forward over the
    cached tokens followed by ``tokens``."""
    B, Tn = tokens.shape
    start = cache.length
    pos_all = torch.arange(start + Tn, device=tokens.device)
    pos = pos_all[start:]
    x = model.embed(tokens)  # (B, Tn, C)
    for scheme in model.schemes:
        x = scheme.embed(x, pos)
    for i, block in enumerate(model.blocks):
        scheme, span, attn = model.schemes[block.scheme_index], block.span, block.attn
        h = block.attn_norm(x)
        C = h.shape[-1]
        q, k, v = attn.qkv(h).view(B, Tn, 3, attn.n_heads, C // attn.n_heads).permute(2, 0, 3, 1, 4)  # (B, H, Tn, D)
        k_all, v_all = cache.append(i, k, v)  # (B, H, start + Tn, D)
        signal = None if attn.signal is None else attn.signal(cache.append_input(i, h))  # (B, H, start + Tn, S)
        q, k_all = scheme.qk(q, k_all, pos, pos_all)
        temp = scheme.temperature(pos)
        if temp is not None:
            q = q * temp.to(q.dtype)
        allowed = span.allowed(pos, pos_all)
        if scheme.own_attention:
            out, _ = scheme.attend(q, k_all, v_all, signal, allowed)
        else:
            terms = None if signal is None else scheme.signal_bias(signal)
            terms = None if terms is None else (terms[0][..., start:], terms[1])  # the queries' rows
            out, _ = reference_attention(q, k_all, v_all, with_terms(scheme.bias(pos, pos_all), terms), allowed,
                                         scheme.logit_term)
        x = x + attn.out(out.transpose(1, 2).reshape(B, Tn, C))
        x = x + block.mlp(block.mlp_norm(x))
    return model.head(model.norm(x))


@torch.no_grad()
def prefill(model: PosBenchLM, tokens: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, KVCache]:
    """(logits of the last position (B, vocab), a cache holding ``tokens`` (B, T)), fed ``block``
    positions at a time so no step holds more than block x T scores per head."""
    cache = KVCache(len(model.blocks))
    for s in range(0, tokens.shape[1], block):
        logits = extend(model, tokens[:, s : s + block], cache)
    return logits[:, -1], cache


PROBE_QUERIES = 8  # query positions the bias check looks at


@torch.no_grad()
def length_invariant(model: PosBenchLM, length: int) -> bool:
    """Whether every position hook and span of ``model`` gives the first ``length // 2``
    positions the same values in a sequence of ``length // 2`` tokens as in one of ``length``:
    then a cache filled over a shorter sequence stays exact up to ``length`` tokens. RoPE with
    dynamic eval-time scaling past its training length is not."""
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
    for scheme in model.schemes:
        q_short, k_short = scheme.qk(qk_in[..., :short, :], qk_in[..., :short, :], pos[:short], pos[:short])
        q_long, k_long = scheme.qk(qk_in[..., :short, :], qk_in, pos[:short], pos)
        pairs += [(q_short, q_long), (k_short, k_long[..., :short, :]),
                  (scheme.embed(emb_in[:, :short], pos[:short]), scheme.embed(emb_in, pos)[:, :short])]
        bias_short, bias_long = scheme.bias(pos_q, pos[:short]), scheme.bias(pos_q, pos)
        if (bias_short is None) != (bias_long is None):
            return False
        if bias_short is not None:
            pairs.append((bias_short, bias_long[..., :short]))
    for block in model.blocks:
        pairs.append((block.span.allowed(pos_q, pos[:short]), block.span.allowed(pos_q, pos)[:, :short]))
    return all(a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6) for a, b in pairs)
