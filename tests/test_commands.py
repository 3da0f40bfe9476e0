"""README commands as written: every sweep composes with every launcher, and ``make sweep``
hands its ``results_dir`` and ``sweep_name`` to its report."""
import shutil
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from suite.config.compose import CONF_DIR
from tests.conftest import install_done, fast_or_exhaustive

ROOT = Path(__file__).parent.parent
SWEEPS = sorted(p.stem for p in (CONF_DIR / "sweep").glob("*.yaml"))
LAUNCHERS = sorted(p.stem for p in (CONF_DIR / "launcher").glob("*.yaml"))


def _hydra_cfg(*overrides):
    """What ``python -m suite.run <overrides> --cfg hydra`` prints, composed in-process."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def test_there_are_sweeps_and_the_four_launchers():
    assert len(SWEEPS) >= 8 and LAUNCHERS == ["basic", "local", "slurm", "submitit_local"]


# make test: every sweep with the launcher make sweep uses (local) and every launcher with the default
# sweep; every other pair under make test-exhaustive
PAIRS = [(sweep, launcher) for sweep in SWEEPS for launcher in LAUNCHERS]


@pytest.mark.parametrize("sweep,launcher", fast_or_exhaustive(
    PAIRS, {(s, launcher) for s, launcher in PAIRS if launcher == "local" or s == "default"}))
def test_every_sweep_composes_with_every_launcher(sweep, launcher):
    cfg = _hydra_cfg(f"+sweep={sweep}", f"launcher={launcher}")
    resolved = cfg.hydra.launcher  # interpolations resolve (n_jobs: ${jobs})
    assert cfg.sweep_name == sweep and str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    if launcher == "local":
        assert resolved.n_jobs == cfg.jobs >= 1


def test_the_gpu_sweep_runs_one_job_at_a_time_locally_and_the_default_two():
    assert _hydra_cfg("+sweep=gpu").hydra.launcher.n_jobs == 1
    assert _hydra_cfg("+sweep=default").hydra.launcher.n_jobs == 2
    assert _hydra_cfg("+sweep=gpu", "launcher=slurm").hydra.launcher.gpus_per_node == 1


@pytest.mark.exhaustive  # composes the SLURM launcher's config
def test_the_slurm_readme_command_composes_under_cfg_hydra():
    """The README's SLURM line, run as written with ``--cfg hydra`` (prints, trains nothing)."""
    import sys
    out = subprocess.run([sys.executable, "-m", "suite.run", "+sweep=gpu", "launcher=slurm",
                          "hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=600", "--cfg", "hydra"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "partition: gpu" in out.stdout and "timeout_min: 600" in out.stdout


def _make_n(*args):
    if shutil.which("make") is None:
        pytest.skip("no make")
    out = subprocess.run(["make", "-n", "--no-print-directory", *args, install_done()], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line.split() for line in out.stdout.splitlines() if "suite.report" in line]


def test_make_sweep_reports_on_the_folder_its_args_name():
    (report,) = _make_n("sweep", "ARGS=results_dir=/x sweep_name=msw train.steps=5")
    assert report[report.index("suite.report") + 1] == "msw"
    assert report[report.index("--results") + 1] == "/x"


def test_make_sweep_reports_on_results_sweep_by_default():
    (report,) = _make_n("sweep", "SWEEP=windows")
    assert report[report.index("suite.report") + 1] == "windows"
    assert report[report.index("--results") + 1] == "results"


def test_make_reproduce_reruns_k_runs_or_every_seed_of_cells():
    """``make reproduce`` passes ``-k K`` (3 by default), and ``CELLS=N`` instead asks for the cell mode.
    Mutation check: the recipe passing ``-k`` whatever CELLS says makes this fail."""
    def command(*args):
        out = subprocess.run(["make", "-n", "--no-print-directory", "reproduce", *args, install_done()], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        (line,) = [line.split() for line in out.stdout.splitlines() if "suite.reproduce" in line]
        return line[line.index("suite.reproduce") + 1:]

    assert command("SWEEP=flagship") == ["flagship", "-k", "3"]
    assert command("SWEEP=flagship", "K=5") == ["flagship", "-k", "5"]
    assert command("SWEEP=flagship", "CELLS=4") == ["flagship", "--cells", "4"]


def test_make_summary_prints_the_report_leaderboard_of_the_sweep():
    out = subprocess.run(["make", "-n", "summary", "SWEEP=windows", "RESULTS=/x", install_done()], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    (line,) = [line.split() for line in out.stdout.splitlines() if "suite.report.summary" in line]
    assert line[line.index("suite.report.summary") + 1] == "/x/windows"


def test_make_sweep_resume_published_unpacks_into_the_results_dir_of_its_args():
    out = subprocess.run(["make", "-n", "sweep", "RESUME=published", "ARGS=results_dir=/x", install_done()], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    (line,) = [line.split() for line in out.stdout.splitlines() if "shipped unpack" in line]
    assert line[line.index("unpack") + 1] == "default" and line[line.index("--results") + 1] == "/x"
    assert line[line.index("--published") + 1] == "published"


def test_make_sweep_resume_checkpoint_unpacks_the_committed_checkpoint_and_make_checkpoint_packs_it():
    def lines(*args, key):
        out = subprocess.run(["make", "-n", *args, install_done()], cwd=ROOT, capture_output=True, text=True, timeout=60)
        return [line.split() for line in out.stdout.splitlines() if key in line]
    (line,) = lines("sweep", "SWEEP=scale", "RESUME=checkpoint", key="shipped unpack")
    assert line[line.index("unpack") + 1] == "scale" and line[line.index("--published") + 1] == "checkpoints"
    (line,) = lines("checkpoint", "SWEEP=scale", key="shipped pack")
    assert line[line.index("pack") + 1] == "scale" and line[line.index("--published") + 1] == "checkpoints"
    assert lines("sweep", "SWEEP=scale", key="shipped unpack") == []  # a plain sweep unpacks nothing
    bad = subprocess.run(["make", "sweep", "SWEEP=scale", "RESUME=later", install_done()], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "RESUME=later: valid: published or checkpoint" in bad.stdout
