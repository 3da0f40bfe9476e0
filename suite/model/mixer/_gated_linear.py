"""What the gated linear mixers share: the layer (projections, short convolution, gates, gated
output norm) and the recurrence in its chunked form (training, prefill) and its step form
(decoding). A mixer (``gated_delta.py``, ``gla.py``) supplies only its state update, a ``Rule``.

The layer follows Gated DeltaNet (Yang, Kautz & Hatamizadeh, "Gated Delta Networks: Improving
Mamba2 with Delta Rule", ICLR 2025) as Qwen3-Next's linear-attention layers build it, checked
against Hugging Face transformers ``models/qwen3_next/modeling_qwen3_next.py``
(``Qwen3NextGatedDeltaNet``, ``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``)
and flash-linear-attention ``fla/layers/gated_deltanet.py`` and ``fla/ops/gated_delta_rule/naive.py``:

    q, k, v = SiLU(causal depthwise conv_K(x W_qkv))        per head: (D,) each, K = conv_size
    q, k    = q / |q|, k / |k|;  q = q / sqrt(D)
    beta_t  = sigmoid(x_t W_b)                              per head, the delta rule's step size
    g_t     = -exp(A_log) * softplus(x_t W_a + dt_bias)     per head, log decay (<= 0)
    S_t     = rule(S_{t-1}, exp(g_t), k_t, v_t, beta_t)     (D_k, D_v) state per head
    o_t     = S_t^T q_t
    y_t     = W_o [RMSNorm(o_t) * SiLU(x_t W_z)]            the norm per head, weights shared by heads

Choices at this scale, and where they depart from the references:

* heads and head sizes: the model's ``n_heads`` and ``head_dim`` for q, k and v alike (Qwen3-Next
  has twice as many value heads as key heads; FLA widens values by ``expand_v=2``). The layer has
  5 C^2 projection weights (q, k, v, the output gate, the output) against attention's 4 C^2, plus
  2 H per token-gate row and 3 C K for the convolution: the output gate is the one extra matrix.
* one projection for q, k, v and one for the output gate z, the decay's input a and beta's
  logit b, where Qwen3-Next fuses q, k, v, z and then b, a: the same maps, in other rows.
* initialization: projections GPT-2's normal init, the output one scaled by depth as in every
  layer here (``suite.model.init``); ``A`` uniform in [1, 16] and ``dt_bias`` the inverse softplus
  of a ``dt`` log-uniform in [0.001, 0.1], as FLA's layer (transformers copies them from the
  checkpoint); the convolution PyTorch's ``Conv1d`` default, uniform within 1/sqrt(K).
* no bias anywhere, the convolution included, as both references.

The chunked form is derived for this file, not ported: within a chunk of C positions with the
state S_0 before it, cumulative log decays G_i and Gamma_i = exp(G_i), the state after i is

    S_i = Gamma_i S_0 + sum_{j <= i} (Gamma_i / Gamma_j) k_j u_j^T

where u_j is what position j writes: v_j for the scalar-gated rule, and for the delta rule the
solution of the unit lower-triangular system (I + A) U = beta V - (beta Gamma K) S_0 with
A_ij = beta_i (Gamma_i / Gamma_j) k_i . k_j for j < i (``Rule.chunk_terms`` returns its two
right-hand sides solved, so U = base - corr S_0 in the loop). The outputs are
O = diag(Gamma) Q S_0 + [(Q K^T) * decay] U and the state after the chunk is
Gamma_C S_0 + (K * Gamma_C / Gamma_j)^T U. Transformers forms the inverse of (I + A) row by row;
this file solves with ``torch.linalg.solve_triangular``, which has a backward pass. A length that
is no multiple of the chunk is padded with k = v = q = 0, g = 0 and beta = 0: the padding writes
nothing and decays nothing, so the state after it is the state after the last token.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from suite.model.cache import LayerCache
from suite.model.init import init_normal_
from suite.model.mixer.base import Mixer, MixerConfig
from suite.model.position.base import at_least_float32
from suite.options import option

CHUNK_MAX = 1024  # the chunk's (C, C) matrices per head grow with its square
CONV_MAX = 64


@dataclass(frozen=True)
class GatedLinearConfig(MixerConfig):
    chunk_size: int = option(64, ge=1, le=CHUNK_MAX, doc="positions per chunk of the chunked (training) form")
    conv_size: int = option(4, ge=1, le=CONV_MAX, doc="kernel of the short causal depthwise convolution on q, k, v")

    def __post_init__(self):
        for key, high in (("chunk_size", CHUNK_MAX), ("conv_size", CONV_MAX)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValueError(f"{key}={value!r}: must be an integer in [1, {high}]")


class Rule:
    """A gated linear state update: what position t writes into the decayed state."""

    uses_beta = False  # whether the layer draws a per-head step size beta_t

    def chunk_terms(self, k, v, beta, gamma, decay):
        """(base, corr): a chunk's writes U = base - corr @ S_0 (corr None: U = base), each
        (B, H, N, C, D) for N chunks, from k (B, H, N, C, Dk), v (B, H, N, C, Dv), beta (B, H, N, C)
        or None, gamma = Gamma_i (B, H, N, C) and decay (B, H, N, C, C) = Gamma_i / Gamma_j for
        j <= i, else 0."""
        raise NotImplementedError

    def step_value(self, state, k, v, beta):
        """u_t (B, H, Dv) from the decayed state (B, H, Dk, Dv), k (B, H, Dk), v (B, H, Dv), beta (B, H)."""
        raise NotImplementedError


def chunked(q, k, v, g, beta, rule: Rule, chunk: int, state: Optional[torch.Tensor] = None):
    """The recurrence over (B, H, T, D) inputs, ``chunk`` positions at a time: q, k (B, H, T, Dk),
    v (B, H, T, Dv), log decays g (B, H, T), beta (B, H, T) or None, the state before (B, H, Dk, Dv)
    or None (zeros). Returns (outputs (B, H, T, Dv), state after the last position)."""
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    pad = (-T) % chunk
    if pad:  # padding writes nothing (k = v = beta = 0) and decays nothing (g = 0)
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g = F.pad(g, (0, pad))
        beta = None if beta is None else F.pad(beta, (0, pad))
    N = (T + pad) // chunk
    q, k, v = (t.reshape(B, H, N, chunk, t.shape[-1]) for t in (q, k, v))  # (B, H, N, C, D)
    g = g.reshape(B, H, N, chunk)
    beta = None if beta is None else beta.reshape(B, H, N, chunk)
    G = g.cumsum(-1)  # (B, H, N, C): log Gamma_i within each chunk
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    decay = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")))  # (B, H, N, C, C)
    base, corr = rule.chunk_terms(k, v, beta, torch.exp(G), decay)
    scores = (q @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C): q_i . k_j Gamma_i / Gamma_j, j <= i
    q_in = q * torch.exp(G)[..., None]  # reads the state before the chunk, decayed to i
    k_out = k * torch.exp(G[..., -1:] - G)[..., None]  # writes decayed to the chunk's end
    end = torch.exp(G[..., -1])[..., None, None]  # (B, H, N, 1, 1)
    S = q.new_zeros(B, H, Dk, Dv) if state is None else state
    outs = []
    for n in range(N):
        u = base[:, :, n] if corr is None else base[:, :, n] - corr[:, :, n] @ S  # (B, H, C, Dv)
        outs.append(q_in[:, :, n] @ S + scores[:, :, n] @ u)
        S = end[:, :, n] * S + k_out[:, :, n].transpose(-1, -2) @ u
    return torch.cat(outs, dim=-2)[:, :, :T], S


def recurrent(q, k, v, g, beta, rule: Rule, state: Optional[torch.Tensor] = None):
    """The same recurrence one position at a time (decoding): same arguments and results as ``chunked``."""
    B, H, T, Dk = k.shape
    S = q.new_zeros(B, H, Dk, v.shape[-1]) if state is None else state
    outs = []
    for t in range(T):
        S = torch.exp(g[:, :, t])[..., None, None] * S
        u = rule.step_value(S, k[:, :, t], v[:, :, t], None if beta is None else beta[:, :, t])  # (B, H, Dv)
        S = S + k[:, :, t, :, None] * u[:, :, None, :]
        outs.append((S * q[:, :, t, :, None]).sum(-2))  # S^T q: (B, H, Dv)
    return torch.stack(outs, dim=2), S


def inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class GatedLinear(nn.Module):
    """One gated linear layer; ``rule`` is its state update."""

    def __init__(self, cfg: GatedLinearConfig, d_model: int, n_heads: int, n_layers: int, rule: Rule):
        super().__init__()
        self.cfg, self.rule, self.n_heads = cfg, rule, n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.conv = nn.Parameter(torch.empty(3 * d_model, 1, cfg.conv_size))  # depthwise, causal
        # the output gate z (C), the decay's input a (H) and, for a rule with beta, its logit b (H)
        self.splits = [d_model, n_heads] + ([n_heads] if rule.uses_beta else [])
        self.zab = nn.Linear(d_model, sum(self.splits), bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(n_heads).uniform_(1.0, 16.0)))
        dt = torch.exp(torch.empty(n_heads).uniform_(math.log(1e-3), math.log(1e-1))).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(inverse_softplus(dt))
        self.norm = nn.Parameter(torch.ones(self.head_dim))
        self.out = nn.Linear(d_model, d_model, bias=False)
        for lin in (self.qkv, self.zab):
            init_normal_(lin.weight)
        init_normal_(self.out.weight, residual_layers=n_layers)
        bound = 1 / math.sqrt(cfg.conv_size)
        nn.init.uniform_(self.conv, -bound, bound)

    def gates(self, a, b=None):
        """(log decays g, beta or None), each (B, H, T), in at least float32, from the projections
        a and b (B, T, H)."""
        g = -torch.exp(at_least_float32(self.A_log)) * F.softplus(at_least_float32(a) + at_least_float32(self.dt_bias))
        beta = None if b is None else torch.sigmoid(at_least_float32(b))
        return g.transpose(1, 2), None if beta is None else beta.transpose(1, 2)

    def forward(self, x, scheme=None, span=None, ctx=None, cache: Optional[LayerCache] = None):
        """x (B, T, C) -> (B, T, C); the scheme, span and context an attention layer takes are not
        read. With this layer's ``cache`` (decoding), x holds the tokens after the cached ones: the
        convolution reads the cached inputs before them and the recurrence starts from the cached
        state (one token: the step form; more: the chunked form)."""
        B, T, C = x.shape
        H, D, K = self.n_heads, self.head_dim, self.cfg.conv_size
        mixed = self.qkv(x)  # (B, T, 3C)
        before = None if cache is None else cache.conv
        if before is None:
            before = mixed.new_zeros(B, K - 1, 3 * C)  # causal padding: nothing before the first token
        padded = torch.cat((before, mixed), dim=1)  # (B, K - 1 + T, 3C)
        conv = F.silu(F.conv1d(padded.transpose(1, 2), self.conv, groups=3 * C)).transpose(1, 2)  # (B, T, 3C)
        q, k, v = conv.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # (B, H, T, D)
        dtype = q.dtype
        q, k, v = (at_least_float32(t) for t in (q, k, v))
        q = F.normalize(q, dim=-1, eps=1e-6) / math.sqrt(D)
        k = F.normalize(k, dim=-1, eps=1e-6)
        # z, a and b share one projection, as Qwen3-Next's: besides, a compiled backward (aot_eager,
        # torch 2.13) fails to view the transposed gradient of a projection of a alone
        z, *ab = self.zab(x).split(self.splits, dim=-1)
        g, beta = self.gates(*ab)
        g, beta = g.to(q.dtype), None if beta is None else beta.to(q.dtype)
        state = None if cache is None else cache.state
        if cache is not None and T == 1:
            o, state = recurrent(q, k, v, g, beta, self.rule, state)
        else:
            o, state = chunked(q, k, v, g, beta, self.rule, self.cfg.chunk_size, state)
        if cache is not None:
            cache.advance(state, padded[:, padded.shape[1] - (K - 1):], T)
        o = F.rms_norm(o.to(dtype), (D,), self.norm, 1e-5)  # (B, H, T, D), per head
        z = z.reshape(B, T, H, D).transpose(1, 2)
        return self.out((o * F.silu(z)).transpose(1, 2).reshape(B, T, C))


class GatedLinearMixer(Mixer):
    """A gated linear recurrence as a layer's mixer: no softmax, no span, no position scheme."""

    Config = GatedLinearConfig
    softmax = False
    rule: type[Rule]

    @classmethod
    def build(cls, cfg, d_model, n_heads, n_layers, signal=None):
        return GatedLinear(cfg, d_model, n_heads, n_layers, cls.rule())

    @classmethod
    def check_layer(cls, position, position_cfg, span):
        problems = []
        if position != "nope":
            problems.append(f"position {position!r} (valid: nope; its order comes from its recurrence)")
        elif position_cfg.log_scale:
            problems.append("position nope with log_scale (valid: log_scale false; it has no softmax to scale)")
        if span != "full":
            problems.append(f"span {span!r} (valid: full; it has no score matrix to mask)")
        if problems:
            raise ValueError(f"mixer {cls.name} takes no position scheme and no span: got {' and '.join(problems)}")

    @classmethod
    def held_floats(cls, cfg, d_model, n_heads, batch, length, training):
        """The chunk matrices (decay, q.k, and for the delta rule k.k and its solves: about 4 of
        C x C per chunk and head), the conv's and gates' outputs (3C + 2H per token) and the state
        after each chunk (H D^2 per chunk), all kept for the backward pass when training."""
        chunk, head_dim = cfg.chunk_size, d_model // n_heads
        chunks = -(-length // chunk)
        per_chunk = n_heads * (4 * chunk * chunk + head_dim * head_dim)
        return batch * (chunks * per_chunk + length * (3 * d_model + 2 * n_heads))
