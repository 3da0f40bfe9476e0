"""KERPLE (log variant) and FIRE against worked values from their formulas, and on every attention path.

Worked values are computed by hand from the papers' formulas, not by the code under test:
KERPLE bias(i, j) = -r1 ln(1 + r2 (i - j)); FIRE bias(i, j) = f(ln(1 + c (i - j)) / (ln(1 + c max(L, i)) + 1e-6)).

Mutation check (each made alone; the named test fails):
* kerple.py bias, log1p(r2 * distance) -> log1p(r1 * distance): test_kerple_worked_values;
* kerple.py at_least returning ``x``: test_kerple_reads_r1_and_r2_at_least_the_floor;
* kerple.py bias, pos_q[:, None] - pos_k[None, :] -> +: test_kerple_depends_only_on_distance_and_never_rises_with_it;
* kerple.py at_least as ``x.clamp(min=floor)``: test_kerple_gradients_reach_r1_and_r2_even_below_the_floor;
* fire.py fire_input, torch.maximum(i, threshold) -> threshold: test_fire_worked_values_below_and_above_the_threshold;
* fire.py constants, self.c.abs() -> self.c: test_fire_reads_c_and_threshold_through_absolute_values;
* fire.py constants, self.threshold_scale -> self.threshold_scale.detach():
  test_fire_gradients_reach_the_mlp_c_and_threshold;
* either bias, pos_q -> torch.arange(len(pos_q)): test_blocks_of_the_bias_equal_the_full_matrix and
  test_blockwise_path_values_and_gradients_equal_the_reference;
* in-kernel score_mod, r2[h] -> r1[h] (kerple) or b1[unit] -> b1[0] (fire), and either dense score_mod,
  bias[h, q_idx, kv_idx] -> bias[h, kv_idx, q_idx]: test_score_mod_adds_the_bias_on_every_causal_pair;
* kerple strengths / fire constants returning detached values:
  test_gradients_reach_the_scheme_on_every_path_and_equal_the_reference;
* KerpleConfig > 0 -> >= 0, FireConfig mlp_width < 1 -> < 0: test_bad_parameters_name_the_value_and_the_range.
"""
import warnings

import pytest
import torch

from suite.model.attention import BLOCK, Context
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES, Dims
from tests.conftest import assert_score_mod_is_the_bias, make_spec

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


# ---------------------------------------------------------------- FIRE (Li et al. 2023)

def _fire(c=0.5, scale=1.0, threshold=4.0):
    """Two heads, two hidden units: f(u) = (relu(u) + 2 relu(0.5 - u) + 0.1, -relu(u) + 0.5 relu(0.5 - u) - 0.2)."""
    scheme = SCHEMES["fire"](SCHEMES["fire"].Config(mlp_width=2, init_threshold=threshold), Dims(16, 2, 8, 16))
    with torch.no_grad():
        scheme.mlp[0].weight.copy_(torch.tensor([[1.0], [-1.0]]))
        scheme.mlp[0].bias.copy_(torch.tensor([0.0, 0.5]))
        scheme.mlp[2].weight.copy_(torch.tensor([[1.0, 2.0], [-1.0, 0.5]]))
        scheme.mlp[2].bias.copy_(torch.tensor([0.1, -0.2]))
        scheme.c.fill_(c)
        scheme.threshold_scale.fill_(scale)
    return scheme


# (i, j): [head 0, head 1] for c = 0.5, L = 4; u = ln(1 + d/2) / (ln(1 + max(4, i)/2) + 1e-6)
FIRE_WORKED = {
    (3, 3): [1.1, 0.05],  # u = 0
    (1, 0): [0.730930, -0.503605],  # i < L: u = ln 1.5 / ln 3 = 0.369070
    (2, 0): [0.730929, -0.830929],  # i < L: u = ln 2 / ln 3 = 0.630929
    (9, 8): [0.862156, -0.306767],  # i > L: u = ln 1.5 / ln 5.5 = 0.237844 (same distance as (1, 0))
    (6, 2): [0.892481, -0.992481],  # i > L: u = ln 3 / ln 4 = 0.792481
    (9, 0): [1.099999, -1.199999],  # i > L: u = ln 5.5 / (ln 5.5 + 1e-6), just under 1
}


def test_fire_worked_values_below_and_above_the_threshold():
    bias = _fire().bias(torch.arange(10), torch.arange(10))
    for (i, j), want in FIRE_WORKED.items():
        assert bias[:, i, j].tolist() == pytest.approx(want, abs=1e-5), (i, j)


def test_fire_reads_c_and_threshold_through_absolute_values():
    pos = torch.arange(10)
    assert torch.allclose(_fire(c=-0.5, scale=-1.0).bias(pos, pos), _fire().bias(pos, pos))


def test_fire_gradients_reach_the_mlp_c_and_threshold():
    scheme = _fire(threshold=6.0)
    pos = torch.arange(10)  # queries below L = 6 (L sets their normalizer) and above it
    causal = torch.tril(torch.ones(10, 10, dtype=torch.bool))
    scheme.bias(pos, pos)[:, causal].sum().backward()
    for name, p in scheme.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


# ---------------------------------------------------------------- both

def _scheme(name):
    torch.manual_seed(0)
    if name == "fire":  # L = 8 so that a 40-token sequence has queries on both sides of it
        return SCHEMES["fire"](SCHEMES["fire"].Config(init_threshold=8.0), Dims(32, 4, 8, 32))
    return SCHEMES["kerple"](SCHEMES["kerple"].Config(), Dims(32, 4, 8, 32))


@pytest.mark.parametrize("name", ["kerple", "fire"])
def test_blocks_of_the_bias_equal_the_full_matrix(name):
    """The blockwise path and the lm-eval cache ask for the bias of a block of queries against a
    range of keys; each block must read the full matrix's values."""
    scheme = _scheme(name)
    pos = torch.arange(40)
    full = scheme.bias(pos, pos)
    for qs, qe, ks in [(0, 16, 0), (16, 32, 10), (32, 40, 25), (39, 40, 0)]:
        assert torch.allclose(scheme.bias(pos[qs:qe], pos[ks:qe]), full[:, qs:qe, ks:qe], atol=1e-6), (qs, ks)


@pytest.mark.parametrize("grad", [True, False], ids=["training: (H, T, T) bias", "no grad: in-kernel bias"])
@pytest.mark.parametrize("name", ["kerple", "fire"])
def test_score_mod_adds_the_bias_on_every_causal_pair(name, grad):
    assert_score_mod_is_the_bias(_scheme(name), 4, grad, atol=1e-5)


def _model(name, *overrides):
    extra = ["position.init_threshold=8"] if name == "fire" else []
    spec = make_spec(f"position={name}", *extra, *overrides, "model.n_layers=2", "model.d_model=32",
                     "model.n_heads=4", "model.d_ff=64")
    torch.manual_seed(0)
    return PosBenchLM(spec.model)


def _grads(model, tokens, impl):
    model.zero_grad()
    out = model(tokens, Context(pos=torch.arange(tokens.shape[1]), impl=impl))
    out.logsumexp(-1).mean().backward()
    return out, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", ["kerple", "fire"])
def test_gradients_reach_the_scheme_on_every_path_and_equal_the_reference(name):
    """sdpa routes a bias with a gradient to the reference path; flex (forward only on the CPU)
    computes the bias in the kernel, past FIRE's threshold too."""
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
@pytest.mark.parametrize("name", ["kerple", "fire"])
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
    ("fire", "mlp_width", 0, r"fire.mlp_width=0: must be >= 1"),
    ("fire", "init_threshold", 0.0, r"fire.init_threshold=0.0: must be > 0"),
])
def test_bad_parameters_name_the_value_and_the_range(name, key, value, message):
    with pytest.raises(ValueError, match=message):
        SCHEMES[name].Config(**{key: value})
