"""The only reader of the raw Hydra config: validate it and freeze it into a hashed run spec.

A run is (model spec, training recipe, task, evaluation grid, seed). Its id is a hash of that
resolved spec, so the same spec is the same run and a re-run sweep can skip finished work.
Every mistake is reported before any training, naming the bad value and the valid choices.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from suite import schema
from suite.codedigest import code_digest, pieces_of
from suite.config import CONF_DIR
from suite.position import SCHEMES, PositionConfig
from suite.registry import build_config, lookup
from suite.span import SPANS, Span, SpanConfig
from suite.tracking import dir_problem
from tasks import TASKS, build_task
from tasks.base import VOCAB_SIZE

SWEEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class SpecError(ValueError):
    """A configuration that cannot be run; the message names the value and the valid choices."""


@dataclass(frozen=True)
class LayerSpec:
    position: str
    position_cfg: PositionConfig
    span: str
    span_cfg: SpanConfig

    @property
    def span_kind(self) -> Optional[str]:
        """What bounds this layer's span ("window", "chunk"), as its class declares (suite/span/base.py)."""
        return SPANS[self.span].kind

    @property
    def span_size(self) -> Optional[int]:
        """The span's window or chunk in tokens, from its own config (None for full attention)."""
        return self._span().size

    @property
    def span_label(self) -> str:
        """'w=16', 'c=16', or '' for full attention."""
        return self._span().label

    def _span(self) -> Span:
        return SPANS[self.span](self.span_cfg)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    vocab_size: int
    train_len: int
    pattern: str
    layers: tuple[LayerSpec, ...]
    attention: str = "auto"
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class TrainSpec:
    name: str
    seq_len: int
    steps: int
    batch_size: int
    lr: float
    warmup: int
    min_lr_ratio: float
    weight_decay: float
    grad_clip: float
    beta1: float
    beta2: float
    loss_on: str
    device: str
    precision: str
    compile: bool
    fused_optimizer: bool
    min_len: Optional[int] = None  # draw each training example's length from [min_len, seq_len]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def build(self):
        return build_task(self.name, **dict(self.params))


@dataclass(frozen=True)
class EvalSpec:
    multiples: tuple[float, ...]
    n_examples: int
    batch_size: int
    seed: int
    diagnostics: bool = False  # recency, logit and attention-mass diagnostics at init and after training
    diagnostics_every: int = 0  # also every N training steps (0: never)


@dataclass(frozen=True)
class RunSpec:
    model: ModelSpec
    train: TrainSpec
    tasks: tuple[TaskSpec, ...]  # trained on as an even mixture, evaluated one by one
    taskset: str  # the task set's name, or the task's name for a single task
    eval: EvalSpec
    seed: int
    sweep: str = field(default="dev", compare=False)
    code: str = ""  # digest of the code that computes the numbers (suite.codedigest), part of the id

    def to_dict(self, drop_defaults: bool = False) -> dict:
        """The spec as plain data; ``drop_defaults`` leaves out fields at their declared default."""
        def convert(obj):
            if dataclasses.is_dataclass(obj):
                return {f.name: convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                        if not (drop_defaults and f.default is not dataclasses.MISSING and getattr(obj, f.name) == f.default)}
            if isinstance(obj, (list, tuple)):
                return [convert(x) for x in obj]
            return obj

        d = convert(self)
        d.pop("sweep", None)
        return d

    @property
    def run_id(self) -> str:
        """Hash of the resolved spec and the code digest. Fields at their declared defaults are
        left out, so adding an option to the suite does not change the id of runs that do not use it."""
        return _hash(self.to_dict(drop_defaults=True))

    @property
    def config_hash(self) -> str:
        """Hash of everything but the seed: runs with equal config hashes form one leaderboard cell."""
        return _hash({k: v for k, v in self.to_dict(drop_defaults=True).items() if k != "seed"})


def _hash(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------------------------
# building


def _plain(node) -> dict:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise SpecError(message)


def _error_line(err: Exception) -> str:
    """OmegaConf's message without its trailing ``full_key`` / ``object_type`` lines."""
    return str(getattr(err, "msg", None) or err).splitlines()[0]


def typed(config_cls: type, params: dict, prefix: str) -> dict:
    """``params`` converted to ``config_cls``'s field types by OmegaConf's rules, so ``5`` and
    ``5.0`` are one value of a float option; a wrong type or unknown key names ``prefix.key``."""
    valid = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(params) - set(valid))
    _require(not unknown, f"unknown key(s) {[f'{prefix}.{k}' for k in unknown]}; valid: {', '.join(sorted(valid)) or 'none'}")
    node = OmegaConf.structured(config_cls)
    OmegaConf.set_readonly(node, False)
    for key, value in params.items():
        try:
            node[key] = value
        except OmegaConfBaseException as err:
            raise SpecError(f"{prefix}.{key}={value!r}: {_error_line(err)}") from None
    return {key: _frozen(OmegaConf.to_object(node[key]) if OmegaConf.is_config(node[key]) else node[key]) for key in params}


def _scheme_config(name: str, params: dict, prefix: str = "position"):
    cls = lookup("position scheme", name, SCHEMES)
    return build_config("position", name, cls.Config, typed(cls.Config, params, prefix))


def _span_config(name: str, params: dict, prefix: str = "span"):
    cls = lookup("span", name, SPANS)
    return build_config("span", name, cls.Config, typed(cls.Config, params, prefix))


def _frozen(value):
    """JSON lists back to tuples, so rebuilt configs hash like the originals."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def model_spec_from_dict(d: dict) -> ModelSpec:
    """The ``ModelSpec`` stored as ``RunSpec.to_dict()["model"]``; unknown keys fail naming the valid ones."""
    valid = {f.name for f in dataclasses.fields(ModelSpec)}
    unknown = sorted(set(d) - valid)
    if unknown:
        raise ValueError(f"unknown model spec key(s) {unknown}; valid: {sorted(valid)}")
    layers = tuple(
        LayerSpec(layer["position"], _scheme_config(layer["position"], {k: _frozen(v) for k, v in layer["position_cfg"].items()}),
                  layer["span"], _span_config(layer["span"], {k: _frozen(v) for k, v in layer["span_cfg"].items()}))
        for layer in d["layers"]
    )
    return ModelSpec(**{**d, "layers": layers})


def _fields_from_dict(cls: type, d: dict, key: str) -> dict:
    valid = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - valid)
    if unknown:
        raise ValueError(f"unknown {key} spec key(s) {unknown}; valid: {sorted(valid)}")
    return {k: _frozen(v) for k, v in d.items()}


def run_spec_from_dict(d: dict) -> RunSpec:
    """The ``RunSpec`` stored as ``RunSpec.to_dict()`` (a result file's ``run.spec``); its
    ``run_id`` is the stored run's. Unknown keys fail naming the valid ones."""
    top = _fields_from_dict(RunSpec, {k: v for k, v in d.items() if k not in ("model", "train", "tasks", "eval")}, "run")
    tasks = tuple(TaskSpec(t["name"], tuple((k, _frozen(v)) for k, v in t["params"])) for t in d["tasks"])
    return RunSpec(model=model_spec_from_dict(d["model"]), train=TrainSpec(**_fields_from_dict(TrainSpec, d["train"], "train")),
                   tasks=tasks, eval=EvalSpec(**_fields_from_dict(EvalSpec, d["eval"], "eval")), **top)


def resolve_layers(position: dict, span: dict, pattern: dict, n_layers: int) -> tuple[LayerSpec, ...]:
    """Tile the pattern's layer kinds over the depth.

    A layer kind may name a position scheme, a span and ``log_scale``; what it leaves out comes
    from the ``position`` and ``span`` groups. A named scheme or span takes the group's
    parameters when the names match, else its defaults, with the pattern's ``window``/``chunk``.
    """
    position, span = dict(position), dict(span)
    pos_name, span_name = position.pop("name"), span.pop("name")
    kinds = pattern.get("layers") or [{}]
    _require(isinstance(kinds, list), f"pattern.layers must be a list of layer kinds, got {kinds!r}")
    layers = []
    for i in range(n_layers):
        kind = dict(kinds[i % len(kinds)] or {})
        unknown = sorted(set(kind) - {"position", "span", "log_scale"})
        _require(not unknown, f"unknown layer-kind key(s) {unknown} in pattern {pattern.get('name')!r}; valid: log_scale, position, span")
        p_name = kind.get("position") or pos_name
        p_params = dict(position) if p_name == pos_name else {}
        if kind.get("log_scale") is not None:
            p_params["log_scale"] = bool(kind["log_scale"])
        s_name = kind.get("span") or span_name
        s_cls = lookup("span", s_name, SPANS)
        from_pattern = {k: pattern[k] for k in (f.name for f in dataclasses.fields(s_cls.Config)) if pattern.get(k) is not None}
        s_params, s_prefix = (dict(span), "span") if s_name == span_name else (from_pattern, "pattern")
        clash = sorted(k for k in from_pattern if s_name == span_name and span.get(k) != from_pattern[k])
        _require(not clash, "; ".join(
            f"pattern.{k}={from_pattern[k]} and span.{k}={span.get(k)} both size the {s_name} layers of pattern "
            f"{pattern.get('name')!r}: set one of them (a pattern's {k} sizes its {s_name} layers unless the span "
            f"group is {s_name} too, and then the two must agree)" for k in clash))
        try:
            layers.append(LayerSpec(p_name, _scheme_config(p_name, p_params, "position" if p_name == pos_name else "pattern"),
                                    s_name, _span_config(s_name, s_params, s_prefix)))
        except SpecError:
            raise
        except (ValueError, TypeError) as err:
            raise SpecError(f"layer {i} ({p_name}, {s_name}) of pattern {pattern.get('name')!r}: {err}") from None
    return tuple(layers)


def _task_spec(name: str, params: dict, prefix: str = "task") -> TaskSpec:
    cls = lookup("task", name, TASKS)
    params = typed(cls, params, prefix)
    build_task(name, **params)  # validates the parameters now, not mid-sweep
    return TaskSpec(name, tuple(sorted(params.items())))


def task_spec(name: str, overrides: Optional[dict] = None, prefix: Optional[str] = None) -> TaskSpec:
    """Task ``name`` with the options of ``conf/task/<name>.yaml`` (none when it has no YAML)
    updated by ``overrides``, typed and checked; errors name ``prefix`` (default ``task.<name>``)."""
    lookup("task", name, TASKS)
    prefix = prefix or f"task.{name}"
    path = CONF_DIR / "task" / f"{name}.yaml"
    params = _plain(OmegaConf.load(path)) if path.exists() else {}
    params.pop("name", None)
    given = overrides or {}
    _require(isinstance(given, dict), f"{prefix}={given!r}: must map option names to values")
    params.update(given)
    return _task_spec(name, params, prefix)


def resolve_tasks(cfg: DictConfig) -> tuple[tuple[TaskSpec, ...], str]:
    """The run's tasks: the ``taskset`` group when chosen (each task with its YAML defaults
    under conf/task/ and ``taskset.params.<task>`` overrides), else the single ``task``."""
    taskset = cfg.get("taskset")
    if not taskset:
        params = _plain(cfg.task)
        name = params.pop("name")
        return (_task_spec(name, params),), name
    names = list(taskset.tasks)
    _require(len(names) > 0 and len(set(names)) == len(names),
             f"taskset {taskset.name!r} must list distinct tasks, got {names}")
    overrides = _plain(taskset.get("params") or {})
    unknown = sorted(set(overrides) - set(names))
    _require(not unknown, f"taskset.params names task(s) {unknown} that are not in the set {names}")
    return tuple(task_spec(name, overrides.get(name), f"taskset.params.{name}") for name in names), str(taskset.name)


@lru_cache(maxsize=4096)
def _unfit(task: TaskSpec, length: int) -> Optional[str]:
    """Why ``task`` cannot generate an example of ``length`` tokens, or None when it can."""
    try:
        task.build().generate(np.random.default_rng(0), length)
    except ValueError as err:
        return str(err)
    return None


def _typed_root(cfg: DictConfig | dict) -> DictConfig:
    """``cfg`` on top of the schema (suite/schema.py): defaults filled in, values converted, a
    wrong type or a missing mandatory value named by its full key."""
    data = OmegaConf.create(cfg) if isinstance(cfg, dict) else cfg.copy()
    with open_dict(data):
        data.pop("hydra", None)
    try:
        root = OmegaConf.merge(OmegaConf.structured(schema.PosBenchConf), data)
        OmegaConf.to_container(root, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        raise SpecError(f"{key}: {_error_line(err)}" if key else _error_line(err)) from None
    return root


def _check_device(device: str) -> None:
    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        raise SpecError(f"unknown train.device {device!r}; valid: cpu, cuda, cuda:N (a GPU index), mps") from None


def _schema_errors(cfg: DictConfig) -> list[str]:
    """Every range, choice and value rule of the schema that ``cfg`` breaks, by full key."""
    errors = schema.range_errors(_plain(cfg), schema.PosBenchConf, "")
    for group, cls in schema.GROUPS.items():
        if cfg.get(group) is not None:
            errors += schema.range_errors(_plain(cfg[group]), cls, group)
    if cfg.get("logger") is not None and (problem := dir_problem(cfg.logger.get("dir"))):
        errors.append(problem)
    return errors


def _check_shapes(m: dict, t: dict) -> None:
    _require(m["d_model"] % m["n_heads"] == 0,
             f"model.n_heads={m['n_heads']} does not divide model.d_model={m['d_model']}; "
             f"valid head counts: {[h for h in range(1, m['d_model'] + 1) if m['d_model'] % h == 0]}")
    _require(t.get("min_len") is None or t["min_len"] <= t["seq_len"],
             f"train.min_len={t.get('min_len')}: must be in [1, train.seq_len={t['seq_len']}] (or null)")
    _check_device(t["device"])


def _checked_layers(cfg: DictConfig, n_layers: int, train_len: int, eval_lens: tuple[int, ...]) -> tuple[LayerSpec, ...]:
    """The pattern tiled over the depth, each layer's position config passed through its scheme's
    own ``check`` (suite/position/base.py): resized to the run's lengths, or refused with the layer."""
    layers = []
    for i, layer in enumerate(resolve_layers(_plain(cfg.position), _plain(cfg.span), _plain(cfg.pattern), n_layers)):
        try:
            position_cfg = SCHEMES[layer.position].check(layer.position_cfg, train_len, eval_lens)
        except ValueError as err:
            raise SpecError(f"layer {i}: {err}") from None
        layers.append(dataclasses.replace(layer, position_cfg=position_cfg))
    return tuple(layers)


def _check_fit(tasks: tuple[TaskSpec, ...], train_len: int, multiples: tuple[float, ...]) -> None:
    """Every task can fill the training length and every eval length."""
    for task in tasks:
        _require(_unfit(task, train_len) is None,
                 f"task {task.name} cannot fill train.seq_len={train_len}: {_unfit(task, train_len)}")
        for x in multiples:
            n = int(round(x * train_len))
            _require(_unfit(task, n) is None,
                     f"task {task.name} cannot fill the eval length {n} (eval.multiples {x:g} x train.seq_len): {_unfit(task, n)}")


def _sweep_name(cfg: DictConfig) -> str:
    sweep = str(cfg.get("sweep_name", "dev"))
    _require(SWEEP_NAME.fullmatch(sweep) is not None,
             f"sweep_name={sweep!r}: must be letters, digits, '.', '_' or '-', not starting with '.' or '_' "
             "(it names a folder under results_dir; '_' folders hold checkpoints and eval sets)")
    return sweep


def _train_spec(t: dict) -> TrainSpec:
    return TrainSpec(
        name=t["name"], seq_len=t["seq_len"], steps=t["steps"], batch_size=t["batch_size"], lr=float(t["lr"]),
        warmup=t["warmup"], min_lr_ratio=float(t["min_lr_ratio"]), weight_decay=float(t["weight_decay"]),
        grad_clip=float(t["grad_clip"]), beta1=float(t["betas"][0]), beta2=float(t["betas"][1]),
        loss_on=t["loss_on"], device=t["device"], precision=t["precision"], compile=bool(t["compile"]),
        fused_optimizer=bool(t["fused_optimizer"]), min_len=t.get("min_len"),
    )


def build(cfg: DictConfig | dict) -> RunSpec:
    """Validate a composed Hydra config and return the frozen run spec. Every broken rule of the
    schema is reported at once, each naming its full key; then shapes, layers, task lengths and
    the sweep name are checked, before anything trains."""
    cfg = _typed_root(cfg)
    m, t, e = _plain(cfg.model), _plain(cfg.train), _plain(cfg.eval)
    errors = _schema_errors(cfg)
    if errors:
        raise SpecError("; ".join(errors))
    multiples = tuple(float(x) for x in e["multiples"])
    try:
        _check_shapes(m, t)
        layers = _checked_layers(cfg, m["n_layers"], t["seq_len"], tuple(int(round(x * t["seq_len"])) for x in multiples))
        tasks, taskset = resolve_tasks(cfg)
        _check_fit(tasks, t["seq_len"], multiples)
        sweep = _sweep_name(cfg)
    except SpecError:
        raise
    except (ValueError, TypeError, KeyError) as err:
        raise SpecError(str(err)) from None
    model = ModelSpec(name=m["name"], n_layers=m["n_layers"], d_model=m["d_model"], n_heads=m["n_heads"], d_ff=m["d_ff"],
                      vocab_size=VOCAB_SIZE, train_len=t["seq_len"], pattern=cfg.pattern.name, layers=layers,
                      attention=m["attention"])
    ev = EvalSpec(multiples=multiples, n_examples=e["n_examples"], batch_size=e["batch_size"], seed=e["seed"],
                  diagnostics=bool(e["diagnostics"]), diagnostics_every=int(e["diagnostics_every"]))
    return RunSpec(model=model, train=_train_spec(t), tasks=tasks, taskset=taskset, eval=ev, seed=int(cfg.seed),
                   sweep=sweep, code=code_digest(**pieces_of({
                       "model": {"layers": [dataclasses.asdict(layer) for layer in layers]},
                       "tasks": [{"name": task.name} for task in tasks]})))
