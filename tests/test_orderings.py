"""``python -m suite.report.orderings`` (suite/report/orderings.py): the board as an earlier revision
shipped it, set against its runs retrained by today's code. Hand-made rows whose ranks are known:
before, alibi leads copy and vt, rope is second and t5 third on both (OOD MRR 1, 1/2, 1/3); after
retraining, t5 leads copy (its biases now reach the distances beyond L), so t5 rises to second
(MRR (1 + 1/3) / 2) and rope falls to third ((1/3 + 1/2) / 2)."""
import re

import pandas as pd
import pytest

from suite.report import boards, orderings
from tests.test_report import _row, frame

BEFORE = {("alibi", "copy"): 0.9, ("rope", "copy"): 0.5, ("t5", "copy"): 0.2,
          ("alibi", "vt"): 0.8, ("rope", "vt"): 0.6, ("t5", "vt"): 0.4}
AFTER = {**BEFORE, ("t5", "copy"): 0.95}


def rows(ood: dict) -> pd.DataFrame:
    out = []
    for (scheme, task), v in ood.items():
        for seed in (0, 1):
            run = f"{scheme}-{task}-{seed}"
            for length, value in ((32, 1.0), (64, v + 0.01 * seed)):
                metric = "token_accuracy" if task == "copy" else "string_match_all"  # each task's headline
                out.append(_row(run, scheme, seed, task, length, value, config=f"{scheme}-{task}", metric=metric))
    return boards.primary(frame(out))


def test_retraining_names_each_move_and_the_task_that_made_it():
    old, new = rows(BEFORE), rows(AFTER)
    before, after = (orderings.protocol(r, 4, intervals=True) for r in (old, new))
    assert before.set_index("label")["rank"].to_dict() == {"alibi": 1, "rope": 2, "t5": 3}
    assert after.set_index("label").mrr_ood.to_dict() == pytest.approx({"alibi": 0.75, "t5": 2 / 3, "rope": 5 / 12})
    moved = {r["what moved"]: r for r in orderings.retrained(before, after, old, new)}
    assert moved["rank of t5"] == {"change": "retrained", "what moved": "rank of t5", "before": "3", "after": "2",
                                   "where": "copy 0.33 -> 1.00"}
    assert (moved["rank of rope"]["before"], moved["rank of rope"]["after"]) == ("2", "3")
    assert moved["rank of rope"]["where"] == "copy 0.50 -> 0.33"
    assert moved["order of rope / t5"]["after"] == "t5 ahead (0.667 vs 0.417)"
    assert "rank of alibi" not in moved  # first before and after
    assert orderings.retrained(before, orderings.protocol(old, 4, intervals=True), old, rows(BEFORE)) == []


def test_the_report_sets_the_old_revision_against_todays_rows(monkeypatch):
    monkeypatch.setattr(orderings, "shipped_at", lambda board, rev: rows(BEFORE))
    monkeypatch.setattr(orderings, "_load", lambda path: rows(AFTER))
    text = orderings.board_report("fx", before="v1")
    assert "12 runs at v1, 12 retrained (3 schemes)" in text
    assert re.search(r"\| retrained \| rank of t5 +\| 3 +\| 2 +\| copy 0.33 -> 1.00 \|", text)
    assert "- leader after retraining (every run" in text
    plain = orderings.board_report("fx")  # no revision: the shipped rows alone, nothing retrained
    assert "retrained" not in plain and "runs at" not in plain


def test_a_revision_without_the_board_is_refused_by_name():
    with pytest.raises(orderings.Refused, match=r"--before 'no-such-rev': git holds no published/default.jsonl.gz"):
        orderings.shipped_at("default", "no-such-rev")


def test_the_command_refuses_an_unknown_board_and_a_folder_for_several(capsys):
    assert orderings.main(["nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown board 'nosuch'" in err and "flagship" in err
    assert orderings.main(["default", "lm", "--after", "results/default"]) == 2
    assert "name exactly one board (got 2)" in capsys.readouterr().err


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_a_revision_gives_the_board_as_git_holds_it(tmp_path):
    """A repository of its own (the checkout may be a copy without .git): the first commit ships the
    default board, the second replaces it with the lm board's rows; each revision gives its own."""
    import shutil

    from suite.results import store

    (tmp_path / "published").mkdir()
    target = tmp_path / store.shipped_path("default")
    _git(tmp_path, "init", "-q")
    shutil.copy(store.shipped_path("default"), target)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "default")
    shutil.copy(store.shipped_path("lm"), target)
    _git(tmp_path, "commit", "-q", "-am", "replaced")

    ids = lambda rows: sorted(rows.run_id.unique())
    assert ids(orderings.shipped_at("default", "HEAD~1", repo=tmp_path)) == ids(orderings._load(store.shipped_path("default")))
    assert ids(orderings.shipped_at("default", "HEAD", repo=tmp_path)) == ids(orderings._load(store.shipped_path("lm")))
    with pytest.raises(orderings.Refused, match="git holds no published/flagship.jsonl.gz"):
        orderings.shipped_at("flagship", "HEAD", repo=tmp_path)


def settings_rows(ood: dict, t5_at_64: float | None = None) -> pd.DataFrame:
    """``rows`` under two training lengths (L = 32 and 64, each scored at L and 2L); ``t5_at_64``
    replaces T5's score beyond L in the second setting."""
    out = []
    for L in (32, 64):
        for (scheme, task), v in ood.items():
            v = t5_at_64 if (t5_at_64 is not None and L == 64 and scheme == "t5") else v
            for seed in (0, 1):
                run = f"{scheme}-{task}-{L}-{seed}"
                metric = "token_accuracy" if task == "copy" else "string_match_all"
                for length, value in ((L, 1.0), (2 * L, v + 0.01 * seed)):
                    out.append(_row(run, scheme, seed, task, length, value, config=f"{L}-{scheme}-{task}",
                                    metric=metric, train_len=L))
    return boards.primary(frame(out))


def test_retraining_that_reorders_one_setting_moves_tau_between_settings():
    """Before, both settings order alibi > rope > t5 (tau 1); retrained, T5 leads at L = 64 on both
    tasks: of the three pairs, alibi / rope keeps its order and both pairs with t5 swap, tau
    (1 - 2) / 3 = -0.33. Retraining that changes no order moves nothing."""
    old = settings_rows(BEFORE)
    moved = orderings.retrained_taus(old, settings_rows(BEFORE, t5_at_64=0.99))
    assert [(m["change"], m["what moved"]) for m in moved] == [("retrained", "Kendall tau L=32 vs L=64")]
    assert moved[0]["before"].startswith("tau 1.00") and moved[0]["after"].startswith("tau -0.33")
    assert orderings.retrained_taus(old, settings_rows(BEFORE, t5_at_64=0.1)) == []
