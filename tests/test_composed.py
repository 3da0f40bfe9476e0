"""The tests' composition (tests/composed.py) is Hydra's: the same config for every kind of
override the tests use, and the same error for an override Hydra refuses.

Mutation check: dropping the step that applies the value overrides in tests/composed.py makes
test_the_tests_composition_is_hydras fail."""
from __future__ import annotations

import pytest
from hydra.errors import HydraException
from omegaconf import OmegaConf

from suite.config.compose import compose_config
from tests.composed import composed

CASES = [
    [],
    ["position=rope"],
    ["position=rope", "position.theta=500", "position.fraction=0.5"],
    ["model.n_layers=2", "model.d_model=16", "train.steps=3", "eval.multiples=[1,2.5]", "task=copy", "position=alibi", "seed=1"],
    ["+arch=llama4", "task=code"],
    ["pattern=command_a", "pattern.window=8", "model.n_layers=8"],
    ["pattern.layers=[{position: rope, span: swa}, {position: nope}]"],
    ["taskset=core", "+taskset.params.mqar.n_queries=3"],
    ["task=vt", "++task.hops=2"],
    ["launcher=basic", "logger=wandb", "logger.mode=disabled"],
    ["position=fox", "position.decay_time_max=nan"],
    ["span=swa", "span.window=4", "position=t5", "position.num_buckets=16"],
    ["train.lr=2e-3", "position=rope", "span=chunked"],  # a value before a choice: Hydra applies values last
]
REFUSED = [["model.widht=3"], ["+train.steps=5"], ["position=warp"], ["seed=one"]]


def _plain(cfg) -> str:
    return repr(OmegaConf.to_container(cfg))  # repr: nan equals nan


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) or "defaults" for c in CASES])
def test_the_tests_composition_is_hydras(overrides):
    ours, hydras = composed(overrides), compose_config(overrides)
    assert _plain(ours) == _plain(hydras)
    assert OmegaConf.is_struct(ours) == OmegaConf.is_struct(hydras)
    assert composed(overrides) is not ours  # a fresh copy each call: a test may change what it gets


@pytest.mark.parametrize("overrides", REFUSED, ids=[" ".join(c) for c in REFUSED])
def test_an_override_hydra_refuses_is_refused_with_hydras_message(overrides):
    with pytest.raises(HydraException) as hydras:
        compose_config(overrides)
    with pytest.raises(HydraException) as ours:
        composed(overrides)
    assert type(ours.value) is type(hydras.value)
    assert str(ours.value).splitlines()[0] == str(hydras.value).splitlines()[0]
