"""The only reader of the raw Hydra config: validate it and freeze it into a hashed run spec.

A run is (model spec, training recipe, task, evaluation grid, seed): the frozen classes of
``suite/model/spec.py`` and ``suite/config/run_spec.py``. Its id is a hash of that resolved spec, so
the same spec is the same run and a re-run sweep can skip finished work. Every mistake is
reported before any training, naming the bad value and the valid choices.
"""
from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache
from typing import Optional

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from suite.config import schema
from suite.config.codedigest import code_digest, pieces_of
from suite.config.compose import CONF_DIR
from suite.config.run_spec import CHANGES, PHASE_KEYS, EvalSpec, Phase, RunSpec, TaskSpec, TrainSpec, eval_length, switch_step
from suite.files import sweep_name_problem
from suite.model.mixer import MIXERS
from suite.model.position import SCHEMES
from suite.model.span import SPANS
from suite.model.position.base import Dims
from suite.model.spec import LayerSpec, ModelSpec
from suite.options import LENGTH_MAX, bounded_count, is_option, range_errors
from suite.registry import build_config, check_keys, lookup
from tasks import TASKS, build_task
from tasks.base import VOCAB_SIZE



class SpecError(ValueError):
    """A configuration that cannot be run; the message names the value and the valid choices."""


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
    check_keys(params, (f.name for f in dataclasses.fields(config_cls)), prefix=f"{prefix}.", error=SpecError)
    node = OmegaConf.structured(config_cls)
    OmegaConf.set_readonly(node, False)
    for key, value in params.items():
        try:
            node[key] = value
        except OmegaConfBaseException as err:
            raise SpecError(f"{prefix}.{key}={value!r}: {_error_line(err)}") from None
    values = {key: _frozen(OmegaConf.to_object(node[key]) if OmegaConf.is_config(node[key]) else node[key]) for key in params}
    errors = range_errors(values, config_cls, prefix)  # the rules every number inherits (suite/options.py)
    if errors:
        raise SpecError("; ".join(errors))
    return values


PIECES = {"position": ("position scheme", SCHEMES), "span": ("span", SPANS), "mixer": ("mixer", MIXERS)}


def piece_config(kind: str, name: str, params: dict, prefix: str | None = None):
    """The frozen ``Config`` of the piece ``name`` of ``kind`` (position, span, mixer) from
    ``params``, typed and checked (``typed``); a bad key or value names ``<prefix>.<key>``, the
    config group it came from (default: the kind's own)."""
    label, catalogue = PIECES[kind]
    cls = lookup(label, name, catalogue)
    return build_config(kind, name, cls.Config, typed(cls.Config, params, prefix or kind))


def _frozen(value):
    """JSON lists back to tuples, so rebuilt configs hash like the originals."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def model_spec_from_dict(d: dict) -> ModelSpec:
    """The ``ModelSpec`` stored as ``RunSpec.to_dict()["model"]``; unknown keys fail naming the valid ones."""
    check_keys(d, (f.name for f in dataclasses.fields(ModelSpec)), "model spec")
    def scheme(name: str, cfg: dict):
        return piece_config("position", name, {k: _frozen(v) for k, v in cfg.items()})

    layers = []
    for layer in d["layers"]:
        check_keys(layer, (f.name for f in dataclasses.fields(LayerSpec)), "layer spec")
        mixer = layer.get("mixer", "attention")  # a spec stored before mixers has attention only
        layers.append(LayerSpec(
            layer["position"], scheme(layer["position"], layer["position_cfg"]),
            layer["span"], piece_config("span", layer["span"], {k: _frozen(v) for k, v in layer["span_cfg"].items()}),
            earlier=tuple((name, scheme(name, cfg)) for name, cfg in layer.get("earlier", ())),
            mixer=mixer, mixer_cfg=piece_config("mixer", mixer, {k: _frozen(v) for k, v in (layer.get("mixer_cfg") or {}).items()})))
    return ModelSpec(**{**d, "layers": tuple(layers)})


def _phase_from_dict(d: dict) -> Phase:
    """A stored ``Phase`` (``RunSpec.to_dict()["train"]["schedule"][i]``)."""
    check_keys(d, (f.name for f in dataclasses.fields(Phase)), "schedule phase")
    position = d.get("position")
    cfg = None if position is None else piece_config("position", position, {k: _frozen(v) for k, v in (d.get("position_cfg") or {}).items()})
    return Phase(until=d["until"], position=position, position_cfg=cfg)


def _fields_from_dict(cls: type, d: dict, key: str) -> dict:
    check_keys(d, (f.name for f in dataclasses.fields(cls)), f"{key} spec")
    return {k: _frozen(v) for k, v in d.items()}


def run_spec_from_dict(d: dict) -> RunSpec:
    """The ``RunSpec`` stored as ``RunSpec.to_dict()`` (a result file's ``run.spec``); its
    ``run_id`` is the stored run's. Unknown keys fail naming the valid ones."""
    top = _fields_from_dict(RunSpec, {k: v for k, v in d.items() if k not in ("model", "train", "tasks", "eval")}, "run")
    tasks = tuple(TaskSpec(t["name"], tuple((k, _frozen(v)) for k, v in t["params"])) for t in d["tasks"])
    train = _fields_from_dict(TrainSpec, d["train"], "train")
    if "schedule" in train:
        train["schedule"] = tuple(_phase_from_dict(p) for p in d["train"]["schedule"])
    return RunSpec(model=model_spec_from_dict(d["model"]), train=TrainSpec(**train),
                   tasks=tasks, eval=EvalSpec(**_fields_from_dict(EvalSpec, d["eval"], "eval")), **top)


def _check_pattern_sizes(pattern: dict) -> None:
    """Each span or mixer option the pattern sets (``pattern.window``, ``pattern.chunk_size``)
    passes the piece's own check, even when the pattern has no layer of that span or mixer."""
    for s_name, s_cls in [*sorted(SPANS.items()), *sorted(MIXERS.items())]:
        for f in dataclasses.fields(s_cls.Config):
            if pattern.get(f.name) is not None:
                try:
                    s_cls.Config(**{f.name: pattern[f.name]})
                except ValueError as err:
                    raise SpecError(f"pattern.{f.name}={pattern[f.name]}: {err}") from None


def _span_options(name: str) -> list[str]:
    """The options of span ``name``'s config (``window``, ``chunk``; none for ``full``)."""
    return [f.name for f in dataclasses.fields(lookup("span", name, SPANS).Config)]


def _layer_span(kind: dict, span_name: str, span: dict, pattern: dict) -> tuple[str, dict, str]:
    """(span name, its options, the group they come from) of one layer: a span the layer kind
    names is part of the pattern and is sized by it (its ``window``/``chunk``, else the span's
    default); a layer kind that names none takes the span group, with the group's options."""
    named = kind.get("span")
    if not named:
        return span_name, dict(span), "span"
    return named, {k: pattern[k] for k in _span_options(named) if pattern.get(k) is not None}, "pattern"


def _check_one_home(kinds: list, span_name: str, span: dict, pattern: dict) -> None:
    """Refuse a size set in a group that sizes no layer: a span group with a size when every layer
    kind names its own span (``pattern=command_a span=swa``), or a pattern size its layer kinds
    never name while the span group it would be mistaken for takes that option (``pattern=rnope
    span=swa pattern.window=8``)."""
    named = [dict(k or {}).get("span") for k in kinds]
    name = pattern.get("name")
    if all(named) and _span_options(span_name):
        raise SpecError(f"span={span_name} sizes no layer: every layer kind of pattern {name!r} names its span, and "
                        f"the pattern sizes them ({', '.join(f'pattern.{k}' for k in _span_options(span_name))}); "
                        "leave the span group at full")
    own = {k for s in named if s for k in _span_options(s)}
    stray = [k for k in _span_options(span_name) if pattern.get(k) is not None and k not in own]
    _require(not stray or all(named), "; ".join(
        f"pattern.{k}={pattern[k]} sizes no layer of pattern {name!r}: its layers take their span from the span "
        f"group; set span.{k}" for k in stray))


def resolve_layers(position: dict, span: dict, pattern: dict, n_layers: int) -> tuple[LayerSpec, ...]:
    """Tile the pattern's layer kinds over the depth.

    A layer kind may name a position scheme, a span, ``log_scale`` and a token mixer; what it
    leaves out comes from the ``position`` and ``span`` groups, and its mixer is softmax attention.
    A named scheme takes the position group's parameters when the names match, else its defaults.
    A span's size has one home per layer (``_layer_span``): a span the layer kind names is sized by
    the pattern (``pattern.window``/``chunk``), any other by the span group. A mixer takes the
    pattern's options of its ``Config`` (``chunk_size``). A mixer refuses a scheme or span it cannot take (a gated linear layer takes
    NoPE and the full span only), naming the layer and the valid choices. Each layer kind is
    resolved once, at its first layer, and the results tiled: the time is the pattern's, not the
    depth's (``model.n_layers`` up to ``LAYERS_MAX``).
    """
    _check_pattern_sizes(pattern)
    position, span = dict(position), dict(span)
    pos_name, span_name = position.pop("name"), span.pop("name")
    kinds = pattern.get("layers") or [{}]
    _require(isinstance(kinds, list), f"pattern.layers must be a list of layer kinds, got {kinds!r}")
    _check_one_home(kinds, span_name, span, pattern)
    layers = []
    for i in range(min(n_layers, len(kinds))):  # layer i is the first of its kind
        kind = dict(kinds[i] or {})
        check_keys(kind, (f.name for f in dataclasses.fields(schema.LayerKind)), "layer-kind",
                   where=f" in pattern {pattern.get('name')!r}", error=SpecError)
        p_name = kind.get("position") or pos_name
        p_params = dict(position) if p_name == pos_name else {}
        if kind.get("log_scale") is not None:
            p_params["log_scale"] = bool(kind["log_scale"])
        s_name, s_params, s_prefix = _layer_span(kind, span_name, span, pattern)
        m_name = kind.get("mixer") or "attention"
        try:
            m_cls = lookup("mixer", m_name, MIXERS)
            m_params = {k: pattern[k] for k in (f.name for f in dataclasses.fields(m_cls.Config)) if pattern.get(k) is not None}
            p_cfg = piece_config("position", p_name, p_params, "position" if p_name == pos_name else "pattern")
            m_cls.check_layer(p_name, p_cfg, s_name)
            layers.append(LayerSpec(p_name, p_cfg, s_name, piece_config("span", s_name, s_params, s_prefix),
                                    mixer=m_name, mixer_cfg=piece_config("mixer", m_name, m_params, "pattern")))
        except SpecError:
            raise
        except (ValueError, TypeError) as err:
            where = f"{p_name}, {s_name}" + ("" if m_name == "attention" else f", {m_name}")
            raise SpecError(f"layer {i} ({where}) of pattern {pattern.get('name')!r}: {err}") from None
    return tuple(layers[i % len(layers)] for i in range(n_layers))


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
def _unfit(task: TaskSpec, length: int, evaluated: bool = False) -> Optional[str]:
    """Why ``task`` cannot make an example of ``length`` tokens, or None when it can: a training
    example, or with ``evaluated`` an evaluation one (its ``eval_set``, else ``eval_generate``)."""
    try:
        built = task.build()
        if not evaluated:
            built.generate(np.random.default_rng(0), length)
        elif built.eval_set(length, 0, 1) is None:
            built.eval_generate(np.random.default_rng(0), length)
    except ValueError as err:
        return str(err)
    return None


@lru_cache(maxsize=4)
def _schema_node(conf: type) -> DictConfig:
    """The schema dataclass as an OmegaConf node, built once per class (0.015 s a build)."""
    return OmegaConf.structured(conf)


def _typed_root(cfg: DictConfig | dict) -> DictConfig:
    """``cfg`` on top of the schema (suite/config/schema.py): defaults filled in, values converted, a
    wrong type or a missing mandatory value named by its full key."""
    data = OmegaConf.create(cfg) if isinstance(cfg, dict) else cfg.copy()
    with open_dict(data):
        data.pop("hydra", None)
    try:
        root = OmegaConf.merge(_schema_node(schema.PosBenchConf), data)  # merge copies the node it starts from
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


def _unknown_keys(cfg: DictConfig) -> list[str]:
    """Keys the schema does not declare, at the top and in every group it types (a key added with
    ``+`` passes Hydra's composition, and a typo such as ``+train.stpes=5`` would otherwise be
    dropped without a word)."""
    errors = []
    for prefix, node, cls in [("", cfg, schema.PosBenchConf),
                              *((f"{g}.", cfg.get(g), c) for g, c in schema.GROUPS.items())]:
        if isinstance(node, DictConfig):
            try:
                check_keys(node.keys(), (f.name for f in dataclasses.fields(cls)), prefix=prefix)
            except ValueError as err:
                errors.append(str(err))
    return errors


def _schema_errors(cfg: DictConfig) -> list[str]:
    """Every unknown key and every range, choice and value rule of the schema that ``cfg``
    breaks, by full key."""
    errors = _unknown_keys(cfg) + schema.range_errors(_plain(cfg), schema.PosBenchConf, "")
    for group, cls in schema.GROUPS.items():
        if cfg.get(group) is not None:
            errors += schema.range_errors(_plain(cfg[group]), cls, group)
    if cfg.get("logger") is not None and (problem := schema.dir_problem(cfg.logger.get("dir"))):
        errors.append(problem)
    return errors


def head_counts(d_model: int, shown: int = 16) -> str:
    """The head counts that divide ``d_model``, found in O(sqrt(d_model)) steps (a width near
    ``COUNT_MAX`` takes milliseconds, not a pass over every number below it), the first ``shown``
    listed and the rest counted."""
    low = [h for h in range(1, math.isqrt(d_model) + 1) if d_model % h == 0]
    counts = sorted({*low, *(d_model // h for h in low)})
    more = f", ... ({len(counts)} in all, up to {counts[-1]})" if len(counts) > shown else ""
    return f"[{', '.join(map(str, counts[:shown]))}{more}]"


def _check_shapes(m: dict, t: dict) -> None:
    if m["d_model"] % m["n_heads"] != 0:  # the message lists divisors: built only when it is said
        raise SpecError(f"model.n_heads={m['n_heads']} does not divide model.d_model={m['d_model']}; "
                        f"valid head counts: {head_counts(m['d_model'])}")
    _require(t.get("min_len") is None or t["min_len"] <= t["seq_len"],
             f"train.min_len={t.get('min_len')}: must be in [1, train.seq_len={t['seq_len']}] (or null)")
    _require(not t.get("compile") or t.get("min_len") is None or t["min_len"] >= t["seq_len"],
             f"train.compile=true with train.min_len={t.get('min_len')}: each batch draws its length from "
             f"[{t.get('min_len')}, train.seq_len={t['seq_len']}], and the compiled graph is built again for each new "
             "length (minutes of compiling on the CPU, before and between steps); valid: train.min_len=null (every "
             "batch at train.seq_len, as the GPU recipe trains) or train.compile=false")
    _check_device(t["device"])


# the sizes a model of conf/model/ fixes, in the order its derived name lists them
SIZES = ("n_layers", "d_model", "n_heads", "d_ff")


@lru_cache(maxsize=1)
def model_catalogue() -> dict[str, dict]:
    """name -> sizes of every model of ``conf/model/`` (the file's stem is the name)."""
    return {path.stem: {k: _plain(OmegaConf.load(path)).get(k) for k in SIZES}
            for path in sorted((CONF_DIR / "model").glob("*.yaml"))}


def model_name(m: dict) -> str:
    """The name a run's model is stored under, derived from its sizes so it cannot say what they are
    not: the model of conf/model/ that has every size of ``m``; else ``model.name`` (which must name
    a model there) followed by the sizes that differ from that model's, as ``tiny(n_heads=2)``."""
    catalogue, given = model_catalogue(), m["name"]
    sizes = {k: m[k] for k in SIZES}
    _require(given in catalogue, f"model.name={given!r} names no model of conf/model; valid: {', '.join(catalogue)} "
                                 "(the stored name is derived from the sizes: the named model's name, with each "
                                 "size that differs from it, as tiny(n_heads=2))")
    if catalogue[given] == sizes:
        return given
    same = [name for name, known in catalogue.items() if known == sizes]
    if same:
        return same[0]
    return f"{given}({','.join(f'{k}={v}' for k, v in sizes.items() if catalogue[given][k] != v)})"


def _checked_layers(cfg: DictConfig, m: dict, train_len: int, eval_lens: tuple[int, ...]) -> tuple[LayerSpec, ...]:
    """The pattern tiled over the depth, each layer's position config passed through its scheme's
    own ``check`` (suite/model/position/base.py) with the model's sizes: resized to the run's
    lengths, or refused with the layer."""
    dims = Dims(m["d_model"], m["n_heads"], m["d_model"] // m["n_heads"], train_len)
    layers = []
    for i, layer in enumerate(resolve_layers(_plain(cfg.position), _plain(cfg.span), _plain(cfg.pattern), m["n_layers"])):
        try:
            position_cfg = SCHEMES[layer.position].check(layer.position_cfg, train_len, eval_lens, dims)
        except ValueError as err:
            raise SpecError(f"layer {i}: {err}") from None
        layers.append(dataclasses.replace(layer, position_cfg=position_cfg))
    return tuple(layers)


def _checked_schedule(raw, t: dict, dims: Dims, eval_lens: tuple[int, ...]) -> tuple[Phase, ...]:
    """``train.schedule`` as typed ``Phase``s: each entry a mapping of ``until`` (a fraction of
    ``train.steps`` in (0, 1), strictly above the entry before's, and a whole step of training on
    each side of it) and what it changes (``position``, a scheme that reads no data, with that
    scheme's options, typed and checked by the scheme as the run's own are); every error names
    ``train.schedule[i].<key>`` and the valid values."""
    _require(isinstance(raw, (list, tuple)), f"train.schedule={raw!r}: must be a list of phases, each "
                                             "{until: <fraction of train.steps>, position: <scheme>, ...its options}")
    phases: list[Phase] = []
    for i, entry in enumerate(raw):
        key = f"train.schedule[{i}]"
        _require(isinstance(entry, dict), f"{key}={entry!r}: must map keys to values: until, position and "
                                          "the scheme's options")
        until = entry.get("until")
        _require(isinstance(until, (int, float)) and not isinstance(until, bool) and math.isfinite(until) and 0 < until < 1,
                 f"{key}.until={until!r}: must be a fraction of train.steps in (0, 1), the point where this phase ends")
        _require(not phases or until > phases[-1].until,
                 f"{key}.until={until!r}: must be above train.schedule[{i - 1}].until={phases[-1].until if phases else None!r}; "
                 "the phases' until strictly increase")
        first = switch_step(until, t["steps"])
        last = switch_step(phases[-1].until, t["steps"]) if phases else 0
        _require(last < first < t["steps"],
                 f"{key}.until={until!r}: with train.steps={t['steps']} it ends at step {first}, leaving "
                 f"{'the phase' if first <= last else 'the phase after it'} no step of training; valid: an until "
                 f"that gives every phase at least one of the {t['steps']} steps")
        if all(entry.get(change) is None for change in CHANGES):
            check_keys(entry, PHASE_KEYS, prefix=f"{key}.", error=SpecError)
            raise SpecError(f"{key}={entry!r} changes nothing; set {' or '.join(f'{key}.{c}' for c in CHANGES)}")
        name = entry["position"]
        _require(isinstance(name, str) and name in SCHEMES,
                 f"{key}.position={name!r}: unknown position scheme; valid: {', '.join(sorted(SCHEMES))}")
        cls = SCHEMES[name]
        _require(not cls.data_dependent,
                 f"{key}.position={name!r}: a scheme that reads the data (a module of its own per layer) cannot be an "
                 f"earlier phase; valid: {', '.join(sorted(n for n, c in SCHEMES.items() if not c.data_dependent))}")
        params = {k: v for k, v in entry.items() if k not in PHASE_KEYS}
        check_keys(params, [*PHASE_KEYS, *(f.name for f in dataclasses.fields(cls.Config))], prefix=f"{key}.",
                   where=f" (phase of scheme {name!r})", error=SpecError)
        try:
            cfg = build_config("position", name, cls.Config, typed(cls.Config, params, key))
            cfg = cls.check(cfg, t["seq_len"], eval_lens, dims)
        except SpecError:
            raise
        except (ValueError, TypeError) as err:
            raise SpecError(f"{key} ({name}): {err}") from None
        phases.append(Phase(until=float(until), position=name, position_cfg=cfg))
    return tuple(phases)


def _scheduled(layers: tuple[LayerSpec, ...], phases: tuple[Phase, ...], group: str) -> tuple[LayerSpec, ...]:
    """``layers`` with each earlier phase's scheme on every layer whose scheme is the ``position``
    group's (``group``, its name); a layer the pattern names with another scheme keeps its own."""
    if not phases:
        return layers
    _require(any(layer.position == group and layer.softmax for layer in layers),
             f"train.schedule changes the scheme of the layers of the position group ({group}), and the pattern names "
             "another scheme for every layer: the schedule would change nothing; valid: a pattern with a layer that "
             "takes the position group's scheme")
    earlier = tuple((p.position, p.position_cfg) for p in phases)
    return tuple(dataclasses.replace(layer, earlier=earlier) if layer.position == group and layer.softmax else layer
                 for layer in layers)


def _check_lengths(train_len: int, multiples: tuple[float, ...]) -> None:
    """Distinct eval multiples that give distinct eval lengths (a repeated length would store every
    row twice and count one run as two seeds), each at most ``LENGTH_MAX`` tokens: the bound is
    judged on the computed product (``bounded_count``) before it is made a length."""
    lengths: dict[int, float] = {}
    for x in multiples:
        product = x * train_len  # x is finite (the schema's rule), the product need not be: 1e308 x 32
        _require(bounded_count(product, LENGTH_MAX) is not None,
                 f"eval.multiples={list(multiples)}: {x:g} x train.seq_len={train_len} is an eval length of "
                 f"{f'{product:.4g}' if math.isfinite(product) else 'more than 1.8e+308'} tokens; valid: at most "
                 f"{LENGTH_MAX:,} tokens (suite.options.LENGTH_MAX), multiples up to {LENGTH_MAX / train_len:g}")
        n = eval_length(x, train_len)
        _require(n not in lengths, f"eval.multiples={list(multiples)}: {lengths.get(n, x):g} and {x:g} x "
                                   f"train.seq_len={train_len} both give the eval length {n}; list each length once")
        lengths[n] = x


def check_tasks_fit(tasks: tuple[TaskSpec, ...], train_len: int, multiples: tuple[float, ...]) -> None:
    """Every task can fill the training length and every eval length (one example generated per
    length: run it after the cheap checks)."""
    for task in tasks:
        _require(_unfit(task, train_len) is None,
                 f"task {task.name} cannot fill train.seq_len={train_len}: {_unfit(task, train_len)}")
        for x in multiples:
            n = eval_length(x, train_len)
            problem = _unfit(task, n, evaluated=True)
            _require(problem is None,
                     f"task {task.name} cannot fill the eval length {n} (eval.multiples {x:g} x train.seq_len): {problem}")


def _sweep_name(cfg: DictConfig) -> str:
    sweep = str(cfg.get("sweep_name", "dev"))
    problem = sweep_name_problem(sweep)
    _require(problem is None, f"sweep_name={problem}")
    return sweep


def _frozen_spec(cls: type, values: dict, **derived):
    """``cls`` (a frozen spec) from its option fields' typed values and the ``derived`` ones."""
    names = {f.name for f in dataclasses.fields(cls) if is_option(f)}
    return cls(**{k: _frozen(v) for k, v in values.items() if k in names}, **derived)


def build(cfg: DictConfig | dict, probe_tasks: bool = True) -> RunSpec:
    """Validate a composed Hydra config and return the frozen run spec. Every broken rule of the
    schema is reported at once, each naming its full key; then shapes, layers, the eval lengths,
    the sweep name and (``probe_tasks``) whether every task fills every length, before anything
    trains. The task probes generate one example per length, so ``suite.config.preflight`` runs
    them last, after the memory estimate has refused what could not fit."""
    cfg = _typed_root(cfg)
    m, t, e = _plain(cfg.model), _plain(cfg.train), _plain(cfg.eval)
    errors = _schema_errors(cfg)
    if errors:
        raise SpecError("; ".join(errors))
    # a sweep's extra_multiples join the task's own grid: the spec, and so the run id, holds one list
    e["multiples"] = multiples = tuple(float(x) for x in [*e["multiples"], *(e.pop("extra_multiples", None) or ())])
    try:
        _check_shapes(m, t)
        _check_lengths(t["seq_len"], multiples)
        m["name"] = model_name(m)
        eval_lens = tuple(eval_length(x, t["seq_len"]) for x in multiples)
        layers = _checked_layers(cfg, m, t["seq_len"], eval_lens)
        dims = Dims(m["d_model"], m["n_heads"], m["d_model"] // m["n_heads"], t["seq_len"])
        schedule = _checked_schedule(t.pop("schedule", None) or [], t, dims, eval_lens)
        layers = _scheduled(layers, schedule, str(cfg.position.name))
        tasks, taskset = resolve_tasks(cfg)
        if all(TASKS[task.name].fixed_length for task in tasks):
            t["min_len"] = None  # natural text trains at the training length only, as language models do (tasks/text.py)
        sweep = _sweep_name(cfg)
        if probe_tasks:
            check_tasks_fit(tasks, t["seq_len"], multiples)
    except SpecError:
        raise
    except (ValueError, TypeError, KeyError) as err:
        raise SpecError(str(err)) from None
    model = _frozen_spec(ModelSpec, m, vocab_size=VOCAB_SIZE, train_len=t["seq_len"], pattern=cfg.pattern.name, layers=layers)
    ev = _frozen_spec(EvalSpec, e)
    spec = RunSpec(model=model, train=_frozen_spec(TrainSpec, t, schedule=schedule), tasks=tasks, taskset=taskset, eval=ev, seed=int(cfg.seed),
                   sweep=sweep, code=code_digest(**pieces_of({
                       "model": {"layers": [dataclasses.asdict(layer) for layer in layers]},
                       "tasks": [{"name": task.name} for task in tasks]})))
    _require_strict_json(spec.to_dict())
    return spec


def non_finite(value, key: str = "") -> list[str]:
    """Every ``key=value`` in ``value`` (a spec as plain data) that strict JSON cannot write: inf, nan."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{key}={value!r}"]
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in non_finite(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, (list, tuple)):
        return [e for i, v in enumerate(value) for e in non_finite(v, f"{key}[{i}]")]
    return []


def _require_strict_json(d: dict) -> None:
    """The spec a result file stores is strict JSON: no option value is inf or nan, whatever path it
    came by (the declarations' rule refuses each by its key first; this is the stored form's guard)."""
    bad = non_finite(d)
    _require(not bad, f"{', '.join(bad)}: must be a finite number (a result file is strict JSON)")
    json.dumps(d, allow_nan=False, default=str)
