"""Hostile numbers, by class, with cases generated from the option declarations (suite/options.py):

* non-finite floats: every float option of every source (top level, model, train, eval, pattern,
  each position scheme, each span, each task) at inf, -inf and nan is refused by its full key;
* unbounded counts: every integer option of every source at 10**12 and 2**64 is refused by its
  full key and its bound (``COUNT_MAX``, ``LENGTH_MAX`` or the option's stated maximum);
* degenerate shapes: a rotary scheme with no pair to rotate, by every road there (head size,
  partial rotary, p-RoPE, a wrapper's base, a pattern's layer);
* name-only fields: the stored model name is derived from the sizes;
* compile on variable lengths is refused;
* what a count under its bound costs is the pre-flight's: eval lengths, lm-eval's lengths.

The grids run in-process against the config builder (a build is a tenth of a second); a handful
of the issue's cases run end to end through ``python -m suite.run``. ``make test`` runs the
issue's cases and one case per kind of source; ``make test-exhaustive`` the whole grid.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from suite.config import schema
from suite.config.build import SpecError, build, model_catalogue, non_finite
from suite.config.run_spec import EXAMPLES_MAX, STEPS_MAX
from suite.model.position import SCHEMES
from suite.model.span import SPANS
from suite.model.spec import LAYERS_MAX
from suite.options import COUNT_MAX, LENGTH_MAX, number_kind
from tasks import TASKS
from tests.composed import composed
from tests.conftest import fast_or_exhaustive

ROOT = Path(__file__).resolve().parent.parent
FLOATS = (math.inf, -math.inf, math.nan)
COUNTS = (10 ** 12, 2 ** 64)


# --------------------------------------------------------------------------------------------
# the declarations, read as the builder reads them


def sources() -> list[tuple[str, list[str], str, type]]:
    """(source, overrides that select it, key prefix, the class whose fields hold its options)."""
    out = [("top", [], "", schema.PosBenchConf)]
    out += [(group, [], group, cls) for group, cls in schema.GROUPS.items()]
    out += [(f"position={name}", [f"position={name}"], "position", cls.Config) for name, cls in sorted(SCHEMES.items())]
    out += [(f"span={name}", [f"span={name}"], "span", cls.Config) for name, cls in sorted(SPANS.items())]
    out += [(f"task={name}", [f"task={name}"], "task", cls) for name, cls in sorted(TASKS.items())]
    return out


def _default(cls: type, name: str):
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _hydra(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return str(value)


def numbers_of(cls: type, kind: type) -> list[tuple[str, bool, dict]]:
    """(name, a sequence, declared rules) of every field of ``cls`` whose type is ``kind`` (float
    or int; optional, or a tuple or list of them), read from the type hints, not from the rules
    under test; a float declared ``finite=False`` is left out."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        found, sequence = number_kind(hints[f.name])
        if found is kind and f.metadata.get("finite", True):
            out.append((f.name, sequence, f.metadata.get("rules", {})))
    return out


def cases_of(kind: type, values) -> list[tuple]:
    """(id, overrides, message pattern) for every option of type ``kind`` of every source at each
    of ``values``: a float must be finite, an integer at most its declared ``le`` or COUNT_MAX."""
    cases = []
    for source, select, prefix, cls in sources():
        for name, each, rules in numbers_of(cls, kind):
            key = f"{prefix}.{name}" if prefix else name
            for value in values:
                shown = _hydra(value)
                if each:  # a sequence: its first element set to the value, the others left as declared
                    rest = [_hydra(v) for v in list(_default(cls, name) or ())[1:]]  # None: no default list
                    override, where = f"{key}=[{','.join([shown, *rest])}]", f"{re.escape(key)}\\[0\\]"
                else:
                    override, where = f"{key}={shown}", re.escape(key)
                if kind is float:
                    message = f"{where}={re.escape(repr(value))}: must be a finite number"
                else:
                    message = f"{where}={value}: must be <= {rules.get('le', COUNT_MAX)}"
                plus = "++" if prefix == "task" else ""  # a task's YAML need not list every option
                cases.append((f"{source}:{name}={shown}", [*select, plus + override], message))
    return cases


FLOAT_CASES = cases_of(float, FLOATS)
COUNT_CASES = cases_of(int, COUNTS)

# make test: the issue's cases, and the first option of each kind of source (the top level, each group,
# one position scheme, one span, one task: every scheme, span and task declares its numbers through the
# same field rules); the rest: make test-exhaustive
ISSUE_FLOAT_KEYS = {"position=rope:theta", "position=fox:decay_time_min", "position=fox:decay_time_max",
                    "position=sinusoidal:rms", "position=rope:factor", "position=kerple:r1_init",
                    "position=xpos:scale_constant"}
ISSUE_COUNT_KEYS = {"model:n_layers", "eval:n_examples", "train:steps", "position=cope:npos_max", "top:seed",
                    "train:seq_len", "eval:seed"}


def _representative(cases, issue_keys) -> list[tuple]:
    """The cases of ``issue_keys`` ("source:option") and the first case of every kind of source
    ("position=rope" and "position=alibi" are one kind)."""
    fast, seen = [], set()
    for case in cases:
        option = case[0].rsplit("=", 1)[0]  # "position=rope:theta=-inf" -> "position=rope:theta"
        kind = option.split(":")[0].split("=")[0]
        if option in issue_keys or kind not in seen:
            fast.append(case)
            seen.add(kind)
    return fast


def _refusal(overrides: list[str]) -> str:
    with pytest.raises(SpecError) as err:
        build(composed(overrides))
    return str(err.value)


def test_the_grids_cover_every_declared_number():
    """Every source contributes, and the issue's options are among the generated cases: the grids
    are read from the declarations' types, not written out by hand. Mutation check: dropping the
    tasks from ``sources`` makes this fail."""
    floats = {c[0].rsplit("=", 1)[0] for c in FLOAT_CASES}
    counts = {c[0].rsplit("=", 1)[0] for c in COUNT_CASES}
    assert ISSUE_FLOAT_KEYS <= floats and ISSUE_COUNT_KEYS <= counts
    assert {"task=cwe:common_share", "train:lr", "train:betas", "eval:multiples", "position=fire:init_c"} <= floats
    assert {"task=vt:hops", "span=swa:window", "pattern:window", "top:threads", "position=t5:num_buckets"} <= counts
    assert len(FLOAT_CASES) == 3 * len(floats) and len(COUNT_CASES) == 2 * len(counts)
    # every scheme inherits at least log_scale_base's bound: no scheme is left out
    assert all(f"position={name}:log_scale_base" in counts for name in SCHEMES)


@pytest.mark.parametrize("name,overrides,message", fast_or_exhaustive(FLOAT_CASES, _representative(FLOAT_CASES, ISSUE_FLOAT_KEYS)),
                         ids=[c[0] for c in FLOAT_CASES])
def test_every_float_option_is_finite(name, overrides, message):
    """inf, -inf and nan are refused before any work by the option's full key, whatever declares it.
    Mutation check: ``rules["finite"] = True`` removed from suite/options.py field_rules makes these
    fail (a scheme's option then reaches its Config, or the stored spec's strict-JSON guard)."""
    assert re.search(message, _refusal(overrides)), (overrides, message)


@pytest.mark.parametrize("name,overrides,message", fast_or_exhaustive(COUNT_CASES, _representative(COUNT_CASES, ISSUE_COUNT_KEYS)),
                         ids=[c[0] for c in COUNT_CASES])
def test_every_count_option_is_bounded(name, overrides, message):
    """10**12 and 2**64 are refused by the option's full key and bound, before layers are tiled,
    a model built or a lock taken. Mutation check: the ``rules["le"] = COUNT_MAX`` default removed
    from suite/options.py field_rules makes these fail (10**12 layers of a span, seeds past int64)."""
    assert re.search(message, _refusal(overrides)), (overrides, message)


@pytest.mark.parametrize("key,bound", [("model.n_layers", LAYERS_MAX), ("train.steps", STEPS_MAX),
                                       ("eval.n_examples", EXAMPLES_MAX), ("train.seq_len", LENGTH_MAX),
                                       ("seed", COUNT_MAX), ("position.npos_max", LENGTH_MAX)])
def test_each_stated_maximum_is_the_edge(key, bound):
    """The bound itself passes the declaration's rule and one past it does not. Mutation check: an
    off-by-one (``le=LAYERS_MAX - 1`` on n_layers) makes this fail."""
    select = ["position=cope"] if key.startswith("position.") else []
    refused = _refusal([*select, f"{key}={bound + 1}"])
    assert refused.startswith(f"{key}={bound + 1}: must be <= {bound}")
    try:
        build(composed([*select, f"{key}={bound}", "train.min_len=null", "eval.multiples=[1]"]), probe_tasks=False)
    except SpecError as err:  # at the bound, only what the bound does not decide (another rule) may refuse
        assert f"{key}={bound}:" not in str(err), err


def test_an_eval_length_past_the_length_bound_is_refused_by_its_multiple():
    """Mutation check: dropping the LENGTH_MAX check in suite/config/build.py _check_lengths makes
    this fail (the multiple passes the schema: it is finite and >= 1)."""
    message = _refusal(["eval.multiples=[1,40000]"])
    assert message.startswith(f"eval.multiples=[1.0, 40000.0]: 40000 x train.seq_len=32 is an eval length of 1.28e+06 "
                              f"tokens; valid: at most {LENGTH_MAX:,} tokens")
    assert build(composed(["eval.multiples=[1,32768]"]), probe_tasks=False).eval_lengths[-1] == LENGTH_MAX


def test_lmeval_metadata_lengths_pass_the_same_bound():
    """lm-eval's --metadata lengths are refused past LENGTH_MAX before any document is generated
    (10**8 used to hang), by the same declarations a run's options have
    (``suite.lmeval.arguments.metadata_values``). Mutation check: ``le=LENGTH_MAX`` dropped from
    ``Metadata.lengths`` in suite/lmeval/arguments.py makes this fail."""
    from suite.lmeval import tasks as T

    with pytest.raises(ValueError, match=r"metadata lengths\[1\]=100000000: must be <= 1048576"):
        T.build_docs("copy", lengths=[32, 100_000_000], n_examples=1)
    with pytest.raises(ValueError, match=r"metadata n_examples=100000000: must be <= 1000000"):
        T.build_docs("copy", lengths=[32], n_examples=100_000_000)
    with pytest.raises(ValueError, match=r"metadata data_seed=18446744073709551616: must be <= 2147483647"):
        T.build_docs("copy", lengths=[32], n_examples=1, data_seed=2 ** 64)


# --------------------------------------------------------------------------------------------
# degenerate shapes: each scheme's own check, given the model's sizes

DEGENERATE = [
    # (id, overrides, what the message must say)
    ("rope-head-1", ["model.d_model=4", "model.n_heads=4"], r"layer 0: rope rotates no pair of dimensions: model\.d_model=4 / model\.n_heads=4 is a head of 1"),
    ("rope-fraction", ["position.fraction=0.1"], r"layer 0: rope rotates no pair.*position\.fraction=0\.1 of it rotates 0 dimensions"),
    ("rope-drop-all", ["position.drop_low=1"], r"layer 0: rope rotates no pair.*position\.drop_low=1\.0 keeps 0 of their pairs"),
    ("prope-head-2", ["+arch=prope", "model.d_model=8", "model.n_heads=4"], r"layer 0: rope rotates no pair.*head of 2"),
    ("xpos-head-1", ["position=xpos", "model.d_model=4", "model.n_heads=4"], r"layer 0: xpos rotates no pair of dimensions"),
    ("randomized-over-rope", ["position=randomized", "model.d_model=4", "model.n_heads=4"],
     r"layer 0: randomized\.base='rope': rope rotates no pair"),
    ("pattern-rope-layers", ["pattern=rnope", "position=nope", "model.d_model=4", "model.n_heads=4"], r"layer 0: rope rotates no pair"),
]
ROTATING = [  # the smallest shapes that rotate one pair: accepted, so the refusal is exact
    ["model.d_model=8", "model.n_heads=4"],
    ["position.fraction=0.125"],
    ["position.drop_low=0.875"],
    ["position=xpos", "model.d_model=8", "model.n_heads=4"],
    ["position=randomized", "model.d_model=8", "model.n_heads=4"],
]


@pytest.mark.parametrize("name,overrides,message", DEGENERATE, ids=[c[0] for c in DEGENERATE])
def test_a_rotary_scheme_with_nothing_to_rotate_is_refused(name, overrides, message):
    """Head size 1 with RoPE trained bit-identical to NoPE and was stored as "rope". Mutation check:
    ``== 0`` -> ``< 0`` in RoPE.check (suite/model/position/rope.py) makes the rope cases fail;
    dropping the base's check in Randomized.check makes randomized-over-rope fail."""
    assert re.search(message, _refusal(overrides)), message


@pytest.mark.parametrize("overrides", ROTATING, ids=[" ".join(o) for o in ROTATING])
def test_one_rotated_pair_is_enough(overrides):
    build(composed(overrides), probe_tasks=False)


# --------------------------------------------------------------------------------------------
# name-only fields, compile on variable lengths, strict JSON


def test_the_stored_model_name_is_derived_from_the_sizes():
    """model.name cannot say what the sizes are not: a name of no model is refused, a model's
    sizes are stored under its name whatever model.name says, and sizes set apart from the named
    model are stated in the name. Mutation check: ``m["name"] = model_name(m)`` removed from
    suite/config/build.py build makes this fail."""
    assert model_catalogue()["tiny"] == {"n_layers": 4, "d_model": 64, "n_heads": 4, "d_ff": 192}
    assert re.match(r"model\.name='enormous' names no model of conf/model; valid: base, mini, small, tiny",
                    _refusal(["model.name=enormous"]))
    name = lambda *o: build(composed(list(o)), probe_tasks=False).model.name  # noqa: E731
    assert name() == "tiny" and name("model=small") == "small"
    assert name("model.name=small") == "tiny"  # tiny's sizes, whatever the label says
    assert name("model.n_heads=2") == "tiny(n_heads=2)"
    assert name("model=small", "model.n_layers=1", "model.d_ff=64") == "small(n_layers=1,d_ff=64)"


def test_compile_on_variable_lengths_is_refused():
    """The CPU recipe draws a length per batch: compiling it rebuilds the graph for each new length.
    Mutation check: dropping the compile rule in suite/config/build.py _check_shapes makes this fail."""
    message = _refusal(["train.compile=yes"])
    assert message.startswith("train.compile=true with train.min_len=4: each batch draws its length from [4, "
                              "train.seq_len=32]") and "valid: train.min_len=null" in message
    assert build(composed(["train.compile=yes", "train.min_len=null"]), probe_tasks=False).train.compile
    assert build(composed(["train.compile=yes", "train.min_len=32"]), probe_tasks=False).train.compile


def test_the_strict_json_guard_names_what_it_refuses(monkeypatch):
    """Every scheme's defaults are stored as strict JSON (tests/test_spec.py, every config of every
    group). Behind the declarations, the stored form has its own guard: with the finite rule undone a
    non-finite value still never reaches a result file. Mutation check: removing
    ``_require_strict_json(spec.to_dict())`` from suite/config/build.py build makes this fail."""
    import suite.options as options

    real = options.field_rules.__wrapped__

    def without_finite(cls):
        return {k: ({r: v for r, v in rules.items() if r != "finite"}, each, declared)
                for k, (rules, each, declared) in real(cls).items()}

    monkeypatch.setattr(options, "field_rules", without_finite)
    message = _refusal(["position.theta=inf"])
    assert message.startswith("model.layers[0].position_cfg.theta=inf, model.layers[1].position_cfg.theta=inf")
    assert message.endswith("must be a finite number (a result file is strict JSON)")
    assert non_finite({"a": [1.0, {"b": math.nan}]}) == ["a[1].b=nan"]


# --------------------------------------------------------------------------------------------
# end to end: the issue's cases through python -m suite.run

END_TO_END = [
    ("theta-nan", ["position.theta=nan"], r"position\.theta=nan: must be a finite number"),
    ("kerple-r1-inf", ["position=kerple", "position.r1_init=inf"], r"position\.r1_init=inf: must be a finite number"),
    ("xpos-constant-nan", ["position=xpos", "position.scale_constant=nan"], r"position\.scale_constant=nan: must be a finite number"),
    ("layers-100000", ["model.n_layers=100000"], r"model\.n_layers=100000: must be <= 1024"),
    ("examples-1e8", ["eval.n_examples=100000000"], r"eval\.n_examples=100000000: must be <= 1000000"),
    ("steps-past-int64", ["train.steps=99999999999999999999"], r"train\.steps=99999999999999999999: must be <= 10000000"),
    ("seed-2-64", ["seed=18446744073709551616"], r"seed=18446744073709551616: must be <= 2147483647"),
    ("cope-table", ["position=cope", "position.npos_max=1000000", "train.batch_size=1024"],
     r"training .* needs about [\d.]+ GiB \([\d.]+ GiB of it held by position scheme cope .*position\.npos_max"),
    ("rope-head-1", ["model.d_model=4", "model.n_heads=4"], r"rope rotates no pair of dimensions"),
    ("model-name", ["model.name=enormous"], r"model\.name='enormous' names no model of conf/model"),
    ("compile-cpu", ["train.compile=yes"], r"train\.compile=true with train\.min_len=4"),
]


# make test: one refusal of each kind (a float, a count, a memory estimate; the seed case once left a
# lock behind); every case is refused in-process above, and make test-exhaustive runs the rest here
FAST_END_TO_END = [case for case in END_TO_END if case[0] in {"theta-nan", "seed-2-64", "cope-table"}]


@pytest.fixture(scope="module")
def end_to_end(tmp_path_factory, request):
    """The selected cases, each a ``python -m suite.run`` process forked from one warm interpreter."""
    base = tmp_path_factory.mktemp("numbers")
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.originalname == "test_the_issue_cases_exit_2_with_one_line_and_nothing_written"}
    cases = [case for case in END_TO_END if case[0] in selected]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    jobs = [{"module": "suite.run", "cwd": str(ROOT), "env": env,
             "args": [*overrides, f"results_dir={base / name / 'results'}", f"hydra.run.dir={base / name / 'h'}", "logger=none"]}
            for name, overrides, _ in cases]
    out = subprocess.run([sys.executable, "-m", "tests.forked_cli"], input=json.dumps(jobs), capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return {name: (rc, text, base / name / "results") for (name, *_), (rc, text) in zip(cases, json.loads(out.stdout))}


@pytest.mark.parametrize("name,overrides,message", fast_or_exhaustive(END_TO_END, FAST_END_TO_END), ids=[c[0] for c in END_TO_END])
def test_the_issue_cases_exit_2_with_one_line_and_nothing_written(end_to_end, name, overrides, message):
    """Exit 2, one log line naming the key, no traceback, nothing under results_dir (no
    ``_work/<run>/lock`` left behind: the seed case used to leave one)."""
    rc, text, results = end_to_end[name]
    assert rc == 2, text[-3000:]
    lines = [line for line in text.splitlines() if re.search(message, line)]
    assert len(lines) == 1 and re.search(r"(bad configuration|cannot run here): ", lines[0]), text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert not results.exists() or not any(results.rglob("*")), sorted(map(str, results.rglob("*")))
