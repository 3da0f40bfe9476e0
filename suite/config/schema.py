"""The typed schema of a run's config: every top-level, model, training, evaluation, logger,
layer-pattern and task-set option with its type, default and valid range.

The ``model``, ``train`` and ``eval`` groups are derived from the frozen specs that hold those
options (``ModelSpec`` in ``suite/model/spec.py``, ``TrainSpec`` and ``EvalSpec`` in
``suite/config/run_spec.py``), where each option is declared once; the other groups are declared
here. The dataclasses are Hydra structured configs (registered in the ConfigStore as
``posbench_schema``, the first entry of ``conf/config.yaml``'s defaults list), so Hydra rejects
a value of the wrong type or an unknown key while it composes, naming the full key. The YAML
files under ``conf/`` set only what differs from these defaults (``tests/test_schema.py`` holds
them to it). Ranges and choices sit in each field's metadata; ``range_errors`` checks them.

Position schemes, spans and tasks keep their options in their own ``Config`` dataclasses (one
file per piece); ``suite.config.build`` converts their YAML values to those types the same way.

A scheme's defaults live only in its ``Config`` dataclass. ``register`` stores each scheme's
defaults in the ConfigStore as ``scheme_defaults/<name>`` (``scheme_node``), and
``conf/position/<name>.yaml`` starts from that node (``defaults: [/scheme_defaults/<name>@_here_,
_self_]``) and states only its ``name`` and what differs. The alternative, defaults only in the
YAMLs, would leave a scheme built in code (a pattern's layer kind naming another scheme, a
stored spec rebuilt, a test) with no defaults, so the dataclass is the home. The node (not a
YAML that restates it) is what keeps the composed config whole: ``--cfg job`` prints every
option, tab completion offers it, and ``position.theta=...`` needs no ``+`` (Hydra refuses a key
the composed group lacks). The node is untyped, so a wrong value is still reported by
``suite.config.build`` with the scheme's own rule. ``tests/test_schema.py`` holds the YAMLs to it.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from suite.config.run_spec import EvalSpec, TrainSpec
from suite.model.mixer import MIXERS
from suite.model.position import SCHEMES
from suite.model.span import SPANS
from suite.model.spec import ModelSpec
from suite.options import REQUIRED, is_option, option, range_errors
from tasks import TASKS

LOGGERS = ("wandb", "none")
WANDB_MODES = ("offline", "online", "disabled")
WANDB_FOLDER = "wandb"  # W&B always names its folder so: its ``dir`` argument is the folder above

__all__ = ["PosBenchConf", "ModelConf", "TrainConf", "EvalConf", "LoggerConf", "PatternConf", "TasksetConf",
           "GROUPS", "SCHEME_DEFAULTS", "register", "range_errors", "conf_of", "scheme_node"]


def conf_of(spec: type, name: str) -> type:
    """A Hydra structured config (a mutable dataclass) with ``spec``'s option fields: their
    types, defaults and rules; a field without a default is mandatory (``???``)."""
    hints = typing.get_type_hints(spec)
    fields = [(f.name, hints[f.name], field(default=MISSING if f.default is REQUIRED else f.default, metadata=f.metadata))
              for f in dataclasses.fields(spec) if is_option(f)]
    return dataclasses.make_dataclass(name, fields, namespace={"__doc__": f"The options of ``{spec.__name__}``.", "__module__": __name__})


ModelConf = conf_of(ModelSpec, "ModelConf")
TrainConf = conf_of(TrainSpec, "TrainConf")
EvalConf = conf_of(EvalSpec, "EvalConf")


@dataclass
class LoggerConf:
    name: str = option("wandb", choices=LOGGERS)
    mode: str = option("offline", choices=WANDB_MODES, doc="offline: no account, no network")
    project: str = option("posbench")
    entity: Optional[str] = option(None)
    silent: bool = option(True, doc="keep W&B's own messages out of the sweep log")
    dir: Optional[str] = option(None, doc="the folder W&B's run folders go in, its last part named wandb; "
                                          "null: <results_dir>/<sweep_name>/wandb")


def dir_problem(value: Optional[str]) -> Optional[str]:
    """Why ``value`` cannot be ``logger.dir``, or None when it can (None itself: the default)."""
    if value is None or Path(str(value)).expanduser().name == WANDB_FOLDER:
        return None
    return (f"logger.dir={value!r}: its last folder must be named {WANDB_FOLDER!r}, because W&B names its folder "
            f"itself; for example {str(Path(str(value)) / WANDB_FOLDER)!r}, or null for <results_dir>/<sweep_name>/wandb")


@dataclass
class LayerKind:
    """One layer of a pattern; what it leaves out comes from the ``position`` and ``span`` groups,
    and its token mixer is softmax attention unless it names another (``suite/model/mixer/``)."""

    position: Optional[str] = None
    span: Optional[str] = None
    log_scale: Optional[bool] = None
    mixer: Optional[str] = None


def pattern_conf(spans: dict[str, type], mixers: dict[str, type] | None = None) -> type:
    """The ``pattern`` group: its name, its layer kinds, each option of a span's ``Config``
    (``window`` of ``swa``, ``chunk`` of ``chunked``) and each option of a mixer's ``Config``
    (``chunk_size`` of ``gated_delta``), with the piece's own type and rules and default None,
    which sets it for the pattern's layers of that span or mixer. The spans and mixers own those
    options; the pattern only passes them on (``suite.config.build.resolve_layers``)."""
    sizes: dict[str, tuple] = {}
    for piece, cls in [*sorted(spans.items()), *sorted((mixers or {}).items())]:
        hints = typing.get_type_hints(cls.Config)
        for f in dataclasses.fields(cls.Config):
            doc = f"{f.name} of the pattern's {piece} layers"
            sizes.setdefault(f.name, (f.name, Optional[hints[f.name]],
                                      field(default=None, metadata={**option(None).metadata, **f.metadata, "doc": doc})))
    fields = [("name", str, option(MISSING)), ("layers", List[LayerKind], field(default_factory=lambda: [LayerKind()])),
              *sizes.values()]
    return dataclasses.make_dataclass("PatternConf", fields, namespace={
        "__doc__": "A layer pattern: layer kinds tiled over the depth, and the sizes of its span layers.", "__module__": __name__})


PatternConf = pattern_conf(SPANS, MIXERS)


@dataclass
class TasksetConf:
    name: str = option(MISSING)
    tasks: List[str] = option(MISSING)
    params: Dict[str, Any] = option({}, doc="per-task overrides: taskset.params.<task>.<key>")


@dataclass
class PosBenchConf:
    """The whole run config. Position, span and task options are typed by their own classes."""

    model: ModelConf = field(default_factory=ModelConf)
    position: Any = MISSING
    span: Any = MISSING
    pattern: PatternConf = field(default_factory=PatternConf)
    task: Any = MISSING
    taskset: Optional[TasksetConf] = None
    train: TrainConf = field(default_factory=TrainConf)
    eval: EvalConf = field(default_factory=EvalConf)
    logger: LoggerConf = field(default_factory=LoggerConf)
    sweep_name: str = option("dev", doc="results go to <results_dir>/<sweep_name>/")
    seed: int = option(0, ge=0)
    results_dir: str = option("results")
    ckpt_every: int = option(500, ge=0, doc="checkpoint every N steps (0: never)")
    log_every: int = option(10, ge=1)
    threads: int = option(1, ge=0, doc="torch threads per run (0: all cores)")
    jobs: int = option(2, ge=1, doc="runs at once under launcher=local (its hydra.launcher.n_jobs)")
    skip: List[Dict[str, str]] = field(default_factory=list, metadata={
        "doc": "grid points a sweep leaves out: each entry names config-group options (family: copy, setting: "
               "tiny_L128) and says why (why: ...); a job whose choices match every option of an entry is not run"})


SCHEME_DEFAULTS = "scheme_defaults"  # the ConfigStore group of every scheme's defaults


def scheme_node(config_cls: type) -> dict:
    """A scheme's options with its ``Config`` dataclass's defaults, after a ``name`` its YAML sets."""
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls)}
    if any(v is dataclasses.MISSING for v in defaults.values()):
        raise TypeError(f"{config_cls.__name__}: every scheme option needs a default")
    return {"name": MISSING, **{k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}}


GROUPS = {"model": ModelConf, "train": TrainConf, "eval": EvalConf, "logger": LoggerConf,
          "pattern": PatternConf, "taskset": TasksetConf}


_stored = None  # what the last register() stored: (the store's repository, each scheme's name and config class)


def register() -> None:
    """Put the schema and each scheme's defaults in Hydra's ConfigStore and the ``${posbench.tasks:}`` resolver (every
    registered task, as ``conf/taskset/all.yaml`` lists them) in OmegaConf (idempotent). Each composition calls it;
    it stores again only when the store was replaced or emptied, or the schemes changed since it last stored."""
    global _stored
    store = ConfigStore.instance()
    schemes = tuple((name, cls.Config) for name, cls in SCHEMES.items())
    if (_stored is not None and _stored[0] is store.repo and _stored[1] == schemes and "posbench_schema.yaml" in store.repo
            and SCHEME_DEFAULTS in store.repo and OmegaConf.has_resolver("posbench.tasks")):
        return
    store.store(name="posbench_schema", node=PosBenchConf)
    for name, cls in SCHEMES.items():
        store.store(group=SCHEME_DEFAULTS, name=name, node=scheme_node(cls.Config))
    OmegaConf.register_new_resolver("posbench.tasks", lambda: sorted(TASKS), replace=True)
    _stored = (store.repo, schemes)


register()
