"""Reverse, MQAR and the four RULER needle-in-a-haystack tasks: format, answers, scoring.

Mutation check: in tasks/mqar.py Mqar.generate, keys drawn with replace=False -> replace=True makes
test_exact_length_and_answers_recomputed_from_the_context fail for mqar."""
from collections import defaultdict

import numpy as np
import pytest

from tasks import build_task
from suite.evaluation.evaluate import score_prediction
from tasks.base import (
    ANSWER_ID, ASSIGN_ID, BOS_ID, DOT_ID, NUMBER_IDS, QUERY_ID, SEP_ID, WORD_IDS, decode,
)

RETRIEVAL = ["mqar", "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"]
ALL = ["reverse", *RETRIEVAL]
LENGTHS = [32, 256, 4096]
WORDS, NUMBERS = set(WORD_IDS.tolist()), set(NUMBER_IDS.tolist())


def facts_in(name, context):
    """Key -> values stated in the context, read off the tokens independently of the generator."""
    facts = defaultdict(list)
    assert context[0] == BOS_ID
    if name == "mqar":  # <s> then pairs "k v" and single "." tokens
        i = 1
        while i < len(context):
            if context[i] == DOT_ID:
                i += 1
                continue
            assert context[i] in WORDS and context[i + 1] in NUMBERS
            facts[context[i]].append(context[i + 1])
            i += 2
    else:  # noise words with needles "k = v"
        for i in range(1, len(context) - 2):
            if context[i + 1] == ASSIGN_ID:
                assert context[i] in WORDS and context[i + 2] in NUMBERS
                facts[context[i]].append(context[i + 2])
    return facts


def queries_in(tail):
    """The query part '? k : v1 .. vn ? k : ..' as (key, value positions in tail)."""
    blocks, i = [], 0
    while i < len(tail):
        assert tail[i] == QUERY_ID and tail[i + 2] == ANSWER_ID
        j = i + 3
        while j < len(tail) and tail[j] != QUERY_ID:
            j += 1
        blocks.append((tail[i + 1], list(range(i + 3, j))))
        i = j
    return blocks


def gold_answers(name, ex):
    """Expected answer spans, recomputed from the tokens."""
    if name == "reverse":
        n = (len(ex.tokens) - 2) // 2
        assert ex.tokens[0] == BOS_ID and ex.tokens[n + 1] == SEP_ID
        return [(n + 2, 2 * n + 2)], [decode(ex.tokens[n:0:-1])]
    if name == "mqar":  # '| k v k v ..': each value after a queried key is an answer
        ctx = ex.tokens.index(SEP_ID)
        tail = ex.tokens[ctx:]
        queries = [(tail[i], [i + 1]) for i in range(1, len(tail), 2)]
    else:
        ctx = ex.tokens.index(QUERY_ID)
        queries = queries_in(ex.tokens[ctx:])
    context, facts = ex.tokens[:ctx], facts_in(name, ex.tokens[:ctx])
    spans, answers = [], []
    for key, positions in queries:
        values = facts[key]
        assert context.count(key) == len(values)  # the key occurs only in its needles / pair
        if name == "niah_multivalue":
            assert len(values) == len(positions) == len(set(values))
        else:
            assert len(values) == len(positions) == 1  # the queried key occurs exactly once
        spans += [(ctx + p, ctx + p + 1) for p in positions]
        answers += [decode([v]) for v in values]
    return spans, answers


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("name", ALL)
def test_exact_length_and_answers_recomputed_from_the_context(name, length):
    task = build_task(name)
    for seed in range(3):
        ex = task.generate(np.random.default_rng(seed), length)
        assert len(ex.tokens) == length
        spans, answers = gold_answers(name, ex)
        assert ex.answer_spans == spans and ex.answers == answers
        if name != "reverse":
            assert ex.answer_spans[-1][1] == length  # answers are the last tokens
            assert set(ex.meta["slices"]) >= {"depth" if name != "mqar" else "n_keys", "distance"}
        assert all(isinstance(b, str) for b in ex.meta["slices"].values())


@pytest.mark.parametrize("name", ALL)
def test_a_wrong_last_answer_scores_zero_exact_and_half_the_items(name):
    # determinism, text round trip and gold scoring hold for every task in test_tasks.py
    task = build_task(name)
    ex = task.generate(np.random.default_rng(5), 64)
    wrong = list(ex.tokens)
    wrong[ex.answer_spans[-1][1] - 1] = BOS_ID
    scores = score_prediction(task, ex, wrong)
    assert scores["exact_match"] == 0.0
    if len(ex.answer_spans) == 2:  # the multi-answer tasks (two answers by default)
        assert scores["string_match_all"] == 0.5 and scores["string_match_part"] == 1.0


def test_formats_at_the_minimum_lengths():
    rng = np.random.default_rng(0)
    ex = build_task("niah_single").generate(rng, 8)
    assert ex.tokens[2] == ASSIGN_ID and ex.tokens[4:7] == [QUERY_ID, ex.tokens[1], ANSWER_ID]
    assert ex.tokens[7] == ex.tokens[3]
    ex = build_task("mqar", n_queries=2).generate(rng, 10)  # two pairs, both queried
    assert ex.meta["n_pairs"] == 2 and ex.tokens[5] == SEP_ID and sorted(ex.tokens[6::2]) == sorted(ex.tokens[1:5:2])
    ex = build_task("niah_multivalue", n_values=3).generate(rng, 1 + 9 + 6)
    assert ex.tokens[1] == ex.tokens[4] == ex.tokens[7] == ex.tokens[11]
    assert ex.answers == [decode([t]) for t in ex.tokens[3:10:3]]
    assert build_task("reverse").generate(rng, 5).tokens[-1] != SEP_ID


def test_mqar_fills_long_lengths_with_dots_between_pairs():
    ex = build_task("mqar").generate(np.random.default_rng(0), 4096)
    assert ex.meta["n_pairs"] == len(WORD_IDS) and ex.meta["slices"]["n_keys"] == "<=256"
    assert ex.tokens.count(DOT_ID) == 4096 - 2 - 2 * len(WORD_IDS) - 12 == ex.meta["n_dots"]
    small = build_task("mqar", max_pairs=4, n_queries=3).generate(np.random.default_rng(0), 32)
    assert small.meta["n_pairs"] == 4 and small.tokens.count(DOT_ID) == 32 - 2 - 8 - 6
    assert len(set(small.tokens[small.tokens.index(SEP_ID) + 1 :: 2])) == 3
    ex = build_task("mqar").generate(np.random.default_rng(0), 32)  # uncapped: 9 pairs, no dot
    assert ex.meta["n_pairs"] == 9 and ex.meta["n_dots"] == 0 and ex.meta["slices"]["n_keys"] == "<=16"


def test_niah_depth_pinned_and_random():
    single = lambda depth: build_task("niah_single", depth=depth)  # noqa: E731
    ex = single(0.0).generate(np.random.default_rng(0), 256)
    assert ex.tokens[2] == ASSIGN_ID and ex.meta["slices"]["depth"] == "0.0"
    ex = single(1.0).generate(np.random.default_rng(0), 256)
    assert ex.tokens[-6] == ASSIGN_ID and ex.meta["slices"]["depth"] == "0.8"
    ex = single(0.5).generate(np.random.default_rng(0), 1024)
    assert abs(ex.tokens.index(ASSIGN_ID) - 512) < 8
    depths = {single(None).generate(np.random.default_rng(s), 256).meta["slices"]["depth"] for s in range(100)}
    assert depths == {"0.0", "0.2", "0.4", "0.6", "0.8"}
    # the real needle of niah_multikey is not always in the same place among the needles
    rank = set()
    for s in range(20):
        ex = build_task("niah_multikey").generate(np.random.default_rng(s), 64)
        keys = [ex.tokens[i - 1] for i, t in enumerate(ex.tokens) if t == ASSIGN_ID]
        rank.add(keys.index(ex.tokens[-3]))
        assert ex.meta["slices"]["n_keys"] == "3"
    assert rank == {0, 1, 2}


def test_longest_supported_length():
    for name in ALL:
        ex = build_task(name).generate(np.random.default_rng(0), 32768)
        assert len(ex.tokens) == 32768 and gold_answers(name, ex)[1] == ex.answers


@pytest.mark.parametrize("name, params, match", [
    ("mqar", {"n_queries": 0}, "n_queries"),
    ("mqar", {"max_pairs": 1}, "max_pairs"),
    ("mqar", {"max_pairs": 179}, "max_pairs"),
    ("niah_multiquery", {"n_queries": 0}, "n_queries"),
    ("niah_multikey", {"n_distractors": 0}, "n_distractors"),
    ("niah_multivalue", {"n_values": 101}, "n_values"),
    ("niah_single", {"depth": 1.5}, "depth"),
    ("reverse", {"alphabet": 1}, "reverse.alphabet"),
    ("niah_single", {"needles": 2}, "needles"),
])
def test_bad_parameters_name_the_parameter(name, params, match):
    with pytest.raises(ValueError, match=match):
        build_task(name, **params)


@pytest.mark.parametrize("name, length", [
    ("reverse", 3), ("mqar", 25), ("niah_single", 7), ("niah_multikey", 13),
    ("niah_multivalue", 11), ("niah_multiquery", 14),
])
def test_too_short_lengths_raise(name, length):
    with pytest.raises(ValueError, match=f"{name} needs length >= {length + 1}"):
        build_task(name).generate(np.random.default_rng(0), length)
    assert len(build_task(name).generate(np.random.default_rng(0), length + 1).tokens) == length + 1
