"""Name configurations that share a scheme label by the settings that tell them apart.

Two runs share a leaderboard cell only when they are identical except for the seed (one
``config_hash``). When one label ('alibi') covers several configurations on a task, each gets
the settings in which they differ: 'alibi steps=80' and 'alibi steps=200'. The settings come from
the resolved spec stored with every run (``run.spec`` in the result file).
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from suite.model.span_kinds import KINDS

SKIP = ("seed", "sweep")  # the one thing runs in a cell may differ in, and the sweep folder a run is
# stored in (a run copied from another sweep carries its new sweep name; the run id leaves it out)


def flatten(spec: dict) -> dict[str, Any]:
    """A run spec as dotted keys: ``train.steps``, ``position.theta``, ``span.window``, ``mixer.chunk_size``,
    ``task.copy.eos``, ``eval.multiples``; a training schedule as ``train.schedule`` ('rope@0.8',
    ``schedule_text``) and each phase's scheme options (``train.schedule[0].theta``). Per-layer settings are merged over the layers (one value
    when every layer agrees, else the distinct values joined by '/')."""
    out: dict[str, Any] = {}
    for section, value in spec.items():
        if section in SKIP:
            continue
        if section == "model":
            for key, v in value.items():
                if key != "layers":
                    out[f"model.{key}"] = v
            for layer in value.get("layers", []):
                for part, prefix in (("position_cfg", "position"), ("span_cfg", "span")):
                    for key, v in layer.get(part, {}).items():
                        out.setdefault(f"{prefix}.{key}", []).append(v)
                for key, v in (layer.get("mixer_cfg") or {}).items():
                    out.setdefault(f"mixer.{key}", []).append(v)
                out.setdefault("position.name", []).append(layer.get("position"))
                out.setdefault("span.name", []).append(layer.get("span"))
                out.setdefault("mixer.name", []).append(layer.get("mixer", "attention"))
        elif section == "tasks":
            for task in value:
                for key, v in (task.get("params") or []):
                    out[f"task.{task['name']}.{key}"] = v
        elif isinstance(value, dict):
            for key, v in value.items():
                out[f"{section}.{key}"] = schedule_text(v) if (section, key) == ("train", "schedule") else v
                if (section, key) == ("train", "schedule") and isinstance(v, list):
                    for i, phase in enumerate(v):
                        for option, x in ((phase.get("position_cfg") or {}) if isinstance(phase, dict) else {}).items():
                            out[f"train.schedule[{i}].{option}"] = x
        else:
            out[section] = value
    for key, v in list(out.items()):
        if key.startswith(("position.", "span.", "mixer.")) and isinstance(v, list):
            distinct = list(dict.fromkeys(json.dumps(x) for x in v))
            out[key] = json.loads(distinct[0]) if len(distinct) == 1 else "/".join(str(json.loads(x)) for x in distinct)
    return out


def schedule_text(phases) -> str:
    """A stored training schedule (``train.schedule``, a list of phases) as 'rope@0.8': each earlier
    phase's scheme and the fraction of the steps it ends at, in order, joined by '>'. A phase's
    scheme options are keys of their own (``train.schedule[0].theta``, ``flatten``)."""
    if not isinstance(phases, (list, tuple)):
        return str(phases)
    return ">".join(f"{p.get('position')}@{_show(p.get('until'))}" if isinstance(p, dict) else str(p) for p in phases)


def _short(keys: list[str]) -> dict[str, str]:
    """The last dotted component of each key ('train.steps' -> 'steps'), longer where two clash."""
    names = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[-n:])
            if sum(1 for other in keys if other.split(".")[-n:] == parts[-n:]) == 1:
                break
        names[key] = name
    return names


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


def differing_keys(specs: list[dict]) -> list[str]:
    """The dotted keys whose values are not the same in every spec of ``specs``, in key order."""
    flat = [flatten(s) for s in specs]
    keys = sorted(set().union(*flat)) if flat else []
    return [k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1]


# a layer's option groups and the catalogue that declares each piece's defaults (its ``Config``)
PIECES = {"position": ("suite.model.position", "SCHEMES"), "span": ("suite.model.span", "SPANS"),
          "mixer": ("suite.model.mixer", "MIXERS")}


def declared_default(flat: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(True, value) when ``key`` is a layer option ('position.theta', or a schedule phase's
    'train.schedule[0].theta') and every piece of ``flat`` that declares it ('rope', or 'rope/nope' in a mixed pattern) declares one default, read from the
    piece's ``Config`` dataclass; (False, None) for any other key. The catalogue is imported here, not
    at the top: the report loads no model code (nor torch) unless a label has a layer option to weigh."""
    import dataclasses
    import importlib

    section, _, option = key.partition(".")
    names = str(flat.get(f"{section}.name")).split("/")
    phase = re.fullmatch(r"train\.schedule\[(\d+)\]\.(\w+)", key)  # a schedule phase's scheme option
    if phase:
        phases = str(flat.get("train.schedule", "")).split(">")
        index, option = int(phase.group(1)), phase.group(2)
        section, names = "position", [phases[index].split("@")[0]] if index < len(phases) else []
    if section not in PIECES or option == "name" or "." in option:
        return False, None
    module, attr = PIECES[section]
    catalogue = getattr(importlib.import_module(module), attr)
    defaults = set()
    for name in names:
        fields = {f.name: f.default for f in dataclasses.fields(catalogue[name].Config)} if name in catalogue else {}
        if option in fields and fields[option] is not dataclasses.MISSING:
            defaults.add(json.dumps(fields[option], sort_keys=True, default=str))
    return (True, json.loads(defaults.pop())) if len(defaults) == 1 else (False, None)


def _at_default(flat: dict[str, Any], key: str) -> bool:
    """Whether ``flat``'s value on ``key`` is unset (None, empty) or the default its piece declares (a
    tuple default equals the stored list, 10000 equals 10000.0)."""
    value = flat.get(key)
    if value is None or value == "" or value == []:  # unset: no schedule is '' (``schedule_text``)
        return True
    known, default = declared_default(flat, key)
    if not known:
        return False
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (value, default)):
        return float(value) == float(default)
    return json.dumps(value, sort_keys=True, default=str) == json.dumps(default, sort_keys=True, default=str)


def describe(spec: dict, keys: list[str], omit_defaults: bool = False) -> str:
    """'steps=80 lr=0.003': ``spec``'s values on ``keys``, each named by its shortest unambiguous tail.
    ``omit_defaults``: leave out a key whose value is None or its piece's declared default
    (``declared_default``): 'fox' beside 'fox decay_time_max=256 decay_time_min=2', not
    'fox decay_time_max=None decay_time_min=None'."""
    flat, names = flatten(spec), _short(keys)
    return " ".join(f"{names[k]}={_show(flat.get(k))}" for k in keys if not (omit_defaults and _at_default(flat, k)))


# the settings a scheme label already shows ('alibi swa w=16'; a layer's mixer shows in the spans
# column and the pattern's name), and the code digest, which follows the span, scheme and mixer
# chosen: never repeated in a suffix
SHOWN = ("position.name", "span.name", "mixer.name", "model.pattern", *(f"span.{kind}" for kind in KINDS), "code")


def split_labels(groups: dict[str, list[str]], specs: dict[str, Optional[dict]],
                 base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """``groups``: the configurations one scheme name covers on each task ({task: [config, ...]});
    ``base``: each configuration's label so far ('alibi', 'alibi swa w=16'), none by default.
    Returns {config: suffix}: every configuration is named by its values on the keys that differ
    within some task's group, less those the label shows (``SHOWN``) and those at None or their
    piece's default (kept only where leaving them out would name two configurations alike), so a
    configuration keeps one name on every task. Without a stored spec (older result files), or when
    only the hash tells two apart, the suffix is the first six characters of the hash."""
    base = base or {}
    configs = list(dict.fromkeys(c for cs in groups.values() for c in cs))
    if any(not specs.get(c) for c in configs):
        return {c: f"[{c[:6]}]" for c in configs}
    keys = sorted({k for cs in groups.values() if len(set(cs)) > 1 for k in differing_keys([specs[c] for c in set(cs)])
                   if k not in SHOWN})
    for omit in (True, False):  # options at their defaults left out, unless that names two configurations alike
        names = {c: describe(specs[c], keys, omit_defaults=omit) for c in configs}
        full = {c: f"{base.get(c, '')} {names[c]}" for c in configs}
        if all(len({full[c] for c in set(cs)}) == len(set(cs)) for cs in groups.values()):
            return names
    return {c: f"[{c[:6]}]" for c in configs}


LABEL_MAX = 32  # the longest label a plot's legend shows (characters)


def _options(name: str) -> list[str]:
    """The options of a line's label, its 'key=value' words after the first ('rope d_model=64
    train_len=32' holds 'd_model=64' and 'train_len=32'; 'alibi swa w=16' holds 'w=16')."""
    return [w for w in name.split(" ")[1:] if "=" in w]


def shared_options(names) -> list[str]:
    """The options (``_options``) every one of two or more ``names`` holds, in the first name's
    order: what a plot's title says once instead of in every legend entry."""
    names = list(dict.fromkeys(names))
    if len(names) < 2:
        return []
    rest = [set(_options(n)) for n in names[1:]]
    return [w for w in _options(names[0]) if all(w in r for r in rest)]


def _abbreviated(word: str) -> str:
    """An option 'decay_time_max=256' as 'dt_max=256': every word of its key but the last by its
    first letter; a word that is no option ('alibi', 'swa') or has a one-word key ('w=16') unchanged."""
    key, eq, value = word.partition("=")
    parts = key.split("_")
    if not eq or len(parts) < 2:
        return word
    return "".join(p[:1] for p in parts[:-1]) + "_" + parts[-1] + eq + value


def _without(names: dict[str, list[str]], key: str) -> dict[str, list[str]]:
    """Each name's words less its option on ``key``."""
    return {n: [w for w in words if w.partition("=")[0] != key or "=" not in w] for n, words in names.items()}


def _distinct(names: dict[str, list[str]]) -> bool:
    return len({" ".join(words) for words in names.values()}) == len(names)


def _fitted(names: dict[str, list[str]], limit: int) -> dict[str, list[str]]:
    """While some label is longer than ``limit``, each option key, last first, is left out of every
    label where the labels still read apart without it: an option the others already imply
    ('d_model=96' beside 'name=mini') goes, one that tells two lines apart stays."""
    keys = list(dict.fromkeys(w.partition("=")[0] for words in names.values() for w in words[1:] if "=" in w))
    for key in reversed(keys):
        if all(len(" ".join(words)) <= limit for words in names.values()):
            break
        fewer = _without(names, key)
        if _distinct(fewer):
            names = fewer
    return names


def _bounded(label: str, limit: int, digits: int = 6) -> str:
    """``label`` cut to ``limit`` characters where longer: its start, '~' and ``digits`` hex digits
    of its SHA-1, so two long labels never cut to one."""
    import hashlib

    if len(label) <= limit:
        return label
    return label[: limit - digits - 1] + "~" + hashlib.sha1(label.encode()).hexdigest()[:digits]


def short_labels(names, limit: int = LABEL_MAX) -> dict[str, str]:
    """{name: what one plot's legend shows}, each at most ``limit`` characters, no two alike,
    deterministic. The options every name shares are left out (``shared_options``: the plot's
    title says them once); a set with a label still too long has each option's key abbreviated
    ('fox dt_max=256 dt_min=2', ``_abbreviated``, unless that names two alike), then the options
    the others imply left out (``_fitted``); a label longer still is cut (``_bounded``). So the
    scale board's 'rope d_ff=192 d_model=64 n_heads=4 name=tiny train_len=32 batch_size=32
    seq_len=32' beside its other settings reads 'rope name=tiny t_len=32'."""
    names = list(dict.fromkeys(names))
    shared = set(shared_options(names))
    words = {n: [w for w in n.split(" ") if w not in shared] for n in names}
    if any(len(" ".join(ws)) > limit for ws in words.values()):
        short = {n: [_abbreviated(w) for w in ws] for n, ws in words.items()}
        words = _fitted(short if _distinct(short) else words, limit)
    out = {n: _bounded(" ".join(ws), limit) for n, ws in words.items()}
    if len(set(out.values())) < len(out):  # two alike once cut: each name whole, cut with a longer digest
        out = {n: _bounded(n, limit, 12) for n in names}
    return out
