"""The flip-flop language task (Liu et al. 2023, FFL(p)): reads report the latest write, FFL(p)'s
instruction shares, training on FFL(p_ignore) only, evaluation on three splits, slices, scores.

Expected values come from plain walks over each example's text here, not from tasks/flipflop.py.

Mutation check (each makes the named tests fail): in tasks/flipflop.py program, keeping
``written`` at the first write instead of ``stored, written = bit, at``:
test_a_worked_program_reads_back_the_latest_write, test_slices_name_the_split_and_the_longest_write_to_read_distance;
``b.answer([BITS[stored]])`` -> ``b.answer([BITS[bit]])``: test_every_read_reports_the_last_written_bit,
test_the_last_written_bit_scores_one_and_its_opposite_zero (and the worked program); in
instructions, ``p=[side, side, p_ignore]`` -> ``p=[side, p_ignore, side]``:
test_the_share_of_ignores_is_p, test_training_batches_hold_only_the_training_distribution,
test_evaluation_sets_hold_the_three_splits; in FlipFlop.generate, ``"in_dist"`` -> ``"sparse"``:
test_training_batches_hold_only_the_training_distribution; in eval_generate, the drawn split ->
``SPLITS[0]``, or in suite/evaluation/evalsets.py generate, ``task.generate`` in place of the
``eval_generate`` hook: test_evaluation_sets_hold_the_three_splits and the slices test; in
__post_init__, leaving ``p_sparse`` out of the range check, or ``length < MIN_LENGTH`` ->
``length < MIN_LENGTH - 1``: test_too_short_lengths_and_bad_probabilities_are_refused; in
suite/lmeval/yamls.py template, dropping the ``answers_between_queries`` check:
test_lm_eval_asks_one_read_at_a_time.
"""
import math
from collections import Counter

import numpy as np
import pytest

from suite.data.batch import make_batch, shortest_length
from suite.evaluation.evalcache import eval_set
from suite.evaluation.evalsets import generate as eval_examples
from tasks import build_task
from tasks.base import TOKEN_ID, decode, distance_bucket
from tasks.flipflop import IGNORE, READ, SPLITS, WRITE, FlipFlop, program
from suite.evaluation.evaluate import score_prediction

P = {"in_dist": 0.8, "sparse": 0.98, "dense": 0.1}  # the paper's FFL(0.8), FFL(0.98), FFL(0.1)


def walk(tokens):
    """Plain walk over the text: (instructions, [(bit position, bit the register holds, distance
    from the read back to its write)] for every read)."""
    words = decode(tokens).split()
    assert words[0] == "<s>"
    if len(words) % 2 == 0:
        assert words[-1] == "</s>"
        words = words[:-1]
    ops, reads, register, write_at = [], [], None, None
    for at in range(1, len(words), 2):
        op, bit = words[at], words[at + 1]
        assert op in ("=", ".", "?") and bit in ("0", "1")
        ops.append(op)
        if op == "=":
            register, write_at = bit, at
        elif op == "?":
            reads.append((at + 1, register, at - write_at))
    return ops, reads


def within(count: int, total: int, p: float, sds: float = 4.5) -> bool:
    """``count`` of ``total`` draws is a binomial(total, p) outcome within ``sds`` standard deviations."""
    return abs(count - total * p) <= sds * math.sqrt(total * p * (1 - p)) + 1e-9


def test_a_worked_program_reads_back_the_latest_write():
    w, i, r = WRITE, IGNORE, READ
    ops = [w, i, i, r, w, r, i, i, i, i, r]
    bits = [1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1]  # entries at reads are ignored: a read reports the latest write
    ex = program(ops, bits, 24, split="dense")
    assert ex.text == "<s> = 1 . 0 . 1 ? 1 = 0 ? 0 . 1 . 1 . 0 . 1 ? 0 </s>"
    assert ex.answer_spans == [(8, 9), (12, 13), (22, 23)] and ex.answers == ["1", "0", "0"]
    # the reads' instructions sit at 7, 11 and 21, their writes at 1, 9 and 9: distances 6, 2, 12
    assert ex.meta["max_distance"] == 12 and ex.meta["n_reads"] == 3
    assert ex.meta["slices"] == {"split": "dense", "distance": "<16"}
    assert len(program(ops, bits, 23, split="dense").tokens) == 23  # odd length: no closing </s>


@pytest.mark.parametrize("make", ["generate", "eval_generate"])
def test_every_read_reports_the_last_written_bit(make):
    task = build_task("flipflop")
    rng = np.random.default_rng(0)
    n_reads = 0
    for length in list(range(5, 70)) * 8 + [256, 257, 1000]:
        ex = getattr(task, make)(rng, length)
        assert len(ex.tokens) == length
        ops, reads = walk(ex.tokens)
        assert ops[0] == "=" and ops[-1] == "?" and len(ops) == (length - 1) // 2
        assert [s for s, _ in ex.answer_spans] == [at for at, _, _ in reads]
        assert all(e == s + 1 for s, e in ex.answer_spans)
        for (at, register, _), answer in zip(reads, ex.answers):
            assert answer == register, (ex.text, at)
        n_reads += len(reads)
    assert n_reads > 1000


@pytest.mark.parametrize("p", [0.1, 0.8, 0.98])
def test_the_share_of_ignores_is_p(p):
    task = build_task("flipflop", p_ignore=p)
    rng = np.random.default_rng(1)
    counts = Counter()
    for _ in range(200):
        ops, _ = walk(task.generate(rng, 257).tokens)
        counts.update(ops[1:-1])  # the first (a write) and the last (a read) are fixed
    total = sum(counts.values())
    assert total == 200 * 126
    assert within(counts["."], total, p)
    assert within(counts["="], total, (1 - p) / 2) and within(counts["?"], total, (1 - p) / 2)


def test_training_batches_hold_only_the_training_distribution(monkeypatch):
    def never(*_):
        raise AssertionError("training called eval_generate")

    monkeypatch.setattr(FlipFlop, "eval_generate", never)
    task = build_task("flipflop")
    counts = Counter()
    for step in range(40):
        tokens, mask = make_batch(task, np.random.default_rng([3, step]), 65, 16, min_length=5)
        for row, marked in zip(tokens.tolist(), mask.tolist()):
            ops, reads = walk(row)
            assert [at for at, _, _ in reads] == [j for j, m in enumerate(marked) if m]
            counts.update(ops[1:-1])
    total = sum(counts.values())
    assert total > 5000 and within(counts["."], total, P["in_dist"])  # the eval splits would pull it to 0.63


def test_evaluation_sets_hold_the_three_splits(tmp_path):
    task = build_task("flipflop")
    examples = eval_examples(task, 129, seed=1234, n=300)
    for _ in range(2):  # generated and cached, then read back from the cache as they were
        cached, _ = eval_set("flipflop", {}, task, 129, 1234, 300, tmp_path)
        assert [(e.tokens, e.answer_spans, e.meta) for e in cached] == [(e.tokens, e.answer_spans, e.meta) for e in examples]
    by_split = Counter(ex.meta["slices"]["split"] for ex in examples)
    assert set(by_split) == set(SPLITS) and all(within(by_split[s], 300, 1 / 3) for s in SPLITS)
    for split in SPLITS:
        counts = Counter()
        for ex in examples:
            if ex.meta["slices"]["split"] == split:
                counts.update(walk(ex.tokens)[0][1:-1])
        assert within(counts["."], sum(counts.values()), P[split]), split


def test_slices_name_the_split_and_the_longest_write_to_read_distance():
    from suite.evaluation.evaluate import _Tally, metrics_of, scored

    task = build_task("flipflop")
    tally, longest = _Tally(metrics_of(task)), {s: [] for s in SPLITS}
    for ex in eval_examples(task, 257, seed=7, n=90):
        _, reads = walk(ex.tokens)
        far = max(d for _, _, d in reads)
        split = ex.meta["slices"]["split"]
        assert ex.meta["slices"] == {"split": split, "distance": distance_bucket(far)} and ex.meta["p_ignore"] == P[split]
        longest[split].append(far)
        tally.add(ex, scored(ex, ex.tokens, [0.0] * (len(ex.tokens) - 1)))
    slices = {s for _, _, _, s in tally.rows()}
    assert {f"split={s}" for s in SPLITS} <= slices and any(s.startswith("distance=<") for s in slices)
    assert np.mean(longest["sparse"]) > np.mean(longest["in_dist"]) > np.mean(longest["dense"])


def test_the_last_written_bit_scores_one_and_its_opposite_zero():
    task = build_task("flipflop")
    rng = np.random.default_rng(2)
    flip = {"0": "1", "1": "0"}
    for length in (5, 32, 33, 256):
        ex = task.eval_generate(rng, length)
        _, reads = walk(ex.tokens)
        right, wrong = [0] * length, [0] * length  # every other position is wrong: only reads count
        for at, register, _ in reads:
            right[at], wrong[at] = TOKEN_ID[register], TOKEN_ID[flip[register]]
        assert score_prediction(task, ex, right) == {"exact_match": 1.0, "string_match_all": 1.0, "string_match_part": 1.0}
        assert score_prediction(task, ex, wrong) == {"exact_match": 0.0, "string_match_all": 0.0, "string_match_part": 0.0}


def test_too_short_lengths_and_bad_probabilities_are_refused():
    task = build_task("flipflop")
    assert shortest_length(task, 64) == 5
    with pytest.raises(ValueError, match="flipflop needs length >= 5"):
        task.generate(np.random.default_rng(0), 4)
    with pytest.raises(ValueError, match=r"flipflop.p_sparse=1.5: must be in \[0, 1\]"):
        build_task("flipflop", p_sparse=1.5)


def test_lm_eval_asks_one_read_at_a_time():
    pytest.importorskip("datasets")
    from suite.lmeval import tasks as T
    from suite.lmeval.yamls import template

    assert template("flipflop") == "_per_query_template"
    docs = T.build_docs("flipflop", lengths=[32], n_examples=6)
    examples = eval_examples(build_task("flipflop"), 32, seed=T.default_seed(), n=6)
    assert len(docs) == sum(len(ex.answer_spans) for ex in examples)
    assert all(d["prompt"].endswith("?") and d["target"] in ("0", "1") and d["answer_len"] == 1 for d in docs)
