"""The sweep wall-time breakdown adds up, and a multirun logs what it needs.

Mutation check: in suite/bench/sweep_time.py latest_multirun, dropping the start <= bound of the timestamp
window makes test_breakdown_adds_up_to_the_worker_time fail."""
import json

import pytest

from suite.results import store
from suite.bench.sweep_time import breakdown
from suite.config.validate import sweep_log_path


def _run(tmp_path, name, end, timing):
    store.write_run(tmp_path, "sw", name, {"run_id": name, "sweep": "sw", "timestamp": end, "timing": timing}, [])


def test_breakdown_adds_up_to_the_worker_time(tmp_path):
    t = {"batches_s": 5.0, "eval_sets_s": 1.0, "train_s": 60.0, "eval_s": 10.0, "log_s": 2.0, "setup_s": 1.0,
         "store_s": 1.0}
    _run(tmp_path, "a", "2026-01-01T00:01:00+00:00", t)
    _run(tmp_path, "b", "2026-01-01T00:02:00+00:00", t)
    _run(tmp_path, "old", "2025-12-31T00:00:00+00:00", {**t, "train_s": 999.0})  # an earlier multirun
    log = sweep_log_path(tmp_path, "sw")
    log.write_text(json.dumps({"sweep": "sw", "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:02:05+00:00",
                               "wall_s": 100.0, "jobs": 2, "launcher": "JoblibLauncher", "parallel": 2}) + "\n")
    table, record = breakdown(tmp_path, "sw")
    s = table.set_index("phase").seconds
    assert record["runs"] == 2 and record["worker_s"] == 200.0
    assert s["training"] == 120.0 and s["evaluation"] == 20.0 and s["task generation"] == 12.0
    assert s["logging (W&B)"] == 4.0 and s["model set-up and storing"] == 4.0
    assert s.iloc[-1] == pytest.approx(200.0 - 160.0)  # outside the runs
    assert table.share.sum() == pytest.approx(1.0)


def test_no_log_means_no_breakdown(tmp_path):
    assert breakdown(tmp_path, "nothing") is None
