"""The pre-flight memory estimate: what it counts, and that it refuses what cannot fit.

Mutation check: in suite/config/resources.py _attention_bytes, total + 2 * scores -> total + scores (logits
only, no probabilities) makes test_scores_are_counted_only_where_the_path_builds_them fail; so does
dropping ``or SCHEMES[layer.position].needs_logits`` (CoPE under FlexAttention counted as no scores)."""
import pytest
import torch

from suite.model.init import shapes_only
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES
from suite.config.resources import GIB, ResourceError, check_memory, estimate_bytes, parameter_count
from tests.conftest import CLASSIC, fast_or_exhaustive, make_spec

CPU = torch.device("cpu")


@pytest.mark.parametrize("position", fast_or_exhaustive(sorted(SCHEMES), CLASSIC))  # every other scheme: make test-exhaustive
def test_parameter_count_is_the_models(position):
    spec = make_spec(f"position={position}", "model=small")
    assert parameter_count(spec) == sum(p.numel() for p in PosBenchLM(spec.model).parameters())


def test_shapes_only_builds_meta_parameters_and_leaves_real_tensors_alone():
    real = torch.zeros(3)
    with shapes_only():
        layer = torch.nn.Linear(4, 5)
        torch.nn.init.normal_(layer.weight)
        real.fill_(1.0)  # an in-place call on a real tensor still runs
    assert layer.weight.is_meta and layer.weight.shape == (5, 4) and layer.bias.shape == (5,)
    assert torch.equal(real, torch.ones(3))
    assert not torch.empty(1).is_meta  # the meta device ends with the block


def test_weights_gradients_and_adam_moments_are_sixteen_bytes_a_parameter():
    spec = make_spec()
    one = estimate_bytes(make_spec("train.batch_size=1", "train.seq_len=8", "train.min_len=null"), CPU)["train"]
    assert one > 16 * parameter_count(spec)


def test_scores_are_counted_only_where_the_path_builds_them():
    long = ["train.seq_len=512", "train.min_len=null", "eval.multiples=[1]", "task=niah_single"]
    causal = estimate_bytes(make_spec(*long), CPU)["train"]
    reference = estimate_bytes(make_spec(*long, "model.attention=reference"), CPU)["train"]
    spec = make_spec(*long)
    scores = spec.train.batch_size * spec.model.n_heads * 512 * 512 * 4
    # the reference path keeps logits and probabilities of every layer for the backward
    assert reference - causal == pytest.approx(2 * scores * spec.model.n_layers)
    # a learned bias (T5) trains through the reference path under SDPA; ALiBi's fixed bias is one mask
    t5 = estimate_bytes(make_spec(*long, "position=t5"), CPU)["train"]
    alibi = estimate_bytes(make_spec(*long, "position=alibi"), CPU)["train"]
    assert t5 - causal >= 2 * scores * spec.model.n_layers
    assert alibi - causal == pytest.approx(spec.model.n_heads * 512 * 512 * 4)
    # FlexAttention (the CUDA default) builds no scores at all
    assert estimate_bytes(make_spec(*long, "position=alibi"), torch.device("cuda"))["train"] == pytest.approx(causal)
    # CoPE's term reads the logits: the reference path on every implementation, FlexAttention's included
    cope = estimate_bytes(make_spec(*long, "position=cope"), torch.device("cuda"))["train"]
    table = spec.model.head_dim * (512 + 1) * 4 * 4  # its table (training length + 1 columns): weights, grads, 2 Adam moments
    # and q . e[n] for every query and column, with the gradient the gathers scatter into it (held_floats)
    per_query = 2 * spec.train.batch_size * spec.model.n_heads * 512 * (512 + 1) * 4
    assert cope - causal - table == pytest.approx((2 * scores + per_query) * spec.model.n_layers, rel=1e-4)


def test_a_position_table_read_per_query_is_in_the_estimate():
    """CoPE's q . e[n] products grow with position.npos_max: a million columns (no bigger a model)
    needs about 122 GiB to train at the CPU recipe and is refused by the estimate, naming the table.
    Mutation check: returning 0.0 from CoPE.held_floats (the table left out, as before) makes this fail."""
    small, big = (make_spec("position=cope", f"position.npos_max={n}") for n in (33, 1_000_000))
    b, h, t = small.train.batch_size, small.model.n_heads, small.train.seq_len
    grown = estimate_bytes(big, CPU)["train"] - estimate_bytes(small, CPU)["train"]
    params = (parameter_count(big) - parameter_count(small)) * 16
    assert grown - params == pytest.approx(2 * b * h * t * (1_000_000 - 33) * 4 * small.model.n_layers, rel=1e-6)
    with pytest.raises(ResourceError, match=r"training .* needs about 122\.\d GiB \(122\.\d GiB of it held by position "
                                            r"scheme cope beyond the attention scores.*position\.npos_max"):
        check_memory(big, available=24 * GIB, device=CPU)


def test_a_run_that_cannot_fit_is_refused_with_the_estimate():
    spec = make_spec("train.seq_len=4096", "train.min_len=null", "eval.multiples=[1]", "task=niah_single")
    need = estimate_bytes(spec, CPU)["train"]
    with pytest.raises(ResourceError, match=rf"training \(train.batch_size=32 x train.seq_len=4096\) needs about {need / GIB:.1f} GiB, "
                                            r"more than the 1.0 GiB available on cpu"):
        check_memory(spec, available=GIB, device=CPU)
    assert check_memory(spec, available=need * 1.01, device=CPU)["train"] == need


def test_the_default_run_fits_in_a_hundred_megabytes():
    assert max(estimate_bytes(make_spec(), CPU).values()) < 100 * 2 ** 20
