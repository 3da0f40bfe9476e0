"""Each position scheme against its paper's formula.

Mutation checks: in suite/position/alibi.py alibi_slopes, the extra slopes [0::2] -> [1::2] makes
test_alibi_slopes_12_heads_follow_the_non_power_of_two_rule fail; in suite/position/learned.py
Learned.check, max_positions < train_len -> <= train_len makes
test_learned_check_sizes_a_null_table_to_the_longest_eval_length_and_keeps_a_set_one fail, and
sizing a null table to min(eval_lens) makes it fail too."""
import math

import pytest
import torch

from suite.position import SCHEMES, Dims, LengthUnsupported, log_length_scale
from suite.position.alibi import alibi_slopes
from suite.position.rope import apply_rope, rope_inv_freq, rotary_dims
from suite.position.sinusoidal import sinusoidal_table
from suite.position.t5 import t5_bucket


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
    pos = torch.arange(40)
    with torch.set_grad_enabled(grad):
        mod = scheme.score_mod(pos)
        h, q, k = torch.meshgrid(torch.arange(2), pos, pos, indexing="ij")
        added = mod(torch.zeros(h.shape), 0, h, q, k)
        expected = scheme.bias(pos, pos)
    causal = k <= q
    assert torch.allclose(added[causal], expected[causal]) and added.requires_grad == grad


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


@pytest.mark.parametrize("name", sorted(set(SCHEMES) - {"learned"}))
def test_a_scheme_without_rules_passes_its_config_through_check(name):
    cfg = SCHEMES[name].Config()
    assert SCHEMES[name].check(cfg, 32, (32, 64)) is cfg


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
