"""lm-eval integration: the ``posbench`` model, the ``posbench_*`` tasks and ``python -m suite.lmeval``.

Mutation checks: in suite/lmeval/tasks.py score, string_match_part any(hits) -> all(hits) makes
test_scores fail; PosBenchTask (suite/lmeval/task_class.py) passing the YAML's metric_list on without
with_directions makes test_every_tasks_headline_metric_is_offered_to_lm_eval fail (lm-eval gives
string_match_all no direction)."""
import json
import os
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from omegaconf import OmegaConf

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from suite.config.compose import CONF_DIR  # noqa: E402
from suite.evaluation.evalsets import generate  # noqa: E402
from suite.lmeval import PosBenchEvalLM, include_dir, model_spec_from_dict, resolve_run  # noqa: E402
from suite.lmeval import tasks as T  # noqa: E402
from suite.lmeval.__main__ import include_args, main, only_posbench_tasks, ours_only, run_args  # noqa: E402
from suite.run import execute  # noqa: E402
from suite.config.build import resolve_tasks  # noqa: E402
from tasks import TASKS  # noqa: E402
from tasks.base import BOS_ID, EOS_ID, VOCAB, encode  # noqa: E402
from tests.conftest import make_spec  # noqa: E402

TINY = ["model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.steps=20",
        "train.batch_size=8", "eval.n_examples=6", "eval.batch_size=6", "eval.multiples=[1,2]", "logger=none",
        "sweep_name=lm"]
STOPS = ["?", "|", "</s>", "\n"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    return execute(make_spec(*TINY, "task=copy"), results_dir=tmp_path_factory.mktemp("results"), progress=False)


@pytest.fixture(scope="module")
def lm(run_file):
    return PosBenchEvalLM(pretrained=str(run_file), batch_size=2)


def manager(**metadata):
    return TaskManager(include_path=str(include_dir()), include_defaults=False, metadata=metadata)


def direct_logprobs(model, ids):
    with torch.no_grad():
        return F.log_softmax(model(torch.tensor([ids])).float(), -1)[0]


# ---------------------------------------------------------------------------------------------
# loading a run


@pytest.mark.parametrize("overrides", [[], ["position=learned", "span=swa"], ["pattern=rope_in_swa", "position=t5"]])
def test_model_spec_round_trips_through_the_stored_dict(overrides):
    spec = make_spec(*overrides)
    stored = json.loads(json.dumps(spec.to_dict()))["model"]
    assert model_spec_from_dict(stored) == spec.model
    with pytest.raises(ValueError, match=r"unknown model spec key\(s\) \['colour'\]"):
        model_spec_from_dict({**stored, "colour": 1})


def test_a_run_is_found_by_file_folder_id_and_hash(run_file):
    root = run_file.parent.parent
    assert resolve_run(run_file) == run_file
    assert resolve_run(run_file.parent / "_work" / run_file.stem) == run_file
    assert resolve_run(run_file.stem, root) == run_file
    assert resolve_run(run_file.stem.rsplit("-", 1)[1], root) == run_file
    with pytest.raises(ValueError) as err:
        resolve_run("nope-123", root)
    assert str(root.resolve()) in str(err.value) and run_file.stem in str(err.value)


# ---------------------------------------------------------------------------------------------
# the model against PosBenchLM computed directly


def test_loglikelihood_is_the_models_own_sum_over_the_continuation(lm):
    pairs = [("apple fox 17 |", " apple fox"), ("cat = 5 ? cat :", " 5"), ("dog", " cat cat cat 3")]
    got = lm.loglikelihood([Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)])
    for (context, continuation), (ll, greedy) in zip(pairs, got):
        ctx, cont = [BOS_ID, *encode(context)], encode(continuation)
        logprobs = direct_logprobs(lm.model, ctx + cont)[len(ctx) - 1 : -1]
        assert ll == pytest.approx(sum(logprobs[i, t].item() for i, t in enumerate(cont)), abs=1e-4)
        assert greedy == all(logprobs[i].argmax().item() == t for i, t in enumerate(cont))


def test_loglikelihood_rolling_is_the_full_sequence_sum(lm):
    text = "apple fox 17 | apple fox 17"
    (got,) = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, (text,), 0)])
    ids = [BOS_ID, *encode(text)]
    logprobs = direct_logprobs(lm.model, ids)
    assert got == pytest.approx(sum(logprobs[i, t].item() for i, t in enumerate(ids[1:])), abs=1e-4)


def greedy(model, ids, n):
    ids, out = list(ids), []
    for _ in range(n):
        out.append(direct_logprobs(model, ids)[-1].argmax().item())
        ids.append(out[-1])
    return out


def test_generate_until_is_greedy_and_stops_at_the_until_string(lm):
    context = "apple fox 17 | apple"
    gen = greedy(lm.model, [BOS_ID, *encode(context)], 6)
    words = [VOCAB[t] for t in gen]
    cut = next(k for k in range(1, 6) if words[k] not in " ".join(words[:k]) and EOS_ID not in gen[:k + 1])
    reqs = [Instance("generate_until", {}, (context, {"until": [], "max_gen_toks": 6}), 0),
            Instance("generate_until", {}, (context, {"until": [words[cut]], "max_gen_toks": 6}), 1)]
    full, stopped = lm.generate_until(reqs)
    n = gen.index(EOS_ID) if EOS_ID in gen else 6
    assert full == " ".join(words[:n])
    assert stopped == " ".join(words[:cut]) + " "
    with pytest.raises(ValueError, match="greedily"):
        lm.generate_until([Instance("generate_until", {}, (context, {"do_sample": True}), 0)])


class Bar:
    """Records a progress bar: its total, its updates and whether it was disabled."""

    made: list = []

    def __init__(self, total, desc, disable):
        self.total, self.desc, self.disable, self.count = total, desc, disable, 0
        Bar.made.append(self)

    def update(self, n=1):
        self.count += n

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def test_generation_and_scoring_show_progress_bars_unless_asked_not_to(lm, monkeypatch):
    monkeypatch.setattr("suite.lmeval.model.tqdm", Bar)
    Bar.made = []
    gens = [Instance("generate_until", {}, (c, {"until": [], "max_gen_toks": n}), i)
            for i, (c, n) in enumerate([("apple fox", 3), ("apple fox", 1), ("cat = 5 ? cat :", 2), ("dog", 0)])]
    lm.generate_until(gens)
    lm.generate_until(gens[:2], disable_tqdm=True)
    lm.loglikelihood([Instance("loglikelihood", {}, ("apple fox", " 17"), i) for i in range(3)])
    lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, ("apple fox 17",), i) for i in range(2)])
    shown = [(b.desc, b.total, b.count, b.disable) for b in Bar.made]
    assert shown == [("Running generate_until requests", 4, 4, None),  # None: tqdm's "off when not a tty"
                     ("Running generate_until requests", 2, 2, True),
                     ("Running loglikelihood requests", 3, 3, None),
                     ("Running loglikelihood_rolling requests", 2, 2, None),
                     ("Running loglikelihood requests", 1, 1, True), ("Running loglikelihood requests", 1, 1, True)]


def test_off_a_terminal_scoring_writes_about_ten_plain_lines_of_requests_done(lm, monkeypatch, capsys):
    """tqdm draws nothing off a terminal, so lm-eval's tens of thousands of requests would run
    silently: the count is written as plain lines instead (25 requests, 2 a batch: a line at each
    multiple of 3 passed, and at the end), and none when lm-eval asks for no bar.

    Mutation check: in suite/lmeval/model.py ``progress``, returning the bar alone off a terminal
    (``if disable or True``) makes this fail."""
    monkeypatch.setattr(lm, "batch_size", 2)
    capsys.readouterr()
    lm.loglikelihood([Instance("loglikelihood", {}, ("apple fox", " 17"), i) for i in range(25)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Running ")]
    counts = [int(re.fullmatch(r"Running loglikelihood requests (\d+)/25 \(\d+%\) ETA (-|\d+s)", line).group(1))
              for line in lines]
    assert counts == [4, 6, 10, 12, 16, 18, 22, 24, 25]
    lm.loglikelihood([Instance("loglikelihood", {}, ("apple fox", " 17"), i) for i in range(5)], disable_tqdm=True)
    assert "Running " not in capsys.readouterr().err


def test_an_unknown_word_is_named(lm):
    with pytest.raises(ValueError, match="'banana' is not in the PosBench vocabulary"):
        lm.loglikelihood([Instance("loglikelihood", {}, ("apple banana", " fox"), 0)])


def test_learned_positions_are_truncated_from_the_left(tmp_path):
    path = execute(make_spec(*TINY, "task=niah_single", "position=learned", "train.seq_len=16", "train.steps=2",
                             "eval.multiples=[1]"), results_dir=tmp_path, progress=False)
    lm = PosBenchEvalLM(pretrained=str(path))
    assert lm.max_length == 16
    context, continuation = " ".join(["apple", "fox"] * 12), " cat 5"
    ((ll, _),) = lm.loglikelihood([Instance("loglikelihood", {}, (context, continuation), 0)])
    ids = [BOS_ID, *encode(context + continuation)]
    window = ids[-17:-1]  # the last 16 inputs, predicting the last 16 tokens
    logprobs = direct_logprobs(lm.model, window)
    assert ll == pytest.approx(logprobs[-2, ids[-2]].item() + logprobs[-1, ids[-1]].item(), abs=1e-4)
    (text,) = lm.generate_until([Instance("generate_until", {}, (context, {"until": [], "max_gen_toks": 4}), 0)])
    (first,) = greedy(lm.model, ids[:-2][-16:], 1)  # the context's last 16 tokens
    assert (text.split() or ["</s>"])[0] == VOCAB[first] and len(text.split()) <= 4


# ---------------------------------------------------------------------------------------------
# documents and scoring


@pytest.mark.parametrize("name", sorted(n for n in TASKS if not getattr(TASKS[n], "byte_level", False)))  # text: tests/test_text.py
def test_documents_are_the_generators_examples(name):
    docs = T.build_docs(name, lengths=[32, 48], n_examples=3)
    examples = {length: generate(T.task_of(name).build(), length, 1234, 3) for length in (32, 48)}
    for length, exs in examples.items():
        mine = [d for d in docs if d["length"] == length]
        assert {d["example"] for d in mine} == {f"{length}/{i}" for i in range(3)}  # flipflop: reads vary per example
        for i, ex in enumerate(exs):
            group = [d for d in mine if d["example"] == f"{length}/{i}"]
            closed = ex.tokens[ex.answer_spans[-1][1] - 1] == EOS_ID  # a closing </s> is where generation stops
            answers = [a.removesuffix(" </s>") for a in ex.answers] if closed else ex.answers
            assert [a for d in group for a in d["answers"]] == answers
            ends = [ex.answer_spans[-1][1] - closed] if len(group) == 1 else [e for _, e in ex.answer_spans]
            for d, end in zip(group, ends):
                assert f"{d['prompt']} {d['target']}" == " ".join(ex.text.split()[1:end])
                assert d["answer_len"] == len(encode(d["target"])) and d["length"] == length
    assert [d["length"] for d in docs if d["query"] == 0][:4] == [32, 48, 32, 48]  # lengths alternate


def test_interleaved_answers_become_one_document_per_query():
    assert len(T.build_docs("mqar", lengths=[32], n_examples=2)) == 2 * 6
    assert len(T.build_docs("niah_multiquery", lengths=[32], n_examples=2)) == 2 * 2
    assert len(T.build_docs("vt", lengths=[32], n_examples=2)) == 2


def test_documents_come_from_the_suites_task_config_and_eval_seed(monkeypatch, tmp_path):
    spec = make_spec("task=vt")  # the suite's default grid
    (vt,) = spec.tasks
    want = generate(vt.build(), 32, spec.eval.seed, 2)
    assert [d["target"] for d in T.build_docs("vt", lengths=[32], n_examples=2)] == [" ".join(e.answers) for e in want]
    # one reader of conf/task: point the suite at another folder and lm-eval's documents follow
    conf = tmp_path / "conf"
    (conf / "task").mkdir(parents=True)
    (conf / "task" / "vt.yaml").write_text("name: vt\nn_chains: 1\nhops: 2\n")
    monkeypatch.setattr("suite.config.build.CONF_DIR", conf)
    cfg = OmegaConf.create({"taskset": {"name": "mine", "tasks": ["vt"], "params": {}}})
    assert dict(resolve_tasks(cfg)[0][0].params)["hops"] == 2
    assert all(len(d["answers"]) == 3 for d in T.build_docs("vt", lengths=[32], n_examples=2))  # 2 hops: 3 variables


def test_metadata_sets_lengths_counts_seed_and_params():
    split = T.dataset("vt", lengths=[40], n_examples=4, data_seed=7, params={"vt": {"hops": 1}}, run="ignored")["test"]
    assert len(split) == 4 and set(split["length"]) == {40}
    assert all(len(a) == 2 for a in split["answers"])
    assert split["answers"] != T.dataset("vt", lengths=[40], n_examples=4, params={"vt": {"hops": 1}})["test"]["answers"]
    with pytest.raises(ValueError, match="unknown task.*'vtt'"):
        T.dataset("vt", params={"vtt": {}})
    with pytest.raises(ValueError, match="posbench_vt at length 8"):
        T.dataset("vt", lengths=[8])
    rank = T.build_docs("rank", lengths=[32], n_examples=3)
    assert all(d["choices"][d["gold"]] == d["target"] for d in rank)


def test_scores():
    assert T.score("17", ["17"]) == {"exact_match": 1.0, "string_match_all": 1.0, "string_match_part": 1.0}
    assert T.score("17. fox", ["17"])["exact_match"] == 1.0  # first k words, trailing punctuation dropped
    assert T.score("1", ["17"])["exact_match"] == 0.0
    assert T.score("17", ["1"])["string_match_part"] == 0.0  # word boundaries: "1" is not in "17"
    assert T.score(": 17", ["17"])["exact_match"] == 0.0  # a punctuation word is a word
    assert T.score("y x z", ["x", "y", "z"]) == {"exact_match": 0.0, "string_match_all": 1.0, "string_match_part": 1.0}
    assert T.score("x q", ["x", "y"]) == {"exact_match": 0.0, "string_match_all": 0.5, "string_match_part": 1.0}
    assert T.score("a b", ["x", "y"])["string_match_part"] == 0.0
    items = [("a", 1.0), ("a", 0.0), ("b", 1.0)]
    assert (T.all_by_example(items), T.mean_by_example(items), T.any_by_example(items)) == (0.5, 0.75, 1.0)
    doc = {"choices": ["5", "7", "9"], "gold": 1}
    assert T.process_results_rank(doc, [(-3.0, False), (-1.0, True), (-2.0, False)]) == {"acc": 1.0, "reciprocal_rank": 1.0}
    assert T.process_results_rank(doc, [(-1.0, False), (-1.0, True), (-2.0, False)]) == {"acc": 0.0, "reciprocal_rank": 0.5}


@pytest.mark.parametrize("taskset", ["core", "ruler", "all"])
def test_groups_mirror_the_task_sets(taskset):
    group = yaml.safe_load((include_dir() / f"posbench_{taskset}.yaml").read_text())
    tasks = [t.name for t in make_spec(f"taskset={taskset}", "train.seq_len=512", "eval.multiples=[1]").tasks]
    assert group["task"] == [f"posbench_{t}" for t in tasks]
    assert all((include_dir() / f"{t}.yaml").is_file() for t in group["task"])


# ---------------------------------------------------------------------------------------------
# through lm-eval


def first_word(model, tokens, end):
    return VOCAB[direct_logprobs(model, tokens[:end])[-1].argmax().item()]


def test_simple_evaluate_scores_a_run_as_posbench_scores_it_per_length(lm, run_file):
    tm = manager(lengths=[32, 64], n_examples=3)
    out = lm_eval.simple_evaluate(model="posbench", model_args=f"pretrained={run_file}",
                                  tasks=["posbench_niah_single", "posbench_mqar"], task_manager=tm, limit=4,
                                  log_samples=True, bootstrap_iters=0)
    # --limit 4: 4 documents per length (niah_single has 3 of each); lm-eval counts one length's
    assert out["n-samples"] == {"posbench_niah_single": {"original": 6, "effective": 3},
                                "posbench_mqar": {"original": 36, "effective": 4}}
    for name, metrics in (("posbench_niah_single", ["exact_match"]),
                          ("posbench_mqar", ["exact_match", "string_match_all", "string_match_part"])):
        values = out["results"][name]
        assert sorted(k for k in values if "," in k and "_stderr" not in k) == sorted(
            f"{m},len={n}" for m in metrics for n in (32, 64))  # one result per length, none pooled
        task = name.removeprefix("posbench_")
        examples = {n: generate(T.task_of(task).build(), n, 1234, 3) for n in (32, 64)}
        for length in (32, 64):
            hits: dict[str, list[float]] = {}
            for sample in out["samples"][name]:
                if sample["filter"] != f"len={length}":
                    continue
                doc = sample["doc"]
                if doc["length"] != length:
                    assert sample["metrics"] == []  # another length's document scores nothing here
                    continue
                i = int(doc["example"].split("/")[1])
                ex = examples[length][i]
                start = ex.answer_spans[doc["query"]][0]
                want = first_word(lm.model, ex.tokens, start)  # teacher forcing: the gold text up to the answer
                got = (sample["resps"][0][0].split() or [None])[0]
                assert got == want or (got is None and want in STOPS)
                hits.setdefault(doc["example"], []).append(float(want == VOCAB[ex.tokens[start]]))
            assert hits
            em = sum(all(h) for h in hits.values()) / len(hits)
            assert values[f"exact_match,len={length}"] == pytest.approx(em)


def test_limit_takes_that_many_documents_of_each_length(lm, caplog, monkeypatch):
    """mqar at three lengths, 12 documents (queries) each, alternating 32, 48, 64 with an example's
    queries: the first 5 documents overall would be 2, 2 and 1 of the lengths."""
    asked = []
    monkeypatch.setattr(lm, "generate_until", lambda reqs, **kw: asked.extend(reqs) or ["x"] * len(reqs))
    out = lm_eval.simple_evaluate(model=lm, tasks=["posbench_mqar"], task_manager=manager(lengths=[32, 48, 64], n_examples=2),
                                  limit=5, log_samples=True, bootstrap_iters=0)
    assert len(asked) == 15  # the model is asked for those 15 documents only, not all 36
    scored = [s for s in out["samples"]["posbench_mqar"] if s["metrics"]]
    for length in (32, 48, 64):
        mine = [s["doc"] for s in scored if s["filter"] == f"len={length}"]
        assert len(mine) == 5 and {d["length"] for d in mine} == {length}
        assert [d["query"] for d in mine] == [0, 1, 2, 3, 4]  # that length's first five documents
    assert out["n-samples"]["posbench_mqar"] == {"original": 36, "effective": 5}
    assert "not scored on the same number" not in caplog.text


def test_generation_stops_at_each_documents_answer_length(run_file):
    def evaluate(**kwargs):
        return lm_eval.simple_evaluate(model="posbench", model_args=f"pretrained={run_file}",
                                       tasks=["posbench_copy", "posbench_niah_multivalue"], log_samples=True,
                                       task_manager=manager(lengths=[32, 64], n_examples=2), bootstrap_iters=0, **kwargs)

    capped, free = evaluate(), evaluate(gen_kwargs="max_gen_toks=256")
    for name in ("posbench_copy", "posbench_niah_multivalue"):
        assert capped["results"][name] == free["results"][name]  # scoring reads only the answer's words
        for short, full in zip(capped["samples"][name], free["samples"][name]):
            doc = short["doc"]
            assert short["arguments"][0][1]["max_gen_toks"] == doc["answer_len"] == len(encode(doc["target"]))
            assert full["arguments"][0][1]["max_gen_toks"] == 256
            assert len(short["resps"][0][0].split()) <= doc["answer_len"]
            assert full["resps"][0][0].startswith(short["resps"][0][0])
    assert {d["answer_len"] for d in T.build_docs("copy", lengths=[32, 64], n_examples=1)} == {15, 31}


def test_groups_average_each_length_over_their_tasks(run_file):
    out = lm_eval.simple_evaluate(model="posbench", model_args=f"pretrained={run_file}", tasks=["posbench_core"],
                                  task_manager=manager(lengths=[32, 64], n_examples=1), bootstrap_iters=0)
    group = out["groups"]["posbench_core"]
    for length in (32, 64):
        key = f"exact_match,len={length}"
        tasks = [out["results"][f"posbench_{t}"][key] for t in ("copy", "mqar", "niah_single", "vt")]
        assert group[key] == pytest.approx(sum(tasks) / len(tasks))
    assert not [k for k in group if k.endswith(",none")]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_tasks_headline_metric_is_offered_to_lm_eval(name):
    task = TaskManager(include_path=str(include_dir()), include_defaults=False,
                       metadata={"lengths": [32], "n_examples": 1}).load([f"posbench_{name}"])["tasks"][f"posbench_{name}"]
    assert T.task_of(name).build().primary_metric in task.aggregation()
    # every metric's direction is the suite's declaration (lm-eval's registry for its own acc)
    from lm_eval.api.registry import is_higher_better
    from suite.data.metrics import METRICS

    assert task.higher_is_better() == {m: METRICS[m].higher_is_better if m in METRICS else is_higher_better(m)
                                       for m in task.aggregation()}
    assert None not in task.higher_is_better().values()


def test_the_templates_state_no_metric_direction():
    """Directions have one home, suite/data/metrics.py; the templates name metrics and aggregations."""
    from suite.lmeval.yamls import TEMPLATES

    assert len(list(TEMPLATES.glob("_*_template"))) == 6
    assert not [p.name for p in TEMPLATES.glob("_*_template") if "higher_is_better" in p.read_text()]


@pytest.fixture(scope="module")
def copier(tmp_path_factory):
    """A model that copies a four-word alphabet partly right (about a quarter of the tokens)."""
    path = execute(make_spec(*TINY, "task=copy", "task.alphabet=4", "train.steps=150"),
                   results_dir=tmp_path_factory.mktemp("copier"), progress=False)
    return PosBenchEvalLM(pretrained=str(path))


@pytest.mark.parametrize("eos", [False, True])
def test_token_accuracy_is_the_suites_own(copier, eos):
    """copy's headline metric through lm-eval equals suite.evaluation.evaluate's token accuracy on
    the same examples (teacher-forced argmax over the answer tokens, a closing </s> included)."""
    from contextlib import nullcontext

    from suite.evaluation.evaluate import score_examples

    lm, params = copier, {"copy": {"alphabet": 4, "eos": eos}}
    out = lm_eval.simple_evaluate(model=lm, tasks=["posbench_copy"], bootstrap_iters=0,
                                  task_manager=manager(lengths=[32, 64], n_examples=3, params=params))
    values = out["results"]["posbench_copy"]
    task = T.task_of("copy", params).build()
    for length in (32, 64):
        tally = score_examples(lm.model, task, generate(task, length, 1234, 3), 3, torch.device("cpu"), nullcontext())
        assert 0 < tally.value("token_accuracy") < 1  # a partly right model: the check can tell
        assert values[f"token_accuracy,len={length}"] == pytest.approx(tally.value("token_accuracy"))
        assert values[f"exact_match,len={length}"] == tally.value("exact_match")


def test_rank_reports_each_length(run_file):
    out = lm_eval.simple_evaluate(model="posbench", model_args=f"pretrained={run_file}", tasks=["posbench_rank"],
                                  task_manager=manager(lengths=[32, 64], n_examples=4), log_samples=True, bootstrap_iters=0)
    values = out["results"]["posbench_rank"]
    for length in (32, 64):
        scored = [s for s in out["samples"]["posbench_rank"] if s["filter"] == f"len={length}" and s["metrics"]]
        assert {s["doc"]["length"] for s in scored} == {length} and len(scored) == 4
        for metric in ("acc", "reciprocal_rank"):
            assert values[f"{metric},len={length}"] == pytest.approx(sum(s[metric] for s in scored) / 4)


def test_hf_llama_reads_the_tasks_as_plain_text(tmp_path):
    pytest.importorskip("transformers", reason="needs the hf extra: pip install -e .[hf]")
    pytest.importorskip("accelerate", reason="needs the hf extra: pip install -e .[hf]")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate([*VOCAB, "<unk>"])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>", unk_token="<unk>")
    tokenizer.save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=0)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(tmp_path)

    out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={tmp_path},dtype=float32", device="cpu",
                                  tasks=["posbench_niah_single", "posbench_rank"], task_manager=manager(n_examples=2),
                                  limit=3, batch_size=3, log_samples=True, bootstrap_iters=0)
    assert {k: v["effective"] for k, v in out["n-samples"].items()} == {"posbench_niah_single": 2, "posbench_rank": 2}
    for length in (32, 64):  # each length's score is the mean over that length's documents, recomputed here
        rr = []
        for sample in out["samples"]["posbench_rank"]:
            if sample["doc"]["length"] == length and sample.get("filter") == f"len={length}":
                logliks = [resp[0][0] for resp in sample["resps"]]
                gold = sample["doc"]["gold"]
                rr.append(1 / (1 + sum(ll >= logliks[gold] for i, ll in enumerate(logliks) if i != gold)))
        assert rr and out["results"]["posbench_rank"][f"reciprocal_rank,len={length}"] == pytest.approx(sum(rr) / len(rr))
        em = [s["exact_match"] for s in out["samples"]["posbench_niah_single"]
              if s["doc"]["length"] == length and s.get("filter") == f"len={length}"]
        assert em and out["results"]["posbench_niah_single"][f"exact_match,len={length}"] == pytest.approx(sum(em) / len(em))
    for sample in out["samples"]["posbench_niah_single"]:
        assert sample["arguments"][0][1]["max_gen_toks"] == sample["doc"]["answer_len"]
    sample = out["samples"]["posbench_rank"][0]
    doc = sample["doc"]
    ids = tokenizer(f"{doc['prompt']} {doc['choices'][0]}", add_special_tokens=False).input_ids
    with torch.no_grad():
        want = F.log_softmax(model(torch.tensor([ids])).logits[0, -2].float(), -1)[ids[-1]].item()
    assert sample["resps"][0][0][0] == pytest.approx(want, abs=1e-4)


# ---------------------------------------------------------------------------------------------
# the entry point


def test_entry_point_arguments(run_file):
    args = run_args(run_file.stem, run_file.parent.parent, ["--tasks", "posbench_copy", "--model", "posbench"])
    assert args.count("--model") == 1 and args[args.index("--model") + 1] == "posbench"
    assert json.loads(args[args.index("--model_args") + 1]) == {
        "pretrained": run_file.stem, "results_dir": str(run_file.resolve().parent.parent), "sweep": "lm"}
    assert json.loads(args[args.index("--metadata") + 1]) == {
        "lengths": [32, 64], "n_examples": 6, "data_seed": 1234, "params": {"copy": {"alphabet": None, "distinct": True, "eos": False}}}
    work = run_file.resolve().parent / "_work" / run_file.stem
    assert args[args.index("--output_path") + 1] == str(work / "lmeval" / "results.json")
    assert args[-2:] == ["--tasks", "posbench_copy"]
    with pytest.raises(ValueError, match="--model posbench; got --model 'hf'"):
        run_args(str(run_file), "results", ["--model", "hf"])
    assert include_args(["--tasks", "x"]) == ["--include_path", str(include_dir()), "--tasks", "x"]
    with pytest.raises(ValueError, match="--include_path"):
        include_args(["--include_path", "mine"])


def run_copy(run_file, folder, **run_meta):
    """A copy of ``run_file`` (and its weights and their record) under ``folder``, its ``run``
    entry updated by ``run_meta``."""
    payload = json.loads(run_file.read_text())
    payload["run"].update(run_meta)
    copy = folder / "lm" / run_file.name
    (copy.parent / "_work" / run_file.stem).mkdir(parents=True)
    copy.write_text(json.dumps(payload))
    for name in ("model.pt", "trained.json"):
        (copy.parent / "_work" / run_file.stem / name).write_bytes((run_file.parent / "_work" / run_file.stem / name).read_bytes())
    return copy


def test_threads_default_to_the_runs_and_an_explicit_model_arg_wins(run_file, tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores to tell the run's threads from one")
    numeric = json.loads(run_file.read_text())["run"]["numeric"]
    stored = run_copy(run_file, tmp_path, numeric={**numeric, "threads": 2})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        PosBenchEvalLM(pretrained=str(stored))
        assert torch.get_num_threads() == 2  # the run's, not torch's default nor the one set before
        PosBenchEvalLM(pretrained=str(stored), threads="1")
        assert torch.get_num_threads() == 1  # --model_args threads=1 wins
    finally:
        torch.set_num_threads(before)


def test_the_model_is_named_by_pretrained_and_unknown_args_are_named(run_file):
    lm = PosBenchEvalLM(pretrained=run_file.stem, results_dir=str(run_file.parent.parent), sweep="lm")
    assert lm.run_id == run_file.stem
    with pytest.raises(ValueError, match=r"unknown model arg\(s\) \['run'\]; valid: pretrained, results_dir, sweep"):
        PosBenchEvalLM(run=str(run_file))
    copy = run_file.parent.parent / "other" / run_file.name
    copy.parent.mkdir()
    copy.write_bytes(run_file.read_bytes())
    try:
        with pytest.raises(ValueError, match="matches several runs.*sweep=<sweep>"):
            resolve_run(run_file.stem, run_file.parent.parent)
        assert resolve_run(run_file.stem, run_file.parent.parent, sweep="other") == copy
    finally:
        copy.unlink()
        copy.parent.rmdir()


def test_posbench_tasks_alone_are_indexed_without_lm_evals_builtin_tasks():
    assert only_posbench_tasks(["--tasks", "posbench_core"]) and only_posbench_tasks(["--tasks=posbench_copy,posbench_vt"])
    assert not only_posbench_tasks(["--tasks", "posbench_copy,hellaswag"]) and not only_posbench_tasks(["--limit", "2"])
    import lm_eval.tasks as lm_tasks

    with ours_only():
        indexed = lm_tasks.TaskManager(include_path=str(include_dir())).all_tasks
    assert lm_tasks.TaskManager is TaskManager  # restored
    assert "posbench_copy" in indexed and "hellaswag" not in indexed
    sets = [p.stem for p in (CONF_DIR / "taskset").glob("*.yaml")]
    assert sorted(indexed) == sorted(f"posbench_{name}" for name in [*TASKS, *sets])  # ours, and nothing else


def test_help_answers_without_loading_torch_or_lm_eval():
    """``python -m suite.lmeval --help`` prints its usage before the heavy imports (seconds of
    start-up): neither torch, lm-eval nor datasets is loaded."""
    import subprocess
    import sys

    code = ("import runpy, sys\nsys.argv = ['suite.lmeval', '--help']\ntry:\n"
            "    runpy.run_module('suite.lmeval', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'lm_eval', 'datasets', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    assert "--run RUN" in out and out.strip().splitlines()[-1] == "[]"


def test_entry_point_writes_results_next_to_the_run(run_file):
    main(["--run", str(run_file), "--tasks", "posbench_niah_single", "--limit", "2", "--device", "cpu",
          "--metadata", '{"n_examples": 1}'])
    (written,) = (run_file.parent / "_work" / run_file.stem / "lmeval").glob("results_*.json")
    result = json.loads(written.read_text())
    assert result["n-samples"]["posbench_niah_single"] == {"original": 2, "effective": 1}
    assert {"exact_match,len=32", "exact_match,len=64"} <= set(result["results"]["posbench_niah_single"])
    assert result["config"]["model"] == "posbench" and result["model_name"] == run_file.stem


def test_lengths_are_written_and_printed_in_numeric_order(run_file, tmp_path, capsys):
    import lm_eval as lm_eval_module

    lengths = [32, 40, 64, 128, 256]  # as text: 128, 256, 32, 40, 64
    main(["--run", str(run_file), "--tasks", "posbench_core", "--device", "cpu", "--output_path", str(tmp_path),
          "--metadata", json.dumps({"lengths": lengths, "n_examples": 1})])
    assert "simple_evaluate" not in vars(lm_eval_module)  # lm-eval's own, restored
    want = [f"len={n}" for n in lengths]
    (written,) = tmp_path.glob("*/results_*.json")
    result = json.loads(written.read_text())
    for values in (result["results"]["posbench_copy"], result["groups"]["posbench_core"]):
        assert [k.split(",")[1] for k in values if k.startswith("exact_match,")] == want
    lines = capsys.readouterr().out.splitlines()
    for name in ("posbench_copy", "posbench_core"):  # lm-eval's table: a task's rows follow its name
        first = next(i for i, line in enumerate(lines) if re.match(rf"\|( - )?{name} ", line))
        assert [re.search(r"len=\d+", row).group() for row in lines[first : first + len(lengths)]] == want


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """A run trained at 16 tokens and evaluated at 1, 1.5 and 3 times that."""
    return execute(make_spec(*TINY, "task=niah_single", "train.seq_len=16", "train.steps=2", "eval.multiples=[1,1.5,3]"),
                   results_dir=tmp_path_factory.mktemp("short"), progress=False)


def test_run_is_scored_at_its_own_lengths_into_a_folder_named_after_it(short_run, tmp_path):
    main(["--run", short_run.stem.rsplit("-", 1)[1], "--results_dir", str(short_run.parent.parent),
          "--tasks", "posbench_niah_single", "--device", "cpu", "--metadata", '{"n_examples": 2}',
          "--output_path", str(tmp_path)])
    (written,) = tmp_path.glob("*/results_*.json")
    assert written.parent.name == short_run.stem
    result = json.loads(written.read_text())
    values = result["results"]["posbench_niah_single"]
    assert sorted(k for k in values if k.startswith("exact_match,")) == ["exact_match,len=16", "exact_match,len=24",
                                                                          "exact_match,len=48"]
    assert result["n-samples"]["posbench_niah_single"] == {"original": 6, "effective": 2}
    stored = json.loads(short_run.read_text())["rows"]
    assert sorted({r["eval_len"] for r in stored}) == [16, 24, 48]  # the lengths the suite scored the run at


def test_each_task_is_scored_by_the_template_its_examples_call_for():
    """Generated from the registry: the ranking task is multiple choice, tasks with answers between
    queries get one document per query, RULER's several-answer tasks string match, the rest plain
    generation; every registered task has a YAML."""
    from suite.lmeval import yamls
    from tasks import TASKS

    expected = {"rank": "_choice_template", "mqar": "_per_query_template", "niah_multiquery": "_per_query_template",
                "vt": "_multi_template", "cwe": "_multi_template", "fwe": "_multi_template",
                "niah_multivalue": "_multi_template", "copy": "_token_template", "copy_repeat": "_generate_template",
                "reverse": "_token_template", "niah_single": "_generate_template",
                "niah_multikey": "_generate_template", "qa": "_generate_template",
                "flipflop": "_per_query_template", "parity": "_multi_template", "permutation": "_multi_template",
                "code": "_text_template", "prose": "_text_template"}
    assert {name: yamls.template(name) for name in TASKS} == expected
    assert sorted(p.stem for p in include_dir().glob("posbench_*.yaml")) == sorted(
        [f"posbench_{t}" for t in TASKS] + ["posbench_all", "posbench_core", "posbench_ruler"])
