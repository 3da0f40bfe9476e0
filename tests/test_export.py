"""``posbench export``: the leaderboard as a paper's wide table, one row per scheme in the report's
order and one column per task@eval_len, as CSV or as a LaTeX tabular.

Mutation checks: ``export_table`` passing ``interval=True`` always makes
test_csv_cells_are_the_leaderboards_means_in_the_reports_order fail ('0.9000 ± 0.5000' read as no
number); ``render`` dropping ``reset_index`` (no 'scheme' column) makes the same test fail;
``latex_escape`` returning its text unchanged makes test_latex_is_a_tabular_of_the_same_numbers
fail (a bare '_' and '±' in the tabular); ``check_format`` accepting every format makes
test_a_bad_format_or_output_is_refused_naming_the_choices fail, and so does ``check_out`` skipping
its reports/ check; ``source_path`` ignoring ``published`` makes
test_a_board_name_reads_the_published_board fail."""
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from suite.commands.export import main
from suite.report import boards, ranking
from suite.results import store
from tests.test_report import fixture_store  # noqa: F401

DATA = Path(__file__).resolve().parent / "data" / "published"


def _leaderboard(folder) -> pd.DataFrame:
    with pytest.warns(UserWarning):  # the fixture's junk file
        return ranking.in_order(boards.leaderboard(store.load(folder)))


def test_csv_cells_are_the_leaderboards_means_in_the_reports_order(fixture_store, capsys):  # noqa: F811
    """Every number of the CSV is its cell's mean over seeds (4 decimals), the schemes best first
    as the report orders them; learned's unsupported copy@64 is '-'."""
    assert main([str(fixture_store / "fx")]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str).set_index("scheme")
    board = _leaderboard(fixture_store / "fx")
    assert list(csv.index) == list(dict.fromkeys(board.scheme)) == ["alibi", "rope", "learned"]
    assert list(csv.columns) == ["copy@32", "copy@64"]
    for row in board.itertuples():
        text = csv.loc[row.scheme, f"{row.task}@{row.eval_len}"]
        assert text == "-" if row.n == 0 else float(text) == pytest.approx(row.mean, abs=5e-5), (row, text)
    assert csv.loc["rope", "copy@64"] == "0.3000" and csv.loc["learned", "copy@64"] == "-"


def test_interval_adds_the_half_width_of_each_cells_interval(fixture_store, tmp_path, capsys):  # noqa: F811
    """--interval: rope's two seeds at 32 have the interval [0, 1] (clipped), '0.9000 ± 0.5000';
    alibi's single seed of token accuracy has none and stays '0.9000'. --out writes the file."""
    out = tmp_path / "paper" / "table.csv"
    assert main([str(fixture_store / "fx"), "--interval", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    csv = pd.read_csv(out, dtype=str).set_index("scheme")
    assert csv.loc["rope", "copy@32"] == "0.9000 ± 0.5000" and csv.loc["alibi", "copy@32"] == "0.9000"


def test_latex_is_a_tabular_of_the_same_numbers(fixture_store, capsys):  # noqa: F811
    """The LaTeX is a tabular with a row per scheme holding the CSV's numbers; the interval is
    '$\\pm$' and an underscore in a name is escaped."""
    assert main([str(fixture_store / "fx"), "--format", "latex", "--interval"]) == 0
    tex = capsys.readouterr().out
    assert tex.startswith(r"\begin{tabular}{lrr}") and tex.rstrip().endswith(r"\end{tabular}")
    rows = {line.split(" & ")[0]: line.removesuffix(r" \\").split(" & ")[1:]
            for line in tex.splitlines() if line.endswith(r" \\")}
    assert rows["scheme"] == ["copy@32", "copy@64"]
    assert rows["rope"] == [r"0.9000 $\pm$ 0.5000", r"0.3000 $\pm$ 0.5000"] and rows["learned"][1] == "-"
    assert "±" not in tex
    assert main([str(fixture_store / "fx"), "--format", "latex", "--metric", "exact_match"]) == 0
    header = capsys.readouterr().out.splitlines()[2]
    assert header == r"scheme & copy@32 \\" and re.search(r"(?<!\\)_", header) is None


def test_a_board_name_reads_the_published_board(capsys):
    """A bare name is the published board of that name; an unknown one is refused naming the boards."""
    assert main(["rank_fixture", "--published", str(DATA)]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype=str)
    assert csv.columns[0] == "scheme" and len(csv) >= 2
    assert main(["no_such_board", "--published", str(DATA)]) == 2
    err = capsys.readouterr().err
    assert "'no_such_board'" in err and "boards: rank_fixture" in err


def test_a_bad_format_or_output_is_refused_naming_the_choices(fixture_store, tmp_path, capsys):  # noqa: F811
    """A bad --format names csv and latex; --out under reports/ or on a folder is refused before any work."""
    assert main([str(fixture_store / "fx"), "--format", "xlsx"]) == 2
    assert "--format 'xlsx': not a format; valid: csv, latex" in capsys.readouterr().err
    assert main([str(fixture_store / "fx"), "--out", "reports/table.csv"]) == 2
    assert "is under reports/" in capsys.readouterr().err
    assert main([str(fixture_store / "fx"), "--out", str(tmp_path)]) == 2
    assert "it is a folder, not a file" in capsys.readouterr().err
    assert not (Path("reports") / "table.csv").exists()
