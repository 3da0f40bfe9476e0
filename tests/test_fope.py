"""FoPE (Hua et al. 2025) against a naive float64 loop over its equations, its floor, its draw, and
the RoPE it reduces to. Every span, attention path, the KV cache and torch.compile run for it in
the generic tests (tests/test_attention.py, tests/test_lmeval_kv_cache.py, ``-k fope``).

Mutation check (each in suite/model/position/fope.py, each makes the named tests fail):
* no floor, ``>= floor`` -> ``>= 0`` in fope_shape: test_scores_and_gradients_equal_a_naive_float64_loop,
  test_frequencies_below_the_floor_are_zero_and_their_pairs_position_free, test_the_paper_shape_at_its_setting;
* wrong frequency, ``j * 2 / (2 * pairs)`` -> ``j / (2 * pairs)`` in inv_freq, or one pair off in series
  (``inv_freq(torch.arange(self.basis, ...`` -> ``inv_freq(1 + torch.arange(self.basis, ...``): the naive-loop
  test and test_without_noise_and_floor_it_is_rope_to_the_bit;
* coefficients ignored, ``angles.cos() @ self.cos_coef.to(dtype)`` -> ``angles.cos()[..., : self.kept]``, or
  the cos series read with the sine coefficients (``@ self.sin_coef``): the naive-loop test;
* cos and sin swapped, ``c = angles.cos() @ ...`` -> ``c = angles.sin() @ ...``: the naive-loop, RoPE and
  relative-position tests;
* the pair cap, ``int(cfg.pair_fraction * pairs)`` -> ``pairs``: the naive-loop test (its step case);
* the floored pairs' padding, ``c.new_ones`` -> ``c.new_zeros``: the floor test;
* the step identity, ``(h, m * step, m)`` -> ``(h, m, m)`` in _draw, or the noise dropped
  (``if self.cfg.sigma > 0`` -> ``if False``): test_coefficients_start_at_the_step_identity_plus_xavier_noise;
* the series computed under autocast (``with torch.autocast(pos.device.type, enabled=False):`` ->
  ``if True:``): test_the_series_stays_float32_under_autocast;
* ``self.register_buffer("cos_coef", cos_coef)`` -> ``self.cos_coef = cos_coef``:
  test_coefficients_are_fixed_buffers_unless_learnable (and the float64 tests: the table stays float32);
* keys turned at the queries' positions, ``(cq, sq) if pos_k is pos_q else self.series(pos_k, dtype)`` ->
  ``(cq, sq)``: the naive-loop test and the generic KV-cache tests (tests/test_lmeval_kv_cache.py -k fope);
* ``if pairs == 0`` -> ``if False`` in FoPE.check: test_bad_options_are_refused_naming_the_value_and_the_valid_range.
"""
from __future__ import annotations

import math

import pytest
import torch

from suite.config.build import SpecError
from suite.model.lm import PosBenchLM
from suite.model.position import Dims
from suite.model.position.fope import FoPE, FoPEConfig, fope_shape
from suite.model.position.rope import RoPE, RopeConfig
from tests.conftest import make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TOL = 1e-12  # float64 scheme against the float64 loop: what the test asserts (reached: 1.4e-14)


def _scheme(head_dim=16, n_heads=2, train_len=64, **options) -> FoPE:
    torch.manual_seed(0)
    return FoPE(FoPEConfig(**options), Dims(head_dim * n_heads, n_heads, head_dim, train_len)).double()


def _naive_rotated(x, pos, coef_cos, coef_sin, head_dim, train_len, cfg):
    """x (H, T, D) float64 turned by the paper's equations, one position, pair and frequency at a
    time: the floor, the pair cap, the two Fourier series, the rotation; the rest unchanged."""
    P = head_dim // 2
    omegas = [cfg.theta ** (-2 * j / head_dim) for j in range(P)]
    basis = [w for w in omegas if w >= cfg.floor_freq_ratio * 2 * math.pi / train_len]  # the floor
    M = min(len(basis), int(cfg.pair_fraction * P))
    rows = []
    for h in range(x.shape[0]):
        for t, n in enumerate(pos.tolist()):
            out = list(x[h, t])
            for m in range(M):
                C = sum(coef_cos[h, i, m] * math.cos(w * n) for i, w in enumerate(basis))
                S = sum(coef_sin[h, i, m] * math.sin(w * n) for i, w in enumerate(basis))
                a, b = (m, m + P) if cfg.layout == "half" else (2 * m, 2 * m + 1)
                out[a], out[b] = x[h, t, a] * C - x[h, t, b] * S, x[h, t, a] * S + x[h, t, b] * C
            rows.append(torch.stack(out))
    return torch.stack(rows).view(x.shape)


CASES = {
    "defaults": {"train_len": 64},  # 3 of 8 frequencies above the floor, 3 pairs carry position
    "step": {"train_len": 1024},  # 5 frequencies, 4 pairs: the step identity skips every other one
    "interleaved-no-floor": {"train_len": 64, "floor_freq_ratio": 0.0, "pair_fraction": 1.0, "layout": "interleaved"},
    "learnable-wide-noise": {"train_len": 256, "sigma": 3.0, "learnable": True},
}


@pytest.mark.parametrize("case", CASES)
def test_scores_and_gradients_equal_a_naive_float64_loop(case):
    """q'.k' for every (head, query, key), at query and key positions that differ (a cache's
    shape), and the gradients of a weighted sum of them with respect to q, k and (learnable) the
    coefficients, equal the loop's to ``TOL``."""
    options = dict(CASES[case])
    train_len = options.pop("train_len")
    scheme = _scheme(train_len=train_len, **options)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 4, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 7, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    pos_q, pos_k = torch.arange(3, 7) * 37, torch.arange(7) * 37  # positions past the training length too
    weights = torch.randn(2, 4, 7, generator=gen, dtype=torch.float64)

    qr, kr = scheme.qk(q, k, pos_q, pos_k)
    scores = torch.einsum("bhqd,bhkd->bhqk", qr, kr)[0]
    coefs = [scheme.cos_coef, scheme.sin_coef] if options.get("learnable") else []
    grads = torch.autograd.grad((scores * weights).sum(), [q, k, *coefs])

    q2, k2 = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    cc, cs = scheme.cos_coef.detach().clone().requires_grad_(), scheme.sin_coef.detach().clone().requires_grad_()
    naive_q = _naive_rotated(q2[0], pos_q, cc, cs, 16, train_len, scheme.cfg)
    naive_k = _naive_rotated(k2[0], pos_k, cc, cs, 16, train_len, scheme.cfg)
    naive = torch.stack([torch.stack([torch.stack([sum(naive_q[h, a, d] * naive_k[h, b, d] for d in range(16))
                                                   for b in range(7)]) for a in range(4)]) for h in range(2)])
    naive_grads = torch.autograd.grad((naive * weights).sum(), [q2, k2, *([cc, cs] if coefs else [])])

    assert torch.allclose(scores, naive, rtol=0, atol=TOL), (scores - naive).abs().max()
    for got, want in zip(grads, naive_grads):
        assert torch.allclose(got, want, rtol=0, atol=TOL), (got - want).abs().max()
    assert scheme.kept >= 1 and (scores - torch.einsum("hqd,hkd->hqk", q[0], k[0])).abs().max() > 1e-3


def test_per_batch_positions_are_each_rows_positions():
    """Positions (B, T) give each batch row what its own (T,) positions give."""
    scheme = _scheme()
    q = torch.randn(2, 2, 5, 16, dtype=torch.float64)
    rows = torch.stack([torch.arange(5), torch.arange(5) + 40])
    qr, _ = scheme.qk(q, q, rows, rows)
    for b in range(2):
        assert torch.allclose(qr[b], scheme.qk(q[b:b + 1], q[b:b + 1], rows[b], rows[b])[0][0], rtol=0, atol=TOL)


@pytest.mark.parametrize("train_len,ratio", [(64, 1.0), (512, 1.0), (64, 4.0)])
def test_frequencies_below_the_floor_are_zero_and_their_pairs_position_free(train_len, ratio):
    """The basis holds exactly the frequencies at or above ratio x 2 pi / L (L from Dims.train_len);
    every other pair has cos 1 and sin 0 at every position (frequency 0), whatever the noise, so
    q and k pass there unchanged and a score over those dimensions ignores both positions."""
    head_dim = 32
    floor = ratio * 2 * math.pi / train_len
    expected = sum(1 for j in range(16) if 10000.0 ** (-2 * j / head_dim) >= floor)
    scheme = _scheme(head_dim=head_dim, train_len=train_len, floor_freq_ratio=ratio, sigma=5.0)
    assert (scheme.basis, scheme.cos_coef.shape[1]) == (expected, expected) and 0 < expected < 16
    pos = torch.arange(0, 3 * train_len, 7)
    c, s = scheme.series(pos, torch.float64)
    assert torch.equal(c[..., scheme.kept:], torch.ones_like(c[..., scheme.kept:]))
    assert torch.equal(s[..., scheme.kept:], torch.zeros_like(s[..., scheme.kept:]))
    free = torch.zeros(16, dtype=torch.bool)
    free[scheme.kept:] = True
    free = torch.cat((free, free))  # half layout: pair m is dimensions m and m + 16
    x = torch.randn(1, 2, len(pos), head_dim, dtype=torch.float64)
    xr, _ = scheme.qk(x, x, pos, pos)
    assert torch.equal(xr[..., free], x[..., free])
    assert not torch.allclose(xr[..., ~free], x[..., ~free])


def test_without_noise_and_floor_it_is_rope_to_the_bit():
    """sigma=0, floor_freq_ratio=0 and pair_fraction=1 is RoPE, both layouts, in float32; with the
    floor it is p-RoPE with the floored pairs dropped (RoPE's ``drop_low`` = floored / pairs)."""
    dims = Dims(64, 4, 16, 64)
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 12, 16)
    pos_q, pos_k = torch.arange(3, 12) * 5, torch.arange(12) * 5
    for layout in ("half", "interleaved"):
        fope = FoPE(FoPEConfig(sigma=0.0, floor_freq_ratio=0.0, pair_fraction=1.0, layout=layout), dims)
        rope = RoPE(RopeConfig(layout=layout), dims)
        for got, want in zip(fope.qk(q, k, pos_q, pos_k), rope.qk(q, k, pos_q, pos_k)):
            assert torch.equal(got, want), layout
    floored = FoPE(FoPEConfig(sigma=0.0, pair_fraction=1.0), dims)
    assert floored.kept == 3
    p_rope = RoPE(RopeConfig(drop_low=5 / 8), dims)
    for got, want in zip(floored.qk(q, k, pos_q, pos_k), p_rope.qk(q, k, pos_q, pos_k)):
        assert torch.equal(got, want)


def test_a_model_without_noise_and_floor_is_the_rope_model():
    """The same seed builds the same weights (a noiseless draw takes nothing from the generator),
    and the logits of the two models are equal."""
    overrides = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.seq_len=32"]
    torch.manual_seed(3)
    fope = PosBenchLM(make_spec(*overrides, "position=fope", "position.sigma=0", "position.floor_freq_ratio=0",
                                "position.pair_fraction=1").model).eval()
    torch.manual_seed(3)
    rope = PosBenchLM(make_spec(*overrides, "position=rope").model).eval()
    tokens = torch.randint(0, fope.spec.vocab_size, (2, 40))
    with torch.no_grad():
        assert torch.equal(fope(tokens), rope(tokens))


def test_scores_are_relative_without_noise_and_not_with_it():
    """Without noise (floor on) q'.k' depends on the offset only: shifting both positions leaves
    it; with the reference's noise the cosine and sine series differ and mix frequencies, so it
    does not (the paper's cross-frequency terms: no exact relative property there)."""
    q, k = torch.randn(1, 2, 6, 16, dtype=torch.float64), torch.randn(1, 2, 6, 16, dtype=torch.float64)
    pos = torch.arange(6) * 3

    def scores(scheme, shift):
        qr, kr = scheme.qk(q, k, pos + shift, pos + shift)
        return qr @ kr.transpose(-1, -2)

    plain = _scheme(sigma=0.0)
    for shift in (1, 17, 500):
        assert torch.allclose(scores(plain, shift), scores(plain, 0), rtol=0, atol=1e-9)
    noisy = _scheme()
    assert (scores(noisy, 17) - scores(noisy, 0)).abs().max() > 1e-2


def test_coefficients_start_at_the_step_identity_plus_xavier_noise():
    """Noise-free, the coefficients are the reference's step identity (pair m reads basis
    frequency m * ceil(I / M)); with noise, what is added has mean 0 and the Xavier-normal std
    sigma * sqrt(2 / (M (I + H))) (within 10 %, over 8 x 20 x 16 draws), independent for cos and sin."""
    plain = _scheme(train_len=1024, sigma=0.0)  # I = 5, M = 4, step 2
    eye = torch.zeros(5, 4, dtype=torch.float64)
    eye[0, 0] = eye[2, 1] = eye[4, 2] = 1.0
    assert torch.equal(plain.cos_coef, eye.expand(2, 5, 4)) and torch.equal(plain.sin_coef, eye.expand(2, 5, 4))

    H, sigma = 8, 0.4
    scheme = _scheme(head_dim=64, n_heads=H, train_len=1024, sigma=sigma, pair_fraction=1.0)
    I, M = scheme.basis, scheme.kept
    assert (I, M) == (18, 18)
    noise = scheme.cos_coef - torch.eye(I, dtype=torch.float64)
    want = sigma * math.sqrt(2 / (M * (I + H)))
    assert abs(noise.std().item() / want - 1) < 0.1 and abs(noise.mean().item()) < 0.1 * want
    assert not torch.allclose(scheme.cos_coef, scheme.sin_coef)


def test_coefficients_are_fixed_buffers_unless_learnable():
    """Off (the reference's default) the coefficients are saved buffers that take no gradient and
    no optimizer step; ``learnable`` makes them parameters."""
    fixed = _scheme()
    assert list(fixed.parameters()) == [] and {"cos_coef", "sin_coef"} <= set(fixed.state_dict())
    learned = _scheme(learnable=True)
    assert {name for name, _ in learned.named_parameters()} == {"cos_coef", "sin_coef"}


def test_the_series_stays_float32_under_autocast():
    """Under bf16 autocast (the GPU recipe) the series are computed in float32, as the reference
    does: the turned q equals the one computed without autocast to float32 precision."""
    scheme = FoPE(FoPEConfig(), Dims(64, 4, 16, 512))
    q = torch.randn(1, 4, 50, 16)
    pos = torch.arange(400, 450)
    want, _ = scheme.qk(q, q, pos, pos)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, _ = scheme.qk(q, q, pos, pos)
    assert got.dtype == torch.float32 and torch.allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("overrides,message", [
    (["position.pair_fraction=0.1"], r"layer 0: fope gives no pair.*pair_fraction=0\.1 allows 0 pairs"),
    (["position.floor_freq_ratio=20"], r"layer 0: fope gives no pair.*floor_freq_ratio=20\.0 at training length \d+ leaves 0"),
    (["position.sigma=-1"], r"position\.sigma=-1\.0: must be >= 0"),
    (["position.pair_fraction=1.5"], r"position\.pair_fraction=1\.5: must be <= 1"),
    (["position.layout=diagonal"], r"unknown position\.layout 'diagonal'; valid: half, interleaved"),
])
def test_bad_options_are_refused_naming_the_value_and_the_valid_range(overrides, message):
    """A shape where no pair carries position is NoPE under this name; out-of-range values name
    their range. Mutation check: ``if pairs == 0`` -> ``if False`` in FoPE.check fails the first two."""
    with pytest.raises(SpecError, match=message):
        make_spec("position=fope", *overrides)


def test_the_paper_shape_at_its_setting():
    """At the paper's 60M setting (head 64, L 512, theta 1e4) 16 frequencies pass the floor and all
    16 carry position, half the head's pairs; at L 1024, 18 pass and 16 carry (the cap)."""
    assert fope_shape(64, 512, FoPEConfig()) == (16, 16)
    assert fope_shape(64, 1024, FoPEConfig()) == (18, 16)
