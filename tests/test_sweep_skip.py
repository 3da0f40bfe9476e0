"""A sweep's ``skip`` list (suite.run.skip_reason): grid points the Cartesian product would launch
and the sweep leaves out, each with its reason.

Mutation checks: ``any`` for ``all`` in skip_reason's match fails
test_an_entry_leaves_out_only_jobs_that_hold_every_option_it_names; dropping the option-file check
fails test_a_misspelt_entry_is_refused_with_the_valid_choices."""
import json
import sys

import pytest

from suite.config.build import SpecError
from suite.run import skip_reason
from tests import forked_cli
from tests.test_sweeps import ROOT

ENTRY = {"family": "copy", "setting": "tiny_L128", "why": "not learnable within the cap"}


def test_an_entry_leaves_out_only_jobs_that_hold_every_option_it_names():
    assert skip_reason([ENTRY], {"family": "copy", "setting": "tiny_L128", "model": "tiny"}) == (
        "the sweep leaves out family=copy, setting=tiny_L128: not learnable within the cap")
    assert skip_reason([ENTRY], {"family": "copy", "setting": "tiny_L64"}) is None
    assert skip_reason([ENTRY], {"family": "vt", "setting": "tiny_L128"}) is None
    assert skip_reason([ENTRY], {"setting": "tiny_L128"}) is None  # a group the job does not choose
    assert skip_reason([], {"family": "copy"}) is None
    assert skip_reason([{"family": "copy"}], {"family": "copy"}) == "the sweep leaves out family=copy"


@pytest.mark.parametrize("entry, said", [
    ({"famly": "copy"}, "group 'famly', not a config group; valid: arch, "),
    ({"setting": "tiny_L46"}, "setting='tiny_L46', not an option of setting; valid: mini_L32, tiny_L128, tiny_L32, "),
    ({"why": "no group"}, "names no config group"),
])
def test_a_misspelt_entry_is_refused_with_the_valid_choices(entry, said):
    """An entry that matches no possible job would skip nothing, silently: it is a bad configuration."""
    with pytest.raises(SpecError, match="skip entry") as err:
        skip_reason([entry], {"family": "copy", "setting": "tiny_L128"})
    assert said in str(err.value)


@pytest.mark.exhaustive  # a whole sweep trained; the skip list's jobs are checked in-process in make test
def test_a_sweep_trains_every_job_but_those_it_leaves_out(tmp_path):
    """Two jobs, one named by the skip list: one run is stored, the other job says why it did not run
    and counts as done, not as stored."""
    args = [sys.executable, "-m", "suite.run", "+sweep=hybrids", "train.steps=2", "eval.n_examples=2",
            "eval.multiples=[1]", "logger=none", f"results_dir={tmp_path}", f"hydra.sweep.dir={tmp_path}/h",
            "+arch=rope,command_a", "+family=copy", "seed=0", "launcher=basic", "skip=[{arch: command_a, why: a test}]"]
    out = forked_cli.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = [json.loads(p.read_text())["run"]["run_id"] for p in (tmp_path / "hybrids").glob("*.json")]
    assert len(runs) == 1 and runs[0].startswith("rope-")
    said = out.stdout + out.stderr
    assert "the sweep leaves out arch=command_a: a test" in said
    assert "run 2 of 2 left out" in said and "(1 left out)" in said and "already stored" not in said
