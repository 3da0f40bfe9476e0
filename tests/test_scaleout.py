"""Scaling out through existing engines: Hydra launchers (joblib, submitit) and torchrun DDP.

Mutation check: in suite/training/distributed.py share, slice(r * per, (r + 1) * per) -> slice(0, per) (every
rank trains on the first rows) makes test_torchrun_two_processes_write_one_result_with_the_single_process_loss fail;
``submitit_folder: ${hydra.sweep.dir}/.submitit/%j`` back in conf/launcher/submitit_local.yaml makes
test_submitit_local_keeps_its_files_in_the_sweep_folder and test_submitit_local_multirun_stores_both_runs fail
(submitit's local runner makes a folder literally named %j)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tests import forked_cli
from suite.results import store
from suite.config.compose import CONF_DIR
from suite.run import execute
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
QUICK = ["train.steps=12", "train.batch_size=8", "train.seq_len=16", "eval.n_examples=6", "eval.batch_size=3",
         "eval.multiples=[1]", "model.n_layers=2", "model.d_model=32", "logger=none"]
# Gloo sums gradients in another order than one process does; over a few steps the float32
# losses agree to about 1e-6 relative. The tolerance below leaves room for that, not for a bug:
# a wrong loss normalisation or a batch split that differs shifts the loss by more than 1e-2.
LOSS_RTOL = 1e-4


def _launcher(name):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"launcher={name}"], return_hydra_config=True).hydra.launcher


@pytest.mark.parametrize("name", ["local", "slurm", "submitit_local"])
def test_every_launcher_config_names_an_installed_hydra_launcher(name):
    """The target resolves to a Launcher class that is installed (joblib and submitit plugins),
    so a typo or a missing plugin fails here, not on a cluster."""
    from hydra.plugins.launcher import Launcher
    from hydra.utils import get_class

    assert issubclass(get_class(_launcher(name)._target_), Launcher)


def test_submitit_local_keeps_its_files_in_the_sweep_folder():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["launcher=submitit_local", "hydra.sweep.dir=/x/h"], return_hydra_config=True)
    folder = cfg.hydra.launcher.submitit_folder
    assert folder == "/x/h/.submitit" and "%" not in folder  # under the sweep folder, no placeholder left


@pytest.mark.exhaustive  # submitit's local executor starts its own processes
def test_submitit_local_multirun_stores_both_runs(tmp_path):
    args = [sys.executable, "-m", "suite.run", "-m", "launcher=submitit_local", *QUICK, "position=nope,alibi",
            f"results_dir={tmp_path}", "sweep_name=sub", f"hydra.sweep.dir={tmp_path}/h"]
    out = forked_cli.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    df = store.load(tmp_path / "sub")
    assert sorted(df.positions.unique()) == ["alibi", "nope"] and df.run_id.nunique() == 2
    submitted = sorted(p.name for p in (tmp_path / "h" / ".submitit").iterdir())
    assert submitted and not [name for name in submitted if "%" in name], submitted  # the jobs went through submitit
    assert sum(name.endswith("_submitted.pkl") for name in submitted) == 2  # one file set per job, by its id


@pytest.mark.exhaustive  # three interpreters; make test checks the batch split is refused when it does not divide
def test_torchrun_two_processes_write_one_result_with_the_single_process_loss(tmp_path):
    overrides = [*QUICK, "train.steps=20", "train.batch_size=16", "position=alibi", "sweep_name=ddp"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "suite.run", *overrides, f"results_dir={tmp_path / 'ddp'}", f"hydra.run.dir={tmp_path}/h"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    files = list((tmp_path / "ddp" / "ddp").glob("*.json"))
    assert len(files) == 1
    ddp = json.loads(files[0].read_text())["run"]
    assert ddp["processes"] == 2

    single_path = execute(make_spec(*overrides), results_dir=tmp_path / "one", progress=False)
    single = json.loads(single_path.read_text())["run"]
    assert single["processes"] == 1 and single["run_id"] == ddp["run_id"]
    assert ddp["final_loss"] == pytest.approx(single["final_loss"], rel=LOSS_RTOL)


def test_a_batch_that_does_not_split_over_the_processes_is_refused(monkeypatch):
    from suite.training import distributed

    monkeypatch.setattr(distributed, "active", lambda: True)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 3)
    with pytest.raises(ValueError, match="train.batch_size=16 does not split over 3 processes"):
        distributed.share(16)
