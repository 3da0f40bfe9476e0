"""The top of a board: a verdict sentence and the setup, computed from the data, at the head of
index.md and index.html.

Mutation checks: in suite/report/sections/verdict.py verdict, sort_values(name, ascending=True) makes
test_a_board_opens_with_its_verdict_and_setup and test_the_verdict_says_whether_the_first_two_are_separated
fail; the overlap test written with < instead of <= (touching intervals 'separated') makes
test_the_verdict_says_whether_the_first_two_are_separated fail; setup reading the seeds of one run
only (runs.seed.iloc[:1]) makes test_a_board_opens_with_its_verdict_and_setup fail; ``Verdict.blocks``
without the verdict line makes test_a_board_opens_with_its_verdict_and_setup fail."""
import json

import pandas as pd

from suite.config.codedigest import spec_digest
from suite.report import render
from suite.report.sections import verdict
from suite.results import store
from tests.conftest import spec_for
from tests.criterion_runs import criterion_metrics, write_runs  # noqa: F401 (a fixture)
from tests.test_report import _row, frame

# copy at 32 (the training length), 64 and 128: alibi best beyond L, rope second, nope last
SCORES = {"alibi": (1.0, 0.9, 0.8), "rope": (1.0, 0.5, 0.3), "nope": (1.0, 0.2, 0.1)}


def _toy(folder):
    """A results folder: three schemes x three seeds, one copy model each, 80 steps."""
    for scheme, values in SCORES.items():
        for seed in (0, 1, 2):
            run = f"{scheme}-s{seed}"
            rows = [_row(run, scheme, seed, "copy", length, value - 0.01 * seed, steps=80)
                    for length, value in zip((32, 64, 128), values)]
            spec = spec_for(rows, model={"layers": [{"position": scheme, "span": "full"}]})
            rows = [{**r, "code_digest": spec_digest(spec), "sweep": "toy"} for r in rows]  # this checkout's code: no warning
            store.write_run(folder, "toy", run, {"run_id": run, "sweep": "toy", "spec": spec}, rows)
    return folder / "toy"


def test_a_board_opens_with_its_verdict_and_setup(tmp_path):
    out = render.write(store.load(_toy(tmp_path / "results")), "toy", tmp_path / "report")
    md = (out / "index.md").read_text().splitlines()
    # alibi is first in every cell beyond L (rank 1), rope second (1/2): MRR 1 and 0.5, no seed changes it
    # a bootstrap of one value reads as one, never as the precise-looking [1.00, 1.00]
    want = ("alibi ranks first by MRR beyond the training length (1.00; 1 distinct value over 1000 replicates, 1000 "
            "at 1.00), ahead of rope (0.50; 1 distinct value over 1000 replicates, 1000 at 0.50); separated from the "
            "second at the 95 % level: yes (the two intervals do not overlap).")
    setup = ("Setup: model tiny (4 layers, d_model 64, 4 heads); 80 steps; trained at L = 32 tokens; "
             "evaluated at 32, 64, 128 tokens; seeds 0, 1, 2; 9 runs.")
    assert md[:5] == ["# PosBench leaderboard: `toy`", "", f"**{want}**", "", setup]  # a stale-code warning comes first
    page = (out / "index.html").read_text()
    head = page.split("<h2>")[0]  # before the first section
    assert f"<p id='verdict'><strong>{want}</strong></p>" in head and f"<p id='setup'>{setup}</p>" in head


def _mrr(rows):
    return pd.DataFrame(rows, columns=["scheme", "mrr_ood", "mrr_ood_low", "mrr_ood_high", "mrr_all", "mrr_all_low",
                                       "mrr_all_high"])


def test_the_verdict_says_whether_the_first_two_are_separated():
    apart = _mrr([("t5", 0.5, 0.4, 0.6, 0.5, 0.4, 0.6), ("alibi", 0.9, 0.8, 0.95, 0.9, 0.8, 0.95)])
    assert verdict.verdict(apart).startswith("alibi ranks first by MRR beyond the training length (0.90 [0.80, 0.95]), "
                                             "ahead of t5 (0.50 [0.40, 0.60]); separated from the second at the "
                                             "95 % level: yes")
    touching = _mrr([("alibi", 0.9, 0.6, 0.95, 0.9, 0.6, 0.95), ("t5", 0.5, 0.4, 0.6, 0.5, 0.4, 0.6)])
    assert "95 % level: no (the two intervals overlap" in verdict.verdict(touching)
    alike = _mrr([("path", 0.594, 0.58, 0.68, 0.6, 0.5, 0.7), ("kerple", 0.591, 0.54, 0.68, 0.6, 0.5, 0.7)])
    assert "(0.594 [0.580, 0.680]), ahead of kerple (0.591" in verdict.verdict(alike)  # 0.59 and 0.59 told apart
    tied = _mrr([("rope", 0.5, 0.4, 0.6, 0.5, 0.4, 0.6), ("nope", 0.5, 0.45, 0.55, 0.5, 0.45, 0.55)])
    assert verdict.verdict(tied) == ("rope (0.50 [0.40, 0.60]) and nope (0.50 [0.45, 0.55]) share the first place by "
                                     "MRR beyond the training length; separated from each other at the 95 % level: "
                                     "no (the two intervals overlap: their order may be noise).")
    no_ood = _mrr([("rope", float("nan"),) * 1 + (float("nan"),) * 2 + (0.75, 0.7, 0.8)])
    assert verdict.verdict(no_ood) == ("rope is the only scheme ranked by MRR over all cells (0.75 [0.70, 0.80]): "
                                       "nothing to compare.")
    assert verdict.verdict(_mrr([])) == "No scheme has a score: nothing is ranked."


def test_a_board_where_no_two_schemes_share_a_cell_ranks_nothing():
    """A scheme is ranked only in cells another scheme is in too, so a board of schemes on disjoint
    tasks has an MRR table with no value: the verdict says so. (A board of one scheme ranks it first
    in every cell: test_honest_boards.test_a_scheme_alone_on_its_board_or_in_its_setting_ranks_first.)

    Mutation check: dropping the ``ranked.empty`` branch in verdict.verdict makes this fail
    (IndexError)."""
    unranked = _mrr([("alibi",) + (float("nan"),) * 6])
    assert verdict.verdict(unranked) == "No two schemes share a cell: nothing is ranked."


def test_the_setup_says_runs_trained_to_criterion_trained_on_up_to_their_cap(tmp_path, criterion_metrics):  # noqa: F811
    """A board of runs trained to criterion (80 steps, cap 4 x 80 = 320) says the protocol after the
    steps; one with a run without checks among them says how many were; a board without checks
    keeps the plain 'N steps' (test_a_board_opens_with_its_verdict_and_setup).

    Mutation check: in suite/report/sections/verdict.py ``setup``, ``{_values(runs.steps)} steps`` back in
    place of ``{protocol(df, runs)}`` makes this fail; ``protocol`` without its '(k of n runs ...)'
    clause makes it fail too."""
    runs = [("rope-0", "rope", 0, "copy", {32: 1.0, 64: 0.5}, 0.95, 160),
            ("nope-0", "nope", 0, "copy", {32: 0.3, 64: 0.1}, 0.40, None)]
    all_checked = store.load(write_runs(tmp_path / "a", runs, steps=80))
    assert verdict.setup(all_checked) == (
        "Setup: model tiny (4 layers, d_model 64, 4 heads); 80 steps, trained on to at most 320 steps until the "
        "check passes; trained at L = 32 tokens; evaluated at 32, 64 tokens; seeds 0; 2 runs.")
    mixed = store.load(write_runs(tmp_path / "b", [*runs, ("t5-0", "t5", 0, "copy", {32: 1.0, 64: 0.2}, None, None)],
                                  steps=80))
    assert "; 80 steps, trained on to at most 320 steps until the check passes (2 of 3 runs; the others a fixed " \
           "budget); trained at L = 32" in verdict.setup(mixed)
    out = render.write(all_checked, "cr", tmp_path / "report")
    assert "80 steps, trained on to at most 320 steps until the check passes;" in (out / "index.md").read_text()


def _framed(rows, train):
    """Rows as the store loads them, each run's stored spec JSON with ``train``."""
    d = frame(rows)
    d["spec"] = json.dumps({"train": train})
    return d


def test_a_run_is_trained_to_criterion_by_its_check_rows_or_by_its_spec_on_a_judged_task():
    """A run with train.until_learned on a judged task (a diverged one: no check row) counts; one on a
    task without a learned line (bits per byte: natural text keeps a fixed budget) does not, nor
    does a spec that does not say (rows stored before the protocol).

    Mutation check: in suite/report/sections/verdict.py ``criterion_runs``, ``head`` without ``& judged``
    (every headline read as having a learned line) makes this fail; so does ``_until_learned`` returning
    ``.get("until_learned", True)`` (a spec that does not say read as trained to criterion)."""
    train = {"steps": 100, "cap": 2.5, "until_learned": True}
    diverged = _framed([_row("r", "rope", 0, "copy", 32, float("nan"), status="diverged", steps=100)], train)
    assert verdict.criterion_runs(diverged) == {"r"}
    assert verdict.protocol(diverged, diverged.drop_duplicates("run_id")) == \
        "100 steps, trained on to at most 250 steps until the check passes"
    text = _framed([_row("t", "rope", 0, "code", 32, 2.1, metric="bits_per_byte", steps=100)], train)
    assert verdict.criterion_runs(text) == set()
    assert verdict.protocol(text, text.drop_duplicates("run_id")) == "100 steps"
    old = _framed([_row("o", "rope", 0, "copy", 32, 1.0, steps=100)], {"steps": 100})
    assert verdict.criterion_runs(old) == set()


def _learned_mrr(rows):
    """``ranking.mrr_every``'s columns: every run's OOD MRR and the learned runs' beside it."""
    cols = ["scheme", "mrr_ood", "mrr_ood_low", "mrr_ood_high", "mrr_ood_learned", "mrr_ood_learned_low",
            "mrr_ood_learned_high"]
    return pd.DataFrame(rows, columns=cols)


def test_a_leader_made_by_ranking_survivors_is_named_beside_the_every_run_leader():
    """When the first scheme over the learned runs alone is another than over every run, the
    verdict names it: the survivor filter changed the leader.

    Mutation check: ``learned_leader`` comparing the two leaders' every-run MRRs (``every``) in
    place of their learned-runs MRRs makes this fail; returning '' always makes it fail too."""
    board = _learned_mrr([("path", 0.61, 0.55, 0.67, 0.61, 0.55, 0.68),
                          ("stickbreaking", 0.57, 0.56, 0.58, 0.73, 0.72, 0.74),
                          ("rope", 0.12, 0.08, 0.17, 0.12, 0.11, 0.17)])
    assert verdict.learned_leader(board) == (" Over the learned runs only, stickbreaking would rank first "
                                             "(0.73 [0.72, 0.74]): ranking survivors changes the leader.")
    board.loc[1, "mrr_ood_learned"] = 0.61  # tied with path over the learned runs: no other leader
    assert verdict.learned_leader(board) == ""
    board.loc[1, "mrr_ood_learned"] = 0.5  # path leads both: nothing to add
    assert verdict.learned_leader(board) == ""
    assert verdict.learned_leader(_learned_mrr([])) == ""
