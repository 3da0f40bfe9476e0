"""State tracking: parity and the permutation word problem (S3, S5), held to hand-computed
examples and to an independent composition by permutation matrices.

Mutation checks: ``sum(bits[:mark]) % 2`` -> ``sum(bits[done:mark]) % 2`` in tasks/parity.py makes
test_parity_reads_the_whole_prefix fail; ``state[a] for a in element`` -> ``element[s] for s in
state`` in tasks/permutation.py compose makes test_s3_by_hand and test_s5_equals_permutation_matrices fail."""
import numpy as np
import pytest

from tasks import build_task
from tasks.base import decode
from tasks.permutation import GROUPS, compose


def _bits(text: str) -> list[int]:
    return [int(t) for t in text.split() if t in ("0", "1")]


def test_parity_reads_the_whole_prefix():
    ex = build_task("parity", every=4).generate(np.random.default_rng(3), 32)
    tokens = decode(ex.tokens).split()
    # every read's answer is the parity of all bits before its "?", answers excluded
    bits, answers = [], []
    for i, tok in enumerate(tokens):
        if tok == "?":
            answers.append(str(sum(bits) % 2))
        elif tok in ("0", "1") and (i == 0 or tokens[i - 1] != "?"):
            bits.append(int(tok))
    assert ex.answers == answers and len(answers) == 5
    assert ex.meta["n_bits"] == len(bits) == 20  # 1 + 20 + 5 reads x 2 = 31 tokens, one </s>


def test_parity_by_hand_and_one_read_by_default():
    task = build_task("parity")
    ex = task.generate(np.random.default_rng(0), 9)
    assert ex.text.split()[-2] == "?" and len(ex.answers) == 1
    assert ex.answers == [str(sum(_bits(" ".join(ex.text.split()[:-2]))) % 2)]
    assert task.answers_between_queries is False and build_task("parity", every=2).answers_between_queries


def test_s3_by_hand():
    s3 = GROUPS["s3"].elements  # 0 identity, 1 (0 2 1), 2 (1 0 2), 3 (1 2 0), 4 (2 0 1), 5 (2 1 0)
    assert s3[3] == (1, 2, 0) and s3[5] == (2, 1, 0)
    # (0 1 2) -5-> (2 1 0) -3-> (1 0 2) -3-> (0 2 1) -1-> (0 1 2)
    state = (0, 1, 2)
    for element, after in [(5, (2, 1, 0)), (3, (1, 0, 2)), (3, (0, 2, 1)), (1, (0, 1, 2))]:
        state = compose(state, s3[element])
        assert state == after
    # the 3-cycle has order 3 and S3 is not abelian
    assert compose(compose(compose((0, 1, 2), s3[3]), s3[3]), s3[3]) == (0, 1, 2)
    assert compose(compose((0, 1, 2), s3[1]), s3[2]) != compose(compose((0, 1, 2), s3[2]), s3[1])


def _matrix(perm: tuple) -> np.ndarray:
    return np.eye(len(perm), dtype=int)[list(perm)]  # row j picks place perm[j]


@pytest.mark.parametrize("group,every", [("s3", 0), ("s3", 3), ("s5", 0), ("s5", 2)])
def test_s5_equals_permutation_matrices(group, every):
    g = GROUPS[group]
    ex = build_task("permutation", group=group, every=every).generate(np.random.default_rng(7), 64)
    tokens = decode(ex.tokens).split()[1:]
    arrangement = np.arange(g.degree)
    expected, i = [], 0
    while i < len(tokens) and tokens[i] != "</s>":
        if tokens[i] == "?":
            answer = tokens[i + 1:i + 1 + g.answer_width]
            expected.append(" ".join(answer))
            i += 1 + g.answer_width
            continue
        arrangement = _matrix(g.elements[int(tokens[i])]) @ arrangement
        i += 1
    written = [" ".join(str(x) for x in ([g.elements.index(tuple(arrangement))] if g.by_index else arrangement))]
    assert ex.answers == expected and expected[-1] == written[0]
    assert len(expected) == (1 if every == 0 else -(-ex.meta["n_elements"] // every))


def test_s5_is_generated_by_its_swaps_and_answers_five_numbers():
    swaps = GROUPS["s5"].elements
    seen, frontier = {tuple(range(5))}, [tuple(range(5))]
    while frontier:
        frontier = [n for s in frontier for n in (compose(s, a) for a in swaps) if n not in seen]
        seen |= set(frontier)
    assert len(seen) == 120
    ex = build_task("permutation", group="s5").generate(np.random.default_rng(0), 20)
    assert len(ex.answers) == 1 and sorted(ex.answers[0].split()) == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize("task,override,message", [
    ("permutation", {"group": "a5"}, "permutation.group='a5': unknown group; valid: s3, s5"),
    ("permutation", {"every": -1}, "permutation.every=-1: must be an integer >= 0"),
    ("parity", {"every": 1.5}, "parity.every=1.5: must be an integer >= 0"),
])
def test_bad_settings_name_the_value_and_the_choices(task, override, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_task(task, **override)


def test_too_short_names_the_minimum():
    with pytest.raises(ValueError, match="permutation needs length >= 8"):
        build_task("permutation", group="s5").generate(np.random.default_rng(0), 7)
