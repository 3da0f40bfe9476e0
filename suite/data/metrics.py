"""Every metric a run stores, declared once as one object: its range, whether it is a share of
examples, which way is better, the line at which a run has learned a task on it, the margin
below which two means tie, how one example is scored (``compute``, from the example's
``Evidence``) and how examples combine (``aggregate``). A task names the metrics it is scored by
(``tasks.base.Task.metrics``); evaluation, the store, the report and lm-eval read these objects.

The store refuses a value outside its metric's range; the report ranks by the direction (loss
lowest first), clips an interval to the range (a share's to [0, 1], a loss's to [0, inf)), uses
the Wilson interval of a proportion only for a share, marks a run that has not reached the learned
line and ties two means closer than the tie margin. Diagnostics are measurements, not scores:
they have a range and no direction, and no board ranks them.

A stored row carries its metric's direction, range and share flag, so a board built from shipped
rows ranks by what the run stored; ``stored`` gives the metric object of such a row.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

LEARNED_AT = 0.9  # a run has learned its task when its headline score at the training length reaches this share of the best value
TIED_BELOW = 0.01  # the tie margin a metric declares unless it says otherwise: two means closer than this are tied
LN2 = math.log(2.0)
MEAN, POOLED = "mean", "pooled"  # how a metric's examples combine: the mean of their values, or a ratio of sums
PREDICTIONS, LOSSES, CANDIDATES = "predictions", "losses", "candidates"  # what a metric reads of an example


@dataclass(frozen=True)
class Evidence:
    """What one evaluated example offers its metrics. Positions index the example's tokens; the
    model's outputs at position i predict token i + 1."""

    tokens: Sequence[int]
    answer_spans: Sequence[tuple[int, int]]  # [start, end) token positions that are scored
    predicted: Sequence[int]  # (T,) the teacher-forced argmax of every token (position 0: the token itself)
    nll: Sequence[float] = ()  # (T - 1,) loss in nats of each next token
    logliks: Optional[Sequence[float]] = None  # a ranking task's log-likelihood of each candidate
    gold: Optional[int] = None  # the index of the right candidate
    train_len: int = 0

    def hits(self) -> list[bool]:
        """Whether each answer span was reproduced exactly."""
        return [list(self.predicted[s:e]) == list(self.tokens[s:e]) for s, e in self.answer_spans]

    def answer_positions(self) -> list[int]:
        """The positions whose next token is an answer token (where a next-token loss is scored)."""
        return sorted({i - 1 for s, e in self.answer_spans for i in range(max(s, 1), e)})


def _exact_match(e: Evidence) -> float:
    return float(all(e.hits()))


def _string_match_all(e: Evidence) -> float:
    hits = e.hits()
    return sum(hits) / len(hits)


def _string_match_part(e: Evidence) -> float:
    return float(any(e.hits()))


def _token_accuracy(e: Evidence) -> tuple[float, float]:
    at = e.answer_positions()
    return float(sum(int(e.predicted[i + 1]) == int(e.tokens[i + 1]) for i in at)), float(len(at))


def _loss(e: Evidence) -> tuple[float, float]:
    at = e.answer_positions()
    return float(sum(float(e.nll[i]) for i in at)), float(len(at))


def _reciprocal_rank(e: Evidence) -> float:
    """1 / rank of the gold; ties count against it (its rank is 1 plus the candidates at or above it)."""
    return 1.0 / (1 + sum(ll >= e.logliks[e.gold] for i, ll in enumerate(e.logliks) if i != e.gold))


def _bits_per_byte(e: Evidence) -> float:
    return float(sum(map(float, e.nll)) / len(e.nll) / LN2)


def _bits_per_byte_past_train(e: Evidence) -> Optional[float]:
    past = [float(x) for x in e.nll[e.train_len - 1:]]
    return sum(past) / len(past) / LN2 if past else None


@dataclass(frozen=True)
class Metric:
    name: str
    low: float
    high: float
    higher_is_better: Optional[bool]  # None: a measurement that is not ranked
    share: bool = False  # each example scores 0 or 1 and the value is the share scoring 1 (Wilson applies with one seed)
    doc: str = ""
    tie_margin: float = TIED_BELOW  # two means of this metric closer than this are tied (the MRR's and the power section's rule)
    # one example's value from its ``Evidence`` (None: the example has none); None: the metric is
    # not scored from examples (diagnostics, training to criterion)
    compute: Optional[Callable[[Evidence], object]] = field(default=None, compare=False, repr=False)
    aggregate: str = MEAN  # MEAN: the mean of the examples' values; POOLED: compute gives (total, count), summed apart
    reads: str = PREDICTIONS  # what of the ``Evidence`` it reads: PREDICTIONS, LOSSES or CANDIDATES (a ranking task)

    def combine(self, values: list) -> float:
        """The metric over examples from their ``compute`` values (None left out): their mean, or
        for a pooled metric the sum of totals over the sum of counts (at least 1)."""
        values = [v for v in values if v is not None]
        if self.aggregate == POOLED:
            return sum(t for t, _ in values) / max(sum(c for _, c in values), 1)
        return sum(values) / len(values)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the metric's range; an unbounded end is open (inf is outside)."""
        return math.isfinite(value) and self.low <= value <= self.high

    @property
    def sign(self) -> float:
        """+1 when higher is better, -1 when lower is: ``sign * value`` is larger for the better score."""
        if self.higher_is_better is None:
            raise ValueError(f"metric {self.name!r} is a measurement with no better direction; it is not ranked")
        return 1.0 if self.higher_is_better else -1.0

    @property
    def judged(self) -> bool:
        """Whether a run can be judged to have learned a task on this metric: its range is bounded
        and higher is better (a loss or bits per byte has no learned line)."""
        return self.higher_is_better is True and math.isfinite(self.high)

    @property
    def learned_line(self) -> Optional[float]:
        """The score at which a run has learned a task on this metric, ``LEARNED_AT`` of its best
        value; None where the metric is not ``judged``."""
        return LEARNED_AT * self.high if self.judged else None

    @property
    def range_label(self) -> str:
        """The range as ``contains`` reads it: an unbounded end is open, ``[0, inf)``."""
        def end(x):
            return "inf" if math.isinf(x) else f"{x:g}"
        return f"{'(' if math.isinf(self.low) else '['}{end(self.low)}, {end(self.high)}{')' if math.isinf(self.high) else ']'}"


INF = math.inf
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("exact_match", 0.0, 1.0, True, share=True, compute=_exact_match,
           doc="share of examples with every answer reproduced exactly"),
    Metric("token_accuracy", 0.0, 1.0, True, compute=_token_accuracy, aggregate=POOLED,
           doc="answer tokens predicted over answer tokens, pooled over the examples"),
    Metric("string_match_all", 0.0, 1.0, True, compute=_string_match_all,
           doc="RULER: mean over examples of the share of its answers found"),
    Metric("string_match_part", 0.0, 1.0, True, share=True, compute=_string_match_part,
           doc="RULER: share of examples with any answer found"),
    Metric("reciprocal_rank", 0.0, 1.0, True, compute=_reciprocal_rank, reads=CANDIDATES,
           doc="mean of 1 / rank of the right candidate"),
    Metric("loss", 0.0, INF, False, compute=_loss, aggregate=POOLED, reads=LOSSES, doc="cross-entropy on the answer tokens, in nats"),
    Metric("bits_per_byte", 0.0, INF, False, compute=_bits_per_byte, reads=LOSSES,
           doc="natural text: mean over a window's bytes of -log2 p(byte | the window before it)"),
    Metric("bits_per_byte_past_train", 0.0, INF, False, compute=_bits_per_byte_past_train, reads=LOSSES,
           doc="natural text: bits per byte over the positions at or past the training length only (extrapolation)"),
    Metric("diverged_at_step", 0.0, INF, None, doc="the step at which the loss stopped being finite"),
    Metric("check_score", 0.0, 1.0, None,
           doc="training to criterion: the headline score on the check set (apart from the eval set) at the training "
               "length, at the last check, where training stopped"),
    Metric("steps_to_learn", 0.0, INF, None,
           doc="training to criterion: the first check step at which the check score reached the learned line "
               "(absent when it never did)"),
    Metric("recency_cos", -1.0, 1.0, None, doc="cosine of hidden states against lag"),
    Metric("recency_gap", -2.0, 2.0, None, doc="difference of two recency cosines"),
    Metric("logit_profile", -INF, INF, None, doc="mean attention logit at a distance"),
    Metric("logit_gap", -INF, INF, None, doc="difference of two mean logits"),
    Metric("attn_mass", 0.0, INF, None, doc="attention shares by segment (and the entropy in nats)"),
    Metric("untrained_positions", 0.0, 1.0, None,
           doc="share of the learned position-indexed parameter entries read at this length (T5 buckets, table rows, "
               "CoPE columns; n: how many, pooled over the model's schemes) that training never read, so never updated"),
)}


def stored(name: str, higher_is_better, low, high, share=False) -> Metric:
    """The metric of a stored row, as the row declares it: today's declaration of ``name`` with the
    row's direction, range and share flag (a row stored under an older declaration ranks as it was
    stored); a name this checkout does not declare keeps the defaults of everything else."""
    facts = {"higher_is_better": None if higher_is_better is None or higher_is_better != higher_is_better
             else bool(higher_is_better), "low": float(low), "high": float(high), "share": bool(share == True)}  # noqa: E712
    known = METRICS.get(name)
    return Metric(name, **facts) if known is None else replace(known, **facts)


def metric(name: str) -> Metric:
    """The declaration of ``name``; an unknown metric is an error that lists the known ones."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None
