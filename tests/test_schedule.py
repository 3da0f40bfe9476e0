"""Training schedules (``train.schedule``): a run changes the position scheme of its position-group
layers at fractions of its steps, and is evaluated with its own ``position`` group.

* the model follows its phase: in phase 0 its logits are a pure RoPE model's with the same weights,
  in the last a pure NoPE model's; the training loop sets the phase from the step
  (test_the_model_uses_the_scheme_of_its_phase, test_training_sets_the_phase_from_the_step);
* the optimizer's state lives across the switch, and an earlier phase's parameters stop moving
  after it (test_the_optimizer_state_is_kept_across_the_switch);
* a run killed before or after the switch and resumed ends bit for bit as an uninterrupted one
  (test_a_run_resumed_before_or_after_the_switch_equals_an_uninterrupted_one);
* the schedule is in the run id, a stored spec round-trips to its id, a run without a schedule
  keeps its published id, and the phases' scheme files are in the code digest
  (test_the_schedule_is_in_the_run_id, test_a_published_spec_rebuilds_to_its_stored_id,
  test_the_phase_schemes_are_in_the_code_digest);
* a bad schedule is refused before anything trains, naming the key and the valid values
  (test_a_bad_schedule_is_refused_naming_the_key);
* a layer a pattern names with another scheme keeps it (test_a_pattern_layer_with_its_own_scheme_keeps_it).

Mutation checks (each made, watched failing, restored):
* suite/model/lm.py forward, ``block.phase_schemes[self.phase]`` -> ``block.scheme_index`` makes
  test_the_model_uses_the_scheme_of_its_phase fail;
* suite/training/loop.py, deleting ``model.set_phase(t.phase_at(step))`` makes
  test_training_sets_the_phase_from_the_step and test_the_optimizer_state_is_kept_across_the_switch fail;
  ``t.phase_at(step)`` -> ``t.phase_at(step - run.start)`` (the phase counted from the process's
  first step) makes test_a_run_resumed_before_or_after_the_switch_equals_an_uninterrupted_one fail;
* suite/training/loop.py, rebuilding the optimizer at the switch (``run.optimizer =
  build_optimizer(model, spec, run.device)`` when ``step == t.switch_steps()[0]``) makes
  test_the_optimizer_state_is_kept_across_the_switch fail;
* suite/config/run_spec.py, ``schedule`` declared with ``default_factory=tuple`` (so the id keeps the
  empty field) makes test_a_published_spec_rebuilds_to_its_stored_id fail; dropping the phase's
  ``position_cfg`` in suite/config/build.py ``_phase_from_dict`` makes test_the_schedule_is_in_the_run_id fail;
* suite/config/codedigest.py pieces_of, leaving out the layers' ``earlier`` schemes makes
  test_the_phase_schemes_are_in_the_code_digest fail;
* suite/config/build.py _checked_schedule, deleting the ``0 < until < 1`` rule, the strictly
  increasing rule, the scheme-name rule or the unknown-key check makes the matching case of
  test_a_bad_schedule_is_refused_naming_the_key fail; ``layer.position == group`` -> ``True`` in
  ``_scheduled`` makes test_a_pattern_layer_with_its_own_scheme_keeps_it fail.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from suite.config.build import SpecError, run_spec_from_dict
from suite.config.codedigest import numeric_files, pieces_of
from suite.model.lm import PosBenchLM
from suite.results.identity import positions_label
from suite.training import loop
from suite.training.loop import train
from tests.conftest import make_spec

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=16",
         "train.batch_size=4", "train.warmup=2", "eval.multiples=[1,2]", "task=copy", "logger=none"]
DROP = [*SMALL, "position=nope", "train.schedule=[{until:0.5,position:rope}]"]

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _model(spec, seed=0):
    torch.manual_seed(seed)
    return PosBenchLM(spec.model)


def test_the_model_uses_the_scheme_of_its_phase():
    spec = make_spec(*DROP)
    model = _model(spec).eval()
    assert model.n_phases == 2 and model.phase == 1  # a new model is in its last phase, the evaluated one
    rope, nope = _model(make_spec(*SMALL, "position=rope"), 1).eval(), _model(make_spec(*SMALL, "position=nope"), 2).eval()
    rope.load_state_dict(model.state_dict())  # neither scheme holds parameters: the same weights
    nope.load_state_dict(model.state_dict())
    tokens = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want_rope, want_nope = rope(tokens), nope(tokens)
        model.set_phase(0)
        in_rope = model(tokens)
        model.set_phase(1)
        in_nope = model(tokens)
    assert torch.equal(in_rope, want_rope) and torch.equal(in_nope, want_nope)
    assert not torch.allclose(want_rope, want_nope, atol=1e-3)  # the two phases differ
    with pytest.raises(ValueError, match="phases 0 to 1"):
        model.set_phase(2)


def test_training_sets_the_phase_from_the_step():
    spec = make_spec(*DROP, "train.steps=5", "train.schedule=[{until:0.6,position:rope}]")
    assert spec.train.switch_steps() == (3,) and [spec.train.phase_at(s) for s in range(5)] == [0, 0, 0, 1, 1]
    model = _model(spec)
    seen = []
    model.register_forward_pre_hook(lambda m, args: seen.append(m.phase))
    result = train(model, spec, [t.build() for t in spec.tasks], progress=False)
    assert result.status == "ok" and seen == [0, 0, 0, 1, 1] and model.phase == 1


def test_the_optimizer_state_is_kept_across_the_switch(monkeypatch):
    """T5 (a learned bias) in phase 0, NoPE after it: the optimizer holds T5's table from step 0,
    every parameter's AdamW state counts every step it trained, and the table stops moving at the
    switch (no gradient, no decay)."""
    spec = make_spec(*SMALL, "position=nope", "train.steps=4", "train.schedule=[{until:0.5,position:t5}]")
    built = []
    monkeypatch.setattr(loop, "build_optimizer", lambda *a, _real=loop.build_optimizer: built.append(_real(*a)) or built[-1])
    model = _model(spec)
    table = next(p for s in model.schemes for p in s.parameters())
    snapshots = {}
    train(model, spec, [t.build() for t in spec.tasks], progress=False,
          on_step=lambda n: snapshots.__setitem__(n, table.detach().clone()))
    assert len(built) == 1
    state = built[0].state
    qkv = model.blocks[0].attn.qkv.weight
    assert float(state[qkv]["step"]) == 4  # one AdamW state for the whole run
    assert float(state[table]["step"]) == 2  # the T5 table trained in phase 0 only
    assert not torch.equal(snapshots[1], snapshots[2])  # it moved while its phase ran
    assert torch.equal(snapshots[2], snapshots[4])  # and not after


def _kill_at(n):
    def stop(done):
        if done == n:
            raise KeyboardInterrupt

    return stop


@pytest.mark.parametrize("kill", [3, 5], ids=["before the switch", "after the switch"])
def test_a_run_resumed_before_or_after_the_switch_equals_an_uninterrupted_one(tmp_path, kill):
    """Switch at step 3 of 6; a checkpoint every step. The killed process's last checkpoint is at
    step ``kill - 1`` (2: before the switch, 4: after it); a new process resumes from it."""
    spec = make_spec(*DROP, "train.steps=6")
    assert spec.train.switch_steps() == (3,)
    tasks = [t.build() for t in spec.tasks]
    straight = _model(spec)
    want = train(straight, spec, tasks, progress=False, log_every=1)
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(KeyboardInterrupt):
        train(_model(spec), spec, tasks, progress=False, ckpt_path=ckpt, ckpt_every=1, on_step=_kill_at(kill), log_every=1)
    resumed_model = _model(spec, seed=7)  # other initial weights: all of it must come from the checkpoint
    resumed = train(resumed_model, spec, tasks, progress=False, ckpt_path=ckpt, ckpt_every=1, log_every=1)
    assert resumed.resumed_from == kill - 1
    assert resumed.final_loss == want.final_loss
    # the whole history, the killed process's steps (from the checkpoint) included
    assert [(h["step"], h["train/loss"]) for h in resumed.history] == [(h["step"], h["train/loss"]) for h in want.history]
    assert all(torch.equal(a, b) for a, b in zip(resumed_model.state_dict().values(), straight.state_dict().values()))
    assert resumed_model.phase == straight.phase == 1


def test_the_schedule_is_in_the_run_id():
    plain = make_spec(*SMALL, "position=nope")
    drope = make_spec(*DROP)
    later = make_spec(*SMALL, "position=nope", "train.schedule=[{until:0.75,position:rope}]")
    theta = make_spec(*SMALL, "position=nope", "train.schedule=[{until:0.5,position:rope,theta:500}]")
    ids = {s.run_id for s in (plain, drope, later, theta)}
    assert len(ids) == 4
    for spec in (drope, later, theta):  # a stored spec rebuilds to its id, phase options included
        assert run_spec_from_dict(json.loads(json.dumps(spec.to_dict()))).run_id == spec.run_id
    assert positions_label(drope) == "rope>nope@0.5" and positions_label(plain) == "nope"
    assert positions_label(make_spec(*SMALL, "position=nope", "train.schedule=[{until:0.25,position:rope},"
                                                               "{until:0.5,position:alibi}]")) == "rope>alibi@0.25>nope@0.5"


def test_a_published_spec_rebuilds_to_its_stored_id():
    """Runs without a schedule keep their ids: the new fields sit at their defaults and the id
    leaves them out. One stored run of every published board (gzipped JSON lines, a run a line)."""
    checked = 0
    for path in sorted((ROOT / "published").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            run = json.loads(fh.readline())["run"]
        spec = json.loads(run["spec"]) if isinstance(run["spec"], str) else run["spec"]
        assert run_spec_from_dict(spec).run_id == run["spec_hash"], path
        checked += 1
    assert checked >= 3


def test_the_phase_schemes_are_in_the_code_digest():
    spec = make_spec(*SMALL, "position=nope", "train.schedule=[{until:0.5,position:alibi}]")
    assert pieces_of(spec.to_dict())["position"] == ("alibi", "nope")
    files = {f.relative_to(ROOT).as_posix() for f in numeric_files(ROOT, **pieces_of(spec.to_dict()))}
    assert "suite/model/position/alibi.py" in files
    assert spec.code != make_spec(*SMALL, "position=nope").code


BAD = {
    "until 0": ("[{until:0,position:rope}]", r"train\.schedule\[0\]\.until=0: must be a fraction of train\.steps in \(0, 1\)"),
    "until 1": ("[{until:1,position:rope}]", r"train\.schedule\[0\]\.until=1: must be a fraction .* in \(0, 1\)"),
    "until 1.5": ("[{until:1.5,position:rope}]", r"train\.schedule\[0\]\.until=1\.5: must be a fraction .* in \(0, 1\)"),
    "until missing": ("[{position:rope}]", r"train\.schedule\[0\]\.until=None: must be a fraction"),
    "not increasing": ("[{until:0.6,position:rope},{until:0.4,position:alibi}]",
                       r"train\.schedule\[1\]\.until=0\.4: must be above train\.schedule\[0\]\.until=0\.6; .*strictly increase"),
    "no step": ("[{until:0.01,position:rope}]", r"train\.schedule\[0\]\.until=0\.01: with train\.steps=20 it ends at step 0"),
    "unknown scheme": ("[{until:0.5,position:ropee}]",
                       r"train\.schedule\[0\]\.position='ropee': unknown position scheme; valid: .*alibi.*rope"),
    "unknown key": ("[{until:0.5,position:rope,thetaa:5}]",
                    r"\['train\.schedule\[0\]\.thetaa'\].*valid: .*train\.schedule\[0\]\.theta, .*train\.schedule\[0\]\.until"),
    "unknown key, no scheme": ("[{until:0.5,postion:rope}]",
                               r"\['train\.schedule\[0\]\.postion'\].*valid: train\.schedule\[0\]\.position, train\.schedule\[0\]\.until"),
    "bad option": ("[{until:0.5,position:rope,theta:0.5}]", r"train\.schedule\[0\] \(rope\): rope\.theta=0\.5: must be > 1"),
    "wrong type": ("[{until:0.5,position:rope,theta:big}]", r"train\.schedule\[0\]\.theta='big'"),
    "data-dependent": ("[{until:0.5,position:fox}]", r"train\.schedule\[0\]\.position='fox': a scheme that reads the data"),
    "not a phase": ("[0.5]", r"train\.schedule\[0\]=0\.5: must map keys to values"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_schedule_is_refused_naming_the_key(case):
    schedule, message = BAD[case]
    with pytest.raises(SpecError, match=message):
        make_spec(*SMALL, "position=nope", "train.steps=20", f"train.schedule={schedule}")


def test_a_pattern_layer_with_its_own_scheme_keeps_it():
    spec = make_spec(*SMALL, "pattern=rnope", "position=rope", "train.schedule=[{until:0.5,position:alibi}]")
    assert [(layer.position, [n for n, _ in layer.earlier]) for layer in spec.model.layers] == [("rope", ["alibi"]), ("nope", [])]
    assert positions_label(spec) == "alibi+nope>rope+nope@0.5"
    with pytest.raises(SpecError, match=r"train\.schedule .* would change nothing"):
        make_spec(*SMALL, "pattern=rnope", "position=alibi", "train.schedule=[{until:0.5,position:t5}]")


def test_report_labels_name_a_schedule_and_its_options():
    """Mutation check: in suite/report/labels.py flatten, storing the schedule as it is (no
    ``schedule_text``) or leaving out the phases' options makes this fail."""
    from suite.report.labels import describe, differing_keys, flatten

    early = make_spec(*DROP).to_dict()
    theta = make_spec(*SMALL, "position=nope", "train.schedule=[{until:0.5,position:rope,theta:500}]").to_dict()
    assert flatten(early)["train.schedule"] == "rope@0.5" and flatten(early)["train.schedule[0].theta"] == 10000.0
    keys = differing_keys([early, theta])
    assert keys == ["train.schedule[0].theta"] and describe(theta, keys) == "theta=500"
    assert "train.schedule" in differing_keys([early, make_spec(*SMALL, "position=nope").to_dict()])
