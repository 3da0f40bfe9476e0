"""Shipped reports are written only on purpose: ``python -m suite.report`` writes ``reports/<sweep>/``
only from the sweep's own shipped rows as they are; a board built from anything else (a results
folder, runs beside it, another metric, tie rule or threshold) goes to ``reports-local/<sweep>/``
and says so, and ``--out reports`` for such a board is refused with nothing written.

Each test runs in a folder of its own laid out as a checkout (``published/fx.jsonl.gz``), since
the routes are relative to where the command runs, as ``make report`` runs them.

Mutation checks: ``not_published`` returning None always makes
test_a_board_built_from_runs_goes_to_the_local_folder and the parametrized option cases fail;
dropping the ``--out`` refusal in ``destination`` makes
test_out_naming_the_shipped_folder_is_refused_for_any_other_board fail; defaulting every build to
the local folder makes test_the_published_board_goes_to_reports fail."""
import hashlib
from pathlib import Path

import pytest

from suite.report.__main__ import main as report_main
from suite.results import shipped, store
from tests.test_report import fixture_store  # noqa: F401  (the report tests' four-run store)


@pytest.fixture
def checkout(fixture_store, tmp_path, monkeypatch):  # noqa: F811
    """A folder with the fixture board shipped as published/fx.jsonl.gz, the working folder."""
    with pytest.warns(UserWarning):  # the fixture store's junk file is skipped as it is packed
        shipped.pack(fixture_store / "fx", store.shipped_path("fx", tmp_path / "published"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.is_dir() else {}


def test_the_published_board_goes_to_reports(checkout, capsys):
    assert report_main(["fx"]) == 0
    assert (checkout / "reports" / "fx" / "index.md").is_file() and not (checkout / "reports-local").exists()
    assert "not the published board" not in capsys.readouterr().out


def test_a_board_built_from_runs_goes_to_the_local_folder(checkout, fixture_store, capsys):  # noqa: F811
    report_main(["fx"])
    shipped_report = _digests(checkout / "reports")
    assert report_main(["fx", "--results", str(fixture_store)]) == 0
    out = capsys.readouterr().out
    assert (checkout / "reports-local" / "fx" / "index.md").is_file()
    assert "not the published board (it is built from" in out and "reports-local/fx/" in out
    assert _digests(checkout / "reports") == shipped_report  # the published report is untouched


@pytest.mark.parametrize("option", [["--metric", "exact_match"], ["--tie", "average"], ["--threshold", "0.5"],
                                    ["--beside", "published/fx.jsonl.gz"]], ids=lambda o: o[0])
def test_an_option_that_changes_the_board_sends_it_to_the_local_folder(checkout, capsys, option):
    assert report_main(["fx", *option]) == 0
    assert (checkout / "reports-local" / "fx" / "index.md").is_file() and not (checkout / "reports").exists()
    assert f"{option[0]} changes the board" in capsys.readouterr().out


def test_out_naming_the_shipped_folder_is_refused_for_any_other_board(checkout, capsys):
    assert report_main(["fx", "--metric", "exact_match", "--out", "reports"]) == 2
    err = capsys.readouterr().err
    assert "--out reports: reports/fx/ holds the published board" in err and "reports-local/fx/" in err
    assert not (checkout / "reports").exists() and not (checkout / "reports-local").exists()


def test_another_out_is_honoured(checkout):
    assert report_main(["fx", "--metric", "exact_match", "--out", "elsewhere"]) == 0
    assert (checkout / "elsewhere" / "fx" / "index.md").is_file()
    assert not (checkout / "reports").exists() and not (checkout / "reports-local").exists()
