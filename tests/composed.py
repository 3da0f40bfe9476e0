"""Hydra's composition for the tests, with the expensive part done once per process.

Hydra composes in two stages (``hydra._internal.config_loader_impl``): the overrides that choose
configs from groups (``position=rope``, ``+arch=llama4``) build the defaults tree and merge its
configs, about 0.2 s here; the overrides of values (``train.steps=3``) are then applied to the
merged config, in their order, with the config in struct mode. ``composed`` does the same: the first
stage is Hydra's own ``compose`` of the group choices alone, cached per process (conf/ does not
change while the tests run: a test that adds a config does so in a copy of the checkout), and the
second is Hydra's own step that applies value overrides. ``tests/test_composed.py`` checks that the
result equals a plain ``compose`` on the override lists the tests use.
"""
from __future__ import annotations

import copy
from functools import lru_cache

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from suite.config.compose import CONF_DIR, compose_config


def _chooses_a_config(override) -> bool:
    """An override Hydra treats as a config-group choice: its key names a group folder of conf/."""
    return override.package is not None or (CONF_DIR / override.key_or_group).is_dir()


@lru_cache(maxsize=512)
def _groups_composed(choices: tuple[str, ...]) -> DictConfig:
    return compose_config(list(choices))


def composed(overrides) -> DictConfig:
    """What ``compose_config(overrides)`` returns, a fresh copy each call."""
    overrides = [str(o) for o in overrides]
    parsed = OverridesParser.create().parse_overrides(overrides)
    if any(o.key_or_group.startswith("hydra") or o.is_sweep_override() for o in parsed):
        return compose_config(overrides)  # Hydra's own node or a sweep: the whole composition
    choices = tuple(o.input_line for o in parsed if _chooses_a_config(o))
    cfg = copy.deepcopy(_groups_composed(choices))
    OmegaConf.set_struct(cfg, True)
    ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if not _chooses_a_config(o)], cfg)
    return cfg
