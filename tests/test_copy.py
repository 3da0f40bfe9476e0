"""The copy task and the shared vocabulary.

Mutation check: in tasks/copy.py Copy.generate, answer_spans (n + 2, ...) -> (n + 1, ...) makes
test_copy_has_the_requested_length_and_its_answer_is_the_sequence fail."""
import numpy as np
import pytest

from tasks import TASKS, build_task
from tasks.base import BOS_ID, SEP_ID, decode, encode
from suite.evaluation.evaluate import score_prediction


@pytest.mark.parametrize("length", [32, 33, 256, 4096])
def test_copy_has_the_requested_length_and_its_answer_is_the_sequence(length):
    ex = build_task("copy").generate(np.random.default_rng(0), length)
    assert len(ex.tokens) == length
    (start, end), = ex.answer_spans
    n = (length - 2) // 2
    assert ex.tokens[0] == BOS_ID and ex.tokens[n + 1] == SEP_ID
    assert ex.tokens[start:end] == ex.tokens[1 : n + 1] and end - start == n
    assert ex.answers == [decode(ex.tokens[1 : n + 1])]


def test_copy_is_deterministic_per_seed_and_distinct_within_the_alphabet():
    task = build_task("copy")
    a = task.generate(np.random.default_rng(7), 64)
    assert a.tokens == task.generate(np.random.default_rng(7), 64).tokens
    assert a.tokens != task.generate(np.random.default_rng(8), 64).tokens
    seq = a.tokens[1:32]
    assert len(set(seq)) == len(seq)  # drawn without replacement


def test_copy_scoring():
    task = build_task("copy")
    ex = task.generate(np.random.default_rng(1), 20)
    assert score_prediction(task, ex, ex.tokens) == {"exact_match": 1.0}
    wrong = list(ex.tokens)
    wrong[ex.answer_spans[0][1] - 1] = BOS_ID
    assert score_prediction(task, ex, wrong) == {"exact_match": 0.0}


def test_text_round_trips_through_the_whitespace_tokenizer():
    ex = build_task("copy").generate(np.random.default_rng(2), 40)
    assert encode(ex.text) == ex.tokens and decode(encode(ex.text)) == ex.text
    with pytest.raises(ValueError, match="'xylophone' is not in the PosBench vocabulary"):
        encode("apple xylophone")


def test_unknown_task_lists_the_valid_ones():
    assert "copy" in TASKS
    with pytest.raises(ValueError, match=r"unknown task 'sorting'; valid tasks: (\w+, )*copy, (\w+, )*vt$"):
        build_task("sorting")
    with pytest.raises(ValueError, match="alphabet"):
        build_task("copy", alphabet=1)
