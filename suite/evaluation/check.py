"""The check of training to criterion: a check set apart from the eval set, and the headline
score on it that decides whether a run has learned its tasks and may stop training.

A run with ``train.until_learned`` scores, every ``train.check_every`` steps (and at ``steps`` and
at the cap), the headline metric of each judged task (one whose line the caller gives: a bounded
metric where higher is better) at the training length on its check set. The check set holds
``train.check_examples`` examples drawn like the eval set's (the task's ``eval_generate``) from a seed stream of their own, ``[eval.seed, length, CHECK_STREAM]`` beside the eval
set's ``[eval.seed, length]``; an example whose tokens equal an eval-set example's is dropped and
the next one drawn, so no check example is scored again by the evaluation. A check set is named
by the hash of its examples (``set_digest``), which the run's check rows carry as their ``eval_set``.

A check changes nothing training depends on: it scores under ``no_grad`` in eval mode, puts the
model back in train mode and restores torch's random state, so a run with checks has the same
weights step for step as one without.
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

import numpy as np
import torch

from suite.config.run_spec import RunSpec
from suite.evaluation.evalsets import generate
from suite.evaluation.evaluate import score_examples
from suite.evaluation.slices import ALL
from tasks.base import Example

CHECK_STREAM = 1  # the third entry of the check set's seed: the eval set's seed has two
MAX_DRAWS = 100  # per example wanted: a task whose every draw is an eval example is refused, not looped on


def check_set(task, length: int, seed: int, n: int, eval_examples: list[Example]) -> list[Example]:
    """``n`` examples of ``length`` tokens from ``[seed, length, CHECK_STREAM]``, none with the tokens of
    an example in ``eval_examples``; ValueError when ``MAX_DRAWS * n`` draws do not give ``n``."""
    taken = {tuple(int(t) for t in ex.tokens) for ex in eval_examples}
    rng = np.random.default_rng([seed, length, CHECK_STREAM])
    out: list[Example] = []
    for _ in range(MAX_DRAWS * n):
        if len(out) == n:
            break
        ex = task.eval_generate(rng, length)
        if tuple(int(t) for t in ex.tokens) not in taken:
            out.append(ex)
    if len(out) < n:
        raise ValueError(f"task {type(task).name!r} at length {length}: {MAX_DRAWS * n} draws gave only {len(out)} "
                         f"examples apart from the eval set, not train.check_examples={n}")
    return out


def set_digest(examples: list[Example]) -> str:
    """The hash of a set's examples (tokens and answer spans), 16 hex digits."""
    key = [[[int(t) for t in ex.tokens], [list(s) for s in ex.answer_spans]] for ex in examples]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


class Check:
    """Scores a model's headline metric on each judged task's check set; ``passed`` when every
    task's score reaches its line."""

    def __init__(self, spec: RunSpec, judged: list[tuple[str, object, float]], device: torch.device):
        """``judged``: (task name, task, line) of each task the check judges."""
        self.train_len, self.batch_size, self.device = spec.train.seq_len, spec.eval.batch_size, device
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=spec.train.precision == "bf16")
        self.lines = {name: line for name, _, line in judged}
        self.sets = {}
        for name, task, _ in judged:
            evals = generate(task, self.train_len, spec.eval.seed, spec.eval.n_examples)
            self.sets[name] = (task, check_set(task, self.train_len, spec.eval.seed, spec.train.check_examples, evals))
        self.digests = {name: set_digest(examples) for name, (_, examples) in self.sets.items()}

    def __call__(self, model) -> dict[str, float]:
        """{task: headline score on its check set}; the model is left in train mode and torch's
        random state as it was."""
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None
        model.eval()
        try:
            scores = {name: _headline(model, task, examples, self) for name, (task, examples) in self.sets.items()}
        finally:
            model.train()
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        return scores

    def passed(self, scores: dict[str, float]) -> bool:
        """Whether every judged task's score reaches its line."""
        return all(scores[name] >= line for name, line in self.lines.items())


def _headline(model, task, examples, check: Check) -> float:
    tally = score_examples(model, task, examples, check.batch_size, check.device, check.autocast,
                           check.train_len)
    return float(next(v for m, v, _, s in tally.rows() if m == task.primary_metric and s == ALL))


def make_check(spec: RunSpec, tasks, lines: dict[str, float], device: torch.device) -> Optional[Check]:
    """The run's check, or None when it makes none (``train.until_learned`` off, or no task with a
    line: natural text, judged by no line, trains its ``steps``). ``tasks``: (TaskSpec, task) pairs;
    ``lines``: task name -> the score a check must reach."""
    judged = [(s.name, task, lines[s.name]) for s, task in tasks if s.name in lines]
    if not spec.train.until_learned or not judged:
        return None
    return Check(spec, judged, device)
