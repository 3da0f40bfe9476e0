"""A fair protocol (docs/protocol.md): no ordering comes from the protocol itself. The headline ranks every
run, learned or not; a board that varies the training length or the model ranks within each
setting and never pools settings in a cell; the bootstrap resamples tasks as well as seeds and a
discrete one says so; each metric's tie margin is its own, on its own scale.

Mutation checks, each named in its test's docstring, were run by breaking the guarded line and
watching the test fail."""
import hashlib
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from suite.data.metrics import METRICS
from suite.report import boards, ranking, render, stats
from suite.report.sections import guide
from suite.report.sections.mrr import mrr_display
from suite.report.sections.power import power
from tests.test_report import _row, frame


def _runs(scores: dict, train_len: int = 32, d_model: int = 64) -> list[dict]:
    """Rows of {(scheme, task): [(score at L, score at 2L) per seed]}, one run per (scheme, task, seed)."""
    rows = []
    for (scheme, task), seeds in scores.items():
        for seed, (at_l, at_2l) in enumerate(seeds):
            run = f"{scheme}-{task}-{train_len}-{d_model}-{seed}"
            for eval_len, value in ((train_len, at_l), (2 * train_len, at_2l)):
                config = hashlib.sha1(f"{scheme}-{train_len}-{d_model}".encode()).hexdigest()[:12]  # one per setting
                row = _row(run, scheme, seed, task, eval_len, value, config=config, train_len=train_len)
                rows.append({**row, "d_model": d_model})
    return rows


def _build(rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return render.build(frame(rows), "fx")


def test_a_scheme_with_no_learned_run_of_a_task_still_ranks_there_and_ranks_last_when_worst():
    """c learns reverse but none of its copy runs learns copy (0.2 at L) and it scores worst at 2L. The
    learned-only filter drops c from the copy cells, so c is ranked on reverse alone, where it wins, and
    leads with 1.0: a leader made by the filter. Over every run c ranks last in copy (1/3) and first
    in reverse: (1/3 + 1) / 2; a leads with (1 + 1/2) / 2.

    Mutation check: ``mrr_every`` in suite/report/ranking.py ranking ``learned_rows(rows)`` for its
    headline (the protocol before the fair one (docs/protocol.md)) makes this fail."""
    scores = {("a", "copy"): [(1.0, 0.8)] * 3, ("b", "copy"): [(1.0, 0.6)] * 3, ("c", "copy"): [(0.2, 0.1)] * 3,
              ("a", "reverse"): [(1.0, 0.5)] * 3, ("b", "reverse"): [(1.0, 0.3)] * 3, ("c", "reverse"): [(1.0, 0.9)] * 3}
    r = _build(_runs(scores))
    m = r["mrr"].set_index("scheme")
    assert m.mrr_ood.to_dict() == pytest.approx({"a": 3 / 4, "b": (1 / 2 + 1 / 3) / 2, "c": 2 / 3})
    assert m.cells_ood["c"] == 2 and m.ranked_on["c"] == "copy, reverse"  # c did not vanish from copy
    lay = ranking._arrays(r["board"])
    rr = ranking._reciprocal_ranks(lay.scores[None], lay.present, "min", lay.signs, lay.margins)[0]
    copy_2l = lay.cells.index(("", "copy", 64))
    assert rr[lay.schemes.index("c"), copy_2l] == pytest.approx(1 / 3)  # last there: it scores worst
    assert list(r["mrr"].scheme) == ["a", "c", "b"]
    # beside it, the learned runs only: c ranked on reverse alone, first with 1.0
    assert m.mrr_ood_learned.to_dict() == pytest.approx({"a": 3 / 4, "b": (1 / 2 + 1 / 3) / 2, "c": 1.0})
    assert m.learned["c"] == "3 of 6" and m.learned["a"] == "6 of 6"
    said = r["verdict"]["verdict"]
    assert said.startswith("a ranks first by MRR beyond the training length")
    assert "Over the learned runs only, c would rank first (1.00" in said and "3 of 18 runs have not learned" in said
    table = boards.pivot(r["board"], "copy")
    assert table.index[-1] == "c (3 of 3 not learned)" and table["runs learned"].iloc[-1] == "0 of 3"


def _two_settings():
    """copy and reverse at L = 32 and at L = 64 (two settings), schemes a and b in each, three seeds. At
    64 tokens the L = 64 runs are at their training length and score near 1; the L = 32 runs are at
    2L. Pooled in one (task, 64) cell, the L = 64 runs would rank above every L = 32 run."""
    at32 = {("a", "copy"): [(1.0, 0.5)] * 3, ("b", "copy"): [(1.0, 0.3)] * 3,
            ("a", "reverse"): [(1.0, 0.2)] * 3, ("b", "reverse"): [(1.0, 0.4)] * 3}
    at64 = {("a", "copy"): [(1.0, 0.1)] * 3, ("b", "copy"): [(0.95, 0.7)] * 3,
            ("a", "reverse"): [(1.0, 0.6)] * 3, ("b", "reverse"): [(1.0, 0.2)] * 3}
    return _runs(at32, train_len=32) + _runs(at64, train_len=64)


def test_two_settings_never_meet_in_a_ranking_cell():
    """A board of two training lengths ranks each setting apart: every ranking cell holds the runs
    of one setting only, each setting's MRRs are those of its rows alone, and the verdict gives a
    ranking per setting and their agreement, never one MRR over both.

    Mutation check: ``_arrays`` in suite/report/ranking.py keying cells by (task, eval length)
    without the setting makes this fail; so does ``boards.varied`` returning no column (one setting),
    and ``headline`` in suite/report/sections/verdict.py calling ``verdict`` on the whole table."""
    df = frame(_two_settings())
    rows = boards.primary(df)
    assert boards.settings_in_order(rows) == ["L=32", "L=64"]
    board = boards.board_of(rows)
    lay = ranking._arrays(board)
    setting_of = board.drop_duplicates("scheme").set_index("scheme").setting
    for j, cell in enumerate(lay.cells):
        held = {setting_of[s] for s, here in zip(lay.schemes, lay.present[:, j]) if here}
        assert held == {cell[0]}, (cell, held)  # one setting per cell, the cell's own
    m = ranking.mrr(board).set_index(["setting", "name"])
    for setting in ("L=32", "L=64"):
        alone = ranking.mrr(boards.board_of(boards.primary(df[df.train_len == int(setting[2:])])))
        assert m.loc[setting].mrr_ood.to_dict() == pytest.approx(alone.set_index("scheme").mrr_ood.to_dict())
    r = _build(_two_settings())
    said = r["verdict"]["verdict"]
    assert said.startswith("Ranked within each of its 2 settings, never across them. In L=32: ")
    assert "In L=64: " in said and "Across settings, on the tasks they share: the ranking" in said
    shown = mrr_display(r["mrr"])
    assert list(shown.columns[:2]) == ["setting", "scheme"] and set(shown.scheme) == {"a", "b"}
    assert r["settings"]["settings"] == ["L=32", "L=64"]


def test_the_bootstrap_resamples_tasks_then_seeds():
    """a wins copy, b wins reverse, every seed alike: seeds alone never move an MRR (0.75 each, an
    interval of zero width), but which tasks the board holds does: a replicate drawing copy twice
    gives a 1, drawing reverse twice 0.5, one of each 0.75. Replicates are seeded: a rebuild gives the same.

    Mutation check: ``_tasks_bootstrap`` in suite/report/ranking.py drawing each task once
    (``draws`` = every task in order) makes this fail; so does ``mrr_replicates`` defaulting to ``SEEDS``."""
    scores = {("a", "copy"): [(1.0, 0.8)] * 3, ("b", "copy"): [(1.0, 0.4)] * 3,
              ("a", "reverse"): [(1.0, 0.3)] * 3, ("b", "reverse"): [(1.0, 0.7)] * 3}
    df = frame(_runs(scores))
    rows = boards.primary(df)
    board = boards.board_of(rows)
    seeds = ranking.mrr_intervals(board, rows, reps=400, resample=ranking.SEEDS).set_index("scheme")
    assert seeds.mrr_ood_low.tolist() == seeds.mrr_ood_high.tolist() == [0.75, 0.75]
    schemes, b_ood, _ = ranking.mrr_replicates(board, rows, reps=400)
    assert set(np.round(b_ood[:, schemes.index("a")], 9)) == {0.5, 0.75, 1.0}
    assert np.allclose(b_ood.sum(axis=1), 1.5)  # one task draw per replicate, shared by both schemes
    tasks = ranking.mrr_intervals(board, rows, reps=400).set_index("scheme")
    assert (tasks.loc["a", "mrr_ood_low"], tasks.loc["a", "mrr_ood_high"], tasks.loc["a", "mrr_ood_distinct"]) == (0.5, 1.0, 3)
    again = ranking.mrr_intervals(board, rows, reps=400).set_index("scheme")
    pd.testing.assert_frame_equal(tasks, again)


def test_a_discrete_bootstrap_is_reported_as_one():
    """Two schemes, a first in every cell of every task and seed: every replicate gives a 1 and b
    0.5. The report writes '1.00; 1 distinct value over 1000 replicates, 1000 at 1.00', never the
    precise-looking [1.00, 1.00]; a bootstrap with width but few values says how many.

    Mutation check: ``stats.interval_text`` without its zero-width branch makes this fail; without
    its ``DISCRETE_BELOW`` branch the last assertion fails."""
    scores = {("a", "copy"): [(1.0, 0.8)] * 3, ("b", "copy"): [(1.0, 0.2)] * 3,
              ("a", "reverse"): [(1.0, 0.9)] * 3, ("b", "reverse"): [(1.0, 0.1)] * 3}
    r = _build(_runs(scores))
    m = r["mrr"].set_index("scheme")
    assert (m.mrr_ood_distinct["a"], m.mrr_ood_modal["a"]) == (1, ranking.BOOTSTRAP_REPS)
    md = render.markdown(r)
    assert "1.00; 1 distinct value over 1000 replicates, 1000 at 1.00" in md
    assert "0.50; 1 distinct value over 1000 replicates, 1000 at 0.50" in md
    ranking_table = md[md.index("## Mean Reciprocal Rank"):md.index("## How to read")]
    assert "[1.00, 1.00]" not in ranking_table and "[0.50, 0.50]" not in ranking_table
    assert stats.interval_text(0.87, 0.73, 1.0, 6, 700, 1000) == "0.87 [0.73, 1.00]; 6 distinct values over 1000 replicates"
    assert stats.interval_text(0.62, 0.55, 0.70, 200, 30, 1000) == "0.62 [0.55, 0.70]"
    # counts read from a column that holds NaN beside them arrive as floats, and are still counts
    assert stats.interval_text(1.0, 1.0, 1.0, 1.0, 1000.0, 1000) == "1.00; 1 distinct value over 1000 replicates, 1000 at 1.00"


def _declared(cells):
    """A board of (scheme, task, metric, eval_len, mean) cells at L = 32, each metric's declaration stored."""
    out = []
    for scheme, task, metric, eval_len, mean in cells:
        m = METRICS[metric]
        out.append({"scheme": scheme, "task": task, "eval_len": eval_len, "train_len": 32, "mean": mean, "n": 3,
                    "metric": metric, "higher_is_better": m.higher_is_better, "low": m.low, "high": m.high,
                    "share": m.share})
    return pd.DataFrame(out)


def test_each_metric_ties_on_its_own_scale_and_the_report_says_so():
    """0.015 apart: two bits-per-byte means tie (margin 0.02 bits), two accuracies do not (0.01),
    in the MRR and the power table alike, and the reading guide states each task's margin.

    Mutation check: bits_per_byte declaring ``tie_margin=0.01`` in suite/data/metrics.py makes this
    fail; so does ``_arrays`` keeping one margin for every cell, and ``with_margins`` in
    suite/report/sections/guide.py reading TIED_BELOW."""
    assert (METRICS["bits_per_byte"].tie_margin, METRICS["token_accuracy"].tie_margin) == (0.02, 0.01)
    board = _declared([("a", "code", "bits_per_byte", 32, 2.000), ("b", "code", "bits_per_byte", 32, 2.015),
                       ("a", "code", "bits_per_byte", 64, 2.300), ("b", "code", "bits_per_byte", 64, 2.315),
                       ("a", "copy", "token_accuracy", 32, 0.500), ("b", "copy", "token_accuracy", 32, 0.515),
                       ("a", "copy", "token_accuracy", 64, 0.300), ("b", "copy", "token_accuracy", 64, 0.315)])
    m = ranking.mrr(board).set_index("scheme")
    assert m.mrr_ood.to_dict() == pytest.approx({"a": (1 + 1 / 2) / 2, "b": 1.0})  # code tied, copy b ahead
    p = power(board).set_index("task")
    assert p.tie_margin.to_dict() == {"code": 0.02, "copy": 0.01}
    assert p.tied_cells.to_dict() == {"code": 2, "copy": 0}
    table = guide.with_margins(pd.DataFrame({"task": ["code", "copy", "reverse"],
                                             "metric": ["bits_per_byte", "token_accuracy", "none stored"]}), board)
    assert table["tie margin"].tolist() == ["0.02", "0.01", "-"]
    assert re.search(r"0\.02 bits for bits per byte", guide.text(None, 0.8))
