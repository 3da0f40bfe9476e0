"""A stored run describes itself: each row names its task's headline metric and carries its
metric's direction, range and share flag, and the report ranks from those, not from the task
classes or today's metric declarations. Rows stored before rows carried them read as today.

Mutation checks: write_run in suite/results/store.py without the metric's declaration makes
test_write_run_stores_each_rows_metric_declaration fail; described() returning the rows as they are
makes test_rows_stored_before_read_with_todays_declarations fail; primary() in
suite/report/boards.py taking the headline from store.task_headlines (the task classes) instead of
the rows, or _arrays taking the sign from suite.data.metrics, makes
test_the_report_ranks_by_the_stored_headline_and_direction fail; filling an unknown task's
headline with "exact_match" makes test_a_task_this_checkout_lacks_is_named_never_scored_by_exact_match
fail; ``from tasks import TASKS`` back in suite/report/boards.py makes
test_a_shipped_board_rebuilds_with_no_task_code_importable fail."""
import gzip
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from suite.report import boards, ranking
from suite.report.__main__ import main as report_main
from suite.results import store
from suite.data.metrics import METRICS
from tasks import TASKS
from tests.test_report import _row as _fixture_row


ROOT = Path(__file__).resolve().parent.parent
DECLARATIONS = {name: {"higher_is_better": m.higher_is_better, "low": m.low, "high": m.high, "share": m.share}
                for name, m in METRICS.items()}


def _row(*args, **kwargs) -> dict:
    """A row of sweep 'sw', the sweep its run's record states."""
    return {**_fixture_row(*args, **kwargs), "sweep": "sw"}


def _spec(*tasks):
    return {"train": {"seq_len": 32}, "eval": {"multiples": [1.0, 2.0]}, "tasks": [{"name": t, "params": []} for t in tasks]}


def _write(tmp_path, run, rows, tasks=("copy",)):
    return store.write_run(tmp_path, "sw", run, {"run_id": run, "sweep": "sw", "spec": _spec(*tasks)}, rows)


def test_write_run_stores_each_rows_metric_declaration(tmp_path):
    rows = [_row("r", "rope", 0, "copy", 32, v, metric=m) for m, v in
            (("token_accuracy", 0.5), ("loss", 2.5), ("exact_match", 0.0), ("recency_gap", 0.1))]
    stored = store.read_run(_write(tmp_path, "r", rows))["rows"]
    for row in stored:
        assert {k: row[k] for k in store.DECLARED} == DECLARATIONS[row["metric"]], row["metric"]
    assert [r["higher_is_better"] for r in stored] == [True, False, True, None]


def _old_payload(run, task, values, metric="token_accuracy"):
    """A run file as written before rows carried their headline and declarations."""
    rows = [{k: v for k, v in _row(run, "rope", 0, task, e, v, metric=metric).items()} for e, v in values]
    return {"schema": store.SCHEMA, "run": {"run_id": run, "sweep": "sw", "spec": _spec(task)}, "rows": rows}


def test_rows_stored_before_read_with_todays_declarations(tmp_path):
    path = tmp_path / "sw" / "old.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_old_payload("old", "vt", [(32, 0.9), (64, 0.4)], metric="string_match_all")))
    df = store.load(tmp_path / "sw")
    assert set(df.headline) == {TASKS["vt"].primary_metric} == {"string_match_all"}
    assert df[list(store.DECLARED)].drop_duplicates().to_dict("records") == [DECLARATIONS["string_match_all"]]
    # rows shipped before the change (the default board's, kept as a fixture): every task's headline
    # is the one its class declares today
    old_board = ROOT / "tests" / "data" / "pre_criterion_default.jsonl.gz"
    shipped = store.load(old_board)
    assert "headline" not in json.loads(gzip.decompress(old_board.read_bytes()).splitlines()[0])["rows"][0]
    assert shipped.groupby("task").headline.unique().map(list).to_dict() == {t: [TASKS[t].primary_metric] for t in set(shipped.task)}
    assert store.task_headlines() == {name: cls.primary_metric for name, cls in TASKS.items()}


def test_the_report_ranks_by_the_stored_headline_and_direction(tmp_path):
    # copy's class declares token_accuracy; these rows say their headline is exact match, lower better
    for scheme, values in {"rope": (0.9, 0.8), "alibi": (0.2, 0.1)}.items():
        rows = [{**_row(f"{scheme}-0", scheme, 0, "copy", e, v, metric="exact_match", n=10), "headline": "exact_match",
                 "higher_is_better": False}
                for e, v in zip((32, 64), values)]
        rows += [_row(f"{scheme}-0", scheme, 0, "copy", e, 0.5, metric="token_accuracy") for e in (32, 64)]
        _write(tmp_path, f"{scheme}-0", rows)
    df = store.load(tmp_path / "sw")
    board = boards.leaderboard(df)
    assert set(board.metric) == {"exact_match"} and set(board.higher_is_better) == {False}
    assert list(ranking.mrr(board).scheme) == ["alibi", "rope"]  # lowest first, as the rows say
    assert boards.scheme_order(board) == ["alibi", "rope"]


def test_a_task_this_checkout_lacks_is_named_never_scored_by_exact_match(tmp_path):
    # stored with its headline: ranked by it
    rows = [{**_row("new", "rope", 0, "retired", e, v, metric=m), "headline": "string_match_part"}
            for e in (32, 64) for m, v in (("exact_match", 0.25), ("string_match_part", 0.75))]
    _write(tmp_path, "new", rows, tasks=("retired",))
    board = boards.leaderboard(store.load(tmp_path / "sw"))
    assert set(board.metric) == {"string_match_part"} and set(board["mean"]) == {0.75}
    # stored without one, by code from before rows carried it: named, and on no board
    path = tmp_path / "old" / "old.json"
    path.parent.mkdir()
    payload = _old_payload("old", "retired", [(32, 0.25)], metric="exact_match")
    payload = {**payload, "run": {**payload["run"], "sweep": "old"}, "rows": [{**r, "sweep": "old"} for r in payload["rows"]]}
    path.write_text(json.dumps(payload))
    with pytest.warns(UserWarning, match="rows of retired name no headline metric and this checkout has no such task"):
        df = store.load(tmp_path / "old")
    assert df.headline.isna().all() and boards.leaderboard(df).empty


BLOCKED = """
import sys
sys.modules["tasks"] = None  # any import of the task package fails
from suite.report.__main__ import main
code = main(sys.argv[1:])
assert not [m for m, mod in sys.modules.items() if mod is not None and m.split(".")[0] == "tasks"]
sys.exit(code)
"""


@pytest.mark.exhaustive  # a whole shipped board rebuilt in a fresh interpreter
def test_a_shipped_board_rebuilds_with_no_task_code_importable(tmp_path):
    args = ["state", "--from", "published", "--published", str(ROOT / "published")]
    out = subprocess.run([sys.executable, "-c", BLOCKED, *args, "--out", str(tmp_path / "blocked")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert report_main([*args, "--out", str(tmp_path / "normal")]) == 0
    files = sorted(p.relative_to(tmp_path / "normal") for p in (tmp_path / "normal").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "blocked") for p in (tmp_path / "blocked").rglob("*") if p.is_file())
    assert Path("state", "leaderboard.csv") in files and Path("state", "index.md") in files
    for f in files:
        assert (tmp_path / "blocked" / f).read_bytes() == (tmp_path / "normal" / f).read_bytes(), f
    assert len(pd.read_csv(tmp_path / "normal" / "state" / "leaderboard.csv")) > 0
