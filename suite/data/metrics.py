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
# how a metric's examples combine: the mean of their values; a ratio of sums; a ratio of sums per slice (a profile)
MEAN, POOLED, PROFILE = "mean", "pooled", "profile"
BINS_PER_OCTAVE = 4  # position bins of a profile: log-spaced, four to each doubling of the position
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
    """Bits per byte over the example's scored bytes (natural text: its target)."""
    at = e.answer_positions()
    return float(sum(float(e.nll[i]) for i in at) / len(at) / LN2)


def position_bins(length: int) -> list[tuple[int, int]]:
    """[lo, hi) bins of the positions 1 .. length - 1 of a window, ``BINS_PER_OCTAVE`` to each
    doubling (log-spaced edges, rounded to whole positions, the last one ending at ``length``)."""
    edges, k = [1], 1
    while edges[-1] < length:
        edges.append(max(edges[-1] + 1, min(length, round(2 ** (k / BINS_PER_OCTAVE)))))
        k += 1
    return list(zip(edges[:-1], edges[1:]))


def _bits_per_byte_at(e: Evidence) -> dict[str, tuple[float, float]]:
    """Per position bin of the window (every byte, context and target): (bits summed, bytes)."""
    nll = e.nll  # (T - 1,): the loss of the byte at position p + 1 is at index p
    return {f"position={lo}-{hi - 1}": (sum(float(x) for x in nll[lo - 1 : hi - 1]) / LN2, float(hi - lo))
            for lo, hi in position_bins(len(nll) + 1)}


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
        for a pooled metric (and each slice of a profile) the sum of totals over the sum of counts
        (at least 1)."""
        values = [v for v in values if v is not None]
        if self.aggregate in (POOLED, PROFILE):
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
    # shares and accuracies: 0.01, one example in a hundred (the eval sets' size), about 0.6 of the median
    # seed-to-seed sd of the shipped boards' cells of these metrics (0.016 to 0.020)
    Metric("exact_match", 0.0, 1.0, True, share=True, compute=_exact_match, tie_margin=0.01,
           doc="share of examples with every answer reproduced exactly"),
    Metric("token_accuracy", 0.0, 1.0, True, compute=_token_accuracy, aggregate=POOLED, tie_margin=0.01,
           doc="answer tokens predicted over answer tokens, pooled over the examples"),
    Metric("string_match_all", 0.0, 1.0, True, compute=_string_match_all, tie_margin=0.01,
           doc="RULER: mean over examples of the share of its answers found"),
    Metric("string_match_part", 0.0, 1.0, True, share=True, compute=_string_match_part, tie_margin=0.01,
           doc="RULER: share of examples with any answer found"),
    Metric("reciprocal_rank", 0.0, 1.0, True, compute=_reciprocal_rank, reads=CANDIDATES, tie_margin=0.01,
           doc="mean of 1 / rank of the right candidate"),
    # a loss in nats: 0.015, the bits-per-byte margin below on the natural-log scale (0.02 bits = 0.014 nats)
    Metric("loss", 0.0, INF, False, compute=_loss, aggregate=POOLED, reads=LOSSES, tie_margin=0.015,
           doc="cross-entropy on the answer tokens, in nats"),
    # bits per byte: 0.02 bits, about 1 % of the 2 to 3 bits a byte the small models score and, as 0.01 is for
    # shares, about 0.6 of the median seed-to-seed sd of the shipped boards' bits-per-byte cells (0.037 bits):
    # 0.01, an accuracy's margin, would call seed noise a win on this scale
    Metric("bits_per_byte", 0.0, INF, False, compute=_bits_per_byte, reads=LOSSES, tie_margin=0.02,
           doc="natural text: -log2 p(byte | the bytes before it), the mean over the scored bytes of the examples "
               "(the same target bytes at every length)"),
    Metric("bits_per_byte_past_train", 0.0, INF, False, tie_margin=0.02,
           doc="natural text, stored by runs before the same-bytes protocol: bits per byte over the positions at or "
               "past the training length only"),
    Metric("bits_per_byte_at", 0.0, INF, None, compute=_bits_per_byte_at, aggregate=PROFILE, reads=LOSSES,
           doc="natural text: bits per byte at each position bin of the evaluation windows (slice position=lo-hi), "
               "context and target alike: the loss-against-position curve"),
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
