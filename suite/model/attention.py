"""Causal self-attention with one reference path and two fast paths.

* ``reference``: materializes the pre-softmax logits (scaled q·k + bias, masked entries -inf,
  plus the scheme's ``logit_term``); tests and diagnostics read them, it is the only path a
  learned bias trains through on the CPU, and a scheme whose term reads the logits
  (``needs_logits``, CoPE) runs on it whatever the implementation asked for.
* ``sdpa``: ``F.scaled_dot_product_attention``; ``is_causal=True`` when there is neither bias
  nor window, else one cached 4-D float mask ``[1, H, T, T]`` (a 3-D mask drops to the math
  kernel); values narrower than q and k are padded to their width, which the fused kernels need.
  Past ``2 x BLOCK`` tokens a span with a bounded reach runs block by block (``blockwise_attention``).
* ``flex``: FlexAttention (PyTorch 2.5+) with the scheme's ``score_mod`` and a block mask built
  from the span's ``mask_mod``; the GPU path, selected by ``auto`` only on CUDA.

A data-dependent scheme's per-token signal (``PositionScheme.signal``, computed from the layer's
input) reaches every path as a score bias separable into a query and a key term
(``signal_bias``), or the scheme computes the layer's attention itself (``own_attention``).

Which path a layer runs is decided in one place, ``suite.model.attention_plan.plan``, from the
scheme's flags, the span's reach, the length and whether gradients are on; the memory pre-flight
(``suite.config.resources``) reads the same plan. All paths compute the same function;
``tests/test_attention.py`` holds them to the reference.

Decoding passes a layer's KV cache (``suite.model.cache``): the layer appends its new keys and
values (and, for a data-dependent scheme, its input) and attends from the new tokens to every
cached one, on the reference path, with the same hooks the full forward calls. Without a cache
the forward is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from suite.model.attention_plan import BLOCK, bias_kind, plan
from suite.model.cache import LayerCache
from suite.model.init import init_normal_
from suite.model.position import PositionScheme
from suite.model.position.base import at_least_float32
from suite.model.span import Span


@dataclass
class Context:
    """Per-forward state shared by all layers: positions and masks/biases built once.

    ``pos_k``: the key positions when they are more than the queries', the cached ones first
    (``PosBenchLM.forward`` with a KV cache); only the reference path takes such a (Tq, Tk) mask,
    the fused ones assume as many keys as queries. None: the keys are the queries, at ``pos``."""

    pos: torch.Tensor  # (Tq,) positions of the tokens this forward computes
    impl: str = "auto"
    want_logits: bool = False
    logits: list = field(default_factory=list)
    built: dict = field(default_factory=dict)
    pos_k: Optional[torch.Tensor] = None  # (Tk,) key positions, or None: ``pos``

    def __post_init__(self):
        if self.pos_k is not None and self.impl != "reference":
            raise ValueError(f"attention over cached keys runs on the reference path; got impl={self.impl!r}")

    @property
    def key_pos(self) -> torch.Tensor:
        """(Tk,) the key positions: ``pos_k``, or the queries' ``pos`` itself."""
        return self.pos if self.pos_k is None else self.pos_k

    def cached(self, key, build: Callable):
        if key not in self.built:
            self.built[key] = build()
        return self.built[key]


def reference_attention(q, k, v, bias: Optional[torch.Tensor], allowed: torch.Tensor,
                        logit_term: Optional[Callable] = None):
    """q, k, v: (B, H, T, D); bias (H, T, T), (B, H, T, T) or None; allowed (T, T) bool;
    ``logit_term(q, logits, bias)``: a scheme's ``PositionScheme.logit_term``, whose term (or None)
    is added to the masked logits. Returns (out, logits), the logits with the term."""
    logits = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    if bias is not None:
        logits = logits + bias.to(logits.dtype)
    logits = logits.masked_fill(~allowed, float("-inf"))
    term = None if logit_term is None else logit_term(q, logits, bias)
    if term is not None:
        logits = logits + term  # -inf stays -inf outside the span
    probs = torch.softmax(at_least_float32(logits), dim=-1).to(q.dtype)
    return probs @ v, logits


def with_terms(bias: Optional[torch.Tensor], terms: Optional[tuple]) -> Optional[torch.Tensor]:
    """A bias with a data-dependent scheme's separable terms added: ``terms`` (a (B, H, Tq),
    b (B, H, Tk)) give a_i + b_j, so the result is (B, H, Tq, Tk); ``bias`` unchanged without them."""
    if terms is None:
        return bias
    a, b = terms
    dense = a[..., :, None] + b[..., None, :]  # (B, H, Tq, Tk)
    return dense if bias is None else dense + bias.to(dense.dtype)


def sdpa(q, k, v, terms: Optional[tuple] = None, **kwargs):
    """``F.scaled_dot_product_attention`` with a data-dependent scheme's separable score terms
    (a (B, H, Tq), b (B, H, Tk)), or none. The query term is a constant per softmax row and drops
    out; the key term joins as one more dimension of q and k (q's entry sqrt(D), k's b_j, under
    the scale 1/sqrt(D)), so no T x T tensor is built. Below float32 a large key term has too few
    bits to share a dot product, so a + b is added as a (B, H, Tq, Tk) mask, computed in float32.
    q and k wider than v (PoPE's 2d against d): the fused kernels take one width for all three
    and the rest fall to the math kernel, which builds the T x T scores, so v is padded with zeros
    to q's width and the output cut back to v's."""
    width = v.shape[-1]
    if q.shape[-1] > width:
        return sdpa(q, k, F.pad(v, (0, q.shape[-1] - width)), terms, **kwargs)[..., :width]
    if terms is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    a, b = terms
    D = q.shape[-1]
    if q.dtype in (torch.float32, torch.float64):
        q = torch.cat((q, q.new_full((*q.shape[:-1], 1), math.sqrt(D))), dim=-1)  # (B, H, Tq, D + 1)
        k = torch.cat((k, b.unsqueeze(-1).to(k.dtype)), dim=-1)  # (B, H, Tk, D + 1)
        return F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(D), **kwargs)
    if kwargs.pop("is_causal", False):
        Tq, Tk = q.shape[-2], k.shape[-2]
        kwargs["attn_mask"] = torch.zeros(Tq, Tk, device=q.device).masked_fill(
            torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).triu(Tk - Tq + 1), float("-inf"))
    mask = with_terms(kwargs.pop("attn_mask", None), (a.float(), b.float()))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), **kwargs)


def float_mask(bias: Optional[torch.Tensor], allowed: torch.Tensor, dtype) -> torch.Tensor:
    """Bias and span folded into one additive 4-D mask, (1, H, T, T) or (1, 1, T, T): a new tensor.
    The scheme's ``bias`` is read, never written, so a scheme may return a tensor it keeps or an
    ``expand``ed view (no H x T x T of its own)."""
    if bias is None:
        add = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))
    else:
        add = bias.to(dtype).masked_fill(~allowed, float("-inf"))  # out of place: the bias stays the scheme's
    return add.unsqueeze(0) if add.dim() == 3 else add[None, None]


def blockwise_attention(q, k, v, scheme: PositionScheme, span: Span, pos: torch.Tensor, block: int = BLOCK,
                        terms: Optional[tuple] = None, logits: bool = False):
    """Attention for spans with a bounded reach (sliding window, chunks), one block of queries
    at a time against only the keys that block can see: O(T * (block + reach)) memory, no T x T
    tensor. The bias comes from the scheme for each block. ``logits`` (``Plan.logits``: a learned
    bias trains, T5's): each block runs the reference path, whose logits keep the bias's gradient;
    else SDPA with the block's float mask. ``terms``: a data-dependent scheme's separable terms
    (a, b), each (B, H, T), or None.
    """
    T, reach = q.shape[-2], span.reach
    outs = []
    for qs in range(0, T, block):
        qe = min(T, qs + block)
        ks = max(0, qs - reach + 1)
        pq, pk = pos[qs:qe], pos[ks:qe]
        allowed = span.allowed(pq, pk)  # (Bq, Bk)
        bias = scheme.bias(pq, pk)  # (H, Bq, Bk) or None
        qb, kb, vb = q[..., qs:qe, :], k[..., ks:qe, :], v[..., ks:qe, :]
        tb = None if terms is None else (terms[0][..., qs:qe], terms[1][..., ks:qe])
        if logits:
            outs.append(reference_attention(qb, kb, vb, with_terms(bias, tb), allowed)[0])
        else:
            outs.append(sdpa(qb, kb, vb, tb, attn_mask=float_mask(bias, allowed, q.dtype)))
    return torch.cat(outs, dim=-2)


_COMPILED_FLEX = None


def compiled_flex():
    """``flex_attention`` compiled once per process (FlexAttention's documented use): called
    uncompiled it materializes the full (B, H, T, T) scores. Its recompile limit is raised to
    cover every evaluation length and batch size of a run."""
    global _COMPILED_FLEX
    if _COMPILED_FLEX is None:
        from torch.nn.attention.flex_attention import flex_attention

        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _COMPILED_FLEX = torch.compile(flex_attention)
    return _COMPILED_FLEX


def with_key_term(score_mod: Optional[Callable], key_term: torch.Tensor) -> Callable:
    """``score_mod`` (or none) followed by adding a data-dependent key term (B, H, T) at each
    score's key: the fused form of a separable signal bias, whose query term leaves the softmax
    unchanged."""

    def add_key_term(score, b, h, q_idx, kv_idx):
        if score_mod is not None:
            score = score_mod(score, b, h, q_idx, kv_idx)
        return score + key_term[b, h, kv_idx]

    return add_key_term


def flex_attention_path(q, k, v, scheme: PositionScheme, span: Span, ctx: Context, terms: Optional[tuple] = None):
    """FlexAttention with the span's block mask and the scheme's score_mod, both built once per
    forward, and a data-dependent scheme's key term (``terms``) for this layer. Compiled on CUDA
    (inside a compiled model it is already traced); on the CPU it runs eagerly, which is what the
    tests hold to the reference."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    T = q.shape[-2]
    block_mask = ctx.cached(("block_mask", span.name, span.cfg, T),
                            lambda: create_block_mask(span.mask_mod(), None, None, T, T, device=q.device))
    score_mod = ctx.cached(("score_mod", id(scheme)), lambda: scheme.score_mod(ctx.pos))
    if terms is not None:
        score_mod = with_key_term(score_mod, at_least_float32(terms[1]))
    attend = compiled_flex() if q.is_cuda and not torch.compiler.is_compiling() else flex_attention
    return attend(q, k, v, score_mod=score_mod, block_mask=block_mask, kernel_options=scheme.flex_kernel_options)


class Attention(nn.Module):
    """Multi-head causal self-attention for one layer: its scheme and span are given per call."""

    def __init__(self, d_model: int, n_heads: int, n_layers: int, signal: Optional[nn.Module] = None):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        init_normal_(self.qkv.weight)
        init_normal_(self.out.weight, residual_layers=n_layers)
        self.signal = signal  # this layer's module of a data-dependent scheme (PositionScheme.signal), or None

    def forward(self, x, scheme: PositionScheme, span: Span, ctx: Context, cache: Optional[LayerCache] = None):
        """x (B, T, C) -> (B, T, C). With this layer's ``cache`` (decoding), x holds the tokens
        after the cached ones; they join the cache, and attend to it and to themselves."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)  # (B, H, T, D)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, Tk, D): every position so far, keys before the scheme's qk
            if self.signal is not None:
                x = cache.append_input(x)  # (B, Tk, C): a token's signal may read the tokens before it
        signal = None if self.signal is None else self.signal(x)  # (B, H, Tk, S)
        pos_q, pos_k = ctx.pos, ctx.key_pos
        q, k = scheme.qk(q, k, pos_q, pos_k)
        temp = scheme.temperature(pos_q)
        if temp is not None:
            q = q * temp.to(q.dtype)
        out = self._attend(q, k, v, scheme, span, ctx, signal)  # (B, H, T, D)
        return self.out(out.transpose(1, 2).reshape(B, T, C))

    def _attend(self, q, k, v, scheme, span, ctx, signal=None):
        """(B, H, Tq, D): the path ``plan`` names for this layer's facts, run."""
        pos, pos_k = ctx.pos, ctx.key_pos  # (Tq,), (Tk,): the same tensor unless a cache holds earlier keys
        terms = None if signal is None else scheme.signal_bias(signal)  # (a, b), each (B, H, Tk), or None
        if terms is not None and ctx.pos_k is not None:  # cached keys: the queries' rows are the last Tq
            terms = (terms[0][..., -q.shape[-2]:], terms[1])
        p = plan(ctx.impl, q.device.type, own_attention=scheme.own_attention, needs_logits=scheme.needs_logits,
                 bias=self._bias_kind(scheme, ctx), data_bias=terms is not None, reach=span.reach,
                 full=span.is_full, length=q.shape[-2], want_logits=ctx.want_logits, grad=torch.is_grad_enabled(),
                 below_fp32=q.dtype not in (torch.float32, torch.float64))
        if p.path == "own":
            out, logits = scheme.attend(q, k, v, signal, self._allowed(span, ctx))
        elif p.path == "flex":
            return flex_attention_path(q, k, v, scheme, span, ctx, terms)  # builds no H x T x T bias
        elif p.path == "blockwise":
            return blockwise_attention(q, k, v, scheme, span, pos, p.block, terms, p.logits)  # never T x T
        elif p.path == "causal":
            return sdpa(q, k, v, terms, is_causal=True)
        elif p.path == "masked":
            return sdpa(q, k, v, terms, attn_mask=self._mask(q, scheme, span, ctx))
        else:  # reference: the bias is kept in the context for the other layers of its scheme
            bias = ctx.cached(("bias", id(scheme)), lambda: scheme.bias(pos, pos_k))  # (H, Tq, Tk) or None
            allowed = self._allowed(span, ctx)  # (Tq, Tk)
            out, logits = reference_attention(q, k, v, with_terms(bias, terms), allowed, scheme.logit_term)
        if ctx.want_logits:
            ctx.logits.append(logits.detach())
        return out

    @staticmethod
    def _bias_kind(scheme, ctx) -> str:
        """"none", "fixed" or "learned" (it requires grad): the kind of ``scheme``'s bias, once per
        forward, read from its first block of queries and keys (the first the blockwise path
        builds), so no path builds an H x T x T bias to learn it. When the keys fit in one block
        that is the whole bias, kept for the path that reads it."""
        def first_block():
            bias = scheme.bias(ctx.pos[:BLOCK], ctx.key_pos[:BLOCK])  # (H, <= BLOCK, <= BLOCK) or None
            if ctx.key_pos.shape[0] <= BLOCK:
                ctx.built[("bias", id(scheme))] = bias  # (H, Tq, Tk)
            return bias_kind(bias)

        return ctx.cached(("bias kind", id(scheme)), first_block)

    @staticmethod
    def _allowed(span, ctx) -> torch.Tensor:
        """The span's (Tq, Tk) boolean mask, built once per forward."""
        return ctx.cached(("allowed", span.name, span.cfg), lambda: span.allowed(ctx.pos, ctx.key_pos))

    @staticmethod
    def _mask(q, scheme, span, ctx) -> torch.Tensor:
        """The (1, H, T, T) float mask of ``scheme``'s bias and ``span``, built once per forward and
        dtype. It is built from the bias out of place (the bias is the scheme's); the bias is
        dropped from the context once a mask holds it, and a layer with another span rebuilds the
        bias it needs."""
        mask_key, bias_key, pos = ("mask", id(scheme), span.name, span.cfg, q.dtype), ("bias", id(scheme)), ctx.pos
        if mask_key not in ctx.built:  # (H, T, T) or None
            bias = ctx.built.pop(bias_key) if bias_key in ctx.built else scheme.bias(pos, pos)
            ctx.built[mask_key] = float_mask(bias, span.allowed(pos, pos), q.dtype)
        return ctx.built[mask_key]
