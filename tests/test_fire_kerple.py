"""KERPLE (log variant) against worked values from its formula, and on every attention path.

Worked values are computed by hand from the paper's formula, not by the code under test:
KERPLE bias(i, j) = -r1 ln(1 + r2 (i - j)).

Mutation check (each made alone; the named test fails):
* kerple.py bias, log1p(r2 * distance) -> log1p(r1 * distance): test_kerple_worked_values;
* kerple.py at_least returning ``x``: test_kerple_reads_r1_and_r2_at_least_the_floor;
* kerple.py bias, pos_q[:, None] - pos_k[None, :] -> +: test_kerple_depends_only_on_distance_and_never_rises_with_it;
* kerple.py at_least as ``x.clamp(min=floor)``: test_kerple_gradients_reach_r1_and_r2_even_below_the_floor;
* bias, pos_q -> torch.arange(len(pos_q)): test_blocks_of_the_bias_equal_the_full_matrix and
  test_blockwise_path_values_and_gradients_equal_the_reference;
* in-kernel score_mod, r2[h] -> r1[h], and the dense score_mod, bias[h, q_idx, kv_idx] -> bias[h, kv_idx, q_idx]:
  test_score_mod_adds_the_bias_on_every_causal_pair;
* strengths returning detached values:
  test_gradients_reach_the_scheme_on_every_path_and_equal_the_reference;
* KerpleConfig > 0 -> >= 0: test_bad_parameters_name_the_value_and_the_range.
"""
import warnings

import pytest
import torch

from suite.attention import BLOCK, Context
from suite.model import PosBenchLM
from suite.position import SCHEMES, Dims
from tests.conftest import make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# ---------------------------------------------------------------- KERPLE (Chi et al. 2022)

def _kerple(r1, r2, heads=2):
    scheme = SCHEMES["kerple"](SCHEMES["kerple"].Config(), Dims(16, heads, 8, 16))
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor(r1))
        scheme.r2.copy_(torch.tensor(r2))
    return scheme


def test_kerple_worked_values():
    bias = _kerple([0.5, 2.0], [0.25, 1.0]).bias(torch.arange(10), torch.arange(10))
    # (i, j) = (5, 1), distance 4: -0.5 ln(1 + 0.25 * 4) = -0.5 ln 2; -2 ln(1 + 4) = -2 ln 5
    assert bias[:, 5, 1].tolist() == pytest.approx([-0.346574, -3.218876], abs=1e-6)
    # (9, 0), distance 9: -0.5 ln 3.25; -2 ln 10
    assert bias[:, 9, 0].tolist() == pytest.approx([-0.589327, -4.605170], abs=1e-6)
    assert bias[:, 3, 3].tolist() == [0.0, 0.0]  # distance 0: ln 1 = 0


def test_kerple_reads_r1_and_r2_at_least_the_floor():
    # the authors clamp both at 0.01: r2 = -0.3 is read as 0.01, so (10, 0) gives -2 ln(1 + 0.01 * 10) = -2 ln 1.1
    bias = _kerple([2.0, -1.0], [-0.3, 1.0]).bias(torch.arange(11), torch.arange(11))
    assert bias[0, 10, 0].item() == pytest.approx(-0.190620, abs=1e-6)
    assert bias[1, 10, 0].item() == pytest.approx(-0.01 * 2.397895, abs=1e-6)  # -0.01 ln 11


def test_kerple_depends_only_on_distance_and_never_rises_with_it():
    torch.manual_seed(0)
    scheme = SCHEMES["kerple"](SCHEMES["kerple"].Config(), Dims(32, 4, 8, 32))
    pos = torch.arange(30)
    bias = scheme.bias(pos, pos).detach()
    assert torch.allclose(scheme.bias(pos + 1000, pos + 1000), bias)
    causal = torch.tril(torch.ones(30, 30, dtype=torch.bool))
    for d in range(30):
        along = bias.diagonal(offset=-d, dim1=1, dim2=2)  # every pair i - j = d
        assert torch.allclose(along, along[:, :1].expand_as(along))
    by_distance = bias[:, -1, :].flip(-1)  # the last query against keys at distance 0, 1, ..., 29
    assert torch.all(by_distance[:, 1:] <= by_distance[:, :-1]) and torch.all(bias[:, causal] <= 0)


def test_kerple_gradients_reach_r1_and_r2_even_below_the_floor():
    scheme = _kerple([0.5, 2.0], [0.25, -0.3])
    pos = torch.arange(4)
    scheme.bias(pos, pos)[:, 3, 1].sum().backward()  # distance 2
    # d/dr1 = -ln(1 + 2 r2); d/dr2 = -2 r1 / (1 + 2 r2), head 1 at its floor r2 = 0.01
    assert scheme.r1.grad.tolist() == pytest.approx([-0.405465, -0.019803], abs=1e-6)
    assert scheme.r2.grad.tolist() == pytest.approx([-0.666667, -3.921569], abs=1e-6)


# ---------------------------------------------------------------- on the attention paths

def _scheme(name):
    torch.manual_seed(0)
    return SCHEMES["kerple"](SCHEMES["kerple"].Config(), Dims(32, 4, 8, 32))


@pytest.mark.parametrize("name", ["kerple"])
def test_blocks_of_the_bias_equal_the_full_matrix(name):
    """The blockwise path and the lm-eval cache ask for the bias of a block of queries against a
    range of keys; each block must read the full matrix's values."""
    scheme = _scheme(name)
    pos = torch.arange(40)
    full = scheme.bias(pos, pos)
    for qs, qe, ks in [(0, 16, 0), (16, 32, 10), (32, 40, 25), (39, 40, 0)]:
        assert torch.allclose(scheme.bias(pos[qs:qe], pos[ks:qe]), full[:, qs:qe, ks:qe], atol=1e-6), (qs, ks)


@pytest.mark.parametrize("grad", [True, False], ids=["training: (H, T, T) bias", "no grad: in-kernel bias"])
@pytest.mark.parametrize("name", ["kerple"])
def test_score_mod_adds_the_bias_on_every_causal_pair(name, grad):
    scheme = _scheme(name)
    pos = torch.arange(40)
    with torch.set_grad_enabled(grad):
        mod = scheme.score_mod(pos)
        h, q, k = torch.meshgrid(torch.arange(4), pos, pos, indexing="ij")
        added = mod(torch.zeros(h.shape), 0, h, q, k)
        expected = scheme.bias(pos, pos)
    causal = k <= q
    assert torch.allclose(added[causal], expected[causal], atol=1e-5) and added.requires_grad == grad


def _model(name, *overrides):
    spec = make_spec(f"position={name}", *overrides, "model.n_layers=2", "model.d_model=32",
                     "model.n_heads=4", "model.d_ff=64")
    torch.manual_seed(0)
    return PosBenchLM(spec.model)


def _grads(model, tokens, impl):
    model.zero_grad()
    out = model(tokens, Context(pos=torch.arange(tokens.shape[1]), impl=impl))
    out.logsumexp(-1).mean().backward()
    return out, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", ["kerple"])
def test_gradients_reach_the_scheme_on_every_path_and_equal_the_reference(name):
    """sdpa routes a bias with a gradient to the reference path; flex (forward only on the CPU)
    computes the bias in the kernel."""
    model = _model(name, "span=swa", "span.window=7")
    tokens = torch.randint(9, model.spec.vocab_size, (2, 20))
    ref, ref_grads = _grads(model, tokens, "reference")
    sdpa, sdpa_grads = _grads(model, tokens, "sdpa")
    assert torch.allclose(ref, sdpa, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ref_grads, sdpa_grads))
    assert all(p.grad.abs().sum() > 0 for p in model.schemes.parameters())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.allclose(model(tokens, Context(pos=torch.arange(20), impl="flex")), ref, atol=1e-4)


@pytest.mark.parametrize("span", [["span=swa", "span.window=50"], ["span=chunked", "span.chunk=96"]],
                         ids=["swa", "chunked"])
@pytest.mark.parametrize("name", ["kerple"])
def test_blockwise_path_values_and_gradients_equal_the_reference(name, span):
    model = _model(name, *span)
    length = 2 * BLOCK + 13  # past 2 x BLOCK the sdpa path goes block by block
    tokens = torch.randint(9, model.spec.vocab_size, (1, length))
    ref, ref_grads = _grads(model, tokens, "reference")
    blocks, block_grads = _grads(model, tokens, "sdpa")
    assert torch.allclose(ref, blocks, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ref_grads, block_grads))


@pytest.mark.parametrize("name,key,value,message", [
    ("kerple", "r1_init", 0.0, r"kerple.r1_init=0.0: must be > 0"),
    ("kerple", "floor", -0.01, r"kerple.floor=-0.01: must be > 0"),
])
def test_bad_parameters_name_the_value_and_the_range(name, key, value, message):
    with pytest.raises(ValueError, match=message):
        SCHEMES[name].Config(**{key: value})
