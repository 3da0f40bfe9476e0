import atexit
import functools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
import torch

from suite.config.build import build
from tests.composed import composed

warnings.filterwarnings("ignore", message=".*flex_attention.*")

# a board shipped before runs were trained to criterion (tests/data/README.md)
PRE_CRITERION = os.path.join(os.path.dirname(__file__), "data", "pre_criterion_default.jsonl.gz")

if os.environ.get("PYTEST_XDIST_WORKER"):  # one test process per core (make test): one torch thread each
    torch.set_num_threads(1)


@functools.cache
def install_done() -> str:
    """``STAMP=<a file touched now>`` for a ``make`` command line: its install step counts as done (the stamp is
    newer than pyproject.toml and the Makefile), in a dry run (-n) and in the sub-makes it starts, so a test never
    installs anything, whatever order a fresh clone wrote the files in."""
    folder = Path(tempfile.mkdtemp(prefix="posbench-stamp-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "installed-stamp").touch()
    return f"STAMP={folder / 'installed-stamp'}"


def make_spec(*overrides):
    """The run spec ``python -m suite.run <overrides>`` would build. The group choices are composed
    once per process (tests/composed.py); the spec is built afresh each time, so a changed code
    file still changes its run id."""
    return build(composed(overrides))


def stored_seeds(folder, overrides, seeds=(0, 1)):
    """A results folder (``folder``/results) holding one stored run of ``overrides`` per seed."""
    from suite.run import execute

    results = folder / "results"
    for seed in seeds:
        execute(make_spec(*overrides, f"seed={seed}"), results_dir=results, progress=False)
    return results


@pytest.fixture
def spec_of():
    return make_spec


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread while a module's tests run."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def assert_score_mod_is_the_bias(scheme, n_heads: int, grad: bool, atol: float = 1e-8) -> None:
    """A scheme's FlexAttention ``score_mod``, called on every (head, query, key) of 40 positions,
    adds exactly its ``bias`` on every causal pair, with a gradient only when training."""
    pos = torch.arange(40)
    with torch.set_grad_enabled(grad):
        mod = scheme.score_mod(pos)
        h, q, k = torch.meshgrid(torch.arange(n_heads), pos, pos, indexing="ij")
        added = mod(torch.zeros(h.shape), 0, h, q, k)
        expected = scheme.bias(pos, pos)
    causal = k <= q
    assert torch.allclose(added[causal], expected[causal], atol=atol) and added.requires_grad == grad


CLASSIC = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5")  # the flagship's six schemes


def fast_or_exhaustive(cases, fast) -> list:
    """``cases`` as pytest params, those not in ``fast`` marked ``exhaustive``: ``make test`` runs
    the fast ones, ``make test-exhaustive`` (and CI, after ``make test``) the rest."""
    out = []
    for case in cases:
        values = case if isinstance(case, tuple) else (case,)
        out.append(pytest.param(*values, marks=() if case in fast else pytest.mark.exhaustive))
    return out


def spec_for(rows: list[dict], **extra) -> dict:
    """The part of a stored run spec that the store checks rows against (training length, eval
    multiples, tasks), as a run that produced ``rows`` would have it; ``extra`` adds keys."""
    train_len = rows[0]["train_len"] if rows else 32
    multiples = sorted({r["eval_len"] / train_len for r in rows}) or [1.0]
    tasks = [{"name": t, "params": []} for t in dict.fromkeys(r["task"] for r in rows)]
    return {"train": {"seq_len": train_len}, "eval": {"multiples": multiples}, "tasks": tasks, **extra}


def killed_and_resumed(spec, tmp_path, monkeypatch, kill_at: int, ckpt_every: int = 5, log_every: int = 2):
    """(uninterrupted result file, resumed result file) of ``spec``: once trained straight through
    under ``tmp_path / "a"``, once under ``tmp_path / "b"`` interrupted at its ``kill_at``-th training
    step (a KeyboardInterrupt from ``train_step``) and run again, resuming from its last checkpoint."""
    from suite.run import execute
    from suite.training import loop

    straight = execute(spec, results_dir=tmp_path / "a", progress=False, ckpt_every=ckpt_every, log_every=log_every)
    real, calls = loop.train_step, {"n": 0}

    def dies(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "train_step", dies)
    with pytest.raises(KeyboardInterrupt):
        execute(spec, results_dir=tmp_path / "b", progress=False, ckpt_every=ckpt_every, log_every=log_every)
    monkeypatch.setattr(loop, "train_step", real)
    return straight, execute(spec, results_dir=tmp_path / "b", progress=False, ckpt_every=ckpt_every, log_every=log_every)
