"""Properties every task must have, the task sets, shared eval sets and ``suite.commands.show``.

Mutation check: in suite/evaluation/evalsets.py eval_set_hash, dropping "seed" from the hashed key makes
test_eval_sets_are_cached_by_hash_and_identical_to_fresh_generation fail."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import forked_cli
from suite.config.compose import CONF_DIR
from suite.evaluation.evalcache import eval_set
from suite.config.codedigest import generator_digest
from suite.evaluation.evalsets import eval_set_hash
from tasks import TASKS, build_task
from tasks.base import decode, encode
from suite.evaluation.evaluate import score_prediction
from suite.config.build import non_finite
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
ALL = sorted(TASKS)


def test_the_catalogue_has_every_task_family():
    assert set(ALL) >= {"copy", "reverse", "mqar", "niah_single", "niah_multikey", "niah_multivalue",
                        "niah_multiquery", "vt", "cwe", "fwe", "qa", "rank", "flipflop", "parity", "permutation"}


@pytest.mark.parametrize("name", [n for n in ALL if not TASKS[n].byte_level])  # text: test_text.py
@pytest.mark.parametrize("length", [32, 256, 4096])
def test_every_task_has_exact_length_answers_at_the_end_and_scores_gold_as_one(name, length):
    task = build_task(name)
    ex = task.generate(np.random.default_rng(0), length)
    assert len(ex.tokens) == length
    assert ex.answer_spans and ex.answer_spans[-1][1] <= length
    assert [decode(ex.tokens[s:e]) for s, e in ex.answer_spans] == ex.answers
    scores = score_prediction(task, ex, list(ex.tokens))
    assert scores["exact_match"] == 1.0 and all(v == 1.0 for v in scores.values())
    wrong = list(ex.tokens)
    s, e = ex.answer_spans[0]
    wrong[s] = (wrong[s] + 1) % 300 or 1
    assert score_prediction(task, ex, wrong)["exact_match"] < 1.0
    assert encode(ex.text) == ex.tokens and decode(encode(ex.text)) == ex.text
    assert isinstance(ex.meta.get("slices", {}), dict)


@pytest.mark.parametrize("name", ALL)
def test_every_task_is_deterministic_per_seed(name):
    task = build_task(name)
    a = task.generate(np.random.default_rng(5), 128)
    assert a.tokens == task.generate(np.random.default_rng(5), 128).tokens
    assert a.tokens != task.generate(np.random.default_rng(6), 128).tokens


@pytest.mark.parametrize("name", ALL)
def test_every_task_has_a_yaml_whose_defaults_build(name):
    path = CONF_DIR / "task" / f"{name}.yaml"
    assert path.exists(), f"missing {path}"
    spec = make_spec(f"task={name}")
    assert spec.tasks[0].name == name
    json.dumps(spec.to_dict(), allow_nan=False)  # what a result file keeps is strict JSON
    assert non_finite(spec.to_dict()) == []


@pytest.mark.parametrize("taskset,expected", [
    ("core", ["copy", "mqar", "niah_single", "vt"]),
    ("ruler", ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa"]),
    ("all", ALL),
])
def test_task_sets(taskset, expected):
    spec = make_spec(f"taskset={taskset}")
    assert sorted(t.name for t in spec.tasks) == sorted(expected)
    assert spec.taskset == taskset


def test_taskset_parameter_overrides_reach_the_task():
    spec = make_spec("taskset=core", "+taskset.params.mqar.n_queries=3")
    assert dict(dict((t.name, t.params) for t in spec.tasks)["mqar"])["n_queries"] == 3


def test_eval_sets_are_cached_by_hash_and_identical_to_fresh_generation(tmp_path):
    task = build_task("niah_single")
    a, ha = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    cached = list(tmp_path.glob("niah_single-64-*.json"))
    assert len(cached) == 1 and ha in cached[0].name
    b, hb = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    c, _ = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=None)
    assert ha == hb and [x.tokens for x in a] == [x.tokens for x in b] == [x.tokens for x in c]
    assert [x.answer_spans for x in b] == [x.answer_spans for x in c]
    # the hash names the set: the same arguments give it again, and each argument changes it
    generator = generator_digest(type(task).name)
    assert eval_set_hash("niah_single", {}, 64, 3, 5, generator) == ha
    for other in [("niah_single", {}, 64, 4, 5), ("niah_single", {}, 128, 3, 5), ("niah_single", {}, 64, 3, 6),
                  ("niah_single", {"n_keys": 2}, 64, 3, 5), ("niah_multikey", {}, 64, 3, 5)]:
        assert eval_set_hash(*other, generator) != ha, other


def _cut_to_one_example(payload):
    payload["examples"] = payload["examples"][:1]


def _edit_a_token(payload):
    payload["examples"][0]["tokens"][3] += 1


def _other_set(payload):
    payload["hash"] = "0" * 16


@pytest.mark.parametrize("damage", [_cut_to_one_example, _edit_a_token, _other_set, "truncated", "no content hash"])
def test_a_damaged_eval_set_cache_file_is_reported_and_regenerated(tmp_path, damage):
    task = build_task("niah_single")
    fresh, digest = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    [path] = tmp_path.glob("niah_single-64-*.json")
    payload = json.loads(path.read_text())
    if damage == "truncated":
        path.write_text(path.read_text()[:200])
    else:
        payload.pop("content") if damage == "no content hash" else damage(payload)
        path.write_text(json.dumps(payload))
    with pytest.warns(UserWarning, match=f"eval-set cache file {path}"):
        again, same = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    assert same == digest and [x.tokens for x in again] == [x.tokens for x in fresh]
    assert len(json.loads(path.read_text())["examples"]) == 5  # the file is whole again


def test_show_prints_json_with_answers():
    out = forked_cli.run([sys.executable, "-m", "suite.commands.show", "mqar", "--length", "48", "--seed", "2", "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    d = json.loads(out.stdout)
    assert set(d) == {"tokens", "text", "answer_spans", "answers", "meta"}
    assert len(d["tokens"]) == 48 and encode(d["text"]) == d["tokens"]
    assert d["answers"] == [decode(d["tokens"][s:e]) for s, e in d["answer_spans"]]
    text = forked_cli.run([sys.executable, "-m", "suite.commands.show", "copy", "--length", "10"], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout
    assert "[" in text and "]" in text


def test_a_changed_generator_gets_a_new_eval_set_hash(tmp_path, monkeypatch):
    from suite.evaluation import evalcache

    task = build_task("niah_single")
    _, before = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    monkeypatch.setattr(evalcache, "generator_digest", lambda name: "edited")  # the task's source changed
    _, after = eval_set("niah_single", {}, task, 64, seed=3, n=5, cache_dir=tmp_path)
    assert before != after and len(list(tmp_path.glob("niah_single-64-*.json"))) == 2
