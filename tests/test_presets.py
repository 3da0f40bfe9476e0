"""The production layer-pattern presets: each names its source, README's preset table lists each
one, and ``swan_gpt`` is ``command_a`` with its NoPE layer's log-length scaling (the one thing the
two sources differ in that the model spec expresses)."""
import re
from pathlib import Path

import pytest

from tests.conftest import make_spec

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = ROOT / "conf" / "pattern"


def sourced() -> dict[str, str]:
    """pattern name -> the text of its ``# source:`` comment, for every preset that has one."""
    out = {}
    for path in sorted(PATTERNS.glob("*.yaml")):
        text = path.read_text()
        if (m := re.search(r"^# source: (.+(?:\n#(?! source:).*)*)", text, re.M)):
            out[path.stem] = m.group(1)
    return out


def readme_presets() -> list[str]:
    """The presets README's "Layer patterns" table lists, in order."""
    section = (ROOT / "README.md").read_text().split("## Layer patterns", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


def test_every_production_preset_names_its_source_and_readme_lists_exactly_those():
    presets = sourced()
    assert {"command_a", "llama4", "smollm3", "rnope", "swan_gpt"} <= set(presets)
    listed = readme_presets()
    assert sorted(listed) == sorted(presets), (listed, sorted(presets))
    for name, text in presets.items():
        assert re.search(r"arXiv \d{4}\.\d{4,5}|model card|blog|announcement|Config", text), (name, text)


def test_swan_gpt_is_command_a_with_log_length_scaling_in_its_nope_layer():
    swan, command_a = make_spec("+arch=swan_gpt").model.layers, make_spec("+arch=command_a").model.layers
    assert [(l.position, l.span) for l in swan] == [(l.position, l.span) for l in command_a] == \
        [("rope", "swa")] * 3 + [("nope", "full")]
    assert [l.position_cfg.log_scale for l in swan] == [False, False, False, True]
    assert [l.position_cfg.log_scale for l in command_a] == [False] * 4
    assert [l.span_cfg for l in swan] == [l.span_cfg for l in command_a]
    assert make_spec("+arch=swan_gpt").run_id != make_spec("+arch=command_a").run_id


@pytest.mark.parametrize("arch,local", [("llama4", "chunked"), ("swan_gpt", "swa"), ("command_a", "swa")])
def test_each_presets_nope_layer_is_global_and_its_rope_layers_local(arch, local):
    layers = make_spec(f"+arch={arch}").model.layers
    assert {l.span for l in layers if l.position == "nope"} == {"full"}
    assert {l.span for l in layers if l.position == "rope"} == {local}


@pytest.mark.parametrize("arch", ["command_a", "llama4", "smollm3", "rnope", "swan_gpt", "rope_in_swa"])
def test_every_hybrid_on_the_hybrids_board_ends_in_its_global_nope_layer(arch):
    """The pattern section reads the mechanism at the last layer (suite/report/sections/patterns.py):
    it is a NoPE layer over the full span in every hybrid the hybrids board trains."""
    board = ROOT.joinpath("conf", "sweep", "hybrids.yaml").read_text()
    assert re.search(rf"\+arch: .*\b{arch}\b", board)
    last = make_spec(f"+arch={arch}").model.layers[-1]
    assert (last.position, last.span) == ("nope", "full")
