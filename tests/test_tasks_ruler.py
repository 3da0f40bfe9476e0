"""RULER-style tasks (vt, cwe, fwe, qa) and candidate ranking: every answer is recomputed here
from the example's tokens alone, independently of the generators.

Mutation check: in tasks/vt.py VariableTracking.generate, noise_pool =
np.setdiff1d(WORD_IDS, np.ravel(names)) -> noise_pool = WORD_IDS makes
test_vt_answers_follow_the_assignments fail; so does a link assigning chain[0] instead of
chain[i - 1]."""
import dataclasses
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks import TASKS, build_task
from suite.evaluation.evaluate import score_prediction
from tasks.base import (
    ANSWER_ID, ASSIGN_ID, BOS_ID, DOT_ID, NUMBER_IDS, QUERY_ID, RELATION_IDS, TOKEN_ID, WORD_IDS,
    decode, depth_bucket, distance_bucket, encode,
)

NAMES = ["vt", "cwe", "fwe", "qa", "rank"]
LENGTHS = [32, 256, 4096]
WORDS, NUMBERS = set(WORD_IDS.tolist()), set(NUMBER_IDS.tolist())
THE, OF, IS = TOKEN_ID["the"], TOKEN_ID["of"], TOKEN_ID["is"]


def make(name, length, seed=0, **params):
    return build_task(name, **params).generate(np.random.default_rng(seed), length)


def split(ex):
    """(context after <s>, position of the query '?')."""
    q = ex.tokens.index(QUERY_ID)
    assert ex.tokens[0] == BOS_ID and QUERY_ID not in ex.tokens[q + 1 :]
    return ex.tokens[1:q], q


def answer_tokens(ex):
    return [ex.tokens[s] for s, e in ex.answer_spans]


# ------------------------------------------------------------------------------------------
# shared contract


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("name", NAMES)
def test_length_spans_and_text(name, length):
    ex = make(name, length)
    assert len(ex.tokens) == length
    assert encode(ex.text) == ex.tokens
    # one-token answer spans, back to back at the very end, right after the ':' of the prompt
    assert all(e - s == 1 for s, e in ex.answer_spans)
    starts = [s for s, _ in ex.answer_spans]
    assert starts == list(range(length - len(starts), length))
    assert ex.tokens[starts[0] - 1] == ANSWER_ID
    assert ex.answers == [decode([t]) for t in answer_tokens(ex)]
    slices = ex.meta["slices"]
    assert slices and all(isinstance(v, str) for v in slices.values())


@pytest.mark.parametrize("name", NAMES)
def test_seeded(name):
    a, b, c = make(name, 128, seed=3), make(name, 128, seed=3), make(name, 128, seed=4)
    assert a.tokens == b.tokens and a.answer_spans == b.answer_spans and a.meta == b.meta
    assert a.tokens != c.tokens


@pytest.mark.parametrize("name", NAMES)
def test_scoring_gold_and_corrupted(name):
    task = build_task(name)
    ex = make(name, 64, seed=5)
    gold = score_prediction(task, ex, ex.tokens)
    assert gold["exact_match"] == 1.0 and all(v == 1.0 for v in gold.values())
    wrong = list(ex.tokens)
    wrong[ex.answer_spans[-1][0]] = BOS_ID
    bad = score_prediction(task, ex, wrong)
    assert bad["exact_match"] == 0.0
    if len(ex.answer_spans) > 1:  # multi-answer tasks: RULER's partial credit
        n = len(ex.answer_spans)
        assert bad["string_match_all"] == pytest.approx((n - 1) / n)
        assert bad["string_match_part"] == 1.0
        none = list(ex.tokens)
        for s, _ in ex.answer_spans:
            none[s] = BOS_ID
        assert score_prediction(task, ex, none) == {"exact_match": 0.0, "string_match_all": 0.0, "string_match_part": 0.0}


@pytest.mark.parametrize("name", NAMES)
def test_yaml_lists_every_parameter_with_its_default(name):
    params = yaml.safe_load((Path(__file__).parents[1] / "conf" / "task" / f"{name}.yaml").read_text())
    assert params.pop("name") == name and name in TASKS
    cls = TASKS[name]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    assert params == defaults


@pytest.mark.parametrize("name, params, bad", [
    ("vt", {"n_chains": 0}, "vt.n_chains"), ("vt", {"hops": 0}, "vt.hops"),
    ("vt", {"n_chains": 50, "hops": 10}, "vt.hops"),
    ("cwe", {"k": 0}, "cwe.k"), ("cwe", {"common_share": 1.0}, "cwe.common_share"),
    ("fwe", {"k": 0}, "fwe.k"), ("fwe", {"alpha": 0}, "fwe.alpha"),
    ("qa", {"n_facts": 0}, "qa.n_facts"), ("qa", {"n_facts": 101}, "qa.n_facts"),
    ("rank", {"n_pairs": 0}, "rank.n_pairs"), ("rank", {"n_candidates": 1}, "rank.n_candidates"),
])
def test_bad_parameters_name_the_parameter(name, params, bad):
    with pytest.raises(ValueError, match=bad):
        build_task(name, **params)


@pytest.mark.parametrize("name, minimum", [("vt", 30), ("cwe", 10), ("fwe", 9), ("qa", 31), ("rank", 11)])
def test_too_short_lengths_raise(name, minimum):
    assert len(make(name, minimum).tokens) == minimum
    with pytest.raises(ValueError, match=f"{name} needs length >= {minimum}"):
        make(name, minimum - 1)


# ------------------------------------------------------------------------------------------
# answers recomputed independently


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("n_chains, hops, minimum", [(1, 4, 30), (2, 2, 32), (3, 1, 31)])
def test_vt_answers_follow_the_assignments(length, n_chains, hops, minimum):
    ex = build_task("vt", n_chains=n_chains, hops=hops).generate(np.random.default_rng(length), length)
    assert len(ex.tokens) == length
    context, q = split(ex)
    assert ex.tokens[q + 1] == TOKEN_ID["hold"] and ex.tokens[q + 3] == ANSWER_ID
    statements = [(context[j - 1], context[j + 1]) for j, t in enumerate(context) if t == ASSIGN_ID]
    assert all(context[j + 2] == DOT_ID for j, t in enumerate(context) if t == ASSIGN_ID)
    assert len(statements) == n_chains * (hops + 1)
    variables = [lhs for lhs, _ in statements]
    assert len(set(variables)) == len(variables) and set(variables) <= WORDS
    chain, value = [], ex.tokens[q + 2]
    for lhs, rhs in statements:  # in text order: a variable is defined before it is used
        if rhs == value or rhs in chain:
            chain.append(lhs)
    assert answer_tokens(ex) == chain and len(chain) == hops + 1
    # each link assigns the previous variable (a hop), not the chain's first one
    assert [rhs for lhs, rhs in statements if lhs in chain] == [value, *chain[:-1]]
    # distractor chains start from other numbers; noise words are never variables
    assert len({rhs for _, rhs in statements if rhs in NUMBERS}) == n_chains
    statement_pos = {j + d for j, t in enumerate(context) if t == ASSIGN_ID for d in (-1, 0, 1, 2)}
    noise = [t for j, t in enumerate(context) if j not in statement_pos]
    assert len(noise) == length - minimum and not set(noise) & set(variables) and set(noise) <= WORDS
    first = ex.tokens.index(chain[0])  # the queried chain's first statement
    assert ex.meta["slices"] == {"n_keys": str(n_chains), "distance": distance_bucket(q - first)}


@pytest.mark.parametrize("length", LENGTHS)
def test_cwe_answers_are_the_most_common_words_in_order_of_appearance(length):
    ex = make("cwe", length, seed=length)
    items, q = split(ex)
    assert ex.tokens[q + 1 : q + 3] == [TOKEN_ID["common"], ANSWER_ID] and set(items) <= WORDS
    counts = Counter(items).most_common()
    top = [w for w, _ in counts[:2]]
    assert counts[1][1] > counts[2][1]  # the two common words beat every other word
    assert answer_tokens(ex) == sorted(top, key=items.index)
    assert 2 * counts[0][1] == pytest.approx(len(items) / 2, abs=2)  # common_share 0.5
    assert ex.meta["slices"] == {"n_keys": "2"}


def test_cwe_small_share_at_a_great_length_keeps_the_common_words_ahead():
    ex = make("cwe", 20000, common_share=0.01, k=3)
    items, _ = split(ex)
    counts = Counter(items).most_common()
    assert counts[2][1] > counts[3][1]
    assert sorted(answer_tokens(ex)) == sorted(w for w, _ in counts[:3])


@pytest.mark.parametrize("length", LENGTHS)
def test_fwe_answers_are_the_top_words_by_count(length):
    ex = make("fwe", length, seed=length)
    items, q = split(ex)
    assert ex.tokens[q + 1 : q + 3] == [TOKEN_ID["frequent"], ANSWER_ID] and set(items) <= WORDS
    counts = Counter(items).most_common() + [(None, 0)]
    assert counts[0][1] > counts[1][1] > counts[2][1]
    assert answer_tokens(ex) == [counts[0][0], counts[1][0]]
    if length >= 256:  # Zipf with alpha 2: the top word about 1 / zeta(2) = 61% of the stream
        assert counts[0][1] / len(items) == pytest.approx(0.61, abs=0.03)


@pytest.mark.parametrize("alpha, k", [(0.2, 3), (1.0, 4), (4.0, 2)])
def test_fwe_rule_holds_for_other_settings_at_every_short_length(alpha, k):
    task = build_task("fwe", alpha=alpha, k=k)
    for length in range(4 + k + k * (k + 1) // 2, 80):
        ex = task.generate(np.random.default_rng(length), length)
        items, _ = split(ex)
        counts = [c for _, c in Counter(items).most_common()] + [0]
        assert all(counts[i] > counts[i + 1] for i in range(k)), (length, counts)
        assert [Counter(items)[w] for w in answer_tokens(ex)] == counts[:k]


@pytest.mark.parametrize("length", LENGTHS)
def test_qa_answer_is_the_value_of_the_asked_fact(length):
    ex = make("qa", length, seed=length)
    context, q = split(ex)
    assert ex.tokens[q + 1 : q + 4] == [TOKEN_ID["what"], IS, THE] and ex.tokens[q + 5] == OF
    relation, entity = ex.tokens[q + 4], ex.tokens[q + 6]
    facts = {}
    for j, t in enumerate(context):
        if t == THE:
            r, e, v = context[j + 1], context[j + 3], context[j + 5]
            assert (context[j + 2], context[j + 4], context[j + 6]) == (OF, IS, DOT_ID)
            assert r in RELATION_IDS and e in WORDS and v in NUMBERS and (r, e) not in facts
            facts[(r, e)] = v
    assert len(facts) == 3 and answer_tokens(ex) == [facts[(relation, entity)]]
    assert sum(t in WORDS for t in context) == length - 31 + 3  # noise words plus the three entities
    entities = {e for _, e in facts}
    assert sum(t in entities for t in context) == 3  # the entities occur only in their facts
    fact_pos = ex.tokens.index(entity) - 3  # 'the' of the asked fact
    assert ex.meta["slices"] == {"depth": depth_bucket(fact_pos - 1, q - 1),
                                 "distance": distance_bucket(q - fact_pos)}


@pytest.mark.parametrize("length", LENGTHS)
def test_rank_gold_candidate_is_the_needle_value(length):
    ex = make("rank", length, seed=length)
    context, q = split(ex)
    needles = {context[j - 1]: context[j + 1] for j, t in enumerate(context) if t == ASSIGN_ID}
    assert len(needles) == 2 and set(needles.values()) <= NUMBERS
    assert answer_tokens(ex) == [needles[ex.tokens[q + 1]]]
    cands, gold = ex.meta["candidates"], ex.meta["gold"]
    assert len(cands) == 4 and all(len(c) == 1 for c in cands)
    assert cands[gold] == answer_tokens(ex)
    flat = [c[0] for c in cands]
    assert len(set(flat)) == 4 and set(flat) <= NUMBERS
    other = [v for v in needles.values() if v != flat[gold]]
    assert [c for i, c in enumerate(flat) if i != gold][0] == other[0]  # other needles' values first
    needle_pos = ex.tokens.index(ex.tokens[q + 1])
    assert ex.meta["slices"] == {"depth": depth_bucket(needle_pos - 1, q - 1),
                                 "distance": distance_bucket(q - needle_pos)}
    assert sum(t in needles for t in context) == 2  # keys occur only in their needles


def test_rank_reciprocal_rank_counts_ties_against_the_gold():
    """Mutation check: ``>=`` -> ``>`` in the reciprocal_rank metric (suite/data/metrics.py) makes this fail."""
    from suite.data.metrics import Evidence, metric

    ex = make("rank", 32, seed=1)
    g = ex.meta["gold"]
    other = (g + 1) % 4

    def rr(gold, other_value, ll=None):
        ll = list(ll or [-9.0, -8.0, -7.5, -9.5])
        ll[g], ll[other] = gold, other_value
        return metric("reciprocal_rank").compute(Evidence(ex.tokens, ex.answer_spans, ex.tokens, logliks=ll, gold=g))

    assert rr(-1.0, -2.0) == 1.0
    assert rr(-2.0, -1.0) == 0.5
    assert rr(-1.0, -1.0) == 0.5  # a tie counts against
    assert rr(0.0, 0.0, [0.0] * 4) == 0.25
