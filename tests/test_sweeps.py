"""Every sweep file composes into a multirun, and a sweep re-run trains nothing.

Mutation check: in suite/config/validate.py sweep_jobs, crossing the keys with the last one varying slowest
instead of the first makes test_sweep_jobs_are_the_jobs_hydras_basic_sweeper_launches fail."""
import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tests import forked_cli
from tests.composed import composed
from tests.conftest import fast_or_exhaustive, make_spec
from suite.results import store
from suite.config.compose import CONF_DIR
from suite.config.build import SpecError, build

ROOT = Path(__file__).parent.parent
SWEEPS = sorted(p.stem for p in (CONF_DIR / "sweep").glob("*.yaml"))


def _sweep_cfg(name):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"+sweep={name}"], return_hydra_config=True)


@lru_cache(maxsize=None)
def _built_jobs(name):
    """(job overrides, run spec) for every job the sweep launches (built once per test process)."""
    from suite.config.validate import sweep_jobs

    return [(job, build(composed(job))) for job in sweep_jobs(_sweep_cfg(name))]


@lru_cache(maxsize=None)
def _run_jobs(name):
    """``_built_jobs`` less the jobs the sweep's ``skip`` list leaves out (``suite.run.skip_reason`` on
    each job's config-group choices as Hydra records them, as the run itself matches): the jobs that
    store a run."""
    from suite.run import skip_reason

    built, skip = _built_jobs(name), _sweep_cfg(name).get("skip")
    if not skip:
        return built
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return [(job, spec) for job, spec in built if skip_reason(
            skip, dict(compose("config", overrides=job, return_hydra_config=True).hydra.runtime.choices)) is None]


def _default_compares_the_classic_schemes_one_model_per_task_all_else_equal(specs):
    """Within a task, configurations differ only in the position scheme: every layer of every
    model has full attention, and the recipe, model size and evaluation grid are shared."""
    assert {layer.position for s in specs for layer in s.model.layers} == {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"}
    assert {layer.span for s in specs for layer in s.model.layers} == {"full"}
    assert all(len(s.tasks) == 1 for s in specs) and {s.taskset for s in specs} == {"copy", "niah_multivalue"}
    for task in ("copy", "niah_multivalue"):
        group = [s for s in specs if s.taskset == task]
        assert len({(s.train, s.eval, s.model.d_model, s.model.n_layers, s.tasks) for s in group}) == 1
        assert len({s.model.layers[0].position for s in group}) == 6
    assert _sweep_cfg("default").hydra.launcher.n_jobs * _sweep_cfg("default").threads <= 2  # fits the 2-core default machine


SWEEP_CHECKS = {"default": _default_compares_the_classic_schemes_one_model_per_task_all_else_equal}


@pytest.mark.exhaustive
def test_the_default_sweeps_runs_are_the_flagships_own():
    """``make sweep`` is a subset of the flagship board under its protocol: every default run has
    a flagship run of the same id (same spec), so the published default board is read from them."""
    default = {spec.run_id for _, spec in _built_jobs("default")}
    flagship = {spec.run_id for _, spec in _built_jobs("flagship")}
    assert len(default) == 36 and len(flagship) == 180 and default <= flagship


@pytest.mark.exhaustive
def test_the_flagships_text_family_is_the_lm_boards_classic_six():
    """The flagship's natural-text family trains as the lm board does (64-byte windows, 1 to 8x):
    its 60 text runs are the lm board's classic-six runs, same ids, so one set of numbers serves both.

    Mutation check: dropping ``train.seq_len: 64`` from conf/family/code.yaml makes this fail."""
    classic = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5")
    flagship = {spec.run_id for _, spec in _built_jobs("flagship") if spec.taskset in ("code", "prose")}
    lm = {spec.run_id for job, spec in _built_jobs("lm") if any(f"+arch={a}" in job for a in classic)}
    assert len(flagship) == 60 and flagship == lm
    assert {spec.train.seq_len for _, spec in _built_jobs("lm")} == {64}


@pytest.mark.exhaustive
def test_the_zoos_classic_runs_are_the_flagships_own():
    """The zoo sets its newer schemes beside the flagship's runs: each classic scheme's zoo job on a
    flagship task is a flagship job (same spec, same run id), so it is copied, not trained again,
    and the two boards read one set of numbers."""
    classic = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"}
    zoo = _built_jobs("zoo")
    flagship = {spec.run_id for _, spec in _built_jobs("flagship")}
    shared = {spec.run_id for job, spec in zoo if any(o in job for o in (f"+arch={a}" for a in classic))}
    assert len(zoo) == 23 * 4 * 3 and len(shared) == 6 * 4 * 3 and shared <= flagship


# make test builds every job of the default sweep (make sweep's); every other sweep under make test-exhaustive
@pytest.mark.parametrize("name", fast_or_exhaustive(SWEEPS, {"default"}))
def test_every_sweep_is_a_multirun_of_configurations_each_with_several_seeds(name):
    cfg = _sweep_cfg(name)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN" and cfg.sweep_name == name
    specs = list({spec.run_id: spec for _, spec in _built_jobs(name)}.values())  # a repeated job trains once
    seeds = {}
    for s in specs:
        seeds.setdefault(s.config_hash, set()).add(s.seed)
    assert len(seeds) >= 2 and all(len(v) >= 2 for v in seeds.values())  # every cell has seeds to average
    assert len({len(v) for v in seeds.values()}) == 1  # and the same number of them
    if name in SWEEP_CHECKS:  # what the sweep itself promises, on the jobs built once above
        SWEEP_CHECKS[name](specs)


def test_the_published_sweeps_have_three_seeds_and_the_kazemnejad_protocol():
    for name in ("default", "kz"):
        cfg = _sweep_cfg(name)
        assert len(cfg.hydra.sweeper.params.seed.split(",")) >= 3
        assert cfg.train.min_len == 4 and cfg.train.seq_len == 32
    default, kz = _sweep_cfg("default"), _sweep_cfg("kz")
    assert list(default.eval.multiples)[:4] == [1, 1.25, 1.5, 2] and default.eval.n_examples >= 100
    # kz: their test set, every length L+1 .. 2L with equal example counts, and L itself; as many
    # examples per task as the default six-length grid, near enough
    assert list(kz.eval.multiples) == [1] + [(32 + k) / 32 for k in range(1, 33)]
    assert abs(len(kz.eval.multiples) * kz.eval.n_examples - 6 * 100) <= 10


@pytest.mark.exhaustive  # one board's sweep file; the default sweep's jobs are built in make test
def test_kz_sweep_configures_rope_and_ape_as_the_study_did():
    """Their RoPE (25 % of each head's dimensions, interleaved pairs) and their "APE", sinusoidal
    absolute positions, not a learned table."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        rope = build(compose("config", overrides=["+sweep=kz", "+arch=rope_kz", "task=reverse"]))
    cfg = rope.model.layers[0].position_cfg
    assert (cfg.fraction, cfg.layout) == (0.25, "interleaved")
    assert dict(rope.tasks[0].params)["eos"] is True and dict(rope.tasks[0].params)["distinct"] is False
    arms = _sweep_cfg("kz").hydra.sweeper.params["+arch"].split(",")
    assert "sinusoidal" in arms and "learned" not in arms
    assert {spec.model.layers[0].position for _, spec in _built_jobs("kz")} == {"nope", "t5", "alibi", "rope", "sinusoidal"}


def test_gpu_sweep_uses_the_gpu_recipe_and_base_model():
    cfg = _sweep_cfg("gpu")
    assert cfg.train.name == "gpu" and cfg.model.name == "base" and cfg.train.seq_len >= 1024
    assert max(cfg.eval.multiples) >= 16
    assert cfg.hydra.launcher.n_jobs == 1 == cfg.jobs  # one run at a time on the one GPU


@pytest.mark.exhaustive  # a sweep run twice; resuming is checked in make test by test_reliability's killed sweep
def test_a_finished_sweep_reruns_without_training(tmp_path):
    args = [sys.executable, "-m", "suite.run", "+sweep=hybrids", "train.steps=2", "eval.n_examples=2",
            "eval.multiples=[1]", "logger=none", f"results_dir={tmp_path}", f"hydra.sweep.dir={tmp_path}/h",
            "+arch=rope,command_a", "+family=copy", "seed=0", "launcher=basic"]
    first = forked_cli.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "hybrids").glob("*.json")}
    assert len(files) == 2
    log = [json.loads(line) for line in (tmp_path / "hybrids" / "_sweeps.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["jobs"] == 2 and log[0]["parallel"] == 1 and log[0]["wall_s"] > 0
    for path in files:  # every run says where its time went
        timing = json.loads(path.read_text())["run"]["timing"]
        assert {"train_s", "eval_s", "batches_s", "eval_sets_s", "log_s", "setup_s", "store_s"} <= set(timing)
        assert all(v >= 0 for v in timing.values())
    second = forked_cli.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert second.returncode == 0 and (second.stdout + second.stderr).count("skip ") == 2
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "hybrids").glob("*.json")} == files
    assert store.load(tmp_path / "hybrids").run_id.nunique() == 2


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_jobs_are_the_jobs_hydras_basic_sweeper_launches(name):
    """The validation callback expands a sweep with Hydra's public override parser; the basic
    sweeper's own expansion (a private API, used here only as the reference) gives the same jobs."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from suite.config.validate import sweep_jobs

    cfg = _sweep_cfg(name)
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.get("params") or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + list(cfg.hydra.overrides.task))
    expected = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
    assert sweep_jobs(cfg) == expected and len(expected) > 1


def test_extra_multiples_join_the_tasks_own_grid_in_one_list_and_one_run_id():
    """A sweep reaches further than its families' grids with eval.extra_multiples: the spec holds
    the joined list, so the run is the run of that list written out (same id); a length already
    in the grid is refused as a repeated length."""
    extended = make_spec("+arch=rope", "+family=code", "eval.extra_multiples=[16]")
    assert extended.eval.multiples == (1.0, 2.0, 4.0, 8.0, 16.0)
    assert extended.run_id == make_spec("+arch=rope", "+family=code", "eval.multiples=[1,2,4,8,16]").run_id
    assert make_spec("+arch=rope", "+family=copy", "eval.extra_multiples=[16]").eval.multiples[-2:] == (8.0, 16.0)
    assert make_spec("+arch=rope", "+family=copy").run_id != make_spec("+arch=rope", "+family=copy",
                                                                       "eval.extra_multiples=[16]").run_id
    with pytest.raises(SpecError, match=r"8 and 8 x train\.seq_len=32 both give the eval length 256"):
        make_spec("+family=copy", "eval.extra_multiples=[8]")


@pytest.mark.exhaustive  # 330 jobs built
def test_the_hybrids_board_trains_as_the_flagship_and_evaluates_to_16x():
    """Eleven arms x the flagship's six families x three seeds; each uniform arm the flagship also
    trains has the flagship's spec but for its evaluation grid, which goes on to 16 x L; every run
    stores its diagnostics."""
    hybrids = {spec.run_id: spec for _, spec in _built_jobs("hybrids")}
    assert len(hybrids) == 11 * 6 * 3
    assert {s.taskset for s in hybrids.values()} == {"copy", "niah_multivalue", "vt", "flipflop", "code", "prose"}
    assert all(s.eval.multiples[-1] == 16 and s.eval.diagnostics for s in hybrids.values())
    flagship = {(s.model.layers, s.taskset, s.seed): s for _, s in _built_jobs("flagship")}
    shared = [s for s in hybrids.values() if (s.model.layers, s.taskset, s.seed) in flagship]
    assert len(shared) == 3 * 6 * 3  # alibi, rope, nope
    for s in shared:
        f = flagship[(s.model.layers, s.taskset, s.seed)]
        assert (s.model, s.train, s.tasks) == (f.model, f.train, f.tasks)
        assert s.eval.multiples == (*f.eval.multiples, 16.0)
