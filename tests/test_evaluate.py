"""Scoring against models whose predictions are known, so every metric has a hand value.

Mutation checks: in suite/evaluation/evaluate.py score_examples, comparing the predictions with
tokens[:, :-1] (the token at the same position) instead of tokens[:, 1:] (the next one) makes
test_token_accuracy_compares_each_prediction_with_the_next_token fail."""
import contextlib

import numpy as np
import pytest
import torch

from suite.evaluation.evaluate import score_examples
from tasks import build_task
from tasks.base import VOCAB_SIZE


class Echo(torch.nn.Module):
    """Predicts, at every position, the token ``shift`` places ahead (1: the next token, a perfect
    model; 0: the token itself), as one-hot logits."""

    def __init__(self, shift: int):
        super().__init__()
        self.shift = shift

    def forward(self, tokens):
        target = torch.roll(tokens, -self.shift, dims=1) if self.shift else tokens
        return torch.nn.functional.one_hot(target, VOCAB_SIZE).float()


def _examples(n=12, length=24):
    task = build_task("copy")
    rng = np.random.default_rng(0)
    return task, [task.generate(rng, length) for _ in range(n)]


def _token_accuracy(tally):
    return next(v for m, v, _, s in tally.rows() if m == "token_accuracy" and s == "all")


def test_token_accuracy_compares_each_prediction_with_the_next_token():
    task, examples = _examples()
    perfect = score_examples(Echo(1), task, examples, 5, "cpu", contextlib.nullcontext())
    assert _token_accuracy(perfect) == 1.0
    assert perfect.value("exact_match") == 1.0
    # predicting each answer token's own predecessor is right where the answer repeats its previous token
    same = score_examples(Echo(0), task, examples, 5, "cpu", contextlib.nullcontext())
    hits = total = 0
    for ex in examples:
        (s, e), = ex.answer_spans
        hits += sum(ex.tokens[i] == ex.tokens[i - 1] for i in range(s, e))
        total += e - s
    assert _token_accuracy(same) == pytest.approx(hits / total)
    assert hits / total < 0.5
