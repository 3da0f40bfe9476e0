"""``posbench curve``: a run's or a cell's training loss against the step, with the band over seeds
from the lowest to the highest loss logged at each step, and the in-distribution score at the end.

Mutation check: in suite/commands/curve.py ``_spread``, ``min(finite)`` -> ``sum(finite) /
len(finite)`` (the band's low end the mean) makes
test_a_cells_curve_is_the_mean_with_a_min_max_band_over_its_seeds fail; grouping by run id in
``curves`` whatever ``by`` says makes test_the_command_draws_a_folder_per_cell_and_prints_the_table
fail; dropping the ``without`` message in ``main`` makes
test_runs_stored_without_a_history_are_named_and_none_is_plotted fail."""
import json
import math
import re

import pytest

from suite import files
from suite.cli import COMMANDS
from suite.commands import curve
from suite.results import store
from suite.run import execute, run_id
from tests.conftest import make_spec

TOY = ["train.steps=9", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
       "eval.multiples=[1]", "model.n_layers=2", "model.d_model=32", "logger=none", "sweep_name=toy",
         "train.until_learned=false"]
RUNS = [("alibi", 0), ("alibi", 1), ("alibi", 2), ("nope", 0)]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """Three seeds of ALiBi (one cell) and one NoPE run, each logging every 2nd step and the last."""
    root = tmp_path_factory.mktemp("curves")
    for position, seed in RUNS:
        execute(make_spec(*TOY, f"position={position}", f"seed={seed}"), results_dir=root, progress=False, log_every=2)
    return root


def _payloads(toy):
    return [payload for _, payload in store.payloads(toy / "toy")]


def test_a_cells_curve_is_the_mean_with_a_min_max_band_over_its_seeds(toy):
    found, without = curve.curves(_payloads(toy), by="cell")
    assert without == [] and [c.label for c in found] == ["alibi full copy", "nope full copy"]
    alibi = found[0]
    assert alibi.seeds == [0, 1, 2] and alibi.steps == [0, 2, 4, 6, 8] and alibi.runs_at == [3] * 5
    histories = {p["run"]["seed"]: p["run"]["history"] for p in _payloads(toy) if p["run"]["positions"] == "alibi"}
    for i, step in enumerate(alibi.steps):
        losses = [next(h["train/loss"] for h in histories[s] if h["step"] == step) for s in (0, 1, 2)]
        assert alibi.low[i] == min(losses) and alibi.high[i] == max(losses)
        assert alibi.loss[i] == pytest.approx(sum(losses) / 3, abs=1e-12)
        assert alibi.low[i] < alibi.high[i]  # the seeds differ, so the band is not a line
    scores = [next(r["value"] for r in p["rows"] if r["metric"] == "token_accuracy" and r["eval_len"] == 16
                   and r["slice"] == "all") for p in _payloads(toy) if p["run"]["positions"] == "alibi"]
    metric, mean, low, high = alibi.scores["copy"]
    assert metric == "token_accuracy" and (low, high) == (min(scores), max(scores))
    assert mean == pytest.approx(sum(scores) / 3) and alibi.final_step == 9
    nope = found[1]  # one seed: its band is its own line
    assert nope.seeds == [0] and nope.low == nope.loss == nope.high


def test_the_command_draws_a_folder_per_cell_and_prints_the_table(toy, tmp_path, capsys):
    assert COMMANDS["curve"][0] == "suite.commands.curve"
    out = tmp_path / "toy.png"
    assert curve.main([str(toy / "toy"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and text.rstrip().endswith(f"wrote {out}")
    alibi = curve.curves(_payloads(toy))[0][0]
    line = next(line for line in text.splitlines() if line.startswith("alibi full copy "))
    assert re.split(r"\s{2,}", line)[1:5] == ["0,1,2", "5", "9", f"{alibi.loss[0]:.3f} [{alibi.low[0]:.3f}, {alibi.high[0]:.3f}]"]
    assert "measured once, at the end of training" in text


def test_a_run_id_draws_that_run_alone(toy, tmp_path, capsys):
    rid = run_id(make_spec(*TOY, "position=nope", "seed=0"))
    assert curve.main([rid.rsplit("-", 1)[1], "--results", str(toy), "--out", str(tmp_path / "one.png")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("nope full copy seed 0 ")]
    assert len(rows) == 1 and (tmp_path / "one.png").is_file()
    assert curve.main(["no-such-run", "--results", str(toy), "--out", str(tmp_path / "x.png")]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_runs_stored_without_a_history_are_named_and_none_is_plotted(toy, tmp_path, capsys):
    old = tmp_path / "old" / "toy"
    old.mkdir(parents=True)
    for payload in _payloads(toy):
        run = {k: v for k, v in payload["run"].items() if k != "history"}  # as runs were stored before
        files.write_json_atomic(old / f"{run['run_id']}.json", {**payload, "run": run})
    assert curve.main([str(old), "--out", str(tmp_path / "old.png")]) == 1
    err = capsys.readouterr().err
    assert "4 of 4 runs store no training history" in err and "nothing to plot" in err
    assert not (tmp_path / "old.png").exists()
    # one run with a history among them: it is drawn, the others are named
    keep = json.loads(files.read_regular(next(toy.glob("toy/nope-*.json"))))
    files.write_json_atomic(old / f"{keep['run']['run_id']}.json", keep)
    assert curve.main([str(old), "--out", str(tmp_path / "mixed.png")]) == 0
    captured = capsys.readouterr()
    assert "3 of 4 runs store no training history" in captured.err and "nope full copy" in captured.out


def test_shipped_rows_stored_before_the_history_was_kept_get_a_clear_message(toy, tmp_path, capsys):
    old = [{**p, "run": {k: v for k, v in p["run"].items() if k != "history"}} for p in _payloads(toy)]
    shipped = tmp_path / "old.jsonl.gz"
    shipped.write_bytes(store.encode_shipped(old))
    assert curve.main([str(shipped), "--out", str(tmp_path / "p.png")]) == 1
    err = capsys.readouterr().err
    assert "4 of 4 runs store no training history" in err and "rerun them" in err
    assert math.isnan(curve._spread([])[0])
