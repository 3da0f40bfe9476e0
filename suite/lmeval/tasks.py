"""PosBench tasks as lm-eval documents (``custom_dataset``) and their scoring (``process_results``).

Documents come from each task's own generator with the parameters the suite gives it
(``suite.config.build.task_spec``: ``conf/task/<name>.yaml`` and overrides), through
``suite.evaluation.evalsets.generate``: at the same seed they are the first ``n_examples`` examples of
PosBench's own evaluation sets. Task metadata (``--metadata`` JSON) sets ``lengths`` (default
[32, 64]), ``n_examples`` per length (default 50), ``data_seed`` (default: the suite's eval seed,
``suite.config.schema.EvalConf.seed``) and ``params`` (per-task overrides, ``{"vt": {"hops": 1}}``).
Documents alternate between the lengths; results are reported per length, and ``--limit N``
takes the first N documents of each length (``suite.lmeval.task_class``).

A natural-text task's document (``byte_level``: code, prose) is one example of the suite's
evaluation set: its held-out context after ``<s>`` (``context``) and its target bytes (``target``),
both whole UTF-8 characters, and the target's byte count (``n_bytes``), scored by lm-eval's
``loglikelihood`` of the target given the context as bits per byte (``process_results_bytes``): the
same target bytes at every length, as the suite scores them (``tasks.text``).

A document is the example's text after ``<s>`` up to its first answer token (``prompt``), the
answers, their ``target`` (the answers joined by spaces), their token count ``answer_len`` (the
generation limit), the example's ``length``, and ``scored``: the words of every token the suite
scores (the answers with a closing ``</s>``), for token accuracy. Answers separated by prompt tokens (``mqar``,
``niah_multiquery``) are asked one at a time, each prompt holding the text before it with the
earlier gold answers (teacher forcing, as PosBench's own evaluation), and the document names its
example so the scores group back per example.

Scoring reads the generation, cut at the task's ``until`` strings, as whitespace words (a word's
leading and trailing punctuation dropped, lower case) and looks at its first k words, k being the
gold answer's word count: PosBench's models never stop by themselves, so a longer window would
credit a model that lists many words. ``exact_match``: those k words are the answer. For several
answers, RULER's ``string_match_all`` (fraction of answers found) and ``string_match_part`` (1 if
any is found) of Hsieh et al. 2024 ("RULER: What's the Real Context Size of Your Long-Context
Language Models?"), with containment at word boundaries ("1" is not found in "17").
"""
from __future__ import annotations

import string
from collections import defaultdict
from itertools import zip_longest

import datasets

from suite.evaluation.evalsets import generate
from suite.config.schema import EvalConf
from suite.config.build import task_spec
from suite.config.run_spec import TaskSpec
from suite.lmeval.arguments import DEFAULT_LENGTHS, DEFAULT_N, metadata_values
from suite.data.metrics import Evidence, metric
from tasks import TASKS
from tasks.base import BOS_ID, EOS_ID, VOCAB, Example, decode
from tasks.text import decode_bytes


def default_seed() -> int:
    """The suite's evaluation seed (``suite.config.schema.EvalConf``), so documents are its eval sets."""
    return EvalConf().seed


def task_of(name: str, params: dict | None = None) -> TaskSpec:
    """Task ``name`` as the suite builds it, with ``params[name]`` over its defaults."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(TASKS))
    if unknown:
        raise ValueError(f"metadata params name unknown task(s) {unknown}; valid tasks: {', '.join(sorted(TASKS))}")
    return task_spec(name, params.get(name), f"metadata params.{name}")


def example_docs(example: Example, length: int, index: int) -> list[dict]:
    """One document per run of adjacent answer spans (see the module docstring)."""
    tokens, spans = example.tokens, example.answer_spans
    groups = [[spans[0]]]
    for prev, span in zip(spans, spans[1:]):
        if span[0] == prev[1]:
            groups[-1].append(span)
        else:
            groups.append([span])
    start = 1 if tokens and tokens[0] == BOS_ID else 0
    docs = []
    for q, group in enumerate(groups):
        # a closing </s> is where generation stops (``until``), so it is never among the words read
        answers = [tokens[s : e - (e - s > 1 and tokens[e - 1] == EOS_ID)] for s, e in group]
        docs.append({"example": f"{length}/{index}", "length": length, "query": q,
                     "prompt": decode(tokens[start : group[0][0]]), "answers": [decode(a) for a in answers],
                     "target": " ".join(decode(a) for a in answers), "answer_len": sum(map(len, answers)),
                     "scored": [VOCAB[t] for s, e in group for t in tokens[s:e]]})
    return docs


def text_docs(example: Example, length: int, index: int) -> list[dict]:
    """A natural-text example as one document: its context after ``<s>`` and its scored target,
    each as text, and the target's byte count."""
    (start, end), = example.answer_spans
    context, target = decode_bytes(example.tokens[1:start]), decode_bytes(example.tokens[start:end])
    return [{"example": f"{length}/{index}", "length": length, "query": 0, "context": context.decode("utf-8"),
             "target": target.decode("utf-8"), "n_bytes": len(target)}]


def build_docs(name: str, lengths=DEFAULT_LENGTHS, n_examples: int = DEFAULT_N, data_seed: int | None = None,
               params: dict | None = None) -> list[dict]:
    """The documents of task ``name``: ``n_examples`` examples per length, the lengths alternating
    document by document (an example's queries too); ``data_seed`` None is the suite's eval seed.
    The metadata is typed and judged by its declaration first (``arguments.metadata_values``:
    each length within ``LENGTH_MAX``, ``n_examples`` within ``EXAMPLES_MAX``), before a document
    of any length is generated."""
    try:
        given = metadata_values({"lengths": lengths, "n_examples": n_examples, "data_seed": data_seed})
    except ValueError as err:
        raise ValueError(f"metadata {err}") from None
    lengths, n_examples, data_seed = given["lengths"], given["n_examples"], given["data_seed"]
    data_seed = default_seed() if data_seed is None else data_seed
    task = task_of(name, params).build()
    docs_of = text_docs if task.byte_level else example_docs
    sets = {}
    for length in lengths:
        try:
            sets[length] = generate(task, length, int(data_seed), n_examples)
        except ValueError as err:
            raise ValueError(f"posbench_{name} at length {length}: {err}") from None
    docs = []
    for i in range(n_examples):
        per_length = []
        for length, examples in sets.items():
            ex = examples[i]
            per_length.append(docs_of(ex, length, i))
            if "candidates" in ex.meta:
                for doc in per_length[-1]:
                    doc.update(choices=[decode(c) for c in ex.meta["candidates"]], gold=int(ex.meta["gold"]))
        docs += [doc for turn in zip_longest(*per_length) for doc in turn if doc is not None]
    return docs


def dataset(posbench_task: str, lengths=DEFAULT_LENGTHS, n_examples: int = DEFAULT_N,
            data_seed: int | None = None, params: dict | None = None, **_other_metadata) -> dict:
    """lm-eval ``custom_dataset``: called with the task metadata (which lm-eval merges with the
    model args, hence the other keys) and ``dataset_kwargs`` (``posbench_task``)."""
    docs = build_docs(posbench_task, lengths, n_examples, data_seed, params)
    return {"test": datasets.Dataset.from_list(docs, split=datasets.Split.TEST)}


# --------------------------------------------------------------------------------------------
# scoring

_PUNCT = string.punctuation


def words(text: str) -> list[str]:
    """Whitespace words, lower case, a word's leading/trailing punctuation dropped ("17." -> "17";
    a word that is only punctuation, like "=", stays)."""
    return [w.strip(_PUNCT) or w for w in text.lower().split()]


def _found(answer: list[str], window: list[str]) -> bool:
    n = len(answer)
    return any(window[i : i + n] == answer for i in range(len(window) - n + 1))


def score(prediction: str, answers: list[str]) -> dict[str, float]:
    """exact_match, string_match_all, string_match_part of one generation (module docstring)."""
    gold = [words(a) for a in answers]
    k = sum(len(g) for g in gold)
    window = words(prediction)[:k]
    hits = [_found(g, window) for g in gold]
    return {"exact_match": float(window == [w for g in gold for w in g]),
            "string_match_all": sum(hits) / len(hits), "string_match_part": float(any(hits))}


def blanked(results: list) -> bool:
    """Whether a length filter blanked these responses (the document is another length's)."""
    return all(r is None for r in results)


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    """Single-answer tasks: exact match (nothing for another length's document)."""
    if blanked(results):
        return {}
    return {"exact_match": score(results[0], doc["answers"])["exact_match"]}


def process_results_tokens(doc: dict, results: list) -> dict:
    """Exact match of the generation (``results[0]``) and token accuracy: whether each scored
    token was the model's greedy choice after the gold text before it (``results[1:]``, lm-eval's
    (log-likelihood, is_greedy) of the requests ``suite.lmeval.task_class`` adds), as a (right,
    scored) pair for ``pooled``."""
    if blanked(results):
        return {}
    greedy = [bool(is_greedy) for _, is_greedy in results[1:]]
    return {"exact_match": score(results[0], doc["answers"])["exact_match"], "token_accuracy": (sum(greedy), len(greedy))}


def pooled(items: list[tuple[int, int]]) -> float:
    """Right tokens over scored tokens, pooled over the documents: the suite's token accuracy, as
    its metric object combines the examples' (right, scored) pairs (``suite.data.metrics``)."""
    return metric("token_accuracy").combine(items)


def process_results_multi(doc: dict, results: list[str]) -> dict[str, float]:
    """Several answers in one document: exact match and RULER's string_match_all/part."""
    if blanked(results):
        return {}
    return score(results[0], doc["answers"])


def process_results_per_query(doc: dict, results: list[str]) -> dict[str, tuple[str, float]]:
    """One answer per document, several per example: (example, score) pairs for the per-example
    aggregations below."""
    if blanked(results):
        return {}
    s = score(results[0], doc["answers"])
    return {"exact_match": (doc["example"], s["exact_match"]),
            "string_match_all": (doc["example"], s["string_match_all"]),
            "string_match_part": (doc["example"], s["string_match_part"])}


def _per_example(items) -> list[list[float]]:
    groups: dict[str, list[float]] = defaultdict(list)
    for key, value in items:
        groups[key].append(value)
    return list(groups.values())


def all_by_example(items) -> float:
    """Mean over examples of 1 if every query was answered (exact match of the whole example)."""
    groups = _per_example(items)
    return sum(float(all(v == 1.0 for v in g)) for g in groups) / len(groups)


def mean_by_example(items) -> float:
    """Mean over examples of the fraction of its answers found (RULER's string_match_all)."""
    groups = _per_example(items)
    return sum(sum(g) / len(g) for g in groups) / len(groups)


def any_by_example(items) -> float:
    """Mean over examples of 1 if any of its answers was found (RULER's string_match_part)."""
    groups = _per_example(items)
    return sum(float(any(g)) for g in groups) / len(groups)


def process_results_bytes(doc: dict, results: list) -> dict:
    """Natural text: the target's (log-likelihood, bytes), for lm-eval's ``bits_per_byte`` aggregation."""
    if blanked(results):
        return {}
    loglik, _greedy = results[0]
    return {"bits_per_byte": (float(loglik), int(doc["n_bytes"]))}


def process_results_rank(doc: dict, results: list[tuple[float, bool]]) -> dict[str, float]:
    """Candidate ranking by log-likelihood: the rank task's reciprocal rank (ties count against
    the gold) and ``acc`` (the gold strictly first)."""
    if blanked(results):
        return {}
    evidence = Evidence((), (), (), logliks=[ll for ll, _ in results], gold=doc["gold"])
    rr = metric("reciprocal_rank").compute(evidence)
    return {"acc": float(rr == 1.0), "reciprocal_rank": rr}
