"""The training protocol of Kazemnejad et al. 2023 (uniform lengths) and the copy / reverse /
copy_repeat variants of the reproduction.

Mutation check: in suite/data/batch.py sample_length, rng.integers(lo, hi + 1) -> rng.integers(lo, hi)
makes test_every_training_length_from_the_minimum_up_is_equally_frequent fail."""
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from suite.data.batch import length_range, make_batch, sample_length, shortest_length
from tasks import build_task
from tasks.base import EOS_ID, PAD_ID
from suite.evaluation.evaluate import score_prediction
from tests.conftest import make_spec


def test_every_training_length_from_the_minimum_up_is_equally_frequent():
    rng = np.random.default_rng(0)
    draws = Counter(sample_length(rng, 4, 32) for _ in range(29_000))
    assert sorted(draws) == list(range(4, 33))  # nothing outside [4, 32], every length drawn
    counts = [draws[n] for n in range(4, 33)]
    assert stats.chisquare(counts).pvalue > 1e-3  # uniform: 29 lengths, about 1000 draws each
    assert sample_length(rng, 32, 32) == 32


def test_the_range_starts_at_the_shortest_length_every_task_can_generate():
    copy, vt = build_task("copy"), build_task("vt")
    assert shortest_length(copy, 32) == 4 and shortest_length(vt, 32) == vt.min_length() == 30
    assert length_range((copy,), 32, 4) == (4, 32)
    assert length_range((copy,), 32, 10) == (10, 32)
    assert length_range((copy, vt), 32, 4) == (30, 32)
    assert length_range((copy,), 32, None) == (32, 32)


def test_a_batch_has_one_drawn_length_and_batches_cover_the_range_uniformly():
    copy = build_task("copy")
    seen = Counter()
    for step in range(2_900):
        tokens, mask = make_batch(copy, np.random.default_rng([0, step]), 32, 2, 4)
        assert not (tokens == PAD_ID).any()  # one length per batch: nothing padded
        seen[tokens.shape[1]] += 1
    assert sorted(seen) == list(range(4, 33))
    assert stats.chisquare([seen[n] for n in range(4, 33)]).pvalue > 1e-3
    fixed, _ = make_batch(copy, np.random.default_rng(0), 32, 8)
    assert fixed.shape == (8, 32)


def test_runs_that_differ_only_in_the_seed_share_a_config_hash():
    a, b = make_spec("position=rope", "seed=0"), make_spec("position=rope", "seed=1")
    assert a.run_id != b.run_id and a.config_hash == b.config_hash
    assert make_spec("position=rope", "train.steps=10").config_hash != a.config_hash


@pytest.mark.parametrize("name,params", [("copy", {"eos": True}), ("reverse", {"eos": True}), ("copy_repeat", {})])
@pytest.mark.parametrize("length", [5, 32, 33, 256])
def test_with_eos_the_answer_closes_with_end_of_sequence(name, params, length):
    task = build_task(name, **params)
    ex = task.generate(np.random.default_rng(1), length)
    (s, e), = ex.answer_spans
    n = ex.meta["n_items"]
    items, answer = ex.tokens[1:1 + n], ex.tokens[s:e]
    assert len(ex.tokens) == length and n == (length - 3) // 2 and answer[-1] == EOS_ID and len(answer) == n + 1
    assert answer[:-1] == (items[::-1] if name == "reverse" else items)
    if name == "copy_repeat":
        assert len(set(items)) == 1
    early = list(ex.tokens)
    early[e - 1] = items[0]  # not stopping where the input did is wrong
    assert score_prediction(task, ex, early)["exact_match"] == 0.0


def test_without_eos_copy_scores_only_the_items():
    ex = build_task("copy").generate(np.random.default_rng(1), 33)
    (s, e), = ex.answer_spans
    assert e - s == ex.meta["n_items"] == 15 and ex.tokens[-1] == EOS_ID
