"""Each fact the suite keeps has one home, and the other places read it from there.

Mutation checks: declaring ``steps`` again in suite/config/schema.py (a hand-written TrainConf)
makes test_the_schema_groups_are_the_spec_option_fields fail; writing int(round(x * seq_len))
in suite/config/resources.py again makes test_the_eval_length_rule_is_computed_in_one_place fail;
a literal 0.02 in suite/model/lm.py makes test_the_init_scale_is_written_once fail; a
pkgutil.iter_modules loop back in tasks/__init__.py makes test_one_package_scanner fail."""
import ast
import dataclasses
import re
from pathlib import Path

import pytest
import torch

from suite.config import schema
from suite.config.run_spec import EvalSpec, TrainSpec, eval_length
from suite.model.init import INIT_STD
from suite.model.spec import ModelSpec
from suite.options import is_option
from tests.conftest import make_spec

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "suite").rglob("*.py")) + sorted((ROOT / "tasks").rglob("*.py"))


def _files_matching(pattern: str, under: str = "") -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in SOURCES
                  if p.relative_to(ROOT).as_posix().startswith(under) and re.search(pattern, p.read_text()))


@pytest.mark.parametrize("conf,spec", [(schema.ModelConf, ModelSpec), (schema.TrainConf, TrainSpec), (schema.EvalConf, EvalSpec)])
def test_the_schema_groups_are_the_spec_option_fields(conf, spec):
    options = [f for f in dataclasses.fields(spec) if is_option(f)]
    fields = dataclasses.fields(conf)
    assert [f.name for f in fields] == [f.name for f in options]
    for mine, theirs in zip(fields, options):
        assert mine.metadata["rules"] is theirs.metadata["rules"]  # the same rules object, not a copy
        assert mine.default == (theirs.default if theirs.default is not dataclasses.MISSING else "???")
    source = (ROOT / "suite" / "config" / "schema.py").read_text()
    assert not re.search(rf"class {conf.__name__}\b", source)  # derived, never written out


def test_the_eval_length_rule_is_computed_in_one_place():
    assert _files_matching(r"round\([^)]*\*\s*(t\.|spec\.train\.)?(seq_len|train_len)") == ["suite/config/run_spec.py"]
    spec = make_spec("train.seq_len=30", "eval.multiples=[1,1.25,1.5,2]")
    assert spec.eval_lengths == [30, 38, 45, 60] == [eval_length(x, 30) for x in (1, 1.25, 1.5, 2)]


def test_the_init_scale_is_written_once():
    assert _files_matching(r"(?<![\d.])0\.02(?!\d)", under="suite/model/") == ["suite/model/init.py"]
    torch.manual_seed(0)
    from suite.model.lm import PosBenchLM

    model = PosBenchLM(make_spec("model.d_model=128", "model.n_heads=4").model)
    assert model.embed.weight.std().item() == pytest.approx(INIT_STD, rel=0.05)
    n = model.spec.n_layers
    assert model.blocks[0].attn.out.weight.std().item() == pytest.approx(INIT_STD / (2 * n) ** 0.5, rel=0.05)


def test_one_package_scanner():
    scanners = _files_matching(r"pkgutil|iter_modules|glob\(\"\*\.py\"\)")  # module discovery
    assert scanners == ["suite/registry.py"]


def test_the_all_task_set_is_every_registered_task():
    from tasks import TASKS

    text = (ROOT / "conf" / "taskset" / "all.yaml").read_text()
    assert not any(re.search(rf"\b{name}\b", text) for name in TASKS)  # no hand-kept list
    assert [t.name for t in make_spec("taskset=all", "train.seq_len=512", "eval.multiples=[1]").tasks] == sorted(TASKS)


def test_imports_are_real_modules():
    """Every ``from suite.x import y`` in the suite names a module that exists (the layout's moves)."""
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("suite"):
                parts = node.module.split(".")
                target = ROOT.joinpath(*parts)
                assert target.with_suffix(".py").is_file() or (target / "__init__.py").is_file(), (path, node.module)
