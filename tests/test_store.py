"""The store cannot lie: a result file with an impossible row is named and skipped, the rest load,
and the report still builds.

Mutation checks: in suite/results/store.py row_problem, eval_len <= 0 -> eval_len < 0 makes
test_a_file_with_an_impossible_row_is_named_and_skipped[zero eval length] fail; dropping "chunk" from
COLUMNS, or in suite/results/identity.py span_columns taking every sized layer instead of the layers of that
kind (chunks counted as windows), makes test_stored_rows_carry_the_smallest_window_and_the_smallest_chunk fail."""
import math

import pytest

from suite import files
from suite.results import store
from suite.report.__main__ import main as report_main


def _row(**change):
    row = {"run_id": "r", "task": "copy", "eval_len": 32, "len_ratio": 1.0, "slice": "all", "metric": "exact_match",
           "value": 0.5, "n": 10, "status": "ok", "positions": "rope", "pattern": "uniform", "train_len": 32,
           "config_hash": "c", "seed": 0}
    return {**row, **change}


BAD = {
    "value is text": _row(value="high"),
    "value is a bool": _row(value=True),
    "exact match above 1": _row(value=7.0),
    "negative token accuracy": _row(metric="token_accuracy", value=-0.1),
    "NaN in an ok run": _row(value=math.nan),
    "unknown metric": _row(metric="accuracy_ish"),
    "unknown status": _row(status="great"),
    "zero eval length": _row(eval_len=0),
    "fractional eval length": _row(eval_len=32.5),
}
MISSING = ["run_id", "task", "eval_len", "metric", "value", "status"]


@pytest.mark.parametrize("case", list(BAD) + [f"no {k}" for k in MISSING] + ["no run record"])
def test_a_file_with_an_impossible_row_is_named_and_skipped(tmp_path, case):
    store.write_run(tmp_path, "sw", "good", {"run_id": "good", "sweep": "sw"}, [_row(run_id="good")])
    bad = BAD.get(case) or {k: v for k, v in _row().items() if f"no {k}" != case}
    path = store.write_run(tmp_path, "sw", "bad", {"run_id": "bad", "sweep": "sw"}, [_row(run_id="bad")])
    payload = store.read_run(path)
    payload["rows"].append(bad)
    if case == "no run record":
        payload.pop("run")
    files.write_json_atomic(path, payload)
    with pytest.warns(UserWarning, match=rf"skipping results file {path}: row (1|-): "):
        df = store.load(tmp_path / "sw")
    assert set(df.run_id) == {"good"}


def test_valid_rows_of_every_kind_pass():
    assert store.row_problem(_row()) is None
    assert store.row_problem(_row(value=math.nan, status="unsupported")) is None  # an unsupported length
    assert store.row_problem(_row(value=None, status="diverged")) is None
    assert store.row_problem(_row(metric="diverged_at_step", value=3, status="diverged")) is None
    assert store.row_problem(_row(metric="loss", value=4.2)) is None
    assert store.row_problem(_row(metric="recency_gap", value=-0.3, slice="init/resid_out")) is None
    assert store.row_problem(_row(metric="string_match_all", value=1.0)) is None  # vt's headline metric


def test_the_report_builds_past_a_bad_file_and_names_it(tmp_path, capsys):
    store.write_run(tmp_path, "sw", "good", {"run_id": "good", "sweep": "sw"},
                    [_row(run_id="good", metric="token_accuracy"), _row(run_id="good", eval_len=64, len_ratio=2.0,
                                                                        metric="token_accuracy", value=0.2)])
    path = store.write_run(tmp_path, "sw", "bad", {"run_id": "bad", "sweep": "sw"}, [_row(run_id="bad", value="x")])
    assert report_main(["sw", "--results", str(tmp_path), "--out", str(tmp_path / "reports")]) == 0
    assert f"warning: skipping results file {path}: row 0: exact_match value 'x' is not a number" in capsys.readouterr().err
    assert (tmp_path / "reports" / "sw" / "index.md").exists()


def test_written_files_get_the_mode_a_plain_open_would(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        path = store.write_run(tmp_path, "sw", "r", {"run_id": "r"}, [_row()])
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert not list(path.parent.glob(".*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize("name", ["../../tmp/escape", "/abs", "a/b", ".hidden", "_work", "", "sp ace"])
def test_a_sweep_name_that_would_leave_its_folder_is_refused(name):
    from suite.config.build import SpecError
    from tests.conftest import make_spec

    with pytest.raises(SpecError, match=r"sweep_name=.*must be letters, digits"):
        make_spec(f"sweep_name='{name}'")



@pytest.mark.parametrize("overrides,window,chunk", [
    (["pattern=llama4"], None, 16),                                # chunked layers: a chunk, not a window
    (["pattern=command_a", "pattern.window=8"], 8, None),
    (["span=swa", "span.window=12"], 12, None),
    (["span=chunked", "span.chunk=6"], None, 6),
    ([], None, None),                                              # full attention everywhere
    (["pattern.layers=[{span: swa}, {span: chunked}, {span: swa}]", "+pattern.window=4", "+pattern.chunk=12",
      "pattern.name=mixed"], 4, 12),
])
def test_stored_rows_carry_the_smallest_window_and_the_smallest_chunk(tmp_path, overrides, window, chunk):
    from suite.results.identity import run_columns
    from tests.conftest import make_spec

    columns = run_columns(make_spec(*overrides))
    store.write_run(tmp_path, "sw", "r", {"run_id": "r", "sweep": "sw"}, [{**columns, **_row()}])
    row = store.load(tmp_path / "sw").iloc[0]
    assert (row.window, row.chunk) == (window, chunk)
