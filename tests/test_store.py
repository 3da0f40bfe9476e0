"""The store cannot lie: a result file with an impossible row is named and skipped, the rest load,
and the report still builds.

Mutation checks: in suite/results/store.py row_problem, eval_len <= 0 -> eval_len < 0 makes
test_a_file_with_an_impossible_row_is_named_and_skipped[zero eval length] fail; dropping "chunk" from
COLUMNS, or in suite/results/identity.py span_columns taking every sized layer instead of the layers of that
kind (chunks counted as windows), makes test_stored_rows_carry_the_smallest_window_and_the_smallest_chunk fail; in row_problem,
n < 1 -> n < 0 makes test_a_file_with_an_impossible_row_is_named_and_skipped[a share over no example] fail."""
import math

import pytest

from suite import files
from suite.results import store
from suite.report.__main__ import main as report_main


def _row(**change):
    row = {"run_id": "r", "sweep": "sw", "task": "copy", "eval_len": 32, "len_ratio": 1.0, "slice": "all",
           "metric": "exact_match", "value": 0.5, "n": 10, "status": "ok", "positions": "rope", "spans": "full",
           "pattern": "uniform", "model": "tiny", "train_len": 32, "config_hash": "c", "spec_hash": "h", "seed": 0}
    return {**row, **change}


def _run(run_id: str, **change) -> dict:
    """A run record whose spec trains copy at 32 tokens and scores it at 1x and 2x."""
    spec = {"train": {"seq_len": 32}, "eval": {"multiples": [1.0, 2.0]}, "tasks": [{"name": "copy", "params": []}]}
    return {"run_id": run_id, "sweep": "sw", "spec": spec, **change}


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
    "a share over no example": _row(n=0),
    "a share over -5 examples": _row(n=-5),
    "a task the run does not have": _row(task="no_such_task"),
    "eval length 1e30": _row(eval_len=1e30, len_ratio=1e30 / 32),
    "eval length not the run's": _row(eval_len=48, len_ratio=1.5),
    "negative length ratio": _row(len_ratio=-1.0),
    "negative loss": _row(metric="loss", value=-1.0),
    "infinite loss": _row(metric="loss", value=math.inf),
    "seed is text": _row(seed="zero"),
    "wall time is text": _row(wall_s="long"),
}
MISSING = ["run_id", "task", "eval_len", "metric", "value", "status", "n", "positions", "config_hash", "seed"]


@pytest.mark.parametrize("case", list(BAD) + [f"no {k}" for k in MISSING] + ["no run record"])
def test_a_file_with_an_impossible_row_is_named_and_skipped(tmp_path, case):
    store.write_run(tmp_path, "sw", "good", _run("good"), [_row(run_id="good")])
    bad = BAD.get(case) or {k: v for k, v in _row().items() if f"no {k}" != case}
    path = store.write_run(tmp_path, "sw", "bad", _run("bad"), [_row(run_id="bad")])
    payload = store.read_run(path)
    payload["rows"].append(bad)
    if case == "no run record":
        payload.pop("run")
    files.write_json_atomic(path, payload)
    with pytest.warns(UserWarning, match=rf"skipping results file {path}: (row 1: |no run record)"):
        df = store.load(tmp_path / "sw")
    assert set(df.run_id) == {"good"}


def test_two_files_claiming_one_run_with_different_contents_are_both_named_and_neither_is_used(tmp_path):
    store.write_run(tmp_path, "sw", "other", _run("other"), [_row(run_id="other")])
    first = store.write_run(tmp_path, "sw", "r", _run("r"), [_row(run_id="r", value=0.25)])
    second = tmp_path / "sw" / "a-copy" / "r.json"  # a copy in a folder of its own, named for its run
    payload = store.read_run(first)
    payload["rows"][0]["value"] = 1.0
    files.write_json_atomic(second, payload)
    with pytest.warns(UserWarning, match=r"skipping run r: 2 files claim it with different contents") as caught:
        df = store.load(tmp_path / "sw")
    assert set(df.run_id) == {"other"}
    assert str(first) in str(caught[0].message) and str(second) in str(caught[0].message)
    files.write_json_atomic(second, store.read_run(first))  # the same contents twice: counted once
    with pytest.warns(UserWarning, match=r"skipping duplicate run r in "):
        df = store.load(tmp_path / "sw")
    assert sorted(df.run_id) == ["other", "r"]


def test_deeply_nested_json_is_an_unreadable_file_not_a_crash(tmp_path):
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.warns(UserWarning, match=r"skipping unreadable results file .*deep\.json: .*nested too deeply"):
        assert store.load(tmp_path / "sw").empty


def test_valid_rows_of_every_kind_pass():
    assert store.row_problem(_row()) is None
    assert store.row_problem(_row(value=math.nan, status="unsupported")) is None  # an unsupported length
    assert store.row_problem(_row(value=None, status="diverged")) is None
    assert store.row_problem(_row(metric="diverged_at_step", value=3, status="diverged")) is None
    assert store.row_problem(_row(metric="loss", value=4.2)) is None
    assert store.row_problem(_row(metric="recency_gap", value=-0.3, slice="init/resid_out")) is None
    assert store.row_problem(_row(metric="string_match_all", value=1.0)) is None  # vt's headline metric
    assert store.row_problem(_row(metric="loss", value=1e308)) is None  # finite: it ranks last, lowest first
    assert store.row_problem(_row(value=math.nan, n=0, status="unsupported")) is None


def test_every_tasks_headline_metric_is_declared_with_a_direction():
    from suite.data.metrics import METRICS
    from tasks import TASKS

    for name, cls in TASKS.items():  # higher is better, or lower for natural text's bits per byte
        assert METRICS[cls.primary_metric].higher_is_better is (not getattr(cls, "byte_level", False)), name


def test_the_report_builds_past_a_bad_file_and_names_it(tmp_path, capsys):
    store.write_run(tmp_path, "sw", "good", _run("good"),
                    [_row(run_id="good", metric="token_accuracy"), _row(run_id="good", eval_len=64, len_ratio=2.0,
                                                                        metric="token_accuracy", value=0.2)])
    path = store.write_run(tmp_path, "sw", "bad", _run("bad"), [_row(run_id="bad", value="x")])
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
    store.write_run(tmp_path, "sw", "r", _run("r"), [{**_row(), **columns, "run_id": "r", "sweep": "sw"}])
    row = store.load(tmp_path / "sw").iloc[0]
    assert (row.window, row.chunk) == (window, chunk)


def test_a_run_records_the_numeric_signature_it_computed_under(tmp_path):
    import torch

    from suite.results import signature
    from suite.report.sections.provenance import provenance
    from suite.run import execute
    from tests.conftest import make_spec

    sig = signature.signature()
    assert sig["torch"] == torch.__version__ and sig["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert sig["threads"] == torch.get_num_threads() and sig["blas"] != ""
    path = execute(make_spec("train.steps=2", "eval.n_examples=2", "eval.multiples=[1]", "logger=none", "sweep_name=ns"),
                   results_dir=tmp_path, progress=False)
    assert store.read_run(path)["run"]["numeric"]["torch"] == torch.__version__
    df = store.load(path.parent)
    assert df.numeric.unique().tolist() == [signature.label(store.read_run(path)["run"]["numeric"])]
    assert provenance(df)["numeric signature (runs)"] == f"{df.numeric.iloc[0]} (1)"
    assert signature.label({"torch": "2.13.0", "blas": "mkl", "cpu_capability": "AVX2", "cpu": "AMD EPYC", "threads": 1,
                           "pins": {"MKL_CBWR": "COMPATIBLE"}}) == "torch 2.13.0, mkl, AVX2, AMD EPYC, 1 thread, MKL_CBWR=COMPATIBLE"
