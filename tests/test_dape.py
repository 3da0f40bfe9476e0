"""DAPE (Zheng et al. 2024) over a base scheme: the scores A + B + f([A, B]) against a naive
float64 loop over the paper's equation, values and gradients, the span's mask, the valid bases
and the memory pre-flight. Every path, span, the KV cache and ``torch.compile`` are held by the
generic tests (tests/test_attention.py, tests/test_lmeval_kv_cache.py, ``-k dape``).

Tolerance reached against the loop, in float64: asserted 1e-12 absolute on the logits, the
outputs and every gradient; the largest difference seen is 4.4e-15 (KERPLE's gradients).

Mask order: the authors apply the causal mask after the MLP, here attention masks first; the MLP
maps each pair by itself, so the order changes no allowed score
(test_the_authors_order_mask_after_the_mlp_gives_the_same_weights; moving ``logit_term`` before the
``masked_fill`` in reference_attention passes every test here, as it should). Where the order
matters is a masked pair reaching the MLP as -inf, which turns every score of the pair into NaN.

Mutation check (each in suite/model/position/dape.py ``Dape.logit_term`` unless named, each makes the
named tests fail): the features ``torch.cat((a, bias...))`` -> ``torch.cat((a, torch.zeros_like(a)))``
(B dropped from the MLP's input): test_logits_and_outputs_equal_the_naive_loop and
test_gradients_equal_the_naive_loop for alibi and kerple; returning ``... - a`` (A dropped from the
residual A + B): the same tests for both bases; returning ``... - bias`` (B dropped from the residual):
the same tests for both bases; ``features.movedim(1, -1)`` -> ``features.movedim(2, -1)`` (the MLP over
the queries, not the heads; T = 2H makes it run): the same tests and
test_the_authors_order_mask_after_the_mlp_gives_the_same_weights; dropping ``.masked_fill(masked, 0.0)``
(masked pairs reach the MLP as -inf): test_keys_outside_the_span_get_no_weight for the window and the
chunks, and the loop tests (the causal mask too); in suite/model/attention.py reference_attention,
``logit_term(q, logits, bias)`` -> ``logit_term(q, logits, None)``: the loop tests; ``needs_logits = False``
(the fused paths skip the term): tests/test_attention.py -k dape. In ``bases``, dropping
``not _is_wrapper(cls) and``: test_an_invalid_base_is_refused_naming_the_valid_ones; in ``held_floats``,
``2 * cfg.mlp_width`` -> ``cfg.mlp_width``, or the input count made 2H for every base:
test_the_preflight_counts_what_the_mlp_keeps.
"""
import math

import pytest
import torch

from suite.config.build import SpecError
from suite.model.attention import reference_attention
from suite.model.position import SCHEMES, Dims
from suite.model.position.dape import Dape, DapeConfig, bases
from suite.model.span import SPANS
from tests.conftest import make_spec

H, D, T, WIDTH = 4, 3, 8, 5  # T = 2H: an MLP over the wrong axis still runs, and must still be caught
TOL = 1e-12

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _scheme(base: str, seed: int = 0) -> Dape:
    """DAPE over ``base`` in float64, the MLP's weights and a learned base's parameters drawn
    wide enough that every part of the term matters."""
    torch.manual_seed(seed)
    scheme = Dape(DapeConfig(base=base, mlp_width=WIDTH), Dims(H * D, H, D, T)).double()
    for p in scheme.mlp.parameters():
        torch.nn.init.normal_(p, std=0.7)
    if base == "kerple":  # r1, r2 above the floor, so their gradients are the formula's
        with torch.no_grad():
            scheme.base.r1.copy_(torch.tensor([0.3, 0.9, 1.5, 2.0]))
            scheme.base.r2.copy_(torch.tensor([0.2, 0.5, 0.8, 1.1]))
    return scheme


def _static_bias(scheme: Dape, h: int, i: int, j: int):
    """B_h(i, j) from the base paper's formula: ALiBi's -m_h (i - j), m_h = 2^(-8(h + 1)/H);
    KERPLE's -r1_h log(1 + r2_h (i - j))."""
    if scheme.cfg.base == "alibi":
        return -(2.0 ** (-8.0 * (h + 1) / H)) * (i - j)
    return -scheme.base.r1[h] * torch.log(1 + scheme.base.r2[h] * (i - j))


def _mlp(scheme: Dape, features: torch.Tensor) -> torch.Tensor:
    """f: Linear, LeakyReLU(0.01), Linear, written out for one pair's (2H,) features."""
    first, _, second = scheme.mlp
    hidden = first.weight @ features + first.bias
    hidden = torch.where(hidden > 0, hidden, 0.01 * hidden)
    return second.weight @ hidden + second.bias


def _naive(scheme: Dape, q, k, v, allowed):
    """(out (B, H, T, D), logits as a dict (b, h, i, j) -> value) by the paper's equation, pair by pair."""
    Bsz = q.shape[0]
    logits, out = {}, torch.zeros_like(q)
    for b in range(Bsz):
        for i in range(T):
            keys = [j for j in range(T) if allowed[i, j]]
            rows = {h: [] for h in range(H)}
            for j in keys:
                a = [sum(q[b, h, i, d] * k[b, h, j, d] for d in range(D)) / math.sqrt(D) for h in range(H)]
                bias = [_static_bias(scheme, h, i, j) for h in range(H)]
                f = _mlp(scheme, torch.stack([torch.as_tensor(x, dtype=torch.float64) for x in a + bias]))
                for h in range(H):
                    logits[b, h, i, j] = a[h] + bias[h] + f[h]
                    rows[h].append(logits[b, h, i, j])
            for h in range(H):
                weights = torch.softmax(torch.stack(rows[h]), dim=0)
                out[b, h, i] = sum(w * v[b, h, j] for w, j in zip(weights, keys))
    return out, logits


def _inputs(seed=1, Bsz=2, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(Bsz, H, T, D, generator=gen, dtype=torch.float64, requires_grad=requires_grad) for _ in range(3))
    return q, k, v


def _causal():
    return SPANS["full"](SPANS["full"].Config()).allowed(torch.arange(T), torch.arange(T))


def _attend(scheme, q, k, v, allowed):
    pos = torch.arange(T)
    return reference_attention(q, k, v, scheme.bias(pos, pos), allowed, scheme.logit_term)


@pytest.mark.parametrize("base", ["alibi", "kerple"])
def test_logits_and_outputs_equal_the_naive_loop(base):
    scheme = _scheme(base)
    q, k, v = _inputs()
    allowed = _causal()
    out, logits = _attend(scheme, q, k, v, allowed)
    with torch.no_grad():
        want_out, want_logits = _naive(scheme, q, k, v, allowed)
    for (b, h, i, j), value in want_logits.items():
        assert abs(logits[b, h, i, j].item() - float(value)) < TOL, (b, h, i, j)
    assert torch.isneginf(logits[..., ~allowed]).all()
    assert (out - want_out).abs().max().item() < TOL


@pytest.mark.parametrize("base", ["alibi", "kerple"])
def test_gradients_equal_the_naive_loop(base):
    """Gradients to q, k, v, the MLP's weights and (KERPLE) the base's r1 and r2."""
    weights = torch.randn(2, H, T, D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    grads = []
    for attend in (lambda s, q, k, v: _attend(s, q, k, v, _causal())[0], lambda s, q, k, v: _naive(s, q, k, v, _causal())[0]):
        scheme = _scheme(base)
        q, k, v = _inputs(requires_grad=True)
        (attend(scheme, q, k, v) * weights).sum().backward()
        params = [p for p in scheme.parameters() if p.requires_grad]
        grads.append([q.grad, k.grad, v.grad] + [p.grad for p in params])
    assert len(grads[0]) == 3 + 4 + (2 if base == "kerple" else 0)
    for got, want in zip(*grads):
        assert want is not None and want.abs().max() > 0
        assert (got - want).abs().max().item() < TOL


@pytest.mark.parametrize("span,cfg", [("swa", {"window": 3}), ("chunked", {"chunk": 3})])
def test_keys_outside_the_span_get_no_weight(span, cfg):
    """Outside a window or a chunk a key gets exactly zero weight, every output is finite and
    equals the loop over the keys the span allows (the MLP reads no masked pair)."""
    scheme = _scheme("alibi")
    allowed = SPANS[span](SPANS[span].Config(**cfg)).allowed(torch.arange(T), torch.arange(T))
    assert (~allowed).tril().any()  # the span hides keys the causal mask would show
    q, k, v = _inputs()
    out, _ = _attend(scheme, q, k, v, allowed)
    with torch.no_grad():
        want, _ = _naive(scheme, q, k, v, allowed)
    assert (out - want).abs().max().item() < TOL
    eye = torch.eye(T, dtype=torch.float64).expand(2, H, T, T)  # the output row is the attention weights
    weights, _ = _attend(scheme, q, k, eye, allowed)
    assert torch.isfinite(weights).all()
    assert torch.equal(weights[..., ~allowed], torch.zeros_like(weights[..., ~allowed]))


def test_the_authors_order_mask_after_the_mlp_gives_the_same_weights():
    """The authors run the MLP on the unmasked scores (future keys read their raw q·k and B = 0)
    and mask in the softmax; the MLP maps each pair by itself, so that order gives the weights
    masking first gives."""
    scheme = _scheme("kerple")
    q, k, v = _inputs()
    allowed = _causal()
    pos = torch.arange(T)
    bias = scheme.bias(pos, pos).masked_fill(~allowed, 0.0)  # the authors' lower-triangular B
    with torch.no_grad():
        a = q @ k.transpose(-2, -1) / math.sqrt(D)
        scores = a + bias + scheme.mlp(torch.cat((a, bias.expand_as(a)), dim=1).movedim(1, -1)).movedim(-1, 1)
        authors = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v
        ours, _ = _attend(scheme, q, k, v, allowed)
    assert (ours - authors).abs().max().item() < TOL


def test_a_bias_free_base_feeds_the_mlp_the_logits_alone():
    """Over NoPE and RoPE the authors' MLP reads A alone (H inputs) and the scores are A + f(A)."""
    scheme = _scheme("rope")
    assert scheme.mlp[0].in_features == H
    q, k, v = _inputs()
    pos = torch.arange(T)
    rq, rk = scheme.qk(q, k, pos, pos)
    out, logits = _attend(scheme, rq, rk, v, _causal())
    with torch.no_grad():
        a = rq @ rk.transpose(-2, -1) / math.sqrt(D)
        want = a + scheme.mlp(a.movedim(1, -1)).movedim(-1, 1)
    allowed = _causal()
    assert (logits[..., allowed] - want[..., allowed]).abs().max().item() < TOL
    assert torch.equal(rq, SCHEMES["rope"](SCHEMES["rope"].Config(), Dims(H * D, H, D, T)).double().qk(q, k, pos, pos)[0])


@pytest.mark.parametrize("base,message", [
    ("cope", "unknown dape.base 'cope'"),
    ("randomized", "unknown dape.base 'randomized'"),
    ("dape", "unknown dape.base 'dape'"),
    ("learned", "unknown dape.base 'learned'"),
    ("nosuch", "unknown dape.base 'nosuch'"),
])
def test_an_invalid_base_is_refused_naming_the_valid_ones(base, message):
    with pytest.raises(SpecError) as err:
        make_spec("position=dape", f"position.base={base}")
    assert message in str(err.value) and f"valid: {', '.join(bases())}" in str(err.value)
    assert {"alibi", "kerple", "kerple_power", "t5", "fire", "nope", "rope"} <= set(bases())
    assert not {"cope", "randomized", "dape", "learned", "fox", "stickbreaking", "path"} & set(bases())


def test_the_base_takes_its_defaults_and_the_wrappers_temperature():
    spec = make_spec("position=dape", "position.base=kerple", "position.log_scale=true", "position.log_scale_base=16")
    cfg = spec.model.layers[0].position_cfg
    scheme = Dape(cfg, Dims(32, 4, 8, 32))
    assert scheme.base.cfg == SCHEMES["kerple"].Config(log_scale=True, log_scale_base=16)
    pos = torch.arange(40)
    assert torch.equal(scheme.temperature(pos), scheme.base.temperature(pos))


def test_a_rotary_base_with_no_pair_to_rotate_is_refused_as_the_base_would_be():
    with pytest.raises(SpecError, match="dape.base='rope'"):
        make_spec("position=dape", "position.base=rope", "model.d_model=4", "model.n_heads=4")


def test_the_preflight_counts_what_the_mlp_keeps():
    """In training, ``held_floats`` is what the term keeps for the backward pass (counted by a
    saved-tensor hook, the scheme's parameters left out: the MLP's 2H inputs and its hidden units
    before and after the LeakyReLU) plus the two (B, H, T, T) tensors made while those are held
    (the term, and the logits with the term); without gradients, one fewer (nothing is kept past
    the term, whose input, hidden units and output exist at once)."""
    scheme = _scheme("kerple").float()
    q, k, v = (t.float().requires_grad_() for t in _inputs())
    pos = torch.arange(T)
    bias = scheme.bias(pos, pos)
    logits = (q @ k.transpose(-2, -1) / math.sqrt(D) + bias).masked_fill(~_causal(), float("-inf"))
    params = {p.data_ptr() for p in scheme.parameters()}
    saved = {}

    def pack(t):
        if t.data_ptr() not in params and t.is_floating_point():
            saved[t.data_ptr()] = max(saved.get(t.data_ptr(), 0), t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        (logits + scheme.logit_term(q, logits, bias)).sum()
    pairs = 2 * T * T
    assert sum(saved.values()) == (2 * H + 2 * WIDTH) * pairs
    assert Dape.held_floats(scheme.cfg, scheme.dims, 2, T, training=True) == sum(saved.values()) + 2 * H * pairs
    assert Dape.held_floats(scheme.cfg, scheme.dims, 2, T, training=False) == (2 * H + 2 * WIDTH + H) * pairs
    no_bias = DapeConfig(base="rope", mlp_width=WIDTH)
    assert Dape.held_floats(no_bias, scheme.dims, 2, T, training=False) == (H + 2 * WIDTH + H) * pairs
