"""Each metric declaration in suite/data/metrics.py agrees with the scorers that produce it.

Every scorer (the suite's evaluation, the task scorers, lm-eval's scorers and per-example
aggregations) runs on hand-made examples, one of them with 2 of its 3 answers right. A metric
declared a share takes only 0 or 1 per example; a metric that is not one takes a value between
(2/3 here), so the one-seed Wilson interval is applied exactly where an example is a 0/1 trial.

Mutation checks: in suite/data/metrics.py, share=True moved from string_match_part back to
string_match_all (the two swapped), or share=True added to token_accuracy, makes
test_a_metric_is_a_share_exactly_when_its_scorers_give_each_example_0_or_1 fail; share removed from
string_match_part or from exact_match makes it fail too; a range of [0, 0.5] for reciprocal_rank
makes test_every_scored_value_lies_in_its_declared_range fail."""
import contextlib
import math
from collections import defaultdict

import pytest
import torch

from suite.evaluation.evaluate import score_examples
from suite.lmeval import tasks as lm
from suite.data.metrics import METRICS
from suite.data.metrics import Evidence
from suite.data.metrics import metric as declared
from tasks.base import MULTI_ANSWER, VOCAB_SIZE, Example, Task

# tokens 10..16, three one-token answers at positions 2, 4 and 6
GOLD = Example(tokens=[10, 11, 12, 13, 14, 15, 16], answer_spans=[(2, 3), (4, 5), (6, 7)])


class Predicts(torch.nn.Module):
    """A model whose argmax at every position is the next token of ``wanted`` (one-hot logits)."""

    def __init__(self, wanted: list[int]):
        super().__init__()
        self.wanted = torch.tensor(wanted)

    def forward(self, tokens):
        nxt = torch.roll(self.wanted, -1).expand(tokens.shape[0], -1)
        return 4.0 * torch.nn.functional.one_hot(nxt, VOCAB_SIZE).float()


class MultiAnswer(Task):
    name, primary_metric, metrics = "multi", "string_match_all", MULTI_ANSWER


def _with(right: int) -> list[int]:
    """GOLD's tokens with the first ``3 - right`` answers predicted wrong."""
    tokens = list(GOLD.tokens)
    for s, _ in GOLD.answer_spans[: 3 - right]:
        tokens[s] = 0
    return tokens


def _evaluation_values() -> dict[str, list[float]]:
    """Per metric, the value the suite's evaluation gives one example with 0, 1, 2 and 3 of its 3
    answers right (each scored alone, so the value is that example's own)."""
    out = defaultdict(list)
    for right in range(4):
        tally = score_examples(Predicts(_with(right)), MultiAnswer(), [GOLD], 1, torch.device("cpu"),
                               contextlib.nullcontext())
        for metric, value, n, _ in tally.rows():
            assert n == 1
            out[metric].append(value)
    return out


def _task_values() -> dict[str, list[float]]:
    out = defaultdict(list)
    """Each metric object's own value of one example (``Metric.compute``)."""
    for right in range(4):
        evidence = Evidence(GOLD.tokens, GOLD.answer_spans, _with(right))
        for name in ("exact_match", "string_match_all", "string_match_part"):
            out[name].append(declared(name).compute(evidence))
    for logliks in ([-1.0, -2.0, -3.0], [-2.0, -1.0, -3.0], [-3.0, -2.0, -1.0]):  # ranks 1, 2, 3
        out["reciprocal_rank"].append(declared("reciprocal_rank").compute(Evidence((), (), (), logliks=logliks, gold=0)))
    # natural text: a context byte and a 3-byte target; per-byte losses in nats (bits given), the context's not scored
    for nll in ([9.0, 1.0, 2.0, 3.0], [9.0, 0.5, 0.5, 4.0]):
        evidence = Evidence([1, 2, 3, 4, 5], [(2, 5)], [1, 2, 3, 4, 5], nll=[x * math.log(2) for x in nll])
        out["bits_per_byte"].append(declared("bits_per_byte").compute(evidence))
    return out


def _lmeval_values() -> dict[str, list[float]]:
    """lm-eval's per-example values: a generation's scores, the per-query aggregations over one
    example (each aggregation's mean over one example is that example's value), pooled tokens."""
    out = defaultdict(list)
    answers = ["alpha", "beta", "gamma"]
    for said in ("alpha beta gamma", "alpha beta delta", "alpha delta delta", "delta delta delta"):
        for metric, value in lm.score(said, answers).items():
            out[metric].append(value)
        queries = [("ex", lm.score(w, [a])) for w, a in zip(said.split(), answers)]
        for metric, aggregate in (("exact_match", lm.all_by_example), ("string_match_all", lm.mean_by_example),
                                  ("string_match_part", lm.any_by_example)):
            out[metric].append(aggregate([(key, s[metric]) for key, s in queries]))
    out["token_accuracy"] += [lm.pooled([(right, 3)]) for right in range(4)]
    doc = {"choices": ["a", "b", "c"], "gold": 0}
    for logliks in ([-1.0, -2.0, -3.0], [-2.0, -1.0, -3.0], [-3.0, -2.0, -1.0]):  # the gold ranked 1, 2, 3
        for metric, value in lm.process_results_rank(doc, [(ll, False) for ll in logliks]).items():
            out[metric].append(value)
    return out


def _all_values() -> dict[str, list[float]]:
    out = defaultdict(list)
    for source in (_evaluation_values(), _task_values(), _lmeval_values()):
        for metric, values in source.items():
            out[metric] += values
    return out


VALUES = _all_values()
SCORED = sorted(m for m in VALUES if m in METRICS)


def test_the_hand_made_examples_give_the_textbook_values():
    ev = _evaluation_values()
    assert ev["string_match_all"] == pytest.approx([0, 1 / 3, 2 / 3, 1])  # share of the example's answers
    assert ev["string_match_part"] == [0, 1, 1, 1]  # any answer
    assert ev["exact_match"] == [0, 0, 0, 1]  # every answer
    assert ev["token_accuracy"] == pytest.approx([0, 1 / 3, 2 / 3, 1])  # answer tokens right of 3
    assert _task_values()["reciprocal_rank"] == pytest.approx([1, 1 / 2, 1 / 3])
    assert _task_values()["bits_per_byte"] == pytest.approx([2, 5 / 3])
    lmv = _lmeval_values()
    assert lmv["string_match_all"] == pytest.approx([1, 1, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 0, 0])  # generation, per query
    assert lmv["string_match_part"] == [1, 1, 1, 1, 1, 1, 0, 0]
    assert lmv["reciprocal_rank"] == pytest.approx([1, 1 / 2, 1 / 3]) and lmv["acc"] == [1, 0, 0]


def test_every_metric_the_scorers_give_is_declared_and_every_ranked_one_is_scored_here():
    assert set(VALUES) - set(METRICS) == {"acc"}  # lm-eval's own metric (the rank task's gold first), never stored
    ranked = {m for m, d in METRICS.items() if d.higher_is_better is not None}
    stored_only = {m for m, d in METRICS.items() if d.compute is None and m not in VALUES}
    assert stored_only & ranked == {"bits_per_byte_past_train"}  # read from rows runs stored before, scored by nothing now
    assert ranked - stored_only <= set(VALUES)


@pytest.mark.parametrize("metric", SCORED)
def test_a_metric_is_a_share_exactly_when_its_scorers_give_each_example_0_or_1(metric):
    zero_one = all(v in (0.0, 1.0) for v in VALUES[metric])
    assert METRICS[metric].share == zero_one, (metric, VALUES[metric])


@pytest.mark.parametrize("metric", SCORED)
def test_every_scored_value_lies_in_its_declared_range(metric):
    declared = METRICS[metric]
    assert all(declared.contains(v) for v in VALUES[metric]), (metric, VALUES[metric], declared.range_label)
    if declared.share:
        assert (declared.low, declared.high) == (0.0, 1.0)
