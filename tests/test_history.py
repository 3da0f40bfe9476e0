"""The whole training history survives a resume: the checkpoint carries the logged steps before it,
the resumed process continues them, and the run's stored record (``run["history"]``) holds every
logged step, equal step for step to an uninterrupted run's (the loss, learning rate and gradient
norm; tokens per second is a timing and differs).

Mutation check: in suite/training/loop.py ``_Meter.__init__``, ``list(history)`` -> ``[]`` (a
resumed run keeps only its own steps) makes both tests fail; in suite/training/checkpoint.py
``save_checkpoint`` writing ``"history": []`` makes both fail; dropping ``"history":
result.history`` from the record in suite/lifecycle.py ``store`` makes
test_a_resumed_runs_stored_history_equals_an_uninterrupted_runs fail."""
import pytest
import torch

from suite.model.lm import PosBenchLM
from suite.results import store
from suite.training.loop import train
from tests.conftest import killed_and_resumed, make_spec

QUICK = ["train.steps=20", "train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4",
         "eval.multiples=[1]", "model.n_layers=2", "model.d_model=32", "logger=none", "position=rope",
         "train.until_learned=false"]
NUMBERS = ("step", "train/loss", "train/lr", "train/grad_norm")


def _numbers(history):
    return [tuple(h[k] for k in NUMBERS) for h in history]


class Interrupt(Exception):
    pass


def test_a_resumed_training_returns_the_whole_history(tmp_path):
    spec = make_spec(*QUICK)
    task = spec.tasks[0].build()
    torch.manual_seed(0)
    straight = train(PosBenchLM(spec.model), spec, task, progress=False, log_every=5)

    def crash(record, step):
        if step >= 15:
            raise Interrupt

    ckpt = tmp_path / "ckpt.pt"
    torch.manual_seed(0)
    with pytest.raises(Interrupt):
        train(PosBenchLM(spec.model), spec, task, ckpt_path=ckpt, ckpt_every=5, log=crash, log_every=5, progress=False)
    assert [h["step"] for h in torch.load(ckpt, weights_only=True)["history"]] == [0, 5, 10]
    torch.manual_seed(1)  # other initial weights: all of it must come from the checkpoint
    resumed = train(PosBenchLM(spec.model), spec, task, ckpt_path=ckpt, ckpt_every=5, log_every=5, progress=False)
    assert resumed.resumed_from == 15
    assert [h["step"] for h in resumed.history] == [0, 5, 10, 15, 19]
    assert _numbers(resumed.history) == _numbers(straight.history)


def test_a_resumed_runs_stored_history_equals_an_uninterrupted_runs(tmp_path, monkeypatch):
    spec = make_spec(*QUICK, "sweep_name=hist")
    straight, resumed = map(store.read_run, killed_and_resumed(spec, tmp_path, monkeypatch, kill_at=13))  # after the checkpoint at step 10

    assert resumed["run"]["resumed_from"] == 10
    history = resumed["run"]["history"]
    assert [h["step"] for h in history] == [*range(0, 20, 2), 19]  # every logged step, 0 to the last
    assert _numbers(history) == _numbers(straight["run"]["history"])
    assert history[-1]["train/loss"] == resumed["run"]["final_loss"] == straight["run"]["final_loss"]
    assert [r["value"] for r in resumed["rows"]] == [r["value"] for r in straight["rows"]]
