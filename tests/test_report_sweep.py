"""What a report says about its sweep: cells never pool configurations, runs whose code changed
are flagged, and published results sit beside ours with the agreement of orderings.

Mutation check: in suite/report/sections/references.py compare, a pair differs when the signs' product is
< 0 -> <= 0 (a tie counted as a disagreement) makes test_compare_orders_with_a_published_tie_by_hand fail;
the authors' MRR computation names its own mutations."""
import html
import math

import pandas as pd
import pytest

from tests.conftest import spec_for

from suite.results import store
from suite.report import boards, code_status, render
from suite.report.sections import provenance, references
from tests.test_report import _row, frame


def test_one_label_over_two_configs_stays_two_rows():
    rows = [_row("r10-0", "rope", 0, "copy", 32, 0.9, config="aaaaaa11", steps=10),
            _row("r10-1", "rope", 1, "copy", 32, 0.7, config="aaaaaa11", steps=10),
            _row("r20-0", "rope", 0, "copy", 32, 0.2, config="bbbbbb22", steps=20),
            _row("al-0", "alibi", 0, "copy", 32, 0.5)]
    board = boards.leaderboard(frame(rows)).set_index("scheme")
    assert sorted(board.index) == ["alibi", "rope [aaaaaa]", "rope [bbbbbb]"]
    assert board.loc["rope [aaaaaa]", "n"] == 2 and board.loc["rope [aaaaaa]", "mean"] == pytest.approx(0.8)
    assert board.loc["rope [bbbbbb]", "n"] == 1 and board.loc["rope [bbbbbb]", "mean"] == pytest.approx(0.2)
    # rows written before config_hash existed: the configuration columns tell the two apart
    old = boards.leaderboard(frame(rows).assign(config_hash=None))
    assert sorted(old.n) == [1, 1, 2] and old.scheme.str.startswith("rope [").sum() == 2
    # one model per task: a config hash per task is still one scheme, one row per task
    per_task = [_row(f"r-{t}-{s}", "rope", s, t, 32, 0.5, config=f"cfg-{t}")
                for t in ("copy", "reverse") for s in (0, 1)]
    board = boards.leaderboard(frame(per_task))
    assert list(board.scheme) == ["rope", "rope"] and list(board.n) == [2, 2]


def _spec(scheme: str) -> dict:
    return {"model": {"layers": [{"position": scheme, "span": "full"}]}, "tasks": [{"name": "copy"}]}


def test_runs_whose_code_changed_are_flagged(tmp_path, capsys):
    from suite.config.codedigest import spec_digest
    from suite.report.__main__ import main

    # rope-0 was computed by other code; rope-1 and alibi-0 carry the digest this checkout gives them
    for run, stale in (("rope-0", True), ("rope-1", False), ("alibi-0", False)):
        scheme, seed = run.split("-")
        digest = "0123456789ab" if stale else spec_digest(_spec(scheme))
        rows = [{**_row(run, scheme, int(seed), "copy", e, 0.5, digest=digest), "sweep": "mx"} for e in (32, 64)]
        store.write_run(tmp_path / "res", "mx", run, {"run_id": run, "sweep": "mx", "spec": spec_for(rows, **_spec(scheme))}, rows)
    assert spec_digest(_spec("rope")) != spec_digest(_spec("alibi"))  # each digest covers its own scheme
    assert main(["mx", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "rep")]) == 0
    warning = ("1 of 3 runs were computed by other code than this checkout holds (git abc; run 2026-01-01): "
               "they carry that code's protocol, and their numbers may not be what this code gives; rerun the sweep")
    assert warning in capsys.readouterr().err
    md = (tmp_path / "rep" / "mx" / "index.md").read_text().splitlines()
    assert warning in md[2]  # right under the title
    page = (tmp_path / "rep" / "mx" / "index.html").read_text()
    assert page.index(html.escape(warning)) < page.index("Mean Reciprocal Rank")
    df = store.load(tmp_path / "res" / "mx")
    assert code_status.code_groups(df).to_dict("records") == [{"git_sha": "abc", "code": "current", "runs": 2},
                                                         {"git_sha": "abc", "code": "stale", "runs": 1}]
    assert provenance._checkout_code(df) == "2 of 3 runs (rerun the sweep to refresh the others)"
    current = df[df.run_id != "rope-0"]
    assert code_status.stale_code_warning(current) is None
    assert provenance._checkout_code(current) == "2 of 2 runs (the runs were computed by this code)"
    # a run stored without its spec cannot be checked: unknown, not stale
    assert code_status.code_status(df.assign(spec=None)).eq("unknown").all()


def test_compare_orders_with_a_published_tie_by_hand():
    paper = {"NoPE": 0.986, "T5": 0.771, "ALiBi": 0.289, "RoPE": 0.0, "APE": 0.0}
    ours = {"NoPE": 0.9, "T5": 0.8, "ALiBi": 0.7, "RoPE": 0.1, "APE": 0.2}
    c = references.compare(paper, ours)
    assert c["paper"] == "NoPE > T5 > ALiBi > RoPE = APE" and c["ours"] == "NoPE > T5 > ALiBi > APE > RoPE"
    # 9 concordant pairs, none discordant, one pair tied in the paper: tau-b = 9 / sqrt(9 * 10)
    assert c["tau"] == pytest.approx(9 / math.sqrt(90)) and c["differ"] == []


def test_published_results_section_from_the_kz_reference(tmp_path):
    # our OOD means on copy: T5 .6 > NoPE .5 > ALiBi .4 > APE .2 > RoPE .1;
    # the paper's "copy, random tokens": T5 > ALiBi > NoPE > APE > RoPE: only NoPE/ALiBi differ, tau = 8/10
    ood = {"nope": 0.5, "t5": 0.6, "alibi": 0.4, "rope": 0.1, "sinusoidal": 0.2}
    rows = [_row(f"{s}-{seed}", s, seed, "copy", e, 0.9 if e == 32 else v if e == 64 else 1 - v)
            for s, v in ood.items() for seed in (0, 1) for e in (32, 64, 128)]  # 128 = 4L: not a test length
    df = frame(rows)
    ref = references.load("kz")
    assert ref["columns"] == {"nope": "NoPE", "t5": "T5", "alibi": "ALiBi", "rope": "RoPE", "sinusoidal": "APE"}
    assert ref["results"]["reverse"]["RoPE"] == 0.077 and ref["mrr"]["NoPE"] == 0.687
    r = render.build(df, "kz")
    agree = r["references"]["agreement"].set_index("row")
    copy = agree.loc["copy, random tokens"]
    assert copy["paper order"] == "T5 > ALiBi > NoPE > APE > RoPE"
    assert copy["our order"] == "T5 > NoPE > ALiBi > APE > RoPE"
    assert copy["kendall tau"] == pytest.approx(0.8) and copy["opposite pairs"] == "NoPE/ALiBi"
    # reverse and copy_repeat were not run; both our MRRs are compared with the published one
    assert set(agree.index) == {"copy, random tokens", "MRR", "MRR, their computation"}
    assert agree.loc["MRR, their computation", "paper order"] == "NoPE > T5 > ALiBi > RoPE > APE"
    assert r["references"]["ours"].loc["copy, random tokens", "NoPE"] == 0.5
    md = render.markdown(r)
    assert "## Published results" in md and "40k steps" in md and "Kazemnejad" in md
    assert "| copy, random tokens " in md and "NoPE/ALiBi" in md and "0.420" in md and "| ours " in md
    assert md.count("Their setup") == 1
    assert references.load("no-such-sweep") is None and "Published results" not in render.markdown(
        render.build(df, "other"))


def test_a_scheme_without_a_score_ranks_last_in_the_comparison():
    board = pd.DataFrame({"scheme": ["rope", "sinusoidal"], "task": "copy", "eval_len": 64, "train_len": 32,
                          "mean": [0.1, math.nan]})
    ref = references.load("kz")
    ours = references.our_scores(ref, board)
    assert ours.loc["copy, random tokens", "APE"] == references.EMPTY
    assert math.isnan(ours.loc["copy, random tokens", "NoPE"])  # not run
    c = references.compare({"RoPE": 0.011, "APE": 0.028}, {"RoPE": 0.1, "APE": references.EMPTY})
    assert c["ours"] == "RoPE > APE (no score)" and c["differ"] == ["RoPE/APE"]


def _authors_rows():
    """copy at L = 32, seeds 0 and 1, scored at 48 and 64 (their test lengths) and at 128 (4L, not one).
    Seed 0: nope (0.6, 0.4), t5 (0.5, 0.5), alibi (0.9, 0.1): each pools to 0.5, a three-way tie.
    Seed 1: nope 0.2, t5 0.7, alibi 0.4 (pooled). At 128 alibi scores 1.0: counted, it would win."""
    scores = {("nope", 0): (0.6, 0.4), ("t5", 0): (0.5, 0.5), ("alibi", 0): (0.9, 0.1),
              ("nope", 1): (0.2, 0.2), ("t5", 1): (0.8, 0.6), ("alibi", 1): (0.4, 0.4)}
    rows = []
    for (scheme, seed), (at48, at64) in scores.items():
        for eval_len, value in ((32, 1.0), (48, at48), (64, at64), (128, 1.0 if scheme == "alibi" else 0.0)):
            rows.append(_row(f"{scheme}-{seed}", scheme, seed, "copy", eval_len, value))
    return boards.primary(frame(rows))


def test_the_authors_mrr_ranks_each_seed_apart_with_ties_broken_by_row_order():
    """Kazemnejad et al.'s computation by hand: per (seed, task) query, the schemes by the seed's
    accuracy pooled over the test lengths (48 and 64, not 128), rank(method="first",
    ascending=False). Seed 0's three-way tie goes by row order (the reference file's: nope, t5,
    alibi): nope 1, t5 2, alibi 3; seed 1: t5 1, alibi 2, nope 3. MRR: nope (1 + 1/3) / 2, t5
    (1/2 + 1) / 2, alibi (1/3 + 1/2) / 2. Ours ranks cell means instead: at 48 t5 and alibi tie
    (0.65), nope 0.4; at 64 t5 0.55, nope 0.3, alibi 0.25: nope (1/3 + 1/2) / 2, t5 1, alibi (1 + 1/3) / 2.

    Mutation checks: ``authors_mrr`` in suite/report/sections/references.py ranking with
    method="min" (ties share the best rank), ascending=True, in sorted order rather than the
    reference file's, or over every length beyond L (128 counted) makes this fail."""
    rows = _authors_rows()
    ref = references.load("kz")
    theirs = references.authors_mrr(ref, rows)
    assert theirs.to_dict() == pytest.approx({"nope": 2 / 3, "t5": 3 / 4, "alibi": 5 / 12})
    reordered = {**ref, "columns": {"alibi": "ALiBi", "t5": "T5", "nope": "NoPE"}}  # alibi's row first: it wins the tie
    assert references.authors_mrr(reordered, rows).to_dict() == pytest.approx({"alibi": 3 / 4, "t5": 3 / 4, "nope": 1 / 3})
    ours = references.our_scores(ref, boards.board_of(rows), rows)
    assert ours.loc["MRR", ["NoPE", "T5", "ALiBi"]].tolist() == pytest.approx([0.417, 1.0, 0.667], abs=1e-3)
    assert ours.loc["MRR, their computation", ["NoPE", "T5", "ALiBi"]].tolist() == pytest.approx([0.667, 0.75, 0.417], abs=1e-3)
    mrrs = references.side_by_side(references.paper_scores(ref), ours)
    assert len(mrrs) == 3 and mrrs.loc["published (their runs, their computation)", "NoPE"] == 0.687


def test_the_stale_code_warning_names_the_commits_and_days_that_computed_the_runs():
    """Mutation check: naming every commit instead of three makes this fail."""
    runs = pd.DataFrame({"git_sha": ["1111111aaaa", "2222222bbbb", "3333333cccc", "4444444dddd", "1111111aaaa"],
                         "timestamp": ["2026-12-05T10:00:00+00:00", "2026-12-03T09:00:00+00:00", None,
                                       "2026-12-04T01:00:00+00:00", "2026-12-05T11:00:00+00:00"]})
    assert code_status._origin(runs) == "git 1111111, 2222222, 3333333 and 1 more; run 2026-12-03 to 2026-12-05"
    assert code_status._origin(runs.iloc[:1]) == "git 1111111; run 2026-12-05"
    assert code_status._origin(runs.drop(columns="git_sha").iloc[2:3]) == ""
