"""``suite.reproduce``: rerun published runs and say where each score lands.

Mutation checks: ``verdict`` comparing ``rerun == published`` with a tolerance, or dropping the
interval test, makes test_verdicts_by_hand fail; ``rerun`` without the published thread count or
spec gives other run ids and no rerun rows (test_a_rerun_on_the_publishing_machine_is_identical);
so does ``rerun`` not passing ``outcome`` to ``execute`` (every rerun then reads "already stored").
"""
import gzip
import json
import re

import pytest

from suite import reproduce
from suite.results import shipped, store
from suite.run import execute
from tests.conftest import make_spec
from tests.test_run import QUICK


def test_verdicts_by_hand():
    assert reproduce.verdict(0.5, 0.5, 0.4, 0.6) == "identical"
    assert reproduce.verdict(0.5, 0.55, 0.4, 0.6) == "inside interval"
    assert reproduce.verdict(0.5, 0.4, 0.4, 0.6) == "inside interval"  # the bounds belong to the interval
    assert reproduce.verdict(0.5, 0.61, 0.4, 0.6) == "outside interval"
    assert reproduce.verdict(0.5, 0.5000001, float("nan"), float("nan")) == "outside interval"
    assert reproduce.verdict(float("nan"), 0.5, 0.4, 0.6) == "no published score"
    assert reproduce.choose(["c", "a", "b"], 5, 0) == ["a", "b", "c"]
    assert reproduce.choose(list("abcdef"), 2, 1) == reproduce.choose(list("fedcba"), 2, 1)  # the draw ignores order


def test_two_boards_cell_by_cell_by_hand(tmp_path, capsys):
    import pandas as pd

    cols = ["scheme", "task", "eval_len", "metric", "mean", "ci_low", "ci_high"]
    pub = pd.DataFrame([["nope", "copy", 32, "token_accuracy", 0.9282, 0.85, 1.0],
                        ["nope", "copy", 40, "token_accuracy", 0.6247, 0.36, 0.89],
                        ["rope", "copy", 40, "token_accuracy", 0.16, 0.10, 0.20],
                        ["t5", "copy", 40, "token_accuracy", 0.5, 0.4, 0.6]], columns=cols)
    other = pd.DataFrame([["nope", "copy", 32, "token_accuracy", 0.9282, 0.8, 1.0],
                          ["nope", "copy", 40, "token_accuracy", 0.5000, 0.3, 0.7],
                          ["rope", "copy", 40, "token_accuracy", 0.25, 0.2, 0.3]], columns=cols)
    table = reproduce.compare_boards(pub, other)
    assert list(table.verdict) == ["identical", "inside interval", "outside interval"]  # t5: only one board
    assert list(table["diff"]) == [0.0, -0.1247, 0.09]
    pub.to_csv(tmp_path / "a.csv", index=False), other.to_csv(tmp_path / "b.csv", index=False)
    assert reproduce.main(["--boards", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 1
    assert "identical: 1; inside interval: 1; outside interval: 1; cells: 3; largest |diff|: 0.1247" in capsys.readouterr().out
    assert reproduce.main(["--boards", str(tmp_path / "a.csv"), str(tmp_path / "a.csv"), "--out", str(tmp_path / "c.md")]) == 0
    assert "identical: 4; inside interval: 0; outside interval: 0; cells: 4" in (tmp_path / "c.md").read_text()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("pub")
    for seed in (0, 1):
        execute(make_spec(*QUICK, "position=alibi", "sweep_name=t", f"seed={seed}"), results_dir=root / "results",
                progress=False)
    shipped.pack(root / "results" / "t", store.shipped_path("t", root / "published"))
    return root


def test_a_rerun_on_the_publishing_machine_is_identical(published, tmp_path, capsys):
    args = ["t", "--published", str(published / "published"), "--results", str(tmp_path)]
    assert reproduce.main([*args, "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "reproducing 1 of 2 runs" in out and "published on: torch" in out
    assert "identical: 2; inside prediction interval: 0; outside prediction interval: 0" in out  # copy at 16 and 32 tokens
    # what it is doing: which rerun of how many, its label, and the comparison
    assert re.search(r"^run 1 of 1: alibi full copy seed [01] \| 0 of 1 done, time left known after the first trained run$",
                     out, re.M)
    assert "\nrun 1 of 1 finished | 1 of 1 done\n" in out and "comparing 1 reruns with the published cells of 2 runs" in out

    # a published number this machine does not give, outside its cell's interval: said, and exit 1
    path = store.shipped_path("t", published / "published")
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    chosen = reproduce.choose([p["run"]["run_id"] for p in lines], 1, 0)[0]
    for p in lines:
        p["rows"] = [{**r, "value": 1.0} if r["metric"] == "token_accuracy" and r["slice"] == "all" else r
                     for r in p["rows"]]
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    (tampered / "t.jsonl.gz").write_bytes(store.encode_shipped(lines))
    assert reproduce.main(["t", "--published", str(tampered), "--results", str(tmp_path), "--run", chosen]) == 1
    out = capsys.readouterr().out
    assert "outside prediction interval: 2" in out
    assert "\nrun 1 of 1 already stored | 1 of 1 done (1 already stored)\n" in out  # the rerun is reused, not retrained


def test_bad_input_is_refused_naming_it(published, tmp_path, capsys):
    args = ["t", "--published", str(published / "published"), "--results", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        reproduce.main([*args, "--run", "nope-x"])
    assert exit_info.value.code == 2 and "--run 'nope-x' is not a run of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reproduce.main([*args, "-k", "0"])
    assert reproduce.main(["other", "--published", str(published / "published")]) == 1
    assert "no shipped file" in capsys.readouterr().err


def test_a_published_run_under_an_older_form_of_its_id_meets_its_rerun(published, tmp_path, capsys):
    """Shipped rows keep the ids they were stored under ('alibi-uniform-copy-s0-<hash>', before the
    span was a field of the id); the rerun is named by this checkout ('alibi-uniform-full-copy-...')
    and still meets its published run.
    Mutation check: matching reruns to published rows by the rerun's own id (``as_published``
    returning ``reruns`` unchanged) gives no rerun rows and makes this fail."""
    path = store.shipped_path("t", published / "published")
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    older = {p["run"]["run_id"]: p["run"]["run_id"].replace("-full-", "-") for p in lines}
    assert all(new != old for new, old in older.items())
    for p in lines:
        p["run"]["run_id"] = older[p["run"]["run_id"]]
        p["rows"] = [{**r, "run_id": older.get(r.get("run_id"), r.get("run_id"))} for r in p["rows"]]
    shipped_dir = tmp_path / "older"
    shipped_dir.mkdir()
    (shipped_dir / "t.jsonl.gz").write_bytes(store.encode_shipped(lines))
    chosen = sorted(older.values())[0]
    assert reproduce.main(["t", "--published", str(shipped_dir), "--results", str(tmp_path / "r"), "--run", chosen]) == 0
    out = capsys.readouterr().out
    assert "identical: 2; inside prediction interval: 0; outside prediction interval: 0" in out and chosen in out


@pytest.mark.parametrize("prog", ["posbench reproduce", "python -m suite.reproduce"])
def test_ctrl_c_prints_one_line_and_exits_130(prog, tmp_path, monkeypatch, capsys):
    """Ctrl-C during the reruns: one line on stderr naming how to go on, exit 130, no traceback.
    Mutation check: dropping the ``except KeyboardInterrupt`` in ``main`` makes this fail (the
    interrupt propagates), as does returning 1."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "rerun", interrupted)
    assert reproduce.main(["default", "-k", "1", "--results", str(tmp_path / "r")], prog=prog) == 130
    captured = capsys.readouterr()
    assert captured.err == "reproduce: interrupted; rerun the same command to go on\n"
    assert "Traceback" not in captured.out
