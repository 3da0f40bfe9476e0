"""KERPLE's power kernel (Chi et al. 2022) against hand-computed values of -r1 (i - j) ** r2.

Mutation check (each made alone; the named test fails):
* kerple_power.py power_bias, exp(r2 * logd) -> exp(r1 * logd): test_worked_values;
* kerple_power.py strengths without at_most: test_r2_is_read_between_the_floor_and_2;
* kerple_power.py at_most as ``x.clamp(max=ceiling)``: test_gradients_pass_the_clamps_and_stay_finite_at_distance_0;
* kerple_power.py kernel_score_mod, r2[h] -> r1[h]: test_score_mod_adds_the_bias_on_every_causal_pair;
* KerplePowerConfig r2_init <= 2 -> < 3: test_bad_parameters_name_the_value_and_the_range.
"""
import math

import pytest
import torch

from suite.model.position import SCHEMES, Dims
from tests.conftest import assert_score_mod_is_the_bias

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _power(r1, r2):
    scheme = SCHEMES["kerple_power"](SCHEMES["kerple_power"].Config(), Dims(16, len(r1), 8, 16))
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor(r1))
        scheme.r2.copy_(torch.tensor(r2))
    return scheme


def test_worked_values():
    bias = _power([0.5, 2.0], [1.0, 0.5]).bias(torch.arange(10), torch.arange(10))
    # (5, 1), distance 4: -0.5 * 4 = -2 (r2 = 1: ALiBi with slope 0.5); -2 * 4 ** 0.5 = -4
    assert bias[:, 5, 1].tolist() == pytest.approx([-2.0, -4.0], abs=1e-6)
    # (9, 0), distance 9: -4.5; -2 * 3 = -6
    assert bias[:, 9, 0].tolist() == pytest.approx([-4.5, -6.0], abs=1e-6)
    assert bias[:, 3, 3].tolist() == [0.0, 0.0]


def test_r2_is_read_between_the_floor_and_2():
    bias = _power([1.0, 1.0, -3.0], [3.5, -1.0, 1.0]).bias(torch.arange(6), torch.arange(6))
    assert bias[0, 5, 0].item() == pytest.approx(-25.0, abs=1e-5)  # r2 = 3.5 read as 2: -5 ** 2
    assert bias[1, 5, 0].item() == pytest.approx(-(5 ** 0.01), abs=1e-6)  # r2 = -1 read as 0.01
    assert bias[2, 5, 0].item() == pytest.approx(-0.01 * 5, abs=1e-6)  # r1 = -3 read as 0.01


def test_depends_only_on_distance_and_never_rises_with_it():
    torch.manual_seed(0)
    scheme = SCHEMES["kerple_power"](SCHEMES["kerple_power"].Config(), Dims(32, 4, 8, 32))
    pos = torch.arange(30)
    bias = scheme.bias(pos, pos).detach()
    assert torch.allclose(scheme.bias(pos + 1000, pos + 1000), bias)
    by_distance = bias[:, -1, :].flip(-1)  # the last query against keys at distance 0, 1, ..., 29
    assert torch.all(by_distance[:, 1:] < by_distance[:, :-1])


def test_gradients_pass_the_clamps_and_stay_finite_at_distance_0():
    scheme = _power([0.5, 2.0], [2.5, 0.001])  # head 0 above the ceiling, head 1 below the floor
    pos = torch.arange(4)
    scheme.bias(pos, pos)[:, 3, :].sum().backward()  # distances 3, 2, 1, 0
    # d/dr1 = -sum d ** r2; d/dr2 = -r1 sum d ** r2 ln d, at the read values r2 = 2 and 0.01
    d = [3.0, 2.0, 1.0]
    assert scheme.r1.grad.tolist() == pytest.approx([-sum(x ** 2 for x in d), -sum(x ** 0.01 for x in d)], abs=1e-5)
    assert scheme.r2.grad.tolist() == pytest.approx(
        [-0.5 * sum(x ** 2 * math.log(x) for x in d), -2.0 * sum(x ** 0.01 * math.log(x) for x in d)], abs=1e-5)


@pytest.mark.parametrize("grad", [True, False], ids=["training: (H, T, T) bias", "no grad: in-kernel bias"])
def test_score_mod_adds_the_bias_on_every_causal_pair(grad):
    torch.manual_seed(0)
    scheme = SCHEMES["kerple_power"](SCHEMES["kerple_power"].Config(), Dims(32, 4, 8, 32))
    assert_score_mod_is_the_bias(scheme, 4, grad, atol=1e-5)


@pytest.mark.parametrize("key,value,message", [
    ("r1_init", 0.0, r"kerple_power.r1_init=0.0: must be > 0"),
    ("r2_init", 2.5, r"kerple_power.r2_init=2.5: must be <= 2"),
    ("floor", -0.01, r"kerple_power.floor=-0.01: must be > 0"),
])
def test_bad_parameters_name_the_value_and_the_range(key, value, message):
    with pytest.raises(ValueError, match=message):
        SCHEMES["kerple_power"].Config(**{key: value})
