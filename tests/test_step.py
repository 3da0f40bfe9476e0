"""The training step: ``train`` follows a plain training loop written out here, and a step whose
loss is not finite changes nothing.

Mutation check: in suite/training/step.py train_step, dropping optimizer.zero_grad(set_to_none=True) makes
test_train_follows_a_plain_training_loop fail."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from suite.data.batch import make_batch
from suite.model.lm import PosBenchLM
from suite.training.step import train_step
from suite.training.loop import train
from tests.conftest import make_spec

STEPS = 40


def _plain_losses(spec, tasks) -> list[float]:
    """AdamW with decay on matrices only, warmup then cosine, clipping, mean cross-entropy over
    the answer tokens: the recipe as its YAML states it, one line each."""
    t = spec.train
    torch.manual_seed(spec.seed)
    model = PosBenchLM(spec.model).train()
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": t.weight_decay}, {"params": vectors, "weight_decay": 0.0}],
                            lr=t.lr, betas=t.betas)
    losses = []
    for step in range(t.steps):
        tokens, mask = make_batch(tasks, np.random.default_rng([spec.seed, step]), t.seq_len, t.batch_size, t.min_len)
        if step < t.warmup:
            lr = t.lr * (step + 1) / t.warmup
        else:
            progress = (step - t.warmup) / (t.steps - t.warmup)
            lr = t.lr * (t.min_lr_ratio + (1 - t.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in opt.param_groups:
            group["lr"] = lr
        logits = model(tokens)[:, :-1]
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), reduction="none")
        weight = mask[:, 1:].reshape(-1).float()
        loss = (nll * weight).sum() / weight.sum()
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        opt.step()
    return losses


@pytest.mark.parametrize("scheme,task", [("rope", "copy"), ("t5", "vt"), ("sinusoidal", "copy")])
def test_train_follows_a_plain_training_loop(scheme, task):
    spec = make_spec("model.n_layers=2", f"position={scheme}", f"task={task}", f"train.steps={STEPS}",
                     "train.warmup=5", "train.batch_size=16", "train.lr=3e-3")
    tasks = [t.build() for t in spec.tasks]
    torch.manual_seed(spec.seed)
    result = train(PosBenchLM(spec.model), spec, tasks, progress=False, log_every=1)
    ours = [h["train/loss"] for h in result.history]
    plain = _plain_losses(spec, tasks)
    assert len(ours) == STEPS and max(ours) - min(ours) > 0.05  # the loss moves, so the comparison says something
    np.testing.assert_allclose(ours, plain, rtol=1e-4, atol=1e-4)


def test_a_step_whose_loss_is_not_finite_changes_nothing():
    spec = make_spec("model.n_layers=1")
    model = PosBenchLM(spec.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    tokens = torch.randint(9, spec.model.vocab_size, (2, 8))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    out = train_step(lambda t: model(t) * float("nan"), opt, list(model.parameters()), tokens, mask, grad_clip=1.0)
    assert out.stopped and math.isnan(out.loss_value) and out.grad_norm is None
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    out = train_step(model, opt, list(model.parameters()), tokens, mask, grad_clip=1.0, check=False)
    assert not out.stopped and out.loss_value is None and math.isfinite(out.loss.item())
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_compiled_run_starts_with_a_fresh_dynamo_cache(monkeypatch):
    # dynamo counts recompiles per process: without a reset, the 9th model of a sweep process
    # silently runs uncompiled once the cache limit (8) is reached
    calls = []
    monkeypatch.setattr(torch.compiler, "reset", lambda: calls.append("reset"))
    monkeypatch.setattr(torch, "compile", lambda module, **kw: calls.append("compile") or module)
    spec = make_spec("model.n_layers=1", "train.steps=1", "train.batch_size=2", "train.compile=true", "train.min_len=null")
    tasks = [t.build() for t in spec.tasks]
    for _ in range(2):
        train(PosBenchLM(spec.model), spec, tasks, progress=False)
    assert calls == ["reset", "compile"] * 2
