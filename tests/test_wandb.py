"""W&B: runs grouped by sweep and tagged by setting, eval rows as a table, every run finished,
files beside the sweep's results, a resumed run continuing its own W&B run, the resolved spec
as config, and the report's leaderboard logged as a table into the runs' project.

Mutation check: in suite/tracking.py wandb_id, safe[:MAX_ID - len(digest) - 1] -> safe[:MAX_ID - len(digest)]
(no room for the '-') makes test_wandb_ids_are_stable_distinct_per_sweep_and_valid fail."""
import json
import warnings

import pandas as pd
import pytest

import suite.lifecycle as run_mod
from suite import files
from suite.results import store
from suite.config.compose import compose_config
from suite.run import execute, run_id
from suite.config.build import SpecError
from suite.tracking import MAX_ID, wandb_id
from tests.conftest import make_spec

QUICK = ["train.steps=4", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
         "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=32"]


class FakeRun:
    def __init__(self, **kwargs):
        self.kwargs, self.logged, self.steps, self.summary, self.finished = kwargs, [], [], {}, 0
        self.dir = kwargs.get("dir")

    def log(self, data, step=None):
        self.logged.append(data)
        self.steps.append(step)

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

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_SILENT", "true")
    for pos in ("nope", "rope"):
        execute(make_spec(*QUICK, f"position={pos}", "sweep_name=rw", "logger=none"), results_dir=tmp_path / "res",
                progress=False)
    assert main(["rw", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "rep"), "--wandb", "offline"]) == 0
    assert not (tmp_path / "wandb").exists()  # beside the sweep's results, not in the working directory
    runs = list((tmp_path / "res" / "rw" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    board = json.loads(next(runs[0].rglob("leaderboard_*.table.json")).read_text())
    assert board["columns"][:6] == ["scheme", "task", "eval_len", "mean", "std", "n"]
    assert {row[0] for row in board["data"]} == {"nope", "rope"} and len(board["data"]) == 4
    mrr = json.loads(next(runs[0].rglob("mrr_*.table.json")).read_text())
    assert mrr["columns"][:2] == ["scheme", "mrr_ood"] and len(mrr["data"]) == 2
    published = pd.read_csv(tmp_path / "rep" / "rw" / "mrr.csv").set_index("scheme")  # the report's own
    assert {row[0]: row[1] for row in mrr["data"]} == pytest.approx(published.mrr_ood.to_dict(), abs=1e-4, nan_ok=True)
    assert published.mrr_ood.notna().all()  # these two-step runs learn nothing: the headline ranks every run all the same
    learned = mrr["columns"].index("mrr_ood_learned")  # and the learned runs' MRR beside it has none
    assert all(pd.isna(row[learned]) for row in mrr["data"]) and published.mrr_ood_learned.isna().all()


def test_report_rejects_an_unknown_wandb_mode(tmp_path, capsys):
    from suite.report.__main__ import main

    with pytest.raises(SystemExit):
        main(["rw", "--wandb", "cloud"])
    assert "invalid choice: 'cloud'" in capsys.readouterr().err


def _fake_wandb(monkeypatch) -> list:
    import wandb

    runs = []
    monkeypatch.setattr(wandb, "init", lambda **kw: runs.append(FakeRun(**kw)) or runs[-1])
    return runs


def _offline_runs(folder):
    return sorted(p.name for p in folder.glob("offline-run-*"))


def test_run_files_go_beside_the_sweeps_results_not_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_SILENT", "true")
    spec = make_spec(*QUICK, "position=alibi", "sweep_name=wd")
    execute(spec, results_dir=tmp_path / "res", progress=False, logger_cfg={"name": "wandb", "mode": "offline"})
    assert not (tmp_path / "wandb").exists()
    folders = _offline_runs(tmp_path / "res" / "wd" / "wandb")
    assert len(folders) == 1 and folders[0].endswith(f"-{wandb_id('wd', run_id(spec))}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # W&B's own JSON files are not taken for results
        df = store.load(tmp_path / "res" / "wd")
    assert df.run_id.unique().tolist() == [run_id(spec)]


def test_logger_dir_moves_the_files_and_a_dir_not_named_wandb_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_config([*QUICK, "position=nope", "sweep_name=ld", f"logger.dir={tmp_path / 'scratch' / 'wandb'}"])
    execute(make_spec(*QUICK, "position=nope", "sweep_name=ld"), results_dir=tmp_path / "res", progress=False,
            logger_cfg=dict(cfg.logger))
    assert len(_offline_runs(tmp_path / "scratch" / "wandb")) == 1
    assert not (tmp_path / "res" / "ld" / "wandb").exists()
    with pytest.raises(SpecError, match=r"logger.dir='/x/wb': its last folder must be named 'wandb'.*'/x/wb/wandb'"):
        make_spec("logger.dir=/x/wb")


def test_a_resumed_run_continues_its_own_wandb_run_from_the_checkpoint_step(tmp_path, monkeypatch):
    runs = _fake_wandb(monkeypatch)
    spec = make_spec(*QUICK, "train.steps=20", "position=rope", "sweep_name=rs", "train.until_learned=false")
    real_train = run_mod.train

    class Killed(Exception):
        pass

    def killed_at_step_13(*args, on_step, **kwargs):
        def hook(step):
            on_step(step)
            if step == 13:
                raise Killed
        return real_train(*args, on_step=hook, **kwargs)

    monkeypatch.setattr(run_mod, "train", killed_at_step_13)
    with pytest.raises(Killed):
        execute(spec, results_dir=tmp_path, progress=False, ckpt_every=5, log_every=5,
                logger_cfg={"name": "wandb", "mode": "offline"})
    monkeypatch.setattr(run_mod, "train", real_train)
    path = execute(spec, results_dir=tmp_path, progress=False, ckpt_every=5, log_every=5,
                   logger_cfg={"name": "wandb", "mode": "offline"})
    resumed_from = store.read_run(path)["run"]["resumed_from"]
    assert resumed_from == 10  # the last checkpoint before the kill
    first, second = runs
    expected = wandb_id("rs", run_id(spec))
    for run in runs:
        assert run.kwargs["id"] == expected and run.kwargs["resume"] == "allow"
        assert run.kwargs["dir"] == str((tmp_path / "rs").resolve())
        assert run.finished == 1
    train_steps = [[s for s, d in zip(r.steps, r.logged) if "train/loss" in d] for r in runs]
    assert train_steps[0] == [0, 5, 10]
    assert train_steps[1] == [10, 15, 19]  # the history goes on from the checkpoint's step
    assert train_steps[1][0] == resumed_from


def test_wandb_ids_are_stable_distinct_per_sweep_and_valid():
    rid = "rope+nope-rnope-core-s0-0123456789ab"
    assert wandb_id("main", rid) == "main-rope_nope-rnope-core-s0-0123456789ab"
    assert wandb_id("main", rid) == wandb_id("main", rid) and wandb_id("other", rid) != wandb_id("main", rid)
    long = wandb_id("s" * 200, rid)
    assert len(long) == MAX_ID and long != wandb_id("s" * 201, rid)


def test_config_is_the_nested_resolved_spec_with_its_ids(tmp_path, monkeypatch):
    runs = _fake_wandb(monkeypatch)
    spec = make_spec("train.steps=2", "train.batch_size=4", "train.seq_len=64", "eval.n_examples=2", "eval.batch_size=2",
                     "eval.multiples=[1]", "model.n_layers=2", "model.d_model=32", "position=alibi", "taskset=core",
                     "+taskset.params.mqar.n_queries=3", "sweep_name=cf")
    execute(spec, results_dir=tmp_path, progress=False, logger_cfg={"name": "wandb", "mode": "offline"})
    config = runs[0].kwargs["config"]
    stored = store.read_run(files.result_path(tmp_path, "cf", run_id(spec)))["run"]
    assert config["run_id"] == run_id(spec) and config["spec_hash"] == spec.run_id == stored["spec_hash"]
    assert config["code_digest"] == spec.code and config["config_hash"] == spec.config_hash
    assert config["sweep"] == "cf" and "code" not in config
    assert set(config["tasks"]) == {"copy", "mqar", "niah_single", "vt"}
    assert config["tasks"]["mqar"] == {"max_pairs": 178, "n_queries": 3}  # a mapping, not a list of pairs
    assert config["tasks"]["copy"] == {"alphabet": None, "distinct": True, "eos": False}
    assert config["model"]["layers"][0]["position"] == "alibi" and config["model"]["layers"][0]["position_cfg"]
    assert config["train"]["steps"] == 2 and config["eval"]["multiples"] == [1.0]
    json.dumps(config)  # plain data all the way down


def test_report_uses_the_logger_project_and_entity(tmp_path, monkeypatch):
    from suite.report.__main__ import main

    execute(make_spec(*QUICK, "position=nope", "sweep_name=rp", "logger=none"), results_dir=tmp_path / "res",
            progress=False)
    runs = _fake_wandb(monkeypatch)
    common = ["rp", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "rep"), "--wandb", "offline"]
    assert main(common) == 0
    assert main([*common, "--project", "pe-study", "--entity", "lab"]) == 0
    logger = compose_config([]).logger
    assert (runs[0].kwargs["project"], runs[0].kwargs["entity"]) == (logger.project, logger.entity) == ("posbench", None)
    assert (runs[1].kwargs["project"], runs[1].kwargs["entity"]) == ("pe-study", "lab")
    assert all(r.kwargs["dir"] == str((tmp_path / "res" / "rp").resolve()) for r in runs)
    assert all(r.kwargs["group"] == "rp" and r.kwargs["job_type"] == "report" for r in runs)


def test_a_runs_wandb_config_has_top_level_keys_to_filter_by(tmp_path, monkeypatch):
    import wandb

    runs = []
    monkeypatch.setattr(wandb, "init", lambda **kw: runs.append(FakeRun(**kw)) or runs[-1])
    execute(make_spec(*QUICK, "pattern=rnope", "task=niah_single", "seed=3", "sweep_name=flt"),
            results_dir=tmp_path, progress=False, logger_cfg={"name": "wandb", "mode": "offline"})
    config = runs[0].kwargs["config"]
    assert {k: config[k] for k in ("position", "span", "pattern", "task", "seed")} == \
        {"position": "rope/nope", "span": "full", "pattern": "rnope", "task": "niah_single", "seed": 3}


def test_a_rebuilt_report_logs_to_the_same_wandb_run(tmp_path, monkeypatch):
    import wandb
    import pandas as pd
    from suite.report.to_wandb import log_report

    runs = []
    monkeypatch.setattr(wandb, "init", lambda **kw: runs.append(FakeRun(**kw)) or runs[-1])
    monkeypatch.setattr(wandb, "Table", lambda dataframe: dataframe)
    mrr = pd.DataFrame({"scheme": ["rope"], "mrr_ood": [1.0], "mrr_all": [1.0]})
    for sweep in ("one", "one", "two"):
        log_report(pd.DataFrame({"a": [1]}), mrr, sweep, results_dir=tmp_path)
    ids = [r.kwargs["id"] for r in runs]
    assert ids[0] == ids[1] == "one-report" and ids[2] == "two-report"
    assert all(r.kwargs["resume"] == "allow" for r in runs)
