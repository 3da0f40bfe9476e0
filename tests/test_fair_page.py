"""``python -m suite.report.fair_page`` (suite/report/fair_page.py): the page README's "What the fair
protocol changed" quotes. Hand-made boards whose rankings are known (tests/test_orderings.py): before
retraining t5 is third on copy and vt; after, it leads copy, so it rises to second. The text rows
score code at 1 x and 2 x the training length, so each cell of the text table is known too."""
import hashlib

import pandas as pd
import pytest

from suite.report import boards, fair_page, orderings
from tests.test_orderings import AFTER, BEFORE, rows
from tests.test_report import _row, frame

TEXT_BEFORE = {"alibi": (2.0, 2.5), "t5": (2.1, 3.0)}  # bits per byte at 1 x, 2 x
TEXT_AFTER = {"alibi": (1.9, 2.2), "t5": (2.1, 2.4)}


def text_rows(bpb: dict) -> pd.DataFrame:
    out = []
    for scheme, values in bpb.items():
        for seed, shift in ((0, 0.0), (1, 0.02)):
            run = f"{scheme}-code-{seed}"
            out += [_row(run, scheme, seed, "code", 64 * (k + 1), v + shift, metric="bits_per_byte", train_len=64)
                    for k, v in enumerate(values)]
    return boards.primary(frame(out))


@pytest.fixture
def shipped(monkeypatch):
    """Three boards: 'fx' retrained, 'stale' not retrained (its shipped rows are the old ones) and
    'fresh' published under the fair protocol (its old revision already holds current runs)."""
    old = {"fx": rows(BEFORE), "stale": rows(BEFORE), "fresh": rows(AFTER), "lm": text_rows(TEXT_BEFORE)}
    now = {"fx": rows(AFTER), "stale": rows(BEFORE), "fresh": rows(AFTER), "lm": text_rows(TEXT_AFTER)}
    current = {id(now["fx"]), id(now["fresh"]), id(old["fresh"]), id(now["lm"])}
    monkeypatch.setattr(orderings, "shipped_at", lambda board, rev: old[board])
    monkeypatch.setattr(orderings, "_load", lambda path: now[path.name.split(".")[0]])
    monkeypatch.setattr(fair_page, "code_status", lambda df: pd.Series(
        "current" if id(df) in current else "stale", index=df.run_id.unique()))
    return [fair_page.board_rows(b) for b in ("fx", "stale", "fresh", "lm")]


def test_each_board_is_retrained_not_retrained_or_fair_from_the_start(shipped):
    assert [b["state"] for b in shipped] == ["retrained", "not retrained (0 of 12 runs computed by this code)",
                                            "fair from the start", "retrained"]


def test_leaders_give_the_runs_and_leave_the_after_columns_of_a_board_not_retrained(shipped):
    table = fair_page.leaders(shipped).set_index("board")
    assert list(table.index) == ["fx", "stale", "lm"]  # 'fresh' has nothing to set against
    assert table.loc["fx", "runs after"] == "12 runs, 12 learned"
    assert table.loc["fx", "leader after retraining"].startswith("alibi (0.75")
    assert table.loc["stale", "runs after"] == table.loc["stale", "leader after retraining"] == "-"


def test_t5_rises_to_second_and_names_the_task_that_moved_it(shipped):
    table = fair_page.t5(shipped).set_index("board")
    assert table.loc["fx", "T5 before (fair protocol, same runs)"].startswith("3 of 3, 0.33")
    assert table.loc["fx", "T5 after retraining"].startswith("2 of 3, 0.67")
    assert table.loc["fx", "task moved most"] == "copy 0.33 -> 1.00"
    assert table.loc["stale", "T5 after retraining"] == "-"


def test_text_cells_are_the_seed_means_before_and_after_at_each_length(shipped):
    table = fair_page.text(shipped).set_index("scheme")
    assert table.loc["alibi", "code 1x"] == "2.010 -> 1.910"  # seeds 0 and 1: v and v + 0.02
    assert table.loc["t5", "code 2x"] == "3.010 -> 2.410"
    assert table.loc["t5", "prose 1x"] == "- -> -"  # no prose runs


def settings_rows(bpb: dict, t5_option: str = "") -> pd.DataFrame:
    """Code runs at two training lengths (two settings, 'L=32' and 'L=64'), two seeds each, scored at
    1 x and 2 x; the L=64 runs score 0.1 more. ``t5_option`` makes t5's configurations other ones, as
    retraining with a setting-dependent option (T5's max_distance) does."""
    out = []
    for train_len, more in ((32, 0.0), (64, 0.1)):
        for scheme, values in bpb.items():
            config = hashlib.sha1(f"{scheme}-{train_len}{t5_option if scheme == 't5' else ''}".encode()).hexdigest()[:12]
            for seed, shift in ((0, 0.0), (1, 0.02)):
                run = f"{scheme}-code-{train_len}-{seed}"
                out += [_row(run, scheme, seed, "code", train_len * (k + 1), v + more + shift, metric="bits_per_byte",
                             train_len=train_len, config=config) for k, v in enumerate(values)]
    return boards.primary(frame(out))


def test_a_board_of_several_settings_pairs_each_scheme_within_its_setting(monkeypatch):
    """On a board of two training lengths, the text table and T5's standing have a row per setting,
    and retraining that changed T5's configuration (its label) still pairs before with after."""
    old, now = settings_rows(TEXT_BEFORE), settings_rows(TEXT_AFTER, t5_option="-max_distance")
    assert set(old[old.name == "t5"].scheme).isdisjoint(now[now.name == "t5"].scheme)  # other configurations
    monkeypatch.setattr(orderings, "shipped_at", lambda board, rev: old)
    monkeypatch.setattr(orderings, "_load", lambda path: now)
    monkeypatch.setattr(fair_page, "code_status", lambda df: pd.Series(
        "current" if df is now else "stale", index=df.run_id.unique()))
    board = [fair_page.board_rows("sc")]
    text = fair_page.text(board).set_index("scheme")
    assert sorted(text.index) == ["alibi [L=32]", "alibi [L=64]", "t5 [L=32]", "t5 [L=64]"]
    assert text.loc["t5 [L=32]", "code 2x"] == "3.010 -> 2.410"
    assert text.loc["t5 [L=64]", "code 2x"] == "3.110 -> 2.510"
    assert text.loc["alibi [L=64]", "code 1x"] == "2.110 -> 2.010"
    t5 = fair_page.t5(board).set_index("board")
    assert list(t5.index) == ["sc L=32", "sc L=64"]
    assert (t5["T5 before (fair protocol, same runs)"].str.startswith("2 of 2")).all()
    assert (t5["T5 after retraining"].str.startswith("2 of 2")).all()  # alibi stays ahead


def test_the_page_holds_every_table_and_each_boards_moves(shipped, monkeypatch):
    monkeypatch.setattr(fair_page, "board_rows", lambda name: next(b for b in shipped if b["board"] == name))
    monkeypatch.setattr(fair_page, "shipped_digest", lambda board: f"published/{board}.jsonl.gz sha256 0")
    text = fair_page.page(["fx", "stale", "fresh", "lm"])
    for heading in ("## Leaders", "## T5", "## Text", "## Stability across settings", "### fx", "### stale"):
        assert heading in text
    assert "### fresh" not in text and "- `fresh`: fair from the start; now: published/fresh.jsonl.gz" in text
    assert "- `fx`: retrained; before: its rows at 883f43a; now: published/fx.jsonl.gz sha256 0" in text
    assert "| retrained | rank of t5" in text  # fx's moves include retraining
    assert "runs at" not in text.split("### stale")[1].split("###")[0]  # stale: the protocol's moves only


def test_the_shipped_page_was_written_from_the_shipped_boards():
    """reports/fair_protocol.md names every shipped board with the digest of the rows it was computed
    from: a board republished without rewriting the page fails here."""
    from suite.results import store

    lines = {line.split("`")[1]: line for line in fair_page.PAGE.read_text(encoding="utf-8").splitlines()
             if line.startswith("- `")}
    assert sorted(lines) == store.shipped_boards(), "rewrite it: python -m suite.report.fair_page"
    for board in store.shipped_boards():
        assert lines[board].endswith(f"now: {fair_page.shipped_digest(board)}"), (
            f"published/{board}.jsonl.gz changed since {fair_page.PAGE} was written: python -m suite.report.fair_page")


REFERENCE = {"columns": {"alibi": "ALiBi", "t5": "T5", "rope": "RoPE"}, "tasks": {"copy": "copy", "vt": "vt"},
             "results": {"copy": {"ALiBi": 0.5, "T5": 0.4, "RoPE": 0.1}, "vt": {"ALiBi": 0.5, "T5": 0.4, "RoPE": 0.1}},
             "mrr": {"ALiBi": 0.9, "T5": 0.6, "RoPE": 0.3}, "max_ratio": 2}


def test_a_reproduced_paper_sets_its_mrr_beside_ours_before_and_after_retraining(shipped, monkeypatch):
    """'fx' reproduces a paper ranking ALiBi > T5 > RoPE. Before retraining alibi, rope and t5 rank
    1, 2, 3 on both tasks (MRR 1, 1/2, 1/3: tau 1/3 against the paper); retrained, t5 leads copy
    (MRR 0.75, 2/3, 5/12: the paper's order). Each seed ranks the same way, so the authors'
    computation agrees. A board not retrained reads '-' after; a board without a reference has no table.

    Mutation check: ranking the old rows in the 'retrained' lines (``b["old"]`` for ``b["now"]``)
    fails the after row."""
    from suite.report.sections import references

    monkeypatch.setattr(references, "load", lambda board: REFERENCE if board in ("fx", "stale") else None)
    fx = fair_page.reproduction(shipped[0]).set_index("MRR")
    assert fx.loc["published (their runs, their computation)", "order"] == "ALiBi > T5 > RoPE"
    assert fx.loc["ours, runs before", ["ALiBi", "T5", "RoPE", "order", "tau vs published"]].tolist() == [
        "1.000", "0.333", "0.500", "ALiBi > RoPE > T5", "0.33"]
    assert fx.loc["their computation, runs before", "order"] == "ALiBi > RoPE > T5"
    assert fx.loc["ours, retrained", ["ALiBi", "T5", "RoPE", "order", "tau vs published"]].tolist() == [
        "0.750", "0.667", "0.417", "ALiBi > T5 > RoPE", "1.00"]
    assert fx.loc["their computation, retrained", "tau vs published"] == "1.00"
    stale = fair_page.reproduction(shipped[1]).set_index("MRR")
    assert stale.loc["ours, retrained"].tolist() == ["-"] * 5 and stale.loc["ours, runs before", "order"] == \
        "ALiBi > RoPE > T5"
    assert fair_page.reproduction(shipped[3]) is None  # 'lm': no reference file
    assert [p for p in fair_page.reproductions(shipped) if p.startswith("###")] == ["### fx\n", "### stale\n"]
