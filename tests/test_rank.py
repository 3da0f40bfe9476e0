"""``posbench rank``: a new scheme trained on a board's grid and placed among its published schemes.

The placement (``suite.report.placement``) is checked on a hand-made board against values worked
out by hand; the like-for-like check on the fixture board's own specs; and the command end to end
on tests/data's fixture board (tests/data/README.md) in a copy of the checkout with a scheme added
there (ALiBi with half the slopes), leaving reports/ and published/ as they were.

Mutation checks: ``paired_differences`` over every cell instead of the out-of-distribution ones
(dropping its ``eval_len > train_len`` filter), or without the metric's sign, makes
test_paired_differences_are_signed_and_counted_by_the_tie_margin fail; ``place`` counting schemes
at or above the arm (``>=``) makes test_the_arm_places_by_ood_mrr_with_separation_from_its_neighbours
fail; ``mrr_shift`` ranking the board without the arm in both columns makes
test_adding_the_arm_shifts_the_published_mrr fail; ``setup`` keeping the model's ``layers`` makes
test_a_run_unlike_the_board_names_the_field_that_differs fail (a position change reads as unlike);
``rank`` not filtering the unlike runs out of the board (``like = arm``) makes
test_rank_end_to_end_on_the_fixture_board fail (the unlike run is ranked).
"""
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.commands import rank_output
from suite.report import boards, placement, ranking
from suite.results import store
from tests.test_report import _row, frame

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURE = DATA / "published" / "rank_fixture.jsonl.gz"

# one copy task at L=32, one seed per scheme: (scheme, eval_len) -> token accuracy
CELLS = {("a", 32): 1.0, ("a", 64): 0.9, ("a", 128): 0.2,
         ("b", 32): 1.0, ("b", 64): 0.5, ("b", 128): 0.6,
         ("new", 32): 0.0, ("new", 64): 0.7, ("new", 128): 0.6}


def _board():
    rows = frame([_row(f"{s}-0", s, 0, "copy", e, v) for (s, e), v in CELLS.items()])
    primary = boards.primary(rows)
    return boards.board_of(primary), primary


def test_the_arm_places_by_ood_mrr_with_separation_from_its_neighbours():
    """OOD ranks: at 64 a, new, b; at 128 b and new tied (0.6), then a: new's OOD MRR is
    (1/2 + 1)/2 = 0.75, a's and b's (1 + 1/3)/2 = 2/3, so new places 1 of 3. On a hand-made MRR
    table, an arm at 0.6 [0.55, 0.7] places 2 of 4, apart from x above ([0.8, 1.0]) and not from y
    below ([0.3, 0.58])."""
    board, rows = _board()
    p = placement.place(ranking.mrr_intervals(board, rows, reps=50), ["new"]).iloc[0]
    assert (p.place, p.of, p.mrr_ood) == (1, 3, pytest.approx(0.75))
    assert p.above == "" and p.separated_above == "" and p.below in ("a", "b")
    table = pd.DataFrame({"scheme": ["x", "new", "y", "z"], "mrr_ood": [0.9, 0.6, 0.5, 0.2],
                          "mrr_ood_low": [0.8, 0.55, 0.3, 0.1], "mrr_ood_high": [1.0, 0.7, 0.58, 0.3],
                          "setting": "", "setting_at": 0})
    p = placement.place(table, ["new"]).iloc[0]
    assert (p.place, p.of, p.above, p.separated_above, p.below, p.separated_below) == (2, 4, "x", "yes", "y", "no")
    tied = placement.place(table.assign(mrr_ood=[0.9, 0.6, 0.6, 0.2]), ["y"]).iloc[0]
    assert tied.place == 2  # a scheme tied with the one above it shares its place
    # one seed of one task: every interval a single point, so separation is not judged
    points = table.assign(mrr_ood_low=table.mrr_ood, mrr_ood_high=table.mrr_ood)
    p = placement.place(points, ["new"]).iloc[0]
    assert (p.separated_above, p.separated_below) == ("n/a", "n/a")
    assert "separation not judged" in rank_output.verdict(p, points, "seeds 0")


def test_paired_differences_are_signed_and_counted_by_the_tie_margin():
    """Over the OOD cells only (new's 0.0 at L would pull every mean down by 1/3): against a,
    -0.2 at 64 and +0.4 at 128, mean 0.1, one better and one worse; against b, +0.2 and 0.0, mean
    0.1, one better, one tied. Read as a loss (lower is better) every sign flips."""
    board, _ = _board()
    d = placement.paired_differences(board, "new").set_index("scheme")
    assert d.loc["a", ["cells", "better", "tied", "worse"]].tolist() == [2, 1, 0, 1]
    assert d.loc["b", ["cells", "better", "tied", "worse"]].tolist() == [2, 1, 1, 0]
    assert d.mean_diff.tolist() == pytest.approx([0.1, 0.1])
    loss = placement.paired_differences(board.assign(higher_is_better=False, high=math.inf), "new").set_index("scheme")
    assert loss.mean_diff.tolist() == pytest.approx([-0.1, -0.1])
    assert loss.loc["b", ["better", "tied", "worse"]].tolist() == [0, 1, 1]


def test_adding_the_arm_shifts_the_published_mrr():
    """Without new, a and b split the OOD cells: 0.75 each; with it, a ranks 1 and 3, b 3 and 1:
    2/3 each, a change of -1/12."""
    board, _ = _board()
    s = placement.mrr_shift(board, ["new"]).set_index("scheme")
    assert s.mrr_ood_without.tolist() == pytest.approx([0.75, 0.75])
    assert s.mrr_ood_with.tolist() == pytest.approx([2 / 3, 2 / 3])
    assert s.change.tolist() == pytest.approx([-1 / 12, -1 / 12]) and "new" not in s.index


def test_a_run_unlike_the_board_names_the_field_that_differs():
    """The fixture board's own spec with another scheme is like for like; with other train steps,
    eval lengths or a seed the board did not run, it is not, and the field is named."""
    setups = placement.board_setups(store.load(FIXTURE))
    spec = json.loads(store.load(FIXTURE).spec.iloc[0])
    other = {**spec, "model": {**spec["model"], "layers": [{**layer, "position": "rope", "position_cfg": {}}
                                                           for layer in spec["model"]["layers"]]}}
    assert placement.differences(other, 0, setups) == []
    steps = placement.differences({**other, "train": {**spec["train"], "steps": 99}}, 0, setups)
    assert steps == ["train.steps: 99 here, 12 on the board"]
    lengths = placement.differences({**other, "eval": {**spec["eval"], "multiples": [1.0, 2.0]}}, 0, setups)
    assert [d.split(":")[0] for d in lengths] == ["eval.multiples"]
    assert placement.differences(other, 7, setups) == ["seed: 7 here, 0, 1 on the board"]


SCHEME = '''"""ALiBi with half the paper's slopes: each head's bias falls half as fast with distance."""
from suite.model.position.alibi import ALiBi


class ALiBiHalf(ALiBi):
    name = "alibi_half"

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.slopes = self.slopes / 2
'''

# several posbench commands in one interpreter of the copied checkout: [exit code, stdout, stderr] each
SEQUENCE = """
import contextlib, io, json, sys
from suite.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = main(argv)
    out.append([code, o.getvalue(), e.getvalue()])
print("\\x00" + json.dumps(out))
"""


def _digests(repo: Path) -> dict:
    return {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
            for part in ("reports", "published") for p in sorted((repo / part).rglob("*")) if p.is_file()}


@pytest.mark.exhaustive  # a copied checkout training two arms; placement, pairing, shift and refusal are unit-tested above
def test_rank_end_to_end_on_the_fixture_board(tmp_path):
    """In a copy of the checkout with alibi_half added: an arm with other train steps is refused
    naming the field before anything trains; an unknown scheme and an unknown board are refused
    naming the valid ones; alibi_half is ranked with an interval and its tables written; with
    --unlike ok and --seeds 0 the unlike arm is reported apart, unranked, as a subset; reports/
    and published/ are unchanged."""
    repo = tmp_path / "repo"
    for part in ("suite", "tasks", "conf", "reports", "published", "tests/data"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    if (ROOT / ".cache").is_dir():
        (repo / ".cache").symlink_to(ROOT / ".cache")
    (repo / "suite" / "model" / "position" / "alibi_half.py").write_text(SCHEME)
    (repo / "conf" / "position" / "alibi_half.yaml").write_text(
        "defaults:\n  - /scheme_defaults/alibi_half@_here_\n  - _self_\nname: alibi_half\n")
    before = _digests(repo)
    board = ["--board", "rank_fixture", "--sweep-file", "tests/data/sweep/rank_fixture.yaml",
             "--published", "tests/data/published"]
    commands = [["rank", "position=alibi_half", "train.steps=13", *board],
                ["rank", "position=nosuch", *board],
                ["rank", "position=alibi_half", "--board", "nosuch"],
                ["rank", "position=alibi_half", *board],
                ["rank", "position=alibi_half", "train.steps=13", "--unlike", "ok", "--seeds", "0", *board]]
    done = subprocess.run([sys.executable, "-c", SEQUENCE, json.dumps(commands)], cwd=repo, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (steps, nosuch, no_board, like, unlike) = json.loads(done.stdout.rsplit("\x00", 1)[1])
    out = repo / "reports-local" / "rank"

    assert steps[0] == 2 and "train.steps: 13 here, 12 on the board" in steps[2] and "--unlike ok" in steps[2]
    assert "run 1 of" not in steps[2] and "Nothing was trained" in steps[2]  # refused before training
    assert nosuch[0] == 2 and "nosuch" in nosuch[2] and "alibi_half" in nosuch[2] and "run 1 of" not in nosuch[2]
    assert no_board[0] == 2 and "'nosuch'" in no_board[2] and "flagship" in no_board[2]

    assert like[0] == 0, like[2][-2000:]
    assert re.search(r"alibi_half \[arm\] places [1-3] of 3 by OOD MRR: \d\.\d\d \[\d\.\d\d, \d\.\d\d\]", like[1])
    folder = out / "rank_fixture-alibi_half"
    assert {"rank.md", "rank.csv", "report"} <= {p.name for p in folder.iterdir()}
    table = pd.read_csv(folder / "rank.csv")
    assert set(table.table) >= {"place", "mrr", "mrr shift", "paired alibi_half [arm]"}
    assert set(table[table.table == "paired alibi_half [arm]"].scheme) == {"nope", "alibi"}
    assert (folder / "report" / "index.md").is_file() and "subset" not in like[1]

    assert unlike[0] == 0, unlike[2][-2000:]
    assert "Not like for like" in unlike[1] and "train.steps: 13 here, 12 on the board" in unlike[1]
    assert "places" not in unlike[1] and "Ranked on a subset" in unlike[1]
    unlike_runs = out / "rank_fixture-alibi_half_steps-13" / "results" / "rank_fixture-alibi_half_steps-13"
    assert [p.name.split("-")[4] for p in unlike_runs.glob("*.json")] == ["s0"]  # seed 0 only
    assert _digests(repo) == before
