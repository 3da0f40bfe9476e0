"""Config composition, layer patterns and validation before training.

Mutation checks: in suite/config/build.py resolve_layers, an empty ``clash`` list makes
test_a_pattern_and_a_span_group_that_disagree_on_a_window_are_refused fail; in build, skipping the
``_unfit`` check at train.seq_len makes test_a_task_that_cannot_fill_the_training_length_is_refused fail;
LayerSpec.span_size guessing getattr(span_cfg, "window"/"chunk") instead of asking the span class makes
test_a_layer_takes_its_span_kind_and_size_from_the_span_class fail; in suite/commands/describe.py layer_table,
putting every size under "window" makes test_layer_table_matches_spec fail, and layer_kind printing
"w=" for every sized span makes test_a_layer_kind_names_its_span_size_as_a_window_or_a_chunk fail;
in _checked_layers, keeping layer.position_cfg instead of calling the scheme's check, or dropping the
"layer {i}: " prefix from its error, makes test_build_passes_every_layer_through_its_schemes_check fail;
not calling _check_pattern_sizes in resolve_layers makes the pattern.window=0 and pattern.chunk=0 cases of
test_bad_configuration_names_the_value fail (a pattern size is checked by its span's own rule).
"""
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests import forked_cli
from suite.config.compose import CONF_DIR, compose_config
from suite.commands.describe import layer_kind, layer_table
from suite.model.position import SCHEMES, PositionConfig
from suite.model.span import SPANS, Span, SpanConfig
from suite.config.build import SpecError, build, non_finite
from suite.model.spec import LayerSpec
from tests.conftest import CLASSIC, fast_or_exhaustive, make_spec

GROUPS = ["model", "position", "span", "pattern", "task", "taskset", "train", "eval", "logger"]


def _options(group):
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


# make test builds every option but the tasks (tests/test_tasks.py builds each task's YAML and checks
# the same) and the schemes outside the flagship's six; make test-exhaustive builds those too
OPTIONS = [(group, option) for group in GROUPS for option in _options(group)]
FAST_OPTIONS = {(g, o) for g, o in OPTIONS if g != "task" and (g != "position" or o in CLASSIC)}


@pytest.mark.parametrize("group,option", fast_or_exhaustive(OPTIONS, FAST_OPTIONS), ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_config_in_every_group_composes_and_builds(group, option):
    """Each YAML of each group builds a spec whose stored form (what a result file keeps) is strict
    JSON: no scheme's, span's or task's defaults hold a non-finite number."""
    spec = build(compose_config([f"{group}={option}"]))
    assert spec.model.n_layers == len(spec.model.layers)
    json.dumps(spec.to_dict(), allow_nan=False)
    assert non_finite(spec.to_dict()) == [], option


def _kinds(spec):
    return [(layer.position, layer.span) for layer in spec.model.layers]


def test_command_a_over_8_layers():
    spec = make_spec("pattern=command_a", "model.n_layers=8")
    assert _kinds(spec) == [("rope", "swa")] * 3 + [("nope", "full")] + [("rope", "swa")] * 3 + [("nope", "full")]
    assert all(layer.span_cfg.window == 16 for layer in spec.model.layers if layer.span == "swa")


def test_llama4_layers_are_chunks_and_command_a_layers_are_windows():
    facts = lambda spec: [(layer.span_kind, layer.span_size, layer.span_label) for layer in spec.model.layers]
    assert facts(make_spec("pattern=llama4")) == [("chunk", 16, "c=16")] * 3 + [(None, None, "")]
    assert facts(make_spec("pattern=command_a")) == [("window", 16, "w=16")] * 3 + [(None, None, "")]


def test_a_layer_takes_its_span_kind_and_size_from_the_span_class(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class BandConfig(SpanConfig):
        width: int = 3  # neither "window" nor "chunk": only the class knows what sizes it

    class Band(Span):
        name, Config, kind = "band", BandConfig, "window"

        @property
        def size(self):
            return self.cfg.width

    monkeypatch.setitem(SPANS, "band", Band)
    layer = LayerSpec("nope", PositionConfig(), "band", BandConfig(width=9))
    assert (layer.span_kind, layer.span_size, layer.span_label) == ("window", 9, "w=9")


def test_pattern_window_sizes_its_swa_layers():
    spec = make_spec("pattern=command_a", "pattern.window=8")
    assert [layer.span_size for layer in spec.model.layers] == [8, 8, 8, None]


@pytest.mark.parametrize("overrides", [
    ["span=swa", "span.window=8"],      # the span group would size no layer: command_a names every layer's span
    ["span=swa", "pattern.window=8"],   # the same, with the pattern's own window set too
])
def test_a_span_group_that_sizes_no_layer_is_refused(overrides):
    """A span's size has one home per layer: the pattern for the spans its layer kinds name.
    Mutation check: dropping the ``all(named)`` refusal in ``_check_one_home`` (suite/config/build.py)
    makes this fail, and the span group's window would be silently unused."""
    with pytest.raises(SpecError, match=r"span=swa sizes no layer: every layer kind of pattern 'command_a' names its span"):
        make_spec("pattern=command_a", *overrides)


def test_a_pattern_window_its_layers_never_name_is_refused_where_the_span_group_has_one():
    """rnope's layer kinds name no span, so the span group sizes them and ``pattern.window`` sizes
    nothing; NoPE's uniform stack on the full span has no window to mistake it for, so the windows
    sweep's ``pattern.window`` leaves that run as it is.
    Mutation check: dropping the ``stray`` refusal in ``_check_one_home`` makes this fail."""
    with pytest.raises(SpecError, match=r"pattern.window=8 sizes no layer of pattern 'rnope'.*set span.window"):
        make_spec("pattern=rnope", "span=swa", "pattern.window=8")
    plain, ignored = make_spec("position=nope"), make_spec("position=nope", "pattern.window=8")
    assert plain.run_id == ignored.run_id
    assert [layer.span_size for layer in make_spec("pattern=rnope", "span=swa", "span.window=8").model.layers] == [8] * 4


@pytest.mark.parametrize("pattern,expected", [
    ("rnope", [("rope", "full"), ("nope", "full")] * 2),
    ("smollm3", [("rope", "full")] * 3 + [("nope", "full")]),
    ("llama4", [("rope", "chunked")] * 3 + [("nope", "full")]),
    ("rope_in_swa", [("rope", "swa"), ("nope", "full")] * 2),
    ("nope_in_swa", [("nope", "swa"), ("nope", "full")] * 2),
])
def test_patterns_tile_over_depth(pattern, expected):
    assert _kinds(make_spec(f"pattern={pattern}")) == expected


def test_llama4_global_layers_use_log_scale_and_local_layers_do_not():
    spec = make_spec("pattern=llama4", "model.n_layers=8")
    assert [layer.position_cfg.log_scale for layer in spec.model.layers] == [False, False, False, True] * 2


def test_user_written_pattern_list():
    spec = make_spec("pattern.layers=[{position: alibi, span: swa}, {position: t5}]", "+pattern.window=4",
                     "model.n_layers=4")
    assert _kinds(spec) == [("alibi", "swa"), ("t5", "full")] * 2
    assert spec.model.layers[0].span_cfg.window == 4


def test_group_parameters_apply_to_uniform_layers():
    spec = make_spec("position=rope", "position.theta=500000", "position.fraction=0.5")
    assert {layer.position_cfg.theta for layer in spec.model.layers} == {500000.0}


def test_unknown_scheme_name_lists_the_valid_ones():
    with pytest.raises(SpecError, match=f"unknown position scheme 'fourier'.*{', '.join(sorted(SCHEMES))}"):
        make_spec("position.name=fourier")


def test_unknown_scheme_in_a_pattern_lists_the_valid_ones():
    with pytest.raises(SpecError, match="unknown position scheme 'ropee'; valid"):
        make_spec("pattern=rnope", "pattern.layers.1.position=ropee")


@pytest.mark.parametrize("overrides,message", [
    (["span=swa", "span.window=0"], "window=0"),
    (["span=chunked", "span.chunk=-3"], "chunk=-3"),
    (["pattern.window=0"], r"^pattern.window=0: swa window=0: must be a positive number of keys"),  # no swa layer: still checked
    (["pattern=llama4", "pattern.chunk=0"], r"^pattern.chunk=0: chunked chunk=0"),
    (["model.n_heads=5"], r"n_heads=5 does not divide model.d_model=64"),
    (["eval.multiples=[0.5,1]"], r"eval.multiples\[0\]=0.5: must be >= 1"),
    (["position=learned", "position.max_positions=16"], "max_positions=16 is shorter than train.seq_len"),
    (["span.name=dilated"], "unknown span 'dilated'; valid spans: chunked, full, swa"),
    (["position=rope", "position.layout=diagonal"], "layout 'diagonal'"),
    (["+position.slope=2"], r"unknown key\(s\) \['position.slope'\]; valid: position.drop_low, position.factor, position.fraction"),
    (["task.name=sorting"], "unknown task 'sorting'; valid tasks: "),
    (["model.attention=triton"], "unknown model.attention 'triton'"),
])
def test_bad_configuration_names_the_value(overrides, message):
    with pytest.raises(SpecError, match=message):
        make_spec(*overrides)


def test_build_passes_every_layer_through_its_schemes_check(monkeypatch):
    seen = []

    def check(cls, cfg, train_len, eval_lens, dims):
        seen.append((cls.name, train_len, eval_lens, (dims.d_model, dims.n_heads, dims.head_dim)))
        if len(seen) == 4:
            raise ValueError("value=1 is refused; valid: >= 2")
        return cfg

    monkeypatch.setattr(SCHEMES["rope"], "check", classmethod(check))
    monkeypatch.setattr(SCHEMES["nope"], "check", classmethod(check))
    with pytest.raises(SpecError, match=r"^layer 3: value=1 is refused; valid: >= 2$"):
        make_spec("pattern=rnope", "model.n_layers=6", "train.seq_len=32", "eval.multiples=[1,2.5]")
    assert seen == [("rope", 32, (32, 80), (64, 4, 16)), ("nope", 32, (32, 80), (64, 4, 16))] * 2  # model=tiny's sizes


def test_run_id_is_a_stable_hash_of_the_resolved_spec():
    a, b = make_spec("position=alibi"), make_spec("position=alibi")
    assert a.run_id == b.run_id and len(a.run_id) == 12
    assert make_spec("position=alibi", "seed=1").run_id != a.run_id
    assert make_spec("position=alibi", "sweep_name=other").run_id == a.run_id  # the sweep is a folder, not the spec
    assert make_spec("position=alibi", "logger=none").run_id == a.run_id


def test_inspect_json_lists_every_layer():
    out = forked_cli.run([sys.executable, "-m", "suite.commands.describe", "pattern=command_a", "model.n_layers=8", "--json"],
                         capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent)
    rows = json.loads(out.stdout)
    assert [r["layer"] for r in rows] == list(range(8))
    assert set(rows[0]) >= {"layer", "position", "span", "window", "chunk"}
    assert rows[3] == {"layer": 3, "position": "nope", "span": "full", "mixer": "attention", "window": None, "chunk": None, "log_scale": False}
    assert rows[4]["position"] == "rope" and rows[4]["span"] == "swa" and (rows[4]["window"], rows[4]["chunk"]) == (16, None)


def test_inspect_table_and_bad_input_exit_code():
    cwd = Path(__file__).parent.parent
    ok = forked_cli.run([sys.executable, "-m", "suite.commands.describe", "pattern=llama4"], capture_output=True, text=True, cwd=cwd)
    assert ok.returncode == 0 and "yes" in ok.stdout
    assert re.search(r"0  rope +chunked +c=16  no", ok.stdout) and "w=16" not in ok.stdout
    bad = forked_cli.run([sys.executable, "-m", "suite.commands.describe", "position=fourier"], capture_output=True, text=True, cwd=cwd)
    assert bad.returncode == 2 and "fourier" in bad.stderr and "alibi" in bad.stderr


def test_layer_table_matches_spec():
    spec = make_spec("pattern=llama4")
    assert layer_table(spec)[3]["log_scale"] is True
    assert (layer_table(spec)[0]["chunk"], layer_table(spec)[0]["window"]) == (16, None)  # a chunk is not a window


def test_a_layer_kind_names_its_span_size_as_a_window_or_a_chunk():
    kinds = lambda *overrides: [layer_kind(layer) for layer in make_spec(*overrides).model.layers]
    assert kinds("pattern=llama4") == ["rope/chunked c=16"] * 3 + ["nope/full"]
    assert kinds("pattern=command_a", "pattern.window=8") == ["rope/swa w=8"] * 3 + ["nope/full"]


def test_run_id_leaves_out_options_at_their_defaults():
    spec = make_spec("position=alibi")
    compact = spec.to_dict(drop_defaults=True)
    assert "diagnostics" not in compact["eval"] and "diagnostics" in spec.to_dict()["eval"]
    assert make_spec("position=alibi", "train.min_len=16").run_id != spec.run_id
    assert make_spec("position=alibi", "eval.diagnostics=true").run_id != spec.run_id


@pytest.mark.parametrize("overrides,task", [
    (["task=mqar", "task.n_queries=100"], "mqar"),
    (["task=cwe", "task.k=50"], "cwe"),
    (["taskset=core", "+taskset.params.vt.hops=30"], "vt"),
])
def test_a_task_that_cannot_fill_the_training_length_is_refused(overrides, task):
    with pytest.raises(SpecError, match=rf"task {task} cannot fill train.seq_len=32: {task} needs length >= \d+"):
        make_spec(*overrides)
    make_spec(*overrides, "train.seq_len=512", "train.min_len=null", "eval.multiples=[1]")  # long enough: builds


def test_no_module_of_suite_shadows_the_standard_library():
    """``python suite/run.py`` puts suite/ first on sys.path (Hydra's tab completion runs it so)."""
    names = {p.stem for p in (CONF_DIR.parent / "suite").glob("*.py")} | {p.name for p in (CONF_DIR.parent / "suite").iterdir() if p.is_dir()}
    assert names & set(sys.stdlib_module_names) == set()


def test_tab_completion_completes_groups_and_schema_keys():
    root = CONF_DIR.parent
    install = forked_cli.run([sys.executable, "suite/run.py", "-sc", "install=bash"], cwd=root)
    assert install.returncode == 0 and "hydra_bash_completion" in install.stdout, install.stderr[-2000:]

    def complete(line: str) -> list[str]:
        env = {**os.environ, "COMP_LINE": f"python suite/run.py {line}"}
        out = forked_cli.run([sys.executable, "suite/run.py", "-sc", "query=bash"], cwd=root, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.split()

    from suite.model.position import SCHEMES

    assert complete("position=a") == sorted(f"position={name}" for name in SCHEMES if name.startswith("a"))
    assert "position=alibi" in complete("position=a")
    assert complete("train.l") == ["train.loss_on=", "train.lr="]


@pytest.mark.parametrize("overrides", [["taskset=core", "pattern=rope_in_swa"], ["taskset=ruler", "+taskset.params.vt.hops=2", "position=learned"],
                                       ["task=copy", "eval.multiples=[1,1.5]", "position=rope", "position.scaling=yarn"]])
def test_a_stored_spec_rebuilds_the_run_spec_and_its_id(overrides):
    from suite.config.build import run_spec_from_dict

    spec = make_spec(*overrides)
    stored = json.loads(json.dumps(spec.to_dict()))
    rebuilt = run_spec_from_dict(stored)
    assert rebuilt == spec and rebuilt.run_id == spec.run_id
    with pytest.raises(ValueError, match=r"unknown eval spec key\(s\) \['colour'\]; valid: batch_size, "):
        run_spec_from_dict({**stored, "eval": {**stored["eval"], "colour": 1}})


def test_a_task_spec_is_its_yaml_with_overrides_typed_and_checked():
    from suite.config.build import task_spec

    assert dict(task_spec("vt").params) == {"n_chains": 1, "hops": 4}
    assert dict(task_spec("vt", {"hops": "2"}).params)["hops"] == 2
    with pytest.raises(SpecError, match=r"unknown key\(s\) \['mine.hop'\]"):
        task_spec("vt", {"hop": 2}, "mine")
    with pytest.raises(ValueError, match="unknown task 'vtt'; valid tasks: .*vt"):
        task_spec("vtt")


def _unknown_key_error(case: str) -> Exception:
    from suite.config.build import model_spec_from_dict, resolve_layers, run_spec_from_dict
    from suite.registry import build_config

    stored = make_spec().to_dict()
    calls = {
        "group": lambda: make_spec("+train.stpes=5"),
        "top": lambda: make_spec("+colour=red"),
        "piece": lambda: make_spec("+position.slope=2"),
        "layer-kind": lambda: resolve_layers({"name": "nope"}, {"name": "full"}, {"name": "mine", "layers": [{"colour": 1}]}, 1),
        "model-spec": lambda: model_spec_from_dict({**stored["model"], "colour": 1}),
        "run-spec": lambda: run_spec_from_dict({**stored, "colour": 1}),
        "config": lambda: build_config("span", "swa", SPANS["swa"].Config, {"colour": 1}),
    }
    with pytest.raises(ValueError) as err:
        calls[case]()
    return err.value


@pytest.mark.parametrize("case,message", [
    ("group", "unknown key(s) ['train.stpes']; valid: train.batch_size, train.betas, "),
    ("top", "unknown key(s) ['colour']; valid: ckpt_every, eval, jobs, log_every, logger, model, "),
    ("piece", "unknown key(s) ['position.slope']; valid: position.drop_low, position.factor, "),
    ("layer-kind", "unknown layer-kind key(s) ['colour'] in pattern 'mine'; valid: log_scale, mixer, position, span"),
    ("model-spec", "unknown model spec key(s) ['colour']; valid: attention, "),
    ("run-spec", "unknown run spec key(s) ['colour']; valid: code, "),
    ("config", "unknown span key(s) ['colour'] for 'swa'; valid: window"),
])
def test_every_unknown_key_is_refused_by_the_one_check_naming_the_key_and_the_valid_ones(case, message):
    """Config groups, the top level, piece options, pattern layer kinds, stored specs and piece
    configs all refuse an unknown key with one message, from ``suite.registry.check_keys``: the
    bad key and every valid one, by full key where the key has a prefix.

    Mutation checks: writing the check out again in build.py's model_spec_from_dict with its old
    message (``unknown model spec key(s) ['colour']; valid: ['attention', ...]``) makes every case
    fail (a second file writes the message); dropping ``prefix +`` before the valid keys in
    check_keys makes the group and piece cases fail."""
    assert message in str(_unknown_key_error(case))
    root = Path(__file__).resolve().parent.parent
    writers = sorted(p.relative_to(root).as_posix() for part in ("suite", "tasks") for p in (root / part).rglob("*.py")
                     if "key(s)" in p.read_text())
    assert writers == ["suite/registry.py"]


def test_describe_names_each_layers_mixer_and_each_schedule_phase_with_its_steps():
    """The table a researcher checks before training says which layers are gated linear and when a
    schedule switches. Mutation check: dropping the ``schedule_lines`` loop (or an off-by-one in its
    ``starts``) in suite/commands/describe.py makes this fail."""
    cwd = Path(__file__).parent.parent
    out = forked_cli.run([sys.executable, "-m", "suite.commands.describe", "+arch=drope", "train.steps=100",
                          "train.schedule=[{until: 0.25, position: rope}]"], capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stderr
    assert "schedule: steps 0-24: rope on the position group's layers" in out.stdout
    assert "schedule: steps 25-99: the table's schemes" in out.stdout
    hybrid = forked_cli.run([sys.executable, "-m", "suite.commands.describe", "pattern=qwen3_next"],
                            capture_output=True, text=True, cwd=cwd)
    rows = [line.split() for line in hybrid.stdout.splitlines()[2:] if not line.startswith("training:")]
    assert [r[-1] for r in rows] == ["gated_delta"] * 3 + ["attention"] and "schedule" not in hybrid.stdout
