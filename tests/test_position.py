"""Each position scheme against its paper's formula.

Mutation check: in suite/model/position/alibi.py alibi_slopes, the extra slopes [0::2] -> [1::2] makes
test_alibi_slopes_12_heads_follow_the_non_power_of_two_rule fail. In suite/model/position/rope.py:
p_rope_pairs ceil -> floor fails test_p_rope_keeps_the_papers_count_of_pairs, and dropping its
round(..., 9) fails it at [50-0.28-18]; RoPE.frequencies zeroing the highest frequencies
instead of the lowest fails test_p_rope_rotates_only_the_two_fastest_pairs and
test_p_rope_score_is_the_hand_formula; giving the dropped pairs frequency 1e-6 instead of 0
fails test_p_rope_dropped_pairs_contribute_the_same_at_every_position; zeroing only when scaling is "none" fails
test_p_rope_composes_with_eval_time_scaling; removing the drop_low-with-fraction check fails
test_bad_scheme_parameters_name_the_value. In suite/model/position/xpos.py: xpos_zeta dividing by d/2
instead of d fails test_xpos_zeta_follows_the_paper and test_xpos_score_is_the_hand_formula; k
scaled by zeta^(+m) like q fails test_xpos_scores_depend_only_on_the_offset; one scale per
dimension instead of per pair (repeat_interleave on the half layout) fails it too; center 0
instead of train_len // 2 fails test_xpos_scales_q_up_and_k_down_from_the_center; an exponent not
divided by scale_base fails test_xpos_scores_stay_finite_in_float32; FACTOR_BITS 65, or the
training-length guard loosened by 1000 tokens, fails
test_xpos_max_length_bounds_the_largest_factor_by_2_to_the_64. In suite/model/position/learned.py
Learned.check, max_positions < train_len -> <= train_len makes
test_learned_check_sizes_a_null_table_to_the_longest_eval_length_and_keeps_a_set_one fail, and
sizing a null table to min(eval_lens) makes it fail too."""
import math

import pytest
import torch

from suite.model.position import SCHEMES, Dims, LengthUnsupported, log_length_scale
from suite.model.position.alibi import alibi_slopes
from suite.model.position.rope import apply_rope, p_rope_pairs, rope_inv_freq, rotary_dims
from suite.model.position.sinusoidal import sinusoidal_table
from suite.model.position.t5 import t5_bucket
from tests.conftest import assert_score_mod_is_the_bias
from suite.model.position.xpos import xpos_zeta


# ---------------------------------------------------------------- ALiBi (Press et al. 2022)

def test_alibi_slopes_8_heads_are_powers_of_one_half():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -i for i in range(1, 9)]))


def test_alibi_slopes_16_heads_start_at_2_to_minus_half():
    assert torch.allclose(alibi_slopes(16), torch.tensor([2.0 ** (-0.5 * i) for i in range(1, 17)]))


def test_alibi_slopes_12_heads_follow_the_non_power_of_two_rule():
    expected = [2.0 ** -i for i in range(1, 9)] + [2.0 ** -0.5, 2.0 ** -1.5, 2.0 ** -2.5, 2.0 ** -3.5]
    assert torch.allclose(alibi_slopes(12), torch.tensor(expected))


def test_alibi_bias_is_minus_slope_times_distance():
    scheme = SCHEMES["alibi"](SCHEMES["alibi"].Config(), Dims(32, 4, 8, 16))
    pos = torch.arange(6)
    bias = scheme.bias(pos, pos)
    assert bias.shape == (4, 6, 6)
    assert bias[0, 5, 2].item() == pytest.approx(-0.25 * 3)  # 4 heads: slopes 1/4, 1/16, ...
    assert bias[3, 4, 0].item() == pytest.approx(-(2.0 ** -8) * 4)
    assert torch.all(bias.diagonal(dim1=1, dim2=2) == 0)


# ---------------------------------------------------------------- T5 (Raffel et al. 2020)

@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20)])
def test_t5_buckets_equal_hugging_faces_unidirectional_buckets(num_buckets, max_distance):
    """An independent implementation as the reference: Hugging Face's ``T5Attention`` (installed
    with the ``hf`` extra) buckets key - query distances for a decoder with bidirectional=False."""
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5", reason="the hf extra holds the reference")
    rel = torch.arange(-500, 5)
    want = t5.T5Attention._relative_position_bucket(rel, bidirectional=False, num_buckets=num_buckets,
                                                     max_distance=max_distance)
    assert t5_bucket(rel, num_buckets, max_distance).tolist() == want.tolist()


def test_t5_buckets_known_values():
    rel = -torch.tensor([0, 1, 15, 16, 20, 32, 64, 127, 128, 1000])
    assert t5_bucket(rel, 32, 128).tolist() == [0, 1, 15, 16, 17, 21, 26, 31, 31, 31]


def test_t5_bias_is_shared_table_lookup():
    scheme = SCHEMES["t5"](SCHEMES["t5"].Config(num_buckets=8, max_distance=16), Dims(16, 2, 8, 16))
    with torch.no_grad():
        scheme.table.weight.copy_(torch.arange(16.0).view(8, 2))
    pos = torch.arange(10)
    bias = scheme.bias(pos, pos)
    buckets = t5_bucket(pos[None, :] - pos[:, None], 8, 16)
    assert torch.equal(bias[1], buckets.float() * 2 + 1)


@pytest.mark.parametrize("grad", [True, False], ids=["training: (H, T, T) bias", "no grad: bias by distance"])
def test_t5_score_mod_adds_the_bias_on_every_allowed_pair(grad):
    scheme = SCHEMES["t5"](SCHEMES["t5"].Config(num_buckets=8, max_distance=16), Dims(16, 2, 8, 16))
    torch.nn.init.normal_(scheme.table.weight)
    assert_score_mod_is_the_bias(scheme, 2, grad)


# ---------------------------------------------------------------- sinusoidal (Vaswani et al. 2017)

def test_sinusoidal_table_matches_the_transformer_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_absolute_schemes_add_to_embeddings():
    dims = Dims(16, 2, 8, 32)
    x = torch.zeros(1, 5, 16)
    out = SCHEMES["sinusoidal"](SCHEMES["sinusoidal"].Config(rms=0.5), dims).embed(x, torch.arange(5))
    assert torch.allclose(out[0], sinusoidal_table(5, 16) * 0.5 * math.sqrt(2))
    assert out.pow(2).mean().sqrt().item() == pytest.approx(0.5, rel=1e-4)


def test_learned_table_refuses_positions_past_its_end():
    dims = Dims(16, 2, 8, 32)
    scheme = SCHEMES["learned"](SCHEMES["learned"].Config(), dims)
    assert scheme.max_length() == 32
    scheme.embed(torch.zeros(1, 32, 16), torch.arange(32))
    with pytest.raises(LengthUnsupported):
        scheme.embed(torch.zeros(1, 33, 16), torch.arange(33))


def test_learned_check_sizes_a_null_table_to_the_longest_eval_length_and_keeps_a_set_one():
    learned = SCHEMES["learned"]
    assert learned.check(learned.Config(), 32, (32, 64, 256)).max_positions == 256  # Kazemnejad et al.'s wpe
    assert learned.check(learned.Config(max_positions=48), 32, (32, 64, 256)).max_positions == 48
    assert learned.check(learned.Config(max_positions=32), 32, (32, 64)).max_positions == 32  # the edge


def test_learned_check_refuses_a_table_shorter_than_the_training_length():
    learned = SCHEMES["learned"]
    with pytest.raises(ValueError, match=r"learned max_positions=31 is shorter than train\.seq_len=32; "
                                         r"valid: null \(the longest eval length\) or at least 32"):
        learned.check(learned.Config(max_positions=31), 32, (32, 64))


@pytest.mark.parametrize("name", sorted(set(SCHEMES) - {"learned", "randomized", "t5"}))  # they size a table, a range, a distance
def test_a_scheme_without_rules_passes_its_config_through_check(name):
    cfg = SCHEMES[name].Config()
    assert SCHEMES[name].check(cfg, 32, (32, 64)) is cfg


def test_t5_check_resolves_max_distance_to_the_training_length():
    """``max_distance: null`` becomes the training length (at least num_buckets // 2 + 1, the least
    the log buckets allow); a set value stays as it is."""
    t5 = SCHEMES["t5"]
    assert t5.check(t5.Config(), 64, (64, 128)).max_distance == 64
    assert t5.check(t5.Config(), 8, (8, 16)).max_distance == 17
    assert t5.check(t5.Config(num_buckets=8), 8, (8, 16)).max_distance == 8
    cfg = t5.Config(max_distance=128)
    assert t5.check(cfg, 32, (32, 64)) is cfg


# ---------------------------------------------------------------- RoPE (Su et al. 2021)

def _rope_logits(q, k, pos, **kw):
    return apply_rope(q, pos, **kw) @ apply_rope(k, pos, **kw).transpose(-2, -1)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.25])
def test_rope_logits_depend_only_on_offset(layout, fraction):
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 16)
    pos = torch.arange(12)
    base = _rope_logits(q, k, pos, layout=layout, fraction=fraction)
    shifted = _rope_logits(q, k, pos + 1000, layout=layout, fraction=fraction)
    assert torch.allclose(base, shifted, atol=1e-3)
    assert not torch.allclose(base, q @ k.transpose(-2, -1), atol=1e-3)  # positions do matter


def test_rope_two_dimensional_worked_example():
    # q=(1,2), k=(3,1), one frequency theta^0 = 1 rad per step: score = 5 cos(d) - 5 sin(d) for d = m - n.
    q = torch.tensor([1.0, 2.0]).view(1, 1, 1, 2)
    k = torch.tensor([3.0, 1.0]).view(1, 1, 1, 2)
    for m, n in [(2, 1), (5, 4), (9, 8), (4, 5)]:
        qr = apply_rope(q, torch.tensor([m]))
        kr = apply_rope(k, torch.tensor([n]))
        d = m - n
        assert (qr * kr).sum().item() == pytest.approx(5 * math.cos(d) - 5 * math.sin(d), abs=1e-5)


def test_rope_half_and_interleaved_agree_up_to_the_permutation():
    torch.manual_seed(1)
    D = 16
    x = torch.randn(1, 2, 7, D)
    pos = torch.arange(7)
    # interleaved dim 2i -> half dim i, interleaved dim 2i+1 -> half dim i + D/2
    perm = torch.empty(D, dtype=torch.long)
    perm[torch.arange(D // 2)] = torch.arange(0, D, 2)
    perm[torch.arange(D // 2) + D // 2] = torch.arange(1, D, 2)
    inter = apply_rope(x, pos, layout="interleaved")
    half = apply_rope(x[..., perm], pos, layout="half")
    assert torch.allclose(half, inter[..., perm], atol=1e-6)
    assert not torch.allclose(apply_rope(x, pos, layout="half"), inter, atol=1e-3)


def test_partial_rotary_leaves_the_tail_untouched():
    x = torch.randn(1, 1, 9, 16)
    out = apply_rope(x, torch.arange(9), fraction=0.25)
    assert rotary_dims(16, 0.25) == 4
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert not torch.allclose(out[..., :4], x[..., :4])
    assert torch.equal(apply_rope(x, torch.arange(9), fraction=0.0), x)


def test_rope_frequencies_are_theta_powers():
    inv = rope_inv_freq(8, 10000.0)
    assert torch.allclose(inv, torch.tensor([10000.0 ** (-i / 8) for i in (0, 2, 4, 6)]))


def _rope_scheme(train_len=16, **kw):
    cls = SCHEMES["rope"]
    return cls(cls.Config(**kw), Dims(64, 4, 16, train_len))


def test_rope_scaling_applies_only_at_eval_time():
    q, k = torch.randn(1, 4, 32, 16), torch.randn(1, 4, 32, 16)
    pos = torch.arange(32)
    scheme = _rope_scheme(scaling="linear", factor=4.0).train()
    q_train, _ = scheme.qk(q, k, pos, pos)
    assert torch.allclose(q_train, apply_rope(q, pos))
    scheme.eval()
    q_eval, _ = scheme.qk(q, k, pos, pos)
    assert torch.allclose(q_eval, apply_rope(q, pos / 4.0), atol=1e-6)  # position interpolation


def test_rope_ntk_changes_the_base():
    scheme = _rope_scheme(scaling="ntk", factor=4.0).eval()
    inv, divisor, mscale = scheme.frequencies(64)
    assert (divisor, mscale) == (1.0, 1.0)
    assert torch.allclose(inv, rope_inv_freq(16, 10000.0 * 4.0 ** (16 / 14)))


def test_rope_ntk_with_one_rotated_pair_keeps_its_frequency():
    # fraction 1/8 of a 16-dim head rotates one pair, at theta^0 = 1 under any base
    inv, divisor, mscale = _rope_scheme(scaling="ntk", factor=4.0, fraction=0.125).eval().frequencies(64)
    assert inv.tolist() == [1.0] and (divisor, mscale) == (1.0, 1.0)


def test_rope_dynamic_factor_is_length_over_train_length():
    scheme = _rope_scheme(train_len=16, scaling="linear").eval()
    assert scheme.frequencies(64)[1] == pytest.approx(4.0)
    assert scheme.frequencies(16)[1] == 1.0


def test_yarn_keeps_fast_dims_interpolates_slow_dims_and_scales_logits():
    scheme = _rope_scheme(train_len=1024, scaling="yarn", factor=8.0).eval()
    inv, _, mscale = scheme.frequencies(8192)
    base = rope_inv_freq(16, 10000.0)
    assert inv[0] == pytest.approx(base[0].item())  # many rotations per context: kept
    assert inv[-1].item() == pytest.approx(base[-1].item() / 8.0)  # under one rotation: interpolated
    assert mscale == pytest.approx(0.1 * math.log(8.0) + 1.0)


# ---------------------------------------------------------------- p-RoPE (Barbero et al. 2024)

@pytest.mark.parametrize("head_dim,drop_low,kept", [
    # the paper's rule with p = 1 - drop_low: int(p * head_dim // 2) pairs rotate
    (8, 0.0, 4), (8, 0.5, 2), (8, 0.25, 3), (8, 0.3, 2), (8, 0.1, 3), (8, 1.0, 0),
    (20, 0.3, 7), (20, 0.9, 1), (64, 0.25, 24), (50, 0.28, 18),
])
def test_p_rope_keeps_the_papers_count_of_pairs(head_dim, drop_low, kept):
    assert p_rope_pairs(head_dim, drop_low) == kept


# head_dim 8, drop_low 0.5: 2 of the 4 pairs rotate, pair 0 at 10000^0 = 1 rad and pair 1 at
# 10000^(-2/8) = 0.1 rad per step; pairs 2 and 3 (0.01 and 0.001 rad in RoPE) do not rotate.
# The dimensions of pair i: (i, i + 4) in the half layout, (2i, 2i + 1) interleaved.
P_ROPE_PAIRS = {"half": [(0, 4), (1, 5), (2, 6), (3, 7)], "interleaved": [(0, 1), (2, 3), (4, 5), (6, 7)]}
P_ROPE_RATES = [1.0, 0.1, 0.0, 0.0]


def _p_rope_qk(layout, q, k, m, n, **kw):
    cls = SCHEMES["rope"]
    scheme = cls(cls.Config(drop_low=0.5, layout=layout, **kw), Dims(32, 4, 8, 16))
    return scheme.qk(q.view(1, 1, 1, 8), k.view(1, 1, 1, 8), torch.tensor([m]), torch.tensor([n]))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_p_rope_rotates_only_the_two_fastest_pairs(layout):
    q = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    m = 3
    out = _p_rope_qk(layout, q, q, m, m)[0].view(8)
    for (a, b), rate in zip(P_ROPE_PAIRS[layout], P_ROPE_RATES):
        c, s = math.cos(m * rate), math.sin(m * rate)
        assert out[a].item() == pytest.approx(q[a].item() * c - q[b].item() * s, abs=1e-5)
        assert out[b].item() == pytest.approx(q[a].item() * s + q[b].item() * c, abs=1e-5)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_p_rope_score_is_the_hand_formula(layout):
    q = torch.tensor([0.5, -1.0, 2.0, 1.5, 1.0, 0.25, -2.0, 3.0])
    k = torch.tensor([1.0, 2.0, -0.5, 1.0, -1.5, 0.5, 1.0, 2.0])
    for m, n in [(7, 2), (12, 12), (30, 1)]:
        qr, kr = _p_rope_qk(layout, q, k, m, n)
        d, want = m - n, 0.0
        for (a, b), rate in zip(P_ROPE_PAIRS[layout], P_ROPE_RATES):
            # a pair at rate w adds (qa ka + qb kb) cos(d w) + (qa kb - qb ka) sin(d w), d = m - n
            dot, cross = q[a] * k[a] + q[b] * k[b], q[a] * k[b] - q[b] * k[a]
            want += dot.item() * math.cos(d * rate) + cross.item() * math.sin(d * rate)
        assert (qr * kr).sum().item() == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_p_rope_dropped_pairs_contribute_the_same_at_every_position(layout):
    torch.manual_seed(3)
    q, k = torch.randn(8), torch.randn(8)
    dropped = [d for pair in P_ROPE_PAIRS[layout][2:] for d in pair]
    for m, n in [(0, 0), (5, 1), (900, 17), (4000, 3999)]:
        qr, kr = _p_rope_qk(layout, q, k, m, n)
        assert torch.equal(qr.view(8)[dropped], q[dropped]) and torch.equal(kr.view(8)[dropped], k[dropped])


@pytest.mark.parametrize("scaling", ["linear", "ntk", "yarn"])
def test_p_rope_composes_with_eval_time_scaling(scaling):
    full = _rope_scheme(train_len=16, scaling=scaling, factor=4.0).eval().frequencies(64)
    p = _rope_scheme(train_len=16, scaling=scaling, factor=4.0, drop_low=0.5).eval().frequencies(64)
    assert torch.equal(p[0][:4], full[0][:4]) and torch.all(p[0][4:] == 0)  # 16 dims: 4 of 8 pairs
    assert p[1:] == full[1:]  # the same position divisor and logit scale


def test_p_rope_with_everything_dropped_is_nope():
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    pos = torch.arange(6)
    assert all(torch.equal(a, b) for a, b in zip(_rope_scheme(drop_low=1.0).qk(q, k, pos, pos), (q, k)))


# ---------------------------------------------------------------- xPos (Sun et al. 2022)

def _xpos(head_dim=4, train_len=16, **kw):
    cls = SCHEMES["xpos"]
    return cls(cls.Config(**kw), Dims(4 * head_dim, 4, head_dim, train_len))


def test_xpos_zeta_follows_the_paper():
    # (2i/d + 0.4) / 1.4 for i = 0..3 of d = 8
    assert torch.allclose(xpos_zeta(8, 0.4), torch.tensor([0.4 / 1.4, 0.65 / 1.4, 0.9 / 1.4, 1.15 / 1.4]))


# head_dim 4, scale_base 8, training length 16 (center 8): pair 0 = dims (0, 2) turns 1 rad per
# step with zeta 0.4 / 1.4 = 2/7; pair 1 = dims (1, 3) turns 10000^(-2/4) = 0.01 rad, zeta 0.9 / 1.4 = 9/14.
XPOS_PAIRS = [((0, 2), 1.0, 2 / 7), ((1, 3), 0.01, 9 / 14)]
XPOS_Q, XPOS_K = torch.tensor([1.0, 2.0, 3.0, -1.0]), torch.tensor([0.5, -1.0, 2.0, 1.0])


def test_xpos_scales_q_up_and_k_down_from_the_center():
    scheme = _xpos(scale_base=8.0)
    q, k = scheme.qk(XPOS_Q.view(1, 1, 1, 4), XPOS_K.view(1, 1, 1, 4), torch.tensor([10]), torch.tensor([3]))
    for x, out, pos, sign in [(XPOS_Q, q.view(4), 10, 1), (XPOS_K, k.view(4), 3, -1)]:
        for (a, b), rate, zeta in XPOS_PAIRS:
            s, c, sn = zeta ** (sign * (pos - 8) / 8), math.cos(pos * rate), math.sin(pos * rate)
            assert out[a].item() == pytest.approx(s * (x[a].item() * c - x[b].item() * sn), rel=1e-5)
            assert out[b].item() == pytest.approx(s * (x[a].item() * sn + x[b].item() * c), rel=1e-5)


@pytest.mark.parametrize("n,m", [(10, 3), (3, 10), (20, 20), (40, 0)])
def test_xpos_score_is_the_hand_formula(n, m):
    scheme = _xpos(scale_base=8.0)
    q, k = scheme.qk(XPOS_Q.view(1, 1, 1, 4), XPOS_K.view(1, 1, 1, 4), torch.tensor([n]), torch.tensor([m]))
    want, d = 0.0, n - m
    for (a, b), rate, zeta in XPOS_PAIRS:
        # RoPE's pair term at offset d, times zeta^(+(n - 8)/8) * zeta^(-(m - 8)/8) = zeta^(d/8)
        dot, cross = XPOS_Q[a] * XPOS_K[a] + XPOS_Q[b] * XPOS_K[b], XPOS_Q[a] * XPOS_K[b] - XPOS_Q[b] * XPOS_K[a]
        want += zeta ** (d / 8) * (dot.item() * math.cos(d * rate) + cross.item() * math.sin(d * rate))
    assert (q * k).sum().item() == pytest.approx(want, rel=1e-5)


def _xpos_logits(scheme, q, k, pos):
    qs, ks = scheme.qk(q, k, pos, pos)
    return qs @ ks.transpose(-2, -1)


@pytest.mark.parametrize("scale_base", [512.0, 16.0])
def test_xpos_scores_depend_only_on_the_offset(scale_base):
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 16)
    scheme, pos = _xpos(head_dim=16, train_len=32, scale_base=scale_base), torch.arange(12)
    base = _xpos_logits(scheme, q, k, pos)
    for shift in (1, 37, 300):
        assert torch.allclose(_xpos_logits(scheme, q, k, pos + shift), base, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(base, _rope_logits(q, k, pos), atol=1e-3)  # the decay does matter


def test_xpos_q_and_k_of_a_position_are_the_same_in_every_sequence():
    # a key/value cache holds them: the center does not move with the sequence length
    scheme, x = _xpos(head_dim=8, train_len=32), torch.randn(1, 2, 64, 8)
    short = scheme.qk(x[..., :8, :], x[..., :8, :], torch.arange(8), torch.arange(8))
    long = scheme.qk(x, x, torch.arange(64), torch.arange(64))
    assert torch.equal(short[0], long[0][..., :8, :]) and torch.equal(short[1], long[1][..., :8, :])


@pytest.mark.parametrize("length", [8 * 32, 16384], ids=["8x a 32-token training length", "16K tokens"])
def test_xpos_scores_stay_finite_in_float32(length):
    torch.manual_seed(1)
    scheme = _xpos(head_dim=8, train_len=32)
    assert scheme.max_length() >= length
    q, k = torch.randn(1, 2, length, 8), torch.randn(1, 2, length, 8)
    qs, ks = scheme.qk(q, k, torch.arange(length), torch.arange(length))
    assert torch.isfinite(qs).all() and torch.isfinite(ks).all()
    # the first and last queries against every key, the masked future ones (the largest) included
    edges = torch.cat((qs[..., :4, :], qs[..., -4:, :]), dim=-2) @ ks.transpose(-2, -1)
    assert torch.isfinite(edges).all()
    # the same token pair at offset 3 scores the same at the end of the sequence as at its start
    end = (qs[..., -1, :] * ks[..., -4, :]).sum(-1)
    q0, k0 = scheme.qk(q[..., -1:, :], k[..., -4:-3, :], torch.tensor([3]), torch.tensor([0]))
    assert torch.allclose(end, (q0 * k0).sum(-1).squeeze(-1), rtol=1e-2, atol=1e-2)


def test_xpos_max_length_bounds_the_largest_factor_by_2_to_the_64():
    length = _xpos(scale_base=8.0).max_length()
    # a query at 0 and a (masked) key at T - 1: factor (2/7)^(-(T - 1)/8)
    assert (7 / 2) ** ((length - 1) / 8) <= 2.0 ** 64 < (7 / 2) ** (length / 8)
    with pytest.raises(ValueError, match=rf"xpos.scale_base=8.0: .* past {length} tokens, .* training length 512"):
        _xpos(scale_base=8.0, train_len=512)


# ---------------------------------------------------------------- log-length temperature

def test_log_scale_is_one_within_base_and_log_ratio_beyond():
    t = log_length_scale(torch.arange(256), base=64).squeeze(-1)
    assert torch.all(t[:64] == 1.0)
    assert t[255].item() == pytest.approx(math.log(256) / math.log(64))
    scheme = SCHEMES["nope"](SCHEMES["nope"].Config(log_scale=True), Dims(16, 2, 8, 64))
    assert torch.equal(scheme.temperature(torch.arange(256)), log_length_scale(torch.arange(256), 64))
    assert SCHEMES["nope"](SCHEMES["nope"].Config(), Dims(16, 2, 8, 64)).temperature(torch.arange(4)) is None


def test_bad_scheme_parameters_name_the_value():
    with pytest.raises(ValueError, match="layout 'diagonal'.*half, interleaved"):
        SCHEMES["rope"].Config(layout="diagonal")
    with pytest.raises(ValueError, match="scaling 'magic'.*none, linear, ntk, yarn"):
        SCHEMES["rope"].Config(scaling="magic")
    with pytest.raises(ValueError, match=r"rope.drop_low=1.5: must be in \[0, 1\]"):
        SCHEMES["rope"].Config(drop_low=1.5)
    with pytest.raises(ValueError, match=r"rope.drop_low=0.5 with rope.fraction=0.5"):
        SCHEMES["rope"].Config(drop_low=0.5, fraction=0.5)
    with pytest.raises(ValueError, match=r"xpos.scale_base=0.0: must be > 0"):
        SCHEMES["xpos"].Config(scale_base=0.0)
    with pytest.raises(ValueError, match=r"xpos.scale_constant=-0.4: must be > 0"):
        SCHEMES["xpos"].Config(scale_constant=-0.4)
