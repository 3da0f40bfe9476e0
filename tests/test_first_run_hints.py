"""On a fresh clone, a command that reads earlier runs says which command makes them and which
published board can be read instead (``suite.results.store.first_run_hint``).

Mutation checks: ``read_source`` not adding the hint makes test_summary_of_a_missing_results_folder_names_make_sweep
fail; ``find_run`` in suite/commands/curve.py not adding it makes test_curve_of_a_missing_results_folder_names_make_sweep
fail; ``first_run_hint`` naming the shipped file without checking it is shipped makes the 'nosuch' case fail."""
import os
from pathlib import Path

from suite import cli

ROOT = Path(__file__).resolve().parent.parent


def test_summary_of_a_missing_results_folder_names_make_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink(ROOT / "published", tmp_path / "published")
    assert cli.main(["summary", "results/default"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("no results under results/default: run `make sweep` (or `make sweep SWEEP=default`) first, "
                        "or read the published board: posbench summary published/default.jsonl.gz\n"), err
    assert cli.main(["summary", "published/default.jsonl.gz"]) == 0  # the board it names is read
    capsys.readouterr()
    assert cli.main(["summary", "results/nosuch"]) == 2
    assert capsys.readouterr().err.endswith("(or `make sweep SWEEP=nosuch`) first\n")


def test_curve_of_a_missing_results_folder_names_make_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink(ROOT / "published", tmp_path / "published")
    assert cli.main(["curve", "results/default", "--results", str(tmp_path / "results")]) == 1
    assert capsys.readouterr().err.endswith(
        "no results under results/default: run `make sweep` (or `make sweep SWEEP=default`) first, "
        "or read the published board: posbench curve published/default.jsonl.gz\n")
