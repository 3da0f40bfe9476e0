"""``posbench diagnose --stored`` finds a sweep's trained models in <results>/<sweep>/ (``--sweep``
composes the config as ``make sweep SWEEP=<sweep>`` does, ``--results`` names the folder), and when
none is there it says where it looked and which command trains it.

Mutation checks: ``main`` composing without ``+sweep=<sweep>`` makes
test_sweep_reads_the_sweeps_trained_model_and_without_it_names_where_to_look fail (it looks under
dev/); ``missing_model`` leaving out the sweeps of ``sweeps_training`` makes the same test and
test_the_sweeps_whose_grid_holds_a_scheme_are_named fail; ``sweeps_training`` matching any axis,
not only the scheme's, makes test_the_sweeps_whose_grid_holds_a_scheme_are_named fail;
``make_sweep`` leaving out ``ARGS=results_dir=`` makes
test_under_sweep_a_missing_model_names_the_sweeps_folder_and_make_sweep fail; ``check_sweep``
accepting any name makes test_an_unknown_sweep_is_refused_naming_the_sweeps fail."""
import pytest

from suite.commands import diagnose
from suite.results.identity import run_id
from suite.run import execute
from tests.conftest import make_spec

TINY = ["+arch=alibi", "task=copy", "seed=0", "model.n_layers=2", "model.d_model=16", "model.n_heads=2",
        "model.d_ff=32", "train.steps=3", "train.batch_size=4", "train.seq_len=12", "eval.n_examples=3",
        "eval.batch_size=3", "eval.multiples=[1]", "logger=none"]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_sweep_reads_the_sweeps_trained_model_and_without_it_names_where_to_look(tmp_path, capsys):
    """A run of the default sweep stored under <results>/default/ is diagnosed trained with
    --sweep default --results <results>; without --sweep the same overrides look under
    <results>/dev/, and the refusal names that folder, the file, `posbench run` and the sweeps
    that train alibi, default among them, to be read with --sweep."""
    results = tmp_path / "results"
    spec = make_spec("+sweep=default", *TINY)
    assert spec.sweep == "default"
    execute(spec, results_dir=results, progress=False)
    assert (results / "default" / "_work" / run_id(spec) / "model.pt").is_file()
    capsys.readouterr()
    assert diagnose.main(["--sweep", "default", "--results", str(results), *TINY, "--stored"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recency gap f(1) - f(") and " at trained, " in out.splitlines()[0]
    assert diagnose.main(["--results", str(results), *TINY, "--stored"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"no stored model of {' '.join(TINY)} under {results}/dev/ (looked for {results}/dev/_work/")
    assert f"train it with `posbench run {' '.join(TINY)} results_dir={results}`" in err
    assert (f"or `make sweep SWEEP=default ARGS=results_dir={results}` for {results}/default/, read with --sweep "
            "default") in err and len(err.splitlines()) == 1


def test_under_sweep_a_missing_model_names_the_sweeps_folder_and_make_sweep(tmp_path, capsys):
    """--sweep hybrids without a stored model: the refusal names <results>/hybrids/, the file
    and `make sweep SWEEP=hybrids` into that results folder."""
    assert diagnose.main(["--sweep", "hybrids", "--results", str(tmp_path), "pattern=rope_in_swa", "--stored"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"no stored model of pattern=rope_in_swa under {tmp_path}/hybrids/ (looked for "
                          f"{tmp_path}/hybrids/_work/")
    assert err.endswith(f"train it with `make sweep SWEEP=hybrids ARGS=results_dir={tmp_path}` (if the sweep's grid "
                        "holds this run)")


def test_the_sweeps_whose_grid_holds_a_scheme_are_named(capsys):
    """pattern=rope_in_swa is on hybrids' +arch axis, not on default's; a sweep_name= that names a
    sweep is offered first. The brief's line: where it looked and the commands that train it."""
    assert "hybrids" in diagnose.sweeps_training(["pattern=rope_in_swa"])
    assert "default" not in diagnose.sweeps_training(["pattern=rope_in_swa", "seed=0"])
    assert diagnose.sweeps_training(["seed=0", "task=copy"]) == []
    assert "default" not in diagnose.sweeps_training(["position=copy"])  # on default's task axis, not its scheme's
    assert diagnose.main(["pattern=rope_in_swa", "results_dir=/nonexistent/r", "--stored"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("no stored model of pattern=rope_in_swa results_dir=/nonexistent/r under /nonexistent/r/dev/")
    assert ("train it with `posbench run pattern=rope_in_swa results_dir=/nonexistent/r` (or `make sweep SWEEP=hybrids "
            "ARGS=results_dir=/nonexistent/r` for /nonexistent/r/hybrids/, read with --sweep hybrids") in err


def test_an_unknown_sweep_is_refused_naming_the_sweeps(capsys):
    assert diagnose.main(["--sweep", "nosuch", "--stored"]) == 2
    err = capsys.readouterr().err
    assert "--sweep 'nosuch': no sweep file" in err and "valid: " in err and "hybrids" in err
