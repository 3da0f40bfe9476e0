"""``suite.reproduce``: rerun published runs and say where each score lands.

Mutation checks: ``verdict`` comparing ``rerun == published`` with a tolerance, or dropping the
interval test, makes test_verdicts_by_hand fail; ``rerun`` without the published thread count or
spec gives other run ids and no rerun rows (test_a_rerun_on_the_publishing_machine_is_identical).
"""
import gzip
import json

import pytest

from suite import reproduce
from suite.results import shipped
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


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("pub")
    for seed in (0, 1):
        execute(make_spec(*QUICK, "position=alibi", "sweep_name=t", f"seed={seed}"), results_dir=root / "results",
                progress=False)
    shipped.pack(root / "results" / "t", shipped.path_of("t", root / "published"))
    return root


def test_a_rerun_on_the_publishing_machine_is_identical(published, tmp_path, capsys):
    args = ["t", "--published", str(published / "published"), "--results", str(tmp_path)]
    assert reproduce.main([*args, "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "reproducing 1 of 2 runs" in out and "published on: torch" in out
    assert "identical: 2; inside interval: 0; outside interval: 0" in out  # copy at 16 and 32 tokens

    # a published number this machine does not give, outside its cell's interval: said, and exit 1
    path = shipped.path_of("t", published / "published")
    lines = [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]
    chosen = reproduce.choose([p["run"]["run_id"] for p in lines], 1, 0)[0]
    for p in lines:
        p["rows"] = [{**r, "value": 1.0} if r["metric"] == "token_accuracy" and r["slice"] == "all" else r
                     for r in p["rows"]]
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    (tampered / "t.jsonl.gz").write_bytes(shipped.encode(lines))
    assert reproduce.main(["t", "--published", str(tampered), "--results", str(tmp_path), "--run", chosen]) == 1
    assert "outside interval: 2" in capsys.readouterr().out


def test_bad_input_is_refused_naming_it(published, tmp_path, capsys):
    args = ["t", "--published", str(published / "published"), "--results", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        reproduce.main([*args, "--run", "nope-x"])
    assert exit_info.value.code == 2 and "--run 'nope-x' is not a run of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reproduce.main([*args, "-k", "0"])
    assert reproduce.main(["other", "--published", str(published / "published")]) == 1
    assert "no shipped file" in capsys.readouterr().err
