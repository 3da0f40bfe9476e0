"""lm-eval results with their lengths in numeric order: ``len=32``, ``len=64``, ``len=128``.

lm-eval orders a group's filters as text (``lm_eval.api.group.Group._discover_filters_for_metric``
sorts them) and its printed table sorts each task's and group's ``metric,filter`` keys as text
(``lm_eval.utils.make_table``), which puts ``len=128`` and ``len=256`` before ``len=32``.
``in_length_order`` reorders the metric keys of ``results`` and ``groups`` by metric and then
by the numbers in the filter, and makes them ``LengthOrdered`` strings, which sort that way, so
lm-eval's table keeps the order too; ``length_order`` applies it to what lm-eval's CLI gets from
``simple_evaluate``, before it writes the results file and prints the table.
"""
from __future__ import annotations

import contextlib
import re

_NUMBER = re.compile(r"(\d+)")


def natural(key: str) -> tuple:
    """``exact_match,len=128`` as (metric, ("len=", 128, "")): numbers compare as numbers."""
    metric, _, filter_name = key.partition(",")
    return metric, tuple(int(part) if part.isdigit() else part for part in _NUMBER.split(filter_name))


class LengthOrdered(str):
    """A ``metric,filter`` key that sorts by ``natural`` (equal and hashed as the plain string)."""

    def __lt__(self, other):
        return natural(self) < natural(str(other))

    def __gt__(self, other):
        return natural(self) > natural(str(other))


def in_length_order(results: dict) -> dict:
    """``results`` (lm-eval's ``simple_evaluate`` output) with every task's and group's
    ``metric,filter`` keys in ``natural`` order, after its other keys (alias, name, ...)."""
    for column in ("results", "groups"):
        for name, values in list(results.get(column, {}).items()):
            plain = {k: v for k, v in values.items() if "," not in k}
            metrics = sorted((LengthOrdered(k) for k in values if "," in k), key=natural)
            results[column][name] = {**plain, **{k: values[k] for k in metrics}}
    return results


@contextlib.contextmanager
def length_order():
    """While the block runs, ``lm_eval.simple_evaluate`` returns its results ``in_length_order``
    (lm-eval's CLI imports it from ``lm_eval`` when it runs)."""
    import lm_eval

    builtin, attribute = lm_eval.simple_evaluate, "simple_evaluate" in vars(lm_eval)  # else lm-eval's lazy __getattr__

    def simple_evaluate(*args, **kwargs):
        results = builtin(*args, **kwargs)
        return in_length_order(results) if results is not None else results

    lm_eval.simple_evaluate = simple_evaluate
    try:
        yield
    finally:
        if attribute:
            lm_eval.simple_evaluate = builtin
        else:
            del lm_eval.simple_evaluate
