"""``posbench summary`` prints the report's leaderboard cells: one row per configuration, labelled
as the report labels it, with the runs behind each cell and how many have not learned.

Mutation checks: in suite/report/boards.py primary, splitting a scheme name only past 2
configurations (``> 2``) pools the two step counts and makes test_two_step_counts_of_one_scheme_print_two_rows fail;
``marks`` in suite/report/summary.py terminal_table left empty makes
test_a_cell_names_its_runs_the_not_learned_and_a_single_seed fail, and so does ``cell_text`` in
suite/report/boards.py printing '[nan, nan]' again (its NaN check removed); ``write_machine`` writing
``table.drop(columns="runs")`` makes test_csv_and_json_write_the_table_the_terminal_shows fail."""
import io
import json
import math

import pandas as pd
import pytest

from suite.report.__main__ import main as report_main
from suite.report.summary import main, summary_table
from suite.results import store
from tests.conftest import make_spec, spec_for
from tests.test_report import _row, fixture_store  # noqa: F401


def _write(tmp_path, steps_values):
    for steps, value in steps_values:
        spec = make_spec("position=alibi", f"train.steps={steps}").to_dict()
        for seed in (0, 1):
            rid = f"alibi-{steps}-s{seed}"
            rows = [_row(rid, "alibi", seed, "copy", 32, value + seed / 10, config=f"cfg{steps}", steps=steps)]
            made = spec_for(rows)  # what the store checks rows against; the steps kept
            spec_stored = {**spec, "train": {**spec["train"], **made["train"]}, "eval": {**spec["eval"], **made["eval"]},
                           "tasks": made["tasks"]}
            store.write_run(tmp_path, "fx", rid, {"run_id": rid, "sweep": "fx", "spec": spec_stored}, rows)
    return tmp_path / "fx"


def test_two_step_counts_of_one_scheme_print_two_rows(tmp_path, capsys):
    """Two rows, in the order of the report's MRR over every run (steps=20 scores higher: first)."""
    folder = _write(tmp_path, [(10, 0.1), (20, 0.5)])
    assert main([str(folder), "--long"]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()[2:]]
    assert [(line[0], line[1]) for line in lines] == [("alibi", "steps=20"), ("alibi", "steps=10")]
    assert [float(line[5]) for line in lines] == [0.55, 0.15]  # mean over the two seeds
    assert [line[8] for line in lines] == ["n=2", "n=2"]  # seeds with a value


def test_a_cell_names_its_runs_the_not_learned_and_a_single_seed(tmp_path, capsys):
    """steps=10 scores 0.1 and 0.2 at the training length: both runs have not learned copy; of
    steps=20 one seed is stored (1.05 is refused as outside [0, 1]): '0.9500 (n=1)', no '[nan, nan]'."""
    folder = _write(tmp_path, [(10, 0.1), (20, 0.95)])
    assert main([str(folder), "--long"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()[2:]
    assert lines[1].split()[5:] == ["0.1500", "[0.0000,", "0.7853]", "n=2", "2", "of", "2", "ok"]
    assert lines[0].split()[5:] == ["0.9500", "(n=1)", "n=1", "ok"]
    assert "nan" not in out


def test_a_summary_equals_the_reports_leaderboard_csv(fixture_store, tmp_path):  # noqa: F811
    assert report_main(["fx", "--results", str(fixture_store), "--out", str(tmp_path / "rep")]) == 0
    csv = pd.read_csv(tmp_path / "rep" / "fx" / "leaderboard.csv")
    with pytest.warns(UserWarning):
        got = summary_table(store.load(fixture_store / "fx"))
    cols = ["scheme", "task", "eval_len", "mean", "ci_low", "ci_high", "n_seeds"]
    pd.testing.assert_frame_equal(got[cols], csv[cols], check_dtype=False)


def test_nothing_to_show_exits_1_and_no_folder_is_a_bad_argument(tmp_path, capsys):
    """An empty folder is nothing to show (1); a path that is no folder or shipped file is a bad
    argument (2), named with the valid choices."""
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 1 and "no results under" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such folder or file; give a results folder" in capsys.readouterr().err


def test_csv_and_json_write_the_table_the_terminal_shows(tmp_path, capsys):
    folder = _write(tmp_path, [(10, 0.1), (20, 0.95)])
    assert main([str(folder), "--csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert main([str(folder), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    with pytest.warns(UserWarning):
        expected = summary_table(store.load(folder))
    pd.testing.assert_frame_equal(csv, expected, check_dtype=False)
    assert [r["scheme"] for r in records] == ["alibi steps=20", "alibi steps=10"]  # the MRR's order
    assert [(r["mean"], r["n_seeds"], r["not_learned"], r["runs"]) for r in records] == [(0.95, 1, 0, 1), (0.15, 2, 2, 2)]
    assert records[0]["ci_low"] is None and math.isnan(csv.ci_low[0])  # one seed: no interval, null in JSON


def test_csv_and_json_are_one_choice(tmp_path, capsys):
    folder = _write(tmp_path, [(10, 0.1)])
    with pytest.raises(SystemExit) as exit_:
        main([str(folder), "--csv", "--json"])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_full_attention_and_a_window_are_two_rows_with_their_runs_and_not_learned():
    """alibi with full attention (seed 1 has not learned copy: token accuracy 0.4 at L) and alibi
    with a sliding window of 16, two seeds each, are two configurations on every row.
    Mutation check: ``primary`` in suite/report/boards.py labelling every uniform scheme by its
    positions alone (its span dropped from ``scheme_label``) makes this fail."""
    from tests.test_report import frame

    rows = []
    for seed, acc in ((0, 1.0), (1, 0.4)):
        rows.append(_row(f"alibi-full-s{seed}", "alibi", seed, "copy", 32, acc, config="full"))
    for seed in (0, 1):
        rows.append({**_row(f"alibi-swa-s{seed}", "alibi", seed, "copy", 32, 0.95, config="swa"), "spans": "swa",
                     "window": 16})
    table = summary_table(frame(rows))  # without stored specs a configuration is named by its hash: 'alibi [full]'
    full, window = (table[table.scheme.str.startswith(label)].iloc[0] for label in ("alibi [", "alibi swa w=16"))
    assert len(table) == 2 and (full["mean"], window["mean"]) == (pytest.approx(0.7), pytest.approx(0.95))
    assert (full.runs, full.not_learned, window.runs, window.not_learned) == (2, 1, 2, 0)


def test_the_summary_prints_the_reports_mrr_then_one_row_per_scheme(fixture_store, capsys):  # noqa: F811
    """By default the summary prints the headline MRR over every run (the OOD MRR of each scheme,
    as ``ranking.mrr`` gives it, with its interval), then the leaderboard one row per scheme and one
    column per task@eval_len holding the mean over seeds.
    Mutation checks: ``mrr_table`` reading ``mrr_all`` for its OOD column, or ``wide_table`` printing
    ``ci_high`` for the mean, makes this fail."""
    from suite.report import boards, ranking

    with pytest.warns(UserWarning):
        df = store.load(fixture_store / "fx")
    assert main([str(fixture_store / "fx")]) == 0
    out = capsys.readouterr().out
    mrr_part, board_part = out.split("\nleaderboard: ", 1)
    printed = {line.split()[0]: float(line.split()[1]) for line in mrr_part.splitlines()[2:]}
    expected = ranking.mrr(boards.board_of(boards.primary(df))).set_index("scheme").mrr_ood
    assert printed == {s: round(v, 3) for s, v in expected.items()} == {"alibi": 1.0, "rope": 0.5, "learned": 0.333}
    assert list(printed) == list(expected.index)  # best first
    header, *lines = board_part.splitlines()[1:]
    board = boards.leaderboard(df).set_index(["scheme", "task", "eval_len"])["mean"]
    for line in lines:
        scheme, *cells = line.split()
        for column, cell in zip(header.split(), cells):
            task, length = column.split("@")
            mean = board.loc[(scheme, task, int(length))]
            assert cell == ("-" if pd.isna(mean) else f"{mean:.4f}"), (scheme, column)
    assert len(lines) == 3 and len(header.split()) == 2
