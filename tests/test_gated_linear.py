"""The gated linear mixers (suite/model/mixer/: ``gated_delta``, ``gla``) against a naive float64
loop over the papers' equations, their decoding state against the full forward, and the patterns,
checks, diagnostics, digests and columns that carry them.

The naive loop below is written from the equations, not from the code under test: a convolution
summed tap by tap, and per token S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
(Gated DeltaNet, Yang et al. ICLR 2025) or S_t = a_t S_{t-1} + k_t v_t^T (scalar-gated linear
attention), o_t = S_t^T q_t. In float64 the chunked form meets it to 1e-10 (outputs and every
parameter's gradient; measured: at most 8e-15), the step form and the chunked form with a cached
state meet the full forward to 1e-10, and a float32 model's cached decoding to 1e-4.

Mutation checks, each watched failing (then restored), in suite/model/mixer/:
* no decay: in _gated_linear.py ``GatedLinear.gates``, ``g = -torch.exp(...) * F.softplus(...)``
  -> ``g = 0 * (...)`` makes test_chunked_form_equals_the_naive_recurrence fail (both rules);
* no beta: in gated_delta.py ``DeltaRule.chunk_terms``, ``beta[..., None] * v`` -> ``v`` makes
  test_chunked_form_equals_the_naive_recurrence[gated_delta-*] fail;
* delta term dropped: in _gated_linear.py ``chunked``, ``base[:, :, n] - corr[:, :, n] @ S`` ->
  ``base[:, :, n]`` makes test_chunked_form_equals_the_naive_recurrence[gated_delta-*] (chunks
  shorter than the sequence) and test_decoding_from_the_cached_state_equals_the_full_forward fail;
* wrong chunk boundary state: in _gated_linear.py ``chunked``, ``S = end[:, :, n] * S + ...`` ->
  ``S = S + ...`` (the state carried undecayed into the next chunk) makes
  test_chunked_form_equals_the_naive_recurrence fail for every chunk shorter than the sequence;
* in the step form, ``S = torch.exp(g[:, :, t])[..., None, None] * S`` -> ``S = S`` makes
  test_decoding_from_the_cached_state_equals_the_full_forward fail;
* the convolution's cached inputs: ``cache.advance(state, padded[:, padded.shape[1] - (K - 1):], T)``
  -> ``cache.advance(state, mixed[:, -(K - 1):], T)`` makes the decoding test fail (a 1-token step
  keeps one input, not K - 1).
Others are named in each test's docstring.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from suite.config.build import SpecError, resolve_layers
from suite.config.codedigest import ROOT, numeric_files, pieces_of
from suite.config.resources import _attention_bytes
from suite.evaluation import diagnostics as dg
from suite.lmeval.kv_cache import extend, prefill
from suite.model.cache import KVCache, LayerCache
from suite.model.lm import PosBenchLM
from suite.model.mixer import MIXERS
from suite.model.mixer._gated_linear import GatedLinearConfig
from suite.report.labels import flatten
from suite.results.identity import run_columns
from tests.conftest import fast_or_exhaustive, make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

RULES = ("gated_delta", "gla")
SMALL = ["model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=16", "eval.multiples=[1,2]", "task=copy"]


def _layer(rule: str, chunk: int, d_model: int = 16, n_heads: int = 2, seed: int = 0):
    """A float64 layer whose weights are drawn wide enough that decay, beta and the delta term
    all move the outputs."""
    torch.manual_seed(seed)
    layer = MIXERS[rule].build(GatedLinearConfig(chunk_size=chunk), d_model, n_heads, 2).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.5)
    return layer


def naive(layer, x: torch.Tensor, delta: bool) -> torch.Tensor:
    """The layer's output from its parameters, token by token, from the equations."""
    B, T, C = x.shape
    H = layer.n_heads
    D = C // H
    w = layer.conv[:, 0, :]  # (3C, K)
    K = w.shape[-1]
    mixed = x @ layer.qkv.weight.T  # (B, T, 3C)
    conv = torch.zeros_like(mixed)
    for t in range(T):
        for j in range(K):  # tap j reads position t - (K - 1) + j
            if t - (K - 1) + j >= 0:
                conv[:, t] = conv[:, t] + w[:, j] * mixed[:, t - (K - 1) + j]
    conv = conv * torch.sigmoid(conv)  # SiLU
    q, k, v = (part.reshape(B, T, H, D) for part in conv.split(C, dim=-1))
    q = q / q.norm(dim=-1, keepdim=True) / math.sqrt(D)
    k = k / k.norm(dim=-1, keepdim=True)
    zab = x @ layer.zab.weight.T  # (B, T, C + H [+ H]): the output gate, the decay's input, beta's logit
    z, a = zab[..., :C].reshape(B, T, H, D), zab[..., C : C + H]
    g = -torch.exp(layer.A_log) * torch.log1p(torch.exp(a + layer.dt_bias))
    beta = torch.sigmoid(zab[..., C + H :]) if delta else None
    S = x.new_zeros(B, H, D, D)  # (Dk, Dv) per head
    eye = torch.eye(D, dtype=x.dtype)
    outs = []
    for t in range(T):
        kt, vt, alpha = k[:, t], v[:, t], torch.exp(g[:, t])[..., None, None]  # (B, H, D), (B, H, 1, 1)
        outer = kt[..., :, None] * vt[..., None, :]  # k v^T
        if delta:
            b = beta[:, t][..., None, None]
            S = alpha * ((eye - b * kt[..., :, None] * kt[..., None, :]) @ S) + b * outer
        else:
            S = alpha * S + outer
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    o = torch.stack(outs, dim=1)  # (B, T, H, D)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-5) * layer.norm
    return (o * z * torch.sigmoid(z)).reshape(B, T, C) @ layer.out.weight.T


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_chunked_form_equals_the_naive_recurrence(rule, chunk):
    """Outputs and the gradients of the input and every parameter, at a length (37) that is no
    multiple of the chunk (64: one padded chunk). Mutations: see the module docstring."""
    layer = _layer(rule, chunk)
    x = torch.randn(2, 37, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    weight = torch.randn(2, 37, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    params = [x, *layer.parameters()]
    got = layer(x)
    want = naive(layer, x, delta=rule == "gated_delta")
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    got_grads = torch.autograd.grad((got * weight).sum(), params)
    want_grads = torch.autograd.grad((want * weight).sum(), params)
    names = ["x", *(n for n, _ in layer.named_parameters())]
    assert len(names) == len(got_grads) == 8  # x and 7 parameters
    assert layer.zab.weight.shape[0] == (16 + 2 * 2 if rule == "gated_delta" else 16 + 2)  # gla draws no beta
    for name, a, b in zip(names, got_grads, want_grads):
        assert b.abs().max() > 1e-6, name  # every parameter moves the output
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("rule", RULES)
def test_decoding_from_the_cached_state_equals_the_full_forward(rule):
    """A prefix by the chunked form, then single steps by the recurrent form, then a block by the
    chunked form from the cached state: the full forward's rows, and the cache counts the positions.
    Mutation: ``cache.advance(state, ..., T)`` -> ``cache.advance(state, ..., 1)`` makes the count fail."""
    layer = _layer(rule, chunk=4)
    x = torch.randn(2, 30, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = layer(x)
        cache = LayerCache()
        pieces = [layer(x[:, :11], cache=cache)]
        pieces += [layer(x[:, t : t + 1], cache=cache) for t in range(11, 25)]
        pieces.append(layer(x[:, 25:], cache=cache))
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-10, atol=1e-10)
    assert cache.length == 30 and cache.state.shape == (2, 2, 8, 8) and cache.conv.shape == (2, 3, 48)


@pytest.mark.parametrize("arch", ["qwen3_next", "gdn_nope", "gla_nope"])
def test_a_hybrids_cached_logits_are_the_full_forwards(arch):
    """The model's decoding (lm-eval's prefill and one-token steps) with gated linear and attention
    layers together: the cache's length is the positions seen when the first layer keeps no keys,
    and rows leave the batch (``KVCache.keep``) with their state.
    Mutation: ``KVCache.length`` back to ``layers[0].keys`` (0 for a gated first layer) makes it fail."""
    torch.manual_seed(0)
    model = PosBenchLM(make_spec(f"+arch={arch}", "model.n_layers=4", "pattern.chunk_size=4", *SMALL).model).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    tokens = torch.randint(3, 300, (3, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        logits, cache = prefill(model, tokens[:, :11], block=4)
        steps = [logits] + [extend(model, tokens[:, t : t + 1], cache)[:, -1] for t in range(11, 20)]
        cache.keep(torch.tensor([2, 0]))  # row 1 leaves; rows 2 and 0 go on, in that order
        steps = torch.stack(steps, dim=1)[[2, 0]]
        rest = torch.cat([extend(model, tokens[[2, 0], t : t + 1], cache) for t in range(20, 30)], dim=1)
    assert cache.length == 30
    torch.testing.assert_close(steps, full[[2, 0], 10:20], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rest, full[[2, 0], 20:], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rule", RULES)
def test_a_later_token_never_changes_an_earlier_output(rule):
    """Changing token 13 leaves every output before it as it was, across chunk boundaries (chunk 4),
    and changes output 13. Mutation: in ``chunked``, the intra-chunk mask ``.tril()`` -> ``.tril(1)``
    (each position also reads the next) makes it fail."""
    layer = _layer(rule, chunk=4)
    x = torch.randn(1, 24, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    y = x.clone()
    y[:, 13] += 1.0
    with torch.no_grad():
        a, b = layer(x), layer(y)
    assert torch.equal(a[:, :13], b[:, :13])
    assert (a[:, 13] - b[:, 13]).abs().max() > 1e-3


@pytest.mark.parametrize("rule", fast_or_exhaustive(list(RULES), ["gated_delta"]))  # gla shares the layer
def test_the_forward_compiles_as_one_graph(rule):
    """torch.compile (aot_eager, one graph) of a gated linear layer's model in training mode: its
    outputs and gradients are the eager ones."""
    torch._dynamo.reset()
    arch = {"gated_delta": "qwen3_next", "gla": "gla_nope"}[rule]
    model = PosBenchLM(make_spec(f"+arch={arch}", "model.n_layers=1", "pattern.chunk_size=8", *SMALL).model).train()
    assert model.spec.layers[0].mixer == rule
    tokens = torch.randint(0, model.spec.vocab_size, (2, 21))
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    out = compiled(tokens)
    grads = torch.autograd.grad(out.square().mean(), list(model.parameters()))
    eager = model(tokens)
    want = torch.autograd.grad(eager.square().mean(), list(model.parameters()))
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_qwen3_next_tiles_three_gated_delta_layers_and_one_attention_layer():
    """Over 8 layers: gated delta at 0-2 and 4-6 (NoPE, full), attention at 3 and 7 with the run's
    position group; the pattern's chunk_size reaches every gated layer."""
    spec = make_spec("+arch=qwen3_next", "position=alibi", "model.n_layers=8", "pattern.chunk_size=16", *SMALL).model
    kinds = [(layer.mixer, layer.position, layer.span) for layer in spec.layers]
    gated, attention = ("gated_delta", "nope", "full"), ("attention", "alibi", "full")
    assert kinds == [gated, gated, gated, attention] * 2
    assert {layer.mixer_cfg for layer in spec.layers if layer.mixer != "attention"} == {GatedLinearConfig(16, 4)}
    assert [type(layer.mixer_cfg).__name__ for layer in spec.layers[3::4]] == ["MixerConfig"] * 2
    hybrid = make_spec("+arch=gdn_nope", "model.n_layers=4", *SMALL).model
    assert [(layer.mixer, layer.position) for layer in hybrid.layers] == [("gated_delta", "nope"), ("attention", "nope")] * 2


@pytest.mark.parametrize("kind,message", [
    ({"mixer": "mamba"}, r"layer 0 \(rope, full, mamba\) of pattern 'p': unknown mixer 'mamba'; valid mixers: "
                         r"attention, gated_delta, gla"),
    ({"mixer": "gated_delta", "position": "nope", "span": "swa"},
     r"layer 0 \(nope, swa, gated_delta\) of pattern 'p': mixer gated_delta takes no position scheme and no span: "
     r"got span 'swa' \(valid: full"),
    ({"mixer": "gla"}, r"layer 0 \(rope, full, gla\) of pattern 'p': .*got position 'rope' \(valid: nope"),
    ({"mixer": "gla", "position": "nope", "log_scale": True}, r"position nope with log_scale \(valid: log_scale false"),
])
def test_a_layer_kind_a_mixer_cannot_take_is_refused_naming_the_layer_and_the_choices(kind, message):
    """Mutation: ``m_cls.check_layer(...)`` removed from resolve_layers makes the last three fail."""
    with pytest.raises(SpecError, match=message):
        resolve_layers({"name": "rope"}, {"name": "full"}, {"name": "p", "layers": [kind], "window": 4}, 2)


def test_a_bad_chunk_size_is_refused_by_its_key_and_range():
    with pytest.raises(SpecError, match=r"pattern\.chunk_size.*0"):
        make_spec("+arch=qwen3_next", "pattern.chunk_size=0", *SMALL)
    with pytest.raises(ValueError, match=r"chunk_size=0: must be an integer in \[1, 1024\]"):
        GatedLinearConfig(chunk_size=0)


def test_the_recency_profile_reads_a_gated_layers_output_and_the_logit_diagnostics_skip_it():
    """The recency cosine at a gated delta layer's ``attn_out`` site is that of the mixer's own
    output; logit profiles and attention mass cover the attention layers only, by their index.
    Mutation: ``zip(model.softmax_layers(), ...)`` -> ``enumerate(...)`` in diagnostic_rows makes it fail."""
    torch.manual_seed(0)
    model = PosBenchLM(make_spec("+arch=gdn_nope", "model.n_layers=4", *SMALL).model).eval()
    tokens = torch.randint(9, 300, (3, 16), generator=torch.Generator().manual_seed(5))
    rows = dg.diagnostic_rows(model, [_example(t) for t in tokens.tolist()], "init")
    lags = dg.lag_grid(16)
    with torch.no_grad():
        mixer_out = model.blocks[0].attn(model.blocks[0].attn_norm(model.embed(tokens)))
    want = dg.cosine_profile(mixer_out, lags)
    got = [r["value"] for r in rows if r["metric"] == "recency_cos" and r["slice"].startswith("at=init,layer=0,site=attn_out,")]
    torch.testing.assert_close(torch.tensor(got), want, rtol=1e-5, atol=1e-6)
    recency_layers = {int(r["slice"].split("layer=")[1].split(",")[0]) for r in rows if r["metric"] == "recency_gap"}
    logit_layers = {int(r["slice"].split("layer=")[1].split(",")[0]) for r in rows if r["metric"] == "logit_gap"}
    assert recency_layers == {0, 1, 2, 3} and logit_layers == {1, 3}
    assert dg.skipped_layers(model) == [0, 2] and model.softmax_layers() == [1, 3]


def _example(tokens):
    from tasks.base import Example

    return Example(tokens=tokens, answer_spans=[(len(tokens) - 2, len(tokens))], meta={})


def test_the_memory_preflight_counts_a_gated_layers_chunks_and_state():
    """A gated delta layer beside a causal NoPE layer on SDPA (which builds no scores): the
    estimate is the mixer's declared floats. Mutation: ``total = total + held`` -> ``total = total``
    makes it fail."""
    spec = make_spec("+arch=gdn_nope", "model.n_layers=2", "pattern.chunk_size=8", *SMALL)
    held = MIXERS["gated_delta"].held_floats(GatedLinearConfig(8), 32, 4, 5, 16, True)
    assert held == 5 * (2 * 4 * (4 * 64 + 64) + 16 * (96 + 8))  # 2 chunks of 8, head size 8
    assert _attention_bytes(spec, torch.device("cpu"), 5, 16, training=True) == held * 4


def test_a_run_hashes_the_mixer_files_it_uses():
    """An attention run hashes no gated linear file; a gated delta run hashes its rule and the
    shared layer but not gla's. Mutation: ``"mixer": ...`` dropped from ``pieces_of`` makes it fail."""
    def files(*overrides):
        return {f.relative_to(ROOT).as_posix() for f in numeric_files(ROOT, **pieces_of(make_spec(*overrides, *SMALL).to_dict()))}

    rope, qwen, gla = files("+arch=rope"), files("+arch=qwen3_next"), files("+arch=gla_nope")
    shared, delta, scalar = ("suite/model/mixer/_gated_linear.py", "suite/model/mixer/gated_delta.py",
                             "suite/model/mixer/gla.py")
    assert "suite/model/mixer/attention.py" in rope and not {shared, delta, scalar} & rope
    assert {shared, delta} <= qwen and scalar not in qwen
    assert {shared, scalar} <= gla and delta not in gla


def test_result_columns_and_labels_show_the_mixer():
    """Mutation: ``LayerSpec.mixing`` (suite/model/spec.py) returning ``self.span`` makes the spans columns equal."""
    qwen, rope = make_spec("+arch=qwen3_next", *SMALL), make_spec("+arch=rope", *SMALL)
    assert run_columns(qwen)["spans"] == "gated_delta+full" and run_columns(rope)["spans"] == "full"
    assert run_columns(make_spec("+arch=gla_nope", *SMALL))["spans"] == "gla+full"
    flat = flatten(make_spec("+arch=qwen3_next", "pattern.chunk_size=16", *SMALL).to_dict())
    assert flat["mixer.name"] == "gated_delta/attention" and flat["mixer.chunk_size"] == 16
    assert flatten(rope.to_dict())["mixer.name"] == "attention"


def test_an_attention_layers_id_does_not_name_a_mixer():
    """Fields at their default leave the id: an attention layer's hashed spec has no mixer key."""
    layers = make_spec("+arch=qwen3_next", *SMALL).to_dict(drop_defaults=True)["model"]["layers"]
    assert [("mixer" in layer, "mixer_cfg" in layer) for layer in layers] == [(True, True)] * 3 + [(False, False)]
