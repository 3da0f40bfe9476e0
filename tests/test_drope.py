"""DroPE (suite/model/position/drope.py, conf/arch/drope.yaml): NoPE with the inference temperature
beta = max(1, 1 + c ln(C_test / C_train)), C_test the query's context, after a RoPE phase.

Mutation checks (each made, watched failing, restored):
* drope.py ``drope_beta``, ``1.0 + c * ...`` -> ``c * ...``, or ``context`` -> ``context - 1``
  (C_test read as the query's index), or the ``clamp(min=1.0)`` dropped, makes
  test_the_temperature_is_the_formula_and_one_up_to_the_training_length fail;
* drope.py ``temperature``, beta read from the whole length (``pos_q.max() + 1`` for every
  query) makes test_a_kv_cache_decodes_exactly_past_the_training_length fail (length_invariant
  says so, and the cached logits differ); deleting the temperature probe from
  suite/model/cache.py ``length_invariant`` makes it fail too under that mutation;
* drope.py ``temperature`` returning ``base`` whatever c makes test_beta_multiplies_the_logits fail;
* the ``le=C_MAX`` rule of ``DropeConfig.c`` dropped (or it and the ``__post_init__`` check both) makes
  test_c_out_of_range_is_refused_naming_the_value fail;
* conf/arch/drope.yaml without its ``train.schedule`` makes test_the_arch_trains_rope_then_drope fail.
"""
from __future__ import annotations

import math

import pytest
import torch

from suite.config.build import SpecError
from suite.lmeval.kv_cache import extend, prefill
from suite.model.cache import length_invariant
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES, Dims
from suite.model.position.drope import C_MAX, DropeConfig
from suite.results.identity import run_columns, run_id
from tests.conftest import make_spec

SMALL = ["model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=16",
         "eval.multiples=[1,4]", "task=copy"]

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_temperature_is_the_formula_and_one_up_to_the_training_length():
    L, c = 16, 0.3
    scheme = SCHEMES["drope"](DropeConfig(c=c), Dims(32, 4, 8, L))
    beta = scheme.temperature(torch.arange(8 * L))  # (T, 1): query i sees i + 1 tokens
    assert beta.shape == (8 * L, 1)
    assert torch.equal(beta[:L], torch.ones(L, 1))  # at and below the training length: 1
    for context in (L + 1, 2 * L, 3 * L, 8 * L):
        assert beta[context - 1, 0].item() == pytest.approx(1 + c * math.log(context / L), rel=1e-6)
    assert beta[L - 1, 0].item() == 1.0  # exactly 1 at the training length
    assert SCHEMES["drope"](DropeConfig(c=0.0), Dims(32, 4, 8, L)).temperature(torch.arange(40)) is None  # c = 0: NoPE
    both = SCHEMES["drope"](DropeConfig(c=c, log_scale=True), Dims(32, 4, 8, L)).temperature(torch.arange(4 * L))
    i = 4 * L - 1
    assert both[i, 0].item() == pytest.approx(math.log(i + 1) / math.log(L) * (1 + c * math.log(4)), rel=1e-6)


def _pair(c):
    """A drope model (c) and a nope model with the same weights, both (1, H, T, T) logits of layer 0."""
    torch.manual_seed(0)
    drope = PosBenchLM(make_spec(*SMALL, "position=drope", f"position.c={c}").model).eval()
    nope = PosBenchLM(make_spec(*SMALL, "position=nope").model).eval()
    nope.load_state_dict(drope.state_dict())
    return drope, nope


def test_beta_multiplies_the_logits():
    """Layer 0 sees the same input in both models: drope's logits are NoPE's times each query's beta."""
    drope, nope = _pair(0.5)
    tokens = torch.randint(3, 300, (1, 64), generator=torch.Generator().manual_seed(0))
    got, base = drope.attention_logits(tokens)[0], nope.attention_logits(tokens)[0]
    beta = (1 + 0.5 * torch.log(torch.arange(1, 65, dtype=torch.float32) / 16)).clamp(min=1)[:, None]  # (T, 1)
    finite = torch.isfinite(base)
    torch.testing.assert_close(got[finite], (base * beta)[finite], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got[finite], base[finite])  # beta acts past the training length
    with torch.no_grad():  # at the training length the model is NoPE
        assert torch.equal(drope(tokens[:, :16]), nope(tokens[:, :16]))


def test_a_kv_cache_decodes_exactly_past_the_training_length():
    drope, _ = _pair(0.5)
    with torch.no_grad():
        for p in drope.parameters():
            p.normal_(0.0, 0.3)
    assert length_invariant(drope, 64)
    tokens = torch.randint(3, 300, (2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = drope(tokens)
    logits, cache = prefill(drope, tokens[:, :11], block=4)
    steps = [logits] + [extend(drope, tokens[:, t : t + 1], cache)[:, -1] for t in range(11, 64)]
    torch.testing.assert_close(torch.stack(steps, dim=1), full[:, 10:], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("value", [-0.1, 10.5])
def test_c_out_of_range_is_refused_naming_the_value(value):
    with pytest.raises(SpecError, match=rf"position\.c={value:g}.*(>= 0|<= {C_MAX:g})"):
        make_spec(*SMALL, "position=drope", f"position.c={value}")
    with pytest.raises(ValueError, match=rf"drope\.c={value:g}: must be in \[0, {C_MAX:g}\]"):
        DropeConfig(c=value)


def test_the_arch_trains_rope_then_drope():
    spec = make_spec("+arch=drope", "task=copy")
    assert [layer.position for layer in spec.model.layers] == ["drope"] * spec.model.n_layers
    assert [phase.position for phase in spec.train.schedule] == ["rope"] and spec.train.schedule[0].until == 0.8
    assert all([name for name, _ in layer.earlier] == ["rope"] for layer in spec.model.layers)
    # a board tells it from a plain NoPE run, and from NoPE dropped after RoPE
    nope = make_spec("+arch=nope", "task=copy")
    assert run_columns(spec)["positions"] == "rope>drope@0.8" and run_columns(nope)["positions"] == "nope"
    assert run_id(spec).startswith("rope~drope@0.8-uniform-full-copy-s0-")
