"""Every optional task hook is declared once, with its default, on ``tasks.base.Task``; nothing
looks for one.

Mutation checks: a ``getattr(task, "eval_generate", task.generate)`` written back into
suite/evaluation/check.py makes test_no_code_looks_for_a_task_hook fail; removing
``eval_generate``'s default from ``Task`` makes test_every_hook_has_its_default_on_the_base fail
(and every task without its own ``eval_generate`` stop evaluating)."""
import re
from pathlib import Path

import numpy as np
import pytest

from suite.data.metrics import METRICS
from tasks import TASKS
from tasks.base import Task

ROOT = Path(__file__).resolve().parent.parent
HOOKS = ("metrics", "fixed_length", "byte_level", "answers_between_queries", "eval_generate", "eval_set",
         "corpus_record")
# names a task hook once went by, each looked for with hasattr/getattr before the hooks were declared
FORMER = ("score", "score_candidates", "score_nll", "text")


def test_no_code_looks_for_a_task_hook():
    names = "|".join(HOOKS + FORMER)
    lookup = re.compile(rf"""\b(hasattr|getattr)\([^()]*,\s*["']({names})["']""")
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for folder in ("suite", "tasks", "scripts") for path in sorted((ROOT / folder).rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), 1) if lookup.search(line)]
    assert not found, "a task hook looked for instead of read from its declaration:\n" + "\n".join(found)


def test_the_pattern_finds_a_lookup():
    """The grep above is not vacuous: it matches the forms it is meant to refuse."""
    lookup = re.compile(r"""\b(hasattr|getattr)\([^()]*,\s*["'](eval_generate|byte_level)["']""")
    assert lookup.search('make = getattr(task, "eval_generate", task.generate)')
    assert lookup.search("if hasattr(task, 'byte_level'):")
    assert not lookup.search("task.eval_generate(rng, length)")


def test_every_hook_has_its_default_on_the_base():
    assert all(hook in vars(Task) for hook in HOOKS)
    base = Task()
    rng = np.random.default_rng(0)
    with pytest.raises(NotImplementedError):
        base.eval_generate(rng, 8)  # the default draws the training distribution: ``generate``, which a task defines
    assert base.eval_set(8, 0, 2) is None and base.corpus_record() is None
    assert (Task.fixed_length, Task.byte_level, Task.answers_between_queries) == (False, False, False)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_is_a_task_naming_declared_metrics_with_its_headline_among_them(name):
    cls = TASKS[name]
    assert issubclass(cls, Task)
    assert set(cls.metrics) <= set(METRICS), sorted(set(cls.metrics) - set(METRICS))
    assert cls.primary_metric in cls.metrics
    assert all(METRICS[m].compute is not None for m in cls.metrics)
