"""The typed schema of a run's config: every top-level, model, training, evaluation, logger,
layer-pattern and task-set option with its type, default and valid range, in one place.

The dataclasses are Hydra structured configs (registered in the ConfigStore as
``posbench_schema``, the first entry of ``conf/config.yaml``'s defaults list), so Hydra rejects
a value of the wrong type or an unknown key while it composes, naming the full key. The YAML
files under ``conf/`` set only what differs from these defaults (``tests/test_schema.py`` holds
them to it). Ranges and choices sit in each field's metadata; ``range_errors`` checks them.

Position schemes, spans and tasks keep their options in their own ``Config`` dataclasses (one
file per piece); ``suite.spec`` converts their YAML values to those types the same way.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

ATTENTION_IMPLS = ("auto", "reference", "sdpa", "flex")
PRECISIONS = ("fp32", "bf16")
LOSS_ON = ("answer", "all")
LOGGERS = ("wandb", "none")
WANDB_MODES = ("offline", "online", "disabled")


def option(default: Any = MISSING, *, ge=None, gt=None, le=None, lt=None, choices=None, each: bool = False,
           length: Optional[int] = None, doc: str = ""):
    """A schema field: its default and the rules ``range_errors`` checks (``each``: the rules
    apply to every element of a list; ``length``: a list's required length)."""
    rules = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, length=length).items() if v is not None}
    metadata = {"rules": rules, "each": each, "doc": doc}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class ModelConf:
    name: str = option(doc="the size's name: tiny | small | base")
    n_layers: int = option(ge=1)
    d_model: int = option(ge=1)
    n_heads: int = option(ge=1, doc="must divide d_model")
    d_ff: int = option(ge=1)
    attention: str = option("auto", choices=ATTENTION_IMPLS, doc="auto: flex on CUDA, sdpa on the CPU")


@dataclass
class TrainConf:
    """Defaults are the CPU recipe (``conf/train/cpu.yaml``); ``train=gpu`` overrides what differs."""

    name: str = option(doc="the recipe's name: cpu | gpu")
    seq_len: int = option(32, ge=8, doc="training length")
    min_len: Optional[int] = option(4, ge=1, doc="each batch draws its length from [min_len, seq_len]; null: seq_len")
    steps: int = option(1750, ge=1)
    batch_size: int = option(32, ge=1)
    lr: float = option(1.0e-3, gt=0)
    warmup: int = option(50, ge=0)
    min_lr_ratio: float = option(0.1, ge=0, le=1, doc="cosine decay ends at lr * min_lr_ratio")
    weight_decay: float = option(0.1, ge=0)
    grad_clip: float = option(1.0, gt=0)
    betas: List[float] = option([0.9, 0.95], ge=0, lt=1, each=True, length=2)
    loss_on: str = option("answer", choices=LOSS_ON, doc="answer: loss on the answer spans only; all: every next token")
    device: str = option("cpu", doc="cpu | cuda | cuda:N")
    precision: str = option("fp32", choices=PRECISIONS)
    compile: bool = option(False)
    fused_optimizer: bool = option(False)


@dataclass
class EvalConf:
    multiples: List[float] = option([1, 1.25, 1.5, 2, 4, 8], ge=1, each=True,
                                    doc="evaluate at these multiples of the training length")
    n_examples: int = option(100, ge=1, doc="per task and length; a share's standard error is at most sqrt(0.25 / n)")
    batch_size: int = option(20, ge=1)
    seed: int = option(1234, ge=0)
    diagnostics: bool = option(False, doc="recency / logit / attention-mass diagnostics at init and after training")
    diagnostics_every: int = option(0, ge=0, doc="with diagnostics: also every N training steps (0: only init and end)")


@dataclass
class LoggerConf:
    name: str = option("wandb", choices=LOGGERS)
    mode: str = option("offline", choices=WANDB_MODES, doc="offline: no account, no network")
    project: str = option("posbench")
    entity: Optional[str] = option(None)
    silent: bool = option(True, doc="keep W&B's own messages out of the sweep log")
    dir: Optional[str] = option(None, doc="the folder W&B's run folders go in, its last part named wandb; "
                                          "null: <results_dir>/<sweep_name>/wandb")


@dataclass
class LayerKind:
    """One layer of a pattern; what it leaves out comes from the ``position`` and ``span`` groups."""

    position: Optional[str] = None
    span: Optional[str] = None
    log_scale: Optional[bool] = None


@dataclass
class PatternConf:
    name: str = option()
    layers: List[LayerKind] = field(default_factory=lambda: [LayerKind()])
    window: Optional[int] = option(None, ge=1, doc="window of the pattern's swa layers")
    chunk: Optional[int] = option(None, ge=1, doc="chunk of the pattern's chunked layers")


@dataclass
class TasksetConf:
    name: str = option()
    tasks: List[str] = option()
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


GROUPS = {"model": ModelConf, "train": TrainConf, "eval": EvalConf, "logger": LoggerConf,
          "pattern": PatternConf, "taskset": TasksetConf}


def register() -> None:
    """Put the schema in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="posbench_schema", node=PosBenchConf)


def _rule_error(key: str, value, rules: dict) -> Optional[str]:
    if "choices" in rules and value not in rules["choices"]:
        return f"unknown {key} {value!r}; valid: {', '.join(map(str, rules['choices']))}"
    bounds = [("ge", ">=", lambda v, b: v >= b), ("gt", ">", lambda v, b: v > b),
              ("le", "<=", lambda v, b: v <= b), ("lt", "<", lambda v, b: v < b)]
    for name, sign, ok in bounds:
        if name in rules and not ok(value, rules[name]):
            return f"{key}={value!r}: must be {sign} {rules[name]}"
    return None


def range_errors(values: dict, schema: type, prefix: str) -> list[str]:
    """Every rule of ``schema``'s fields that ``values`` breaks, each naming its full key."""
    errors = []
    for f in dataclasses.fields(schema):
        rules, value = f.metadata.get("rules", {}), values.get(f.name)
        key = f"{prefix}.{f.name}" if prefix else f.name
        if not rules or value is None:
            continue
        if f.metadata.get("each"):
            if "length" in rules and len(value) != rules["length"]:
                errors.append(f"{key}={list(value)}: must have {rules['length']} values")
            if len(value) == 0:
                errors.append(f"{key}=[]: must have at least one value")
            errors += [e for i, v in enumerate(value) if (e := _rule_error(f"{key}[{i}]", v, rules))]
        elif (e := _rule_error(key, value, rules)):
            errors.append(e)
    return errors


register()
