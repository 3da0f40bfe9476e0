"""The lm-eval task class of every ``posbench_*`` task: one result per length, and generation
capped at each document's answer length.

``PosBenchTask`` is lm-eval's ``ConfigurableTask`` (the YAML's ``class:``) with these additions:

* **Metric directions from the suite's declarations.** The templates name each metric and its
  aggregation; its ``higher_is_better`` comes from ``suite.data.metrics`` (lm-eval's own
  ``acc`` from lm-eval's registry), so a direction is written once.

* **A filter per length.** After the documents are built it sets ``filter_list`` to one filter
  ``len=<n>`` per example length: lm-eval's ``take_first`` followed by ``posbench_length``, which
  keeps the responses of the documents of that length and blanks the others (the scorers in
  ``suite.lmeval.tasks`` return no metric for a blank). lm-eval keys results by metric and filter,
  so each length gets its own ``exact_match,len=<n>`` (and every other metric), the metrics keep
  their names, aggregations and ``higher_is_better``, and a group's ``aggregate_metric_list``
  averages each length over its tasks, since lm-eval groups find the filters themselves.
* **``--limit N`` takes N documents of each length.** lm-eval's limit is the first N documents
  of a task (``Task.doc_iterator``, ``instances[:limit]`` in ``Task.build_all_requests``); here it
  is the first N documents of every length, so each ``len=<n>`` result is scored on N documents
  (or all of that length's, when it has fewer) and lm-eval's ``n-samples`` ``effective`` is N. An
  example's queries are documents (``suite.lmeval.tasks``), so N counts queries, as lm-eval does.
  A fractional limit is turned into a count by lm-eval over all lengths before the task sees it.
* **Token accuracy, teacher-forced.** A task that reports ``token_accuracy`` (its YAML's
  ``metric_list``) gets, beside its generation request, one ``loglikelihood`` request per scored
  token: the prompt and the gold words before it, then that word. lm-eval's ``is_greedy`` says
  whether the model's argmax was the word, which is how ``suite.evaluation.evaluate`` scores a
  token (teacher-forced argmax), so lm-eval's ``token_accuracy`` is the suite's.
* **Generation stops at the answer.** A generation request's ``max_gen_toks`` is the document's
  ``answer_len`` (its answer's token count in PosBench's word tokenizer): scoring reads only
  that many words. ``--gen_kwargs max_gen_toks=N`` replaces it for every document, for a model
  whose tokenizer splits PosBench's words.
"""
from __future__ import annotations

from lm_eval import utils
from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from lm_eval.api.registry import is_higher_better, register_filter
from lm_eval.api.task import ConfigurableTask

from suite.data.metrics import METRICS

LENGTH_FILTER = "posbench_length"


def filter_name(length: int) -> str:
    """The filter (and result key suffix) of the documents of ``length`` tokens."""
    return f"len={length}"


def first_per_length(lengths: list[int], limit: int) -> list[int]:
    """Indices of the first ``limit`` documents of each length, in document order."""
    seen: dict[int, int] = {}
    chosen = []
    for i, length in enumerate(lengths):
        if seen.get(length, 0) < limit:
            seen[length] = seen.get(length, 0) + 1
            chosen.append(i)
    return chosen


@register_filter(LENGTH_FILTER)
class LengthFilter(Filter):
    """Keeps the responses of the documents of ``length`` tokens; the others become None."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = int(length)

    def apply(self, resps, docs):
        return [resp if doc["length"] == self.length else None for resp, doc in zip(resps, docs)]


def token_requests(doc: dict, ctx: str, delimiter: str, metadata, first: int) -> list[Instance]:
    """One ``loglikelihood`` request per scored word of ``doc``: the context and the words before
    it, then the word (request indices from ``first``)."""
    words = doc["scored"]
    return [Instance("loglikelihood", doc, (ctx + "".join(delimiter + w for w in words[:i]), delimiter + word),
                     first + i, metadata=metadata)
            for i, word in enumerate(words)]


def with_directions(metric_list: list[dict] | None) -> list[dict] | None:
    """``metric_list`` with each metric's ``higher_is_better`` as ``suite.data.metrics`` declares
    it, or lm-eval's registry for a metric of lm-eval's own (``acc``); a metric with neither is an error."""
    if metric_list is None:
        return None
    out = []
    for entry in metric_list:
        name = entry["metric"]
        higher = METRICS[name].higher_is_better if name in METRICS else is_higher_better(name)
        if higher is None:
            raise ValueError(f"lm-eval metric {name!r} has no direction: declare it in suite/data/metrics.py")
        out.append({**entry, "higher_is_better": higher})
    return out


class PosBenchTask(ConfigurableTask):
    """A ``posbench_*`` task: lm-eval's YAML task with a filter per length and per-document
    generation limits (module docstring)."""

    def __init__(self, config: dict | None = None) -> None:
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        if "metric_list" in config:
            config["metric_list"] = with_directions(config["metric_list"])
        super().__init__(config=config)

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        """lm-eval's download (the documents), then one ``len=<n>`` filter per length found."""
        super().download(dataset_kwargs, **kwargs)
        lengths = sorted(set(self.dataset[self.config.test_split]["length"]))
        self.config.filter_list = [
            {"name": filter_name(n), "filter": [{"function": "take_first"}, {"function": LENGTH_FILTER, "length": n}]}
            for n in lengths
        ]

    def doc_iterator(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        """lm-eval's (doc_id, doc) pairs of this rank; with ``limit``, of the first ``limit``
        documents of each length (the module docstring)."""
        if limit is None or samples:
            return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)
        docs = self.eval_docs
        chosen = first_per_length(docs["length"], int(limit))
        return utils.create_iterator(((i, docs[i]) for i in chosen), rank=int(rank), world_size=int(world_size))

    def build_all_requests(self, *, limit: int | None = None, rank: int = 0, world_size: int = 1, **kwargs) -> None:
        """lm-eval's requests of the documents ``doc_iterator`` yields for ``limit``. lm-eval keeps
        the requests of the first ``limit`` documents it built, so with a limit it builds (and with
        ``cache_requests`` caches) every document's, and they are cut to those documents here."""
        if limit is None:
            return super().build_all_requests(limit=None, rank=rank, world_size=world_size, **kwargs)
        super().build_all_requests(limit=None, rank=0, world_size=1, **kwargs)
        keep = {doc_id for doc_id, _ in self.doc_iterator(rank=rank, limit=limit, world_size=world_size)}
        self._instances = [inst for inst in self._instances if inst.doc_id in keep]

    def construct_requests(self, doc: dict, ctx, **kwargs):
        """lm-eval's requests; a generation request gets ``max_gen_toks`` = the document's
        ``answer_len`` unless ``generation_kwargs`` sets it."""
        requests = super().construct_requests(doc, ctx, **kwargs)
        requests = requests if isinstance(requests, list) else [requests]
        if self.OUTPUT_TYPE == "generate_until" and "max_gen_toks" not in (self.config.generation_kwargs or {}):
            for request in requests:
                request.arguments[1]["max_gen_toks"] = int(doc["answer_len"])
        if "token_accuracy" in {m["metric"] for m in self.config.metric_list or []}:
            requests += token_requests(doc, ctx, self.config.target_delimiter, kwargs.get("metadata"), len(requests))
        return requests
