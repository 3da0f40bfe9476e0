"""Result folders of runs trained to criterion, fabricated row by row: each run stores its eval rows
and, for a run with checks, its ``check_score`` row and (when it passed) its ``steps_to_learn`` row,
as the training side writes them. The two metrics are declared here for the test when this
checkout's ``suite.data.metrics`` does not declare them yet (``criterion_metrics``)."""
import math

import pytest

from suite.config.codedigest import spec_digest
from suite.results import store
from suite.results.has_learned import CHECK_METRIC, STEPS_METRIC
from suite.data.metrics import METRICS, Metric
from tests.conftest import spec_for
from tests.test_report import _row

DECLARED_HERE = (
    Metric(CHECK_METRIC, 0.0, 1.0, None, doc="the check set's headline score at the last check"),
    Metric(STEPS_METRIC, 0.0, math.inf, None, doc="the first check step whose score reached the line"),
)


@pytest.fixture
def criterion_metrics(monkeypatch):
    """The two criterion metrics declared (the checkout's own declarations where it has them)."""
    for m in DECLARED_HERE:
        if m.name not in METRICS:
            monkeypatch.setitem(METRICS, m.name, m)


def write_runs(folder, runs, sweep="cr", train_len=32, steps=100, cap=4.0):
    """Write ``runs`` under ``folder/sweep``: each ``(run_id, scheme, seed, task, {eval_len: value},
    check, steps_to_learn)``; ``check`` None for a run without checks (no criterion rows),
    ``steps_to_learn`` None for a run whose checks never passed. Returns the sweep folder."""
    for run, scheme, seed, task, scores, check, learned_at in runs:
        rows = [_row(run, scheme, seed, task, length, value, steps=steps, train_len=train_len)
                for length, value in scores.items()]
        if check is not None:
            rows.append(_row(run, scheme, seed, task, train_len, check, metric=CHECK_METRIC, steps=steps,
                             n=100, train_len=train_len))
        if learned_at is not None:
            rows.append(_row(run, scheme, seed, task, train_len, learned_at, metric=STEPS_METRIC, steps=steps,
                             n=100, train_len=train_len))
        spec = spec_for(rows, model={"layers": [{"position": scheme, "span": "full"}]},
                        train={"seq_len": train_len, "steps": steps, "cap": cap})
        rows = [{**r, "sweep": sweep, "code_digest": spec_digest(spec)} for r in rows]
        store.write_run(folder, sweep, run, {"run_id": run, "sweep": sweep, "spec": spec}, rows)
    return folder / sweep
