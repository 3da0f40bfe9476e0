"""W&B: runs grouped by sweep and tagged by setting, eval rows as a table, every run finished,
and the report's leaderboard logged as a table."""
import json

import pytest

from suite.run import execute
from tests.conftest import make_spec

QUICK = ["train.steps=4", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
         "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=32"]


class FakeRun:
    def __init__(self, **kwargs):
        self.kwargs, self.logged, self.summary, self.finished = kwargs, [], {}, 0

    def log(self, data, step=None):
        self.logged.append(data)

    def finish(self):
        self.finished += 1


def test_runs_are_grouped_by_sweep_tagged_by_setting_and_finished(tmp_path, monkeypatch):
    import wandb

    runs = []
    monkeypatch.setattr(wandb, "init", lambda **kw: runs.append(FakeRun(**kw)) or runs[-1])
    for pos in ("alibi", "t5"):
        execute(make_spec(*QUICK, f"position={pos}", "span=swa", "span.window=8", "sweep_name=grp"),
                results_dir=tmp_path, progress=False, logger_cfg={"name": "wandb", "mode": "offline"})
    assert [r.kwargs["group"] for r in runs] == ["grp", "grp"]
    assert runs[0].kwargs["tags"][:3] == ["alibi", "swa", "uniform"] and runs[1].kwargs["tags"][0] == "t5"
    assert all(r.finished == 1 for r in runs)  # joblib reuses workers: each run must be closed
    tables = [d["eval/table"] for d in runs[0].logged if "eval/table" in d]
    assert len(tables) == 1
    table = tables[0]
    stored = json.loads(next((tmp_path / "grp").glob("alibi-*.json")).read_text())["rows"]
    assert len(table.data) == len(stored)
    em = {(row[0], row[1]): row[5] for row in table.data if row[4] == "exact_match" and row[3] == "all"}
    for row in stored:
        if row["metric"] == "exact_match" and row["slice"] == "all":
            assert em[(row["task"], row["eval_len"])] == row["value"]
            assert runs[0].summary[f"eval/copy/exact_match@{row['eval_len']}"] == row["value"]


def test_report_logs_leaderboard_and_mrr_tables_offline(tmp_path, monkeypatch):
    from suite.report.__main__ import main

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    for pos in ("nope", "rope"):
        execute(make_spec(*QUICK, f"position={pos}", "sweep_name=rw", "logger=none"), results_dir=tmp_path / "res",
                progress=False)
    assert main(["rw", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "rep"), "--wandb", "offline"]) == 0
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    board = json.loads(next(runs[0].rglob("leaderboard_*.table.json")).read_text())
    assert board["columns"][:6] == ["scheme", "task", "eval_len", "mean", "std", "n"]
    assert {row[0] for row in board["data"]} == {"nope", "rope"} and len(board["data"]) == 4
    mrr = json.loads(next(runs[0].rglob("mrr_*.table.json")).read_text())
    assert mrr["columns"][:2] == ["scheme", "mrr_ood"] and len(mrr["data"]) == 2
    assert all(0 < row[1] <= 1 for row in mrr["data"])


def test_report_rejects_an_unknown_wandb_mode(tmp_path, capsys):
    from suite.report.__main__ import main

    with pytest.raises(SystemExit):
        main(["rw", "--wandb", "cloud"])
    assert "invalid choice: 'cloud'" in capsys.readouterr().err
