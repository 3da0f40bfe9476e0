"""The values lm-eval's command line hands PosBench, declared as options (``suite.options``) so that
they are typed by their declared types and judged by the rules a run's config obeys (a float is
finite, a count within its bound), before lm-eval starts and again where they are used:

- ``Metadata``: the task metadata PosBench's tasks read (``--metadata``, JSON or ``key=value``);
  ``params`` is judged task by task by each task's own declarations (``suite.config.build.task_spec``,
  the function a run's tasks pass through);
- ``ModelArgs``: the ``posbench`` model's arguments (``--model_args``).

lm-eval passes ``--batch_size`` (default 1), ``--max_batch_size`` and ``--device`` to every model
itself, beside ``--model_args``: a model argument of the same name is given twice and fails inside
lm-eval (``FLAG_ARGS``), so ``model_args_problem`` refuses it, naming the flag to use instead.

Standard library and ``suite.options`` only at import; ``EXAMPLES_MAX`` (and with it torch) is read
when ``Metadata`` is first asked for, so ``python -m suite.lmeval --help`` stays light.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Optional

from suite.options import LENGTH_MAX, REQUIRED, option, range_errors, typed_options, typed_value
from suite.registry import check_keys

DEFAULT_LENGTHS = (32, 64)
DEFAULT_N = 50
# lm-eval's flags it passes to the model beside --model_args (None is left out: only a flag given,
# or a default that is not None, collides): name -> (flag, lm-eval's default)
FLAG_ARGS = {"batch_size": ("--batch_size", 1), "max_batch_size": ("--max_batch_size", None), "device": ("--device", None)}
BATCH_WORDS = ("auto", "auto:N")  # --batch_size's other forms: lm-eval tunes the size (posbench takes 32)


@lru_cache(maxsize=1)
def metadata_options() -> type:
    """The ``Metadata`` declaration, built once: its ``n_examples`` bound is the run's own
    (``suite.config.run_spec.EXAMPLES_MAX``), whose module loads torch."""
    from suite.config.run_spec import EXAMPLES_MAX

    @dataclasses.dataclass(frozen=True)
    class Metadata:
        """The task metadata PosBench's tasks read; with ``--run``, the run's own values."""

        lengths: tuple[int, ...] = option(DEFAULT_LENGTHS, ge=1, le=LENGTH_MAX, each=True,
                                          doc="example lengths in tokens, one result per length")
        n_examples: int = option(DEFAULT_N, ge=1, le=EXAMPLES_MAX, doc="examples per length")
        data_seed: Optional[int] = option(None, ge=0, doc="the generator's seed; null: the suite's eval seed")
        params: dict = option({}, doc="per-task parameters over conf/task/<name>.yaml: {task: {option: value}}")

    return Metadata


@dataclasses.dataclass(frozen=True)
class ModelArgs:
    """The ``posbench`` model's arguments (``--model_args``; ``--run`` sets the first three)."""

    pretrained: str = option(REQUIRED, doc="the run: its id, hash, result file or _work/<run_id> folder")
    results_dir: str = option("results", doc="where a run id is looked up")
    sweep: Optional[str] = option(None, doc="look only under results_dir/<sweep>")
    batch_size: Optional[int] = option(None, ge=1, doc="documents per forward (lm-eval's --batch_size)")
    max_batch_size: Optional[int] = option(None, ge=1, doc="lm-eval's --max_batch_size")
    device: Optional[str] = option(None, doc="default: CUDA when there is one")
    threads: Optional[int] = option(None, ge=0, doc="torch CPU threads; 0 or null: the run's own")


MODEL_ARGS = tuple(f.name for f in dataclasses.fields(ModelArgs))
METADATA_FORM = ("give a JSON object ('{\"lengths\": [32, 64]}') or key=value pairs (lengths=[32,64] n_examples=8); "
                 "PosBench tasks read lengths, n_examples, data_seed and params")


def metadata_values(given: dict, own_only: bool = False) -> dict:
    """The PosBench keys of ``given`` typed and judged by ``Metadata`` (a single length is a list of
    one), and each task's ``params`` by that task's declarations; a ValueError naming the key, its
    value and the valid range otherwise. ``own_only`` (every task asked for is PosBench's): a key
    no PosBench task reads is refused too, not passed over."""
    cls = metadata_options()
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(given) - set(names))
    if own_only and unknown:
        raise ValueError(f"{', '.join(unknown)}: not a key PosBench's tasks read; valid: {', '.join(names)} (a task's "
                         "option goes under params: {\"params\": {\"niah_single\": {\"depth\": 0.5}}})")
    ours = {k: v for k, v in given.items() if k in names}
    if isinstance(ours.get("lengths"), (int, float)):  # one length: a list of one (a bool is refused by name)
        ours["lengths"] = [ours["lengths"]]
    values = typed_options(cls, {k: v for k, v in ours.items() if k != "params"})
    if "params" in ours:
        values["params"] = _task_params(ours["params"])
    return values


def _task_params(params) -> dict:
    """``params`` ({task: {option: value}}) with each task's options judged as a run's are
    (``task_spec``: the task's YAML defaults, its declared types and rules, its own checks)."""
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise ValueError(f"params={params!r}: must map task names to their options: {{\"vt\": {{\"hops\": 1}}}}")
    from suite.config.build import task_spec
    from tasks import TASKS

    unknown = sorted(set(params) - set(TASKS))
    if unknown:
        raise ValueError(f"params names unknown task(s) {unknown}; valid tasks: {', '.join(sorted(TASKS))}")
    for name, options in params.items():
        task_spec(name, options, f"params.{name}")  # a SpecError (a ValueError) names params.<task>.<key>
    return params


def batch_size_problem(value: str) -> Optional[str]:
    """Why ``value`` cannot be ``--batch_size`` (a whole number >= 1, ``auto`` or ``auto:N``), or None."""
    text = str(value).strip()
    if text == "auto" or (text.startswith("auto:") and text[5:].isdigit() and int(text[5:]) >= 1):
        return None
    errors = range_errors({"batch_size": typed_value(Optional[int], text)}, ModelArgs, "")
    return f"--{errors[0]} (or {', '.join(BATCH_WORDS)})" if errors else None


def model_args_problem(given: dict, flags: set[str], posbench: bool) -> Optional[str]:
    """Why ``given`` (``--model_args``, parsed) cannot reach the model, or None: a key lm-eval also
    passes from its own flag (``FLAG_ARGS``; ``flags``: the flags given), and for the ``posbench``
    model an unknown key, no ``pretrained`` or a value its declaration refuses (``ModelArgs``)."""
    for key, (flag, default) in FLAG_ARGS.items():
        if key in given and (default is not None or flag in flags):
            shown = typed_value(Optional[int], given[key]) if key != "device" else given[key]  # lm-eval reads -1 as -1.0
            return (f"--model_args {key}={shown!r}: lm-eval passes {flag} ({'given' if flag in flags else f'default {default}'}) "
                    f"to the model itself, so {key} would be given twice; set it with {flag} instead")
    if not posbench:
        return None
    try:
        check_keys(given, MODEL_ARGS, what="model posbench")
    except ValueError as err:
        return f"--model_args: {err}"
    if "pretrained" not in given:
        return ("--model posbench needs --model_args pretrained=<run id, hash, result file or _work/<run_id> folder>, "
                "or give --run <run> instead of --model")
    try:
        typed_options(ModelArgs, given)
    except ValueError as err:
        return f"--model_args {err}"
    return None


def model_args(given: dict) -> dict:
    """``given`` (``posbench``'s keyword arguments, as lm-eval hands them: text or parsed) typed and
    judged by ``ModelArgs``; ``batch_size`` ``auto`` or ``auto:N`` is left out (the model's
    default). A ValueError naming the key and the valid keys or values otherwise."""
    return typed_options(ModelArgs, {k: v for k, v in given.items()
                                     if not (k == "batch_size" and str(v).startswith("auto"))})
