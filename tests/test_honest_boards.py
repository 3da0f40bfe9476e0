"""A board says what it holds: its MRR intervals contain their points, a scheme is ranked only
against schemes over the same tasks, a partial board says "k of N runs" and never silently
replaces a fuller one, and the terminal's MRR names the runs behind each scheme and those not learned.

Mutation checks: ``mrr_intervals`` in suite/report/ranking.py taking ``stats.percentile_interval(b)``
alone (without ``stats.containing``) makes test_an_mrr_at_its_ceiling_keeps_its_point_inside_the_interval
fail; ``stats.containing`` returning (low, high) unchanged makes test_containing_widens_only_to_the_point
fail; ``ranked`` returning ``present`` makes
test_a_four_task_run_among_one_task_runs_is_ranked_on_the_shared_task_only fail; ``mrr_display`` in
suite/report/sections/mrr.py without its "ranked on" column makes it fail too; ``_distinct_runs`` in
suite/report/declared.py counting ``len(jobs)`` makes test_windows_declares_its_distinct_runs fail;
``_distinct_runs`` counting the jobs the sweep's skip list leaves out makes
test_a_skipped_job_is_not_declared fail; ``declared_runs`` without its ``have >= len(jobs)`` shortcut makes
test_a_whole_board_builds_no_job fail; ``check_replace`` in suite/report/__main__.py without its
``not args.force`` makes test_a_partial_board_says_k_of_n_and_refuses_a_fuller_one_without_force
fail, and so does ``Verdict.blocks`` in suite/report/sections/verdict.py without its coverage line; ``console_mrr`` without the
report's marks makes test_the_terminals_mrr_names_runs_and_not_learned fail."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from suite.report import boards, declared, ranking, render, stats
from suite.report.sections.mrr import mrr_display
from suite.report.__main__ import console_mrr, main as report_main
from suite.results import store
from tests.conftest import fast_or_exhaustive
from tests.test_report import _row, frame, write_fixture

SHIPPED = sorted(p.name.removesuffix(store.SHIPPED_SUFFIX) for p in __import__("pathlib").Path(store.PUBLISHED).glob("*.jsonl.gz"))


# make test: the flagship (tasks and text) and lm (text only, settings apart); every other board in make test-exhaustive
@pytest.mark.parametrize("sweep", fast_or_exhaustive(SHIPPED, {"flagship", "lm"}))
def test_every_shipped_mrr_interval_contains_its_point(sweep):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = store.load(store.shipped_path(sweep))
    rows = boards.primary(df)
    m = ranking.mrr_intervals(boards.board_of(rows), rows)
    for name in ("mrr_ood", "mrr_all"):
        assert ((m[f"{name}_low"] <= m[name]) & (m[name] <= m[f"{name}_high"])).all(), m[["scheme", name, f"{name}_low", f"{name}_high"]]


def test_containing_widens_only_to_the_point():
    low, high = stats.containing([0.74, 0.5, 0.2, math.nan], [0.51, 0.4, 0.3, 0.1], [0.72, 0.6, 0.4, 0.2])
    assert low[:3].tolist() == [0.51, 0.4, 0.2] and high[:3].tolist() == [0.74, 0.6, 0.4]
    assert np.isnan(low[3]) and np.isnan(high[3])


def _board(cells):
    return pd.DataFrame([{"scheme": s, "task": t, "eval_len": e, "train_len": 32, "mean": v, "higher_is_better": True}
                         for s, t, e, v in cells])


def _runs(cells):
    """One run per (scheme, task) scoring each cell's mean: the rows a bootstrap resamples."""
    return pd.DataFrame([{"scheme": s, "task": t, "run_id": f"{s}-{t}", "eval_len": e, "value": v} for s, t, e, v in cells])


def test_an_mrr_at_its_ceiling_keeps_its_point_inside_the_interval():
    """a beats b by 0.001 in each of 20 cells, from two runs 0.2 apart; b's runs agree. a's point
    MRR is 1, yet a replicate keeps a first in a cell only when it does not draw a's low run twice
    (3 in 4), so it wins all 20 cells in 0.75**20 < 0.4 % of replicates: the percentile interval
    alone ends below 1 and the reported one is widened to contain it."""
    cells, runs = [], []
    for k in range(20):
        task = f"t{k}"
        cells += [("a", task, 64, 0.5), ("b", task, 64, 0.499)]
        runs += [{"scheme": "a", "task": task, "run_id": f"a{i}", "eval_len": 64, "value": v} for i, v in enumerate((0.6, 0.4))]
        runs += [{"scheme": "b", "task": task, "run_id": f"b{i}", "eval_len": 64, "value": 0.499} for i in range(2)]
    board, rows = _board(cells), pd.DataFrame(runs)
    schemes, b_ood, _ = ranking.mrr_replicates(board, rows, "min", 400, ranking.BOOTSTRAP_SEED)
    assert stats.percentile_interval(b_ood)[1][schemes.index("a")] < 1.0  # the replicates alone miss the point
    m = ranking.mrr_intervals(board, rows, reps=400).set_index("scheme")
    assert m.loc["a", "mrr_ood"] == 1.0
    assert m.loc["a", "mrr_ood_low"] < 1.0 and m.loc["a", "mrr_ood_high"] == 1.0


def test_a_four_task_run_among_one_task_runs_is_ranked_on_the_shared_task_only():
    """a and b ran copy only; mix, one run trained on four tasks, scores 0.99 on the three no one
    else ran. Ranked there it would take MRR (1/2 + 1 + 1 + 1) / 4 = 0.875; it is ranked on copy
    alone, second at 64: 1/2."""
    cells = [("a", "copy", 32, 0.9), ("a", "copy", 64, 0.8), ("b", "copy", 32, 0.5), ("b", "copy", 64, 0.4),
             ("mix", "copy", 32, 0.7), ("mix", "copy", 64, 0.6)]
    cells += [("mix", task, e, 0.99) for task in ("flipflop", "niah_multivalue", "vt") for e in (32, 64)]
    m = ranking.mrr(_board(cells)).set_index("scheme")
    assert m.mrr_ood.to_dict() == pytest.approx({"a": 1.0, "mix": 0.5, "b": 1 / 3})
    assert m.mrr_all.to_dict() == pytest.approx({"a": 1.0, "mix": 0.5, "b": 1 / 3})
    assert m.cells_ood.to_dict() == {"a": 1, "b": 1, "mix": 1} and m.cells_all.to_dict() == {"a": 2, "b": 2, "mix": 2}
    assert set(m.ranked_on) == {"copy"}
    # a scheme ranked on fewer tasks than the others: the table says which
    two = ranking.mrr(_board(cells + [("a", "vt", 32, 0.1), ("a", "vt", 64, 0.1)])).set_index("scheme")
    assert two.ranked_on.to_dict() == {"a": "copy, vt", "b": "copy", "mix": "copy, vt"}
    more = cells + [("a", "vt", 32, 0.1), ("a", "vt", 64, 0.1)]
    shown = mrr_display(ranking.mrr_intervals(_board(more), _runs(more), reps=2))
    assert dict(zip(shown.scheme, shown["ranked on"])) == {"a": "copy, vt", "b": "copy", "mix": "copy, vt"}


def test_a_scheme_alone_on_its_board_or_in_its_setting_ranks_first(tmp_path):
    """A board of one scheme has an MRR of 1 (first, with no neighbour), its interval [1, 1], not
    an empty table; so has the one scheme of a setting on a board of two settings, while the other
    setting's schemes rank among themselves. A cell only one scheme has on a board of several (mix
    alone on vt) still ranks nothing; the report of a one-scheme board builds and says so.

    Mutation check: ``ranked`` in suite/report/ranking.py without its loop over the settings (the
    rule before: a cell needs two schemes) makes this fail; so does ``mrr`` calling ``ranked`` without
    ``_cell_settings`` (the board one setting)."""
    one = [("rope", "copy", 32, 0.9), ("rope", "copy", 64, 0.4), ("rope", "vt", 64, 0.2)]
    m = ranking.mrr_intervals(_board(one), _runs(one), reps=20).set_index("scheme")
    assert (m.mrr_ood["rope"], m.mrr_ood_low["rope"], m.mrr_ood_high["rope"], m.mrr_all["rope"]) == (1, 1, 1, 1)
    assert (m.cells_ood["rope"], m.cells_all["rope"], m.ranked_on["rope"]) == (2, 3, "copy, vt")
    two = pd.concat([_board([("rope", "copy", 64, 0.4)]).assign(setting="L=32", setting_at=0, name="rope"),
                     _board([("rope", "copy", 64, 0.3), ("alibi", "copy", 64, 0.6)]).assign(
                         setting="L=64", setting_at=1, name=lambda b: b.scheme)], ignore_index=True)
    two.loc[two.setting == "L=64", "scheme"] = two.scheme + " L=64"
    got = ranking.mrr(two).set_index("scheme")
    assert got.mrr_ood.to_dict() == {"rope": 1.0, "alibi L=64": 1.0, "rope L=64": 0.5}
    assert got.cells_ood.to_dict() == {"rope": 1, "alibi L=64": 1, "rope L=64": 1} and got.ranked_on["rope"] == "copy"
    several = [("a", "copy", 64, 0.9), ("mix", "copy", 64, 0.5), ("mix", "vt", 64, 0.99)]
    assert ranking.mrr(_board(several)).set_index("scheme").cells_ood.to_dict() == {"a": 1, "mix": 1}
    assert not ranking.ranked(np.array([[True, True], [True, False]]))[0, 1]
    rows = [_row(f"rope-{s}", "rope", s, "copy", e, v) for s in (0, 1) for e, v in ((32, 0.9), (64, 0.4 + 0.1 * s))]
    out = render.write(frame(rows), "fx", tmp_path / "fx")
    assert (out / "index.md").read_text().startswith(
        "# PosBench leaderboard: `fx`\n\n**rope is the only scheme ranked by MRR beyond the training length (1.00;")


def test_one_task_set_shows_no_ranked_on_column():
    cells = [("a", "copy", 64, 0.9), ("b", "copy", 64, 0.5)]
    shown = mrr_display(ranking.mrr_intervals(_board(cells), _runs(cells), reps=2))
    assert "ranked on" not in shown


@pytest.mark.exhaustive  # expands the windows sweep; declared runs are also checked by the skipped-job and partial-board tests
def test_windows_declares_its_distinct_runs():
    """windows crosses 5 archs x 3 windows x 3 seeds (45 jobs); nope, gdn_nope and gla_nope have no
    window, so each of their three window settings is one run: 2 x 3 x 3 + 3 x 3 = 27."""
    assert declared.declared_runs("windows") == 27
    assert declared.declared_runs("no_such_sweep") is None


def test_a_skipped_job_is_not_declared(monkeypatch):
    """scale skips vt at L = 128: of its NoPE jobs at that setting on copy and vt (2 families x 3
    seeds), the 3 vt jobs are no run the sweep declares, so a board holding the other 3 is whole,
    not '3 of 6'."""
    jobs = [job for job in declared._jobs("scale") if "+arch=nope" in job and "+setting=tiny_L128" in job
            and ("+family=copy" in job or "+family=vt" in job)]
    assert len(jobs) == 6
    monkeypatch.setattr(declared, "_jobs", lambda sweep: jobs)
    assert declared.declared_runs("scale") == 3
    assert declared.coverage("scale", 3, declared.declared_runs("scale", have=3)) is None


def test_a_whole_board_builds_no_job(monkeypatch):
    def refuse(jobs):
        raise AssertionError("a board with every job's run needs no build")

    monkeypatch.setattr(declared, "_distinct_runs", refuse)
    assert declared.declared_runs("default", have=36) == 36 and declared.coverage("default", 36, 36) is None


def _partial(tmp_path):
    """The four runs of the report fixture, as results/default: 4 of the 36 runs default declares."""
    return write_fixture(tmp_path, sweep="default")


@pytest.mark.exhaustive  # three report builds; make test counts declared runs in the skipped-job and whole-board cases
def test_a_partial_board_says_k_of_n_and_refuses_a_fuller_one_without_force(tmp_path, capsys):
    results, out = _partial(tmp_path), tmp_path / "reports"
    assert report_main(["default", "--results", str(results), "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[1]  # after the line that counts the declared runs
    assert first.startswith("4 of 36 runs: this board holds part of the sweep conf/sweep/default.yaml declares")
    md = (out / "default" / "index.md").read_text()
    assert md.splitlines()[2].startswith("> **4 of 36 runs:") and "4 of 36 runs:" in (out / "default" / "index.html").read_text()
    full = md.replace("- runs: 4\n", "- runs: 36\n")  # the board already there holds 36 runs
    (out / "default" / "index.md").write_text(full)
    assert report_main(["default", "--results", str(results), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert (f"{out / 'default'}/index.md holds a board of 36 runs; this one has 4 of 36 runs. Nothing was written; "
            "pass --force (make report FORCE=1) to replace it") in err
    assert (out / "default" / "index.md").read_text() == full
    assert report_main(["default", "--results", str(results), "--out", str(out), "--force"]) == 0
    assert (out / "default" / "index.md").read_text() == md


def test_the_terminals_mrr_names_runs_and_not_learned(tmp_path, capsys):
    """The fixture: rope's seed 1 scores 0.8 at L (not learned), alibi and learned one seed each.
    The terminal prints the report's MRR table over every run with the runs behind each scheme, how
    many learned, the learned runs' MRR beside it and the report's not-learned mark."""
    results = write_fixture(tmp_path)
    assert report_main(["fx", "--results", str(results), "--out", str(tmp_path / "reports")]) == 0
    printed = capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shown = console_mrr(render.build(store.load(results / "fx"), "fx"))
    assert shown.to_string(index=False) in printed
    assert list(shown.columns[:5]) == ["scheme", "MRR (OOD)", "MRR (all)", "runs learned", "MRR (OOD), learned runs"]
    rows = shown.set_index("scheme")
    assert rows.runs.to_dict() == {"rope": "n=2", "alibi": "n=1", "learned": "n=1"}
    assert rows["runs learned"].to_dict() == {"rope": "1 of 2", "alibi": "1 of 1", "learned": "1 of 1"}
    assert rows["not learned"].to_dict() == {"rope": "copy 1 of 2", "alibi": "", "learned": ""}  # the report's mark
