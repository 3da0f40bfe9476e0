"""The typed schema (suite/config/schema.py) is the one place for types, defaults and ranges.

Mutation checks: in suite/config/schema.py TrainConf.steps, ge=1 -> ge=0 makes
test_every_range_is_checked_before_training[train.steps=0] fail; adding `lr: 1.0e-3` (the schema's
default) to conf/train/gpu.yaml makes test_group_yamls_set_only_what_differs_from_the_schema[train] fail;
the scheme tests name their own.
"""
import dataclasses
import re
import typing
from typing import Optional

import pytest
from hydra.errors import HydraException
from omegaconf import OmegaConf

from suite.config import schema
from suite.config.compose import CONF_DIR, compose_config
from tests.composed import composed
from tests.conftest import CLASSIC, fast_or_exhaustive
from suite.model.position import SCHEMES
from suite.model.mixer import MIXERS
from suite.model.span import SPANS
from suite.config.build import SpecError, build
from tasks import TASKS


def _yaml(path) -> dict:
    data = OmegaConf.to_container(OmegaConf.load(path)) or {}
    data.pop("defaults", None)
    return data


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _restated(data: dict, cls) -> list[str]:
    defaults = OmegaConf.to_container(OmegaConf.structured(cls))
    return [k for k, v in data.items() if k != "name" and k in defaults and v == defaults[k]
            and defaults[k] != "???"]


@pytest.mark.parametrize("group", sorted(schema.GROUPS))
def test_group_yamls_set_only_what_differs_from_the_schema(group):
    cls = schema.GROUPS[group]
    files = sorted((CONF_DIR / group).glob("*.yaml"))
    assert files
    for path in files:
        assert _restated(_yaml(path), cls) == [], f"{path} restates schema defaults"


def test_top_level_yaml_restates_no_default():
    top = {k: v for k, v in _yaml(CONF_DIR / "config.yaml").items() if k != "hydra"}
    assert top == {}, f"conf/config.yaml sets {sorted(top)}; their defaults live in suite/config/schema.py"


@pytest.mark.parametrize("group,catalogue", [("span", SPANS), ("task", TASKS)])
def test_piece_yamls_hold_their_dataclass_defaults(group, catalogue):
    """A span or task YAML lists its options for the reader: each value it states is the
    piece's own default, except a span's size, which the dataclass leaves unset (required)."""
    for name, cls in catalogue.items():
        data = _yaml(CONF_DIR / group / f"{name}.yaml")
        assert data.pop("name") == name
        defaults = _defaults(getattr(cls, "Config", cls))
        assert set(data) <= set(defaults), f"{group}/{name}.yaml has keys the class lacks: {set(data) - set(defaults)}"
        for key, value in data.items():
            if defaults[key] is None and group == "span":
                continue
            assert value == defaults[key], f"{group}/{name}.yaml: {key}={value!r}, the class says {defaults[key]!r}"


def test_scheme_yamls_state_no_default():
    """A scheme's defaults live only in its ``Config`` dataclass: ``conf/position/<name>.yaml``
    starts from the scheme's node (``/scheme_defaults/<name>``) and states its name and only
    values that differ from the dataclass.

    Mutation checks: adding ``log_scale: false`` (or ``theta: 10000.0`` to rope.yaml) makes this
    fail; so does a YAML that starts from another scheme's node."""
    files = sorted((CONF_DIR / "position").glob("*.yaml"))
    assert {p.stem for p in files} == set(SCHEMES)
    for path in files:
        raw = OmegaConf.to_container(OmegaConf.load(path))
        data = _yaml(path)
        name = data.pop("name")
        assert raw["defaults"] == [f"/{schema.SCHEME_DEFAULTS}/{name}@_here_", "_self_"], path
        defaults = _defaults(SCHEMES[name].Config)
        assert set(data) <= set(defaults), f"{path} has keys {name} lacks: {set(data) - set(defaults)}"
        assert [k for k, v in data.items() if v == defaults[k]] == [], f"{path} restates defaults of {name}"


@pytest.mark.parametrize("name", fast_or_exhaustive(sorted(SCHEMES), CLASSIC))  # every other scheme: make test-exhaustive
def test_every_scheme_option_composes_with_its_dataclass_default_and_takes_an_override(name):
    """``position=<name>`` composes every option of the scheme with its dataclass default (what
    ``--cfg job`` prints and tab completion offers), and each option takes a plain override,
    with no ``+``. Mutation check: leaving the scheme_defaults loop out of schema.register makes
    this fail."""
    defaults = _defaults(SCHEMES[name].Config)
    cfg = compose_config([f"position={name}"])
    assert OmegaConf.to_container(cfg.position) == {"name": name, **defaults}
    assert list(cfg.position)[0] == "name"
    assert compose_config([f"position={name}", "position.log_scale_base=77"]).position.log_scale_base == 77


def test_a_pattern_sizes_its_span_layers_with_the_spans_own_options():
    """The pattern group's size options are the spans' ``Config`` fields (``window`` of swa,
    ``chunk`` of chunked), with their types, each unset by default; a new span's option becomes a
    pattern option with no edit here, and the schema declares none by hand.

    Mutation check: declaring ``window: Optional[int] = option(None, ge=1)`` in a hand-written
    PatternConf again makes this fail."""
    @dataclasses.dataclass(frozen=True)
    class StrideConfig:
        stride: Optional[int] = None

    class Strided:
        Config = StrideConfig

    own = {k: t for cls in [*SPANS.values(), *MIXERS.values()] for k, t in typing.get_type_hints(cls.Config).items()}
    sizes = {f.name: f for f in dataclasses.fields(schema.PatternConf) if f.name not in ("name", "layers")}
    assert set(sizes) == set(own) == {"window", "chunk", "chunk_size", "conv_size"}  # a mixer's options too
    assert all(sizes[k].default is None and sizes[k].type == Optional[own[k]] for k in own)
    assert "stride" in {f.name for f in dataclasses.fields(schema.pattern_conf({**SPANS, "strided": Strided}))}
    source = (CONF_DIR.parent / "suite" / "config" / "schema.py").read_text()
    assert not re.search(r"^\s+(window|chunk)\s*:", source, re.MULTILINE)
    assert compose_config(["pattern=command_a", "pattern.window=8"]).pattern.window == 8
    assert compose_config(["pattern=qwen3_next", "pattern.chunk_size=16"]).pattern.chunk_size == 16


def test_the_composed_config_carries_the_schema_defaults():
    cfg = compose_config([])
    assert cfg.train.lr == schema.TrainConf.lr
    assert cfg.eval.n_examples == schema.EvalConf.n_examples
    assert cfg.log_every == schema.PosBenchConf.log_every
    assert cfg.model.attention == "auto"
    assert cfg.logger.dir is None and schema.LoggerConf.dir is None  # null: <results_dir>/<sweep_name>/wandb
    assert OmegaConf.to_container(cfg.eval.multiples) == [1.0, 1.25, 1.5, 2.0, 4.0, 8.0]


@pytest.mark.parametrize("override,key", [
    ("train.steps=abc", "train.steps"),
    ("eval.multiples=[a]", "eval.multiples"),
    ("model.d_model=1.5", "model.d_model"),
    ("pattern.window=1.5", "pattern.window"),
    ("train.typo=1", "typo"),
])
def test_hydra_rejects_a_wrong_type_or_an_unknown_key_while_composing(override, key):
    with pytest.raises(HydraException, match=key.replace(".", r"\.")):
        compose_config([override])


@pytest.mark.parametrize("override,message", [
    ("train.steps=0", r"train.steps=0: must be >= 1"),
    ("model.d_model=0", r"model.d_model=0: must be >= 1"),
    ("eval.n_examples=0", r"eval.n_examples=0: must be >= 1"),
    ("train.lr=-1", r"train.lr=-1.0: must be > 0"),
    ("train.batch_size=0", r"train.batch_size=0: must be >= 1"),
    ("seed=-1", r"^seed=-1: must be >= 0"),
    ("log_every=0", r"log_every=0: must be >= 1"),
    ("train.betas=[0.9,1.5]", r"train.betas\[1\]=1.5: must be < 1"),
    ("train.betas=[0.9]", r"train.betas=\[0.9\]: must have 2 values"),
    ("train.precision=fp8", r"unknown train.precision 'fp8'; valid: fp32, bf16"),
    ("logger.mode=sometimes", r"unknown logger.mode 'sometimes'; valid: offline, online, disabled"),
    ("logger.dir=/tmp/wb", r"logger.dir='/tmp/wb': its last folder must be named 'wandb'"),
    ("eval.multiples=[]", r"eval.multiples=\[\]: must have at least one value"),
    ("train.lr=inf", r"train.lr=inf: must be a finite number"),
    ("train.grad_clip=nan", r"train.grad_clip=nan: must be a finite number"),
    ("eval.multiples=[1,inf]", r"eval.multiples\[1\]=inf: must be a finite number"),
])
def test_every_range_is_checked_before_training(override, message):
    with pytest.raises(SpecError, match=message):
        build(composed([override]))


def test_every_broken_rule_is_reported_at_once():
    with pytest.raises(SpecError) as err:
        build(composed(["train.steps=0", "eval.batch_size=0", "threads=-2"]))
    for key in ("train.steps=0", "eval.batch_size=0", "threads=-2"):
        assert key in str(err.value)


def test_a_plain_dict_is_typed_like_a_composed_config():
    cfg = OmegaConf.to_container(compose_config([]))
    cfg["train"]["steps"] = "12"
    assert build(cfg).train.steps == 12
    cfg["train"]["steps"] = "many"
    with pytest.raises(SpecError, match="train.steps"):
        build(cfg)


def test_register_stores_again_only_what_changed(monkeypatch):
    """Each composition calls ``schema.register``: it stores nothing new while the store and the schemes are
    what it last stored, and stores again once the scheme defaults are gone from the store or a scheme is added.

    Mutation check: returning early whenever ``posbench_schema.yaml`` is in the store (the schemes not
    compared) makes this fail."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    schema.register()
    kept = store.repo[schema.SCHEME_DEFAULTS]
    schema.register()
    assert store.repo[schema.SCHEME_DEFAULTS] is kept  # nothing stored again
    store.repo.pop(schema.SCHEME_DEFAULTS)
    schema.register()
    assert sorted(store.repo[schema.SCHEME_DEFAULTS]) == sorted(f"{name}.yaml" for name in SCHEMES)
    monkeypatch.setitem(SCHEMES, "rope_again", SCHEMES["rope"])
    schema.register()
    assert "rope_again.yaml" in store.repo[schema.SCHEME_DEFAULTS]
    monkeypatch.undo()
    store.repo[schema.SCHEME_DEFAULTS].pop("rope_again.yaml")
    schema.register()


def test_the_schema_node_a_build_starts_from_keeps_its_defaults():
    """``build`` merges each config onto one schema node per process: the merge copies it, so a build with
    other values leaves the next build's defaults as the schema has them.

    Mutation check: ``OmegaConf.unsafe_merge`` (which merges into its first argument) in ``_typed_root``
    makes this fail."""
    from suite.config.build import _schema_node

    default_steps = _schema_node(schema.PosBenchConf).train.steps
    assert build(composed(["train.steps=7"])).train.steps == 7
    assert _schema_node(schema.PosBenchConf).train.steps == default_steps
    assert build(composed([])).train.steps == default_steps
