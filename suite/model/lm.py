"""A pre-norm decoder-only transformer whose layers each carry a token mixer, a position scheme and a span.

Layout follows Llama (Touvron et al. 2023): RMSNorm before attention and MLP (Zhang & Sennrich
2019), SwiGLU feed-forward (Shazeer 2020), untied output head. Position schemes are shared
between the layers that use the same configuration (as T5 shares its bias table); absolute
schemes act once on the embeddings, relative ones inside every layer's attention. A
data-dependent scheme (FoX's forget gates, PaTH's transforms) also gives each of its layers a
module of its own, which that layer's attention calls on the layer's input.
A layer's token mixer (``suite.model.mixer``) is softmax attention, or a gated linear recurrence
(gated delta rule, scalar-gated linear attention) that reads neither scheme nor span; either sits
at ``Block.attn``, so hooks on a layer's mixer output see both.
The model never reads config: it receives a ``ModelSpec``.

A schedule (a layer's scheme changes at a training step, ``LayerSpec.earlier``) is a phase index:
the model builds every phase's scheme at once, so the optimizer holds all their parameters from
step 0 and keeps their state across a switch, and each layer uses its scheme of the phase set
with ``set_phase`` (the training loop sets it per step; a new model is in the last phase, the one
it is evaluated with). Only the schemes of the set phase act, on the embeddings as in the layers.

Decoding runs this same forward with a ``KVCache`` (``suite.model.cache``): the tokens are the
positions after the cached ones, and every layer attends to its cached keys as well.
"""
from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from suite.model.attention import Context
from suite.model.cache import KVCache, LayerCache
from suite.model.init import init_normal_
from suite.model.mixer import MIXERS
from suite.model.position import SCHEMES, Dims, PositionScheme
from suite.model.span import SPANS
from suite.model.spec import LayerSpec, ModelSpec


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int, n_layers: int):
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)
        init_normal_(self.gate_up.weight)
        init_normal_(self.down.weight, residual_layers=n_layers)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, layer: LayerSpec, phase_schemes: tuple[int, ...], span, signal: nn.Module | None = None):
        super().__init__()
        self.phase_schemes = phase_schemes  # the model's scheme index for each phase, the last phase's last
        self.scheme_index = phase_schemes[-1]
        self.span = span
        self.softmax = layer.softmax  # whether the mixer is softmax attention (it has logits)
        self.attn_norm = RMSNorm(spec.d_model, spec.norm_eps)
        self.attn = MIXERS[layer.mixer].build(layer.mixer_cfg, spec.d_model, spec.n_heads, spec.n_layers, signal)
        self.mlp_norm = RMSNorm(spec.d_model, spec.norm_eps)
        self.mlp = SwiGLU(spec.d_model, spec.d_ff, spec.n_layers)

    def forward(self, x, scheme: PositionScheme, ctx: Context, cache: LayerCache | None = None):
        x = x + self.attn(self.attn_norm(x), scheme, self.span, ctx, cache)  # (B, T, C)
        return x + self.mlp(self.mlp_norm(x))


class PosBenchLM(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        dims = Dims(spec.d_model, spec.n_heads, spec.head_dim, spec.train_len)
        self.n_phases = 1 + max(len(layer.earlier) for layer in spec.layers)
        if any(len(layer.earlier) not in (0, self.n_phases - 1) for layer in spec.layers):
            raise ValueError(f"every layer with earlier schemes needs one per earlier phase ({self.n_phases - 1}); "
                             f"got {[len(layer.earlier) for layer in spec.layers]}")
        # the last phase's schemes first (in layer order, as a model without a schedule holds them), then
        # those only an earlier phase uses
        distinct = list(dict.fromkeys([(layer.position, layer.position_cfg) for layer in spec.layers]
                                      + [s for layer in spec.layers for s in layer.earlier]))
        self.schemes = nn.ModuleList(SCHEMES[name](cfg, dims) for name, cfg in distinct)
        self.embed = nn.Embedding(spec.vocab_size, spec.d_model)
        init_normal_(self.embed.weight)  # GPT-2 scale: layer outputs matter from step one
        index = [tuple(distinct.index(s) for s in (layer.phases if layer.earlier else (layer.phases[-1],) * self.n_phases))
                 for layer in spec.layers]
        # a data-dependent scheme gives each of its layers a signal module of its own (the last
        # phase's: the configuration refuses a data-dependent scheme in an earlier phase)
        self.blocks = nn.ModuleList(
            Block(spec, layer, i, SPANS[layer.span](layer.span_cfg), self.schemes[i[-1]].signal())
            for i, layer in zip(index, spec.layers)
        )
        # per phase, the schemes its layers use, in the model's order: they alone embed
        self._active = [sorted({block.phase_schemes[k] for block in self.blocks}) for k in range(self.n_phases)]
        self.phase = self.n_phases - 1
        self.norm = RMSNorm(spec.d_model, spec.norm_eps)
        self.head = nn.Linear(spec.d_model, spec.vocab_size, bias=False)
        init_normal_(self.head.weight)

    def set_phase(self, phase: int) -> None:
        """Use each layer's scheme of schedule phase ``phase`` (0 to ``n_phases - 1``, the last the
        evaluated one) from the next forward on."""
        if not 0 <= phase < self.n_phases:
            raise ValueError(f"phase {phase}: this model has phases 0 to {self.n_phases - 1}")
        self.phase = phase

    def active_schemes(self) -> list[PositionScheme]:
        """The schemes the layers use in the set phase, in the model's order."""
        return [self.schemes[i] for i in self._active[self.phase]]

    def max_length(self) -> int | None:
        """Longest input every scheme of the set phase can represent (None: unbounded)."""
        limits = [m for s in self.active_schemes() if (m := s.max_length()) is not None]
        return min(limits) if limits else None

    def forward(self, tokens: torch.Tensor, ctx: Context | None = None, cache: KVCache | None = None) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, vocab). With a ``cache`` (decoding), ``tokens`` are the T
        positions after the cached ones; they join the cache, and the logits are those the forward
        over the cached tokens followed by ``tokens`` gives at their positions."""
        T = tokens.shape[1]
        if cache is not None:
            if ctx is not None:
                raise ValueError("a forward with a KV cache builds its own context (the cached key positions)")
            pos_k = torch.arange(cache.length + T, device=tokens.device)  # (Tk,) cached positions, then the new
            ctx = Context(pos=pos_k[cache.length :], pos_k=pos_k, impl="reference")
        elif ctx is None:
            ctx = Context(pos=torch.arange(T, device=tokens.device), impl=self.spec.attention)
        x = self.embed(tokens)  # (B, T, C)
        for scheme in self.active_schemes():
            x = scheme.embed(x, ctx.pos)
        for i, block in enumerate(self.blocks):
            x = block(x, self.schemes[block.phase_schemes[self.phase]], ctx, None if cache is None else cache.layers[i])
        return self.head(self.norm(x))

    def softmax_layers(self) -> list[int]:
        """The indices of the layers whose mixer is softmax attention, in order."""
        return [i for i, block in enumerate(self.blocks) if block.softmax]

    @torch.no_grad()
    def attention_logits(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Pre-softmax logits per softmax-attention layer (``softmax_layers``), each (B, H, T, T),
        masked entries -inf; a gated linear layer has none."""
        ctx = Context(pos=torch.arange(tokens.shape[1], device=tokens.device), impl="reference", want_logits=True)
        self.forward(tokens, ctx)
        return ctx.logits

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
