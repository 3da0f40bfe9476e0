"""Training to criterion (``train.until_learned``): a run below the learned line at ``steps`` trains
on in chunks of ``check_every`` steps up to the cap and stops at the first passing check; the checks
change no weight; a run killed mid-extension resumes to the same end; the check set is apart from
the eval set; natural text keeps its fixed budget; and the run stores ``check_score`` and
``steps_to_learn`` rows and its record's ``criterion``.

Each test's docstring names the one-line mutation it was watched failing on."""
import numpy as np
import pytest
import torch

import suite.lifecycle as lifecycle
from suite.evaluation.check import CHECK_STREAM, check_set, make_check
from suite.evaluation.evalsets import generate
from suite.model.lm import PosBenchLM
from suite.results import store
from suite.data.metrics import LEARNED_AT
from suite.run import execute
from suite.training.loop import train
from tasks.base import Example, Task
from tests.conftest import killed_and_resumed, make_spec

TINY = ["train.batch_size=4", "train.seq_len=16", "eval.n_examples=4", "eval.batch_size=4", "eval.multiples=[1]",
        "model.n_layers=2", "model.d_model=32", "logger=none", "position=rope", "train.check_examples=8"]
QUICK = [*TINY, "train.steps=20", "train.check_every=10"]  # checks at 10, 20, ...; the cap is 80 steps


class Scripted:
    """A check whose scores follow a script: ``score(step)`` after each step (no model is scored)."""

    def __init__(self, score, line=LEARNED_AT):
        self.score, self.line, self.steps = score, line, []

    def __call__(self, model):
        self.steps.append(len(self.steps))
        return {"copy": self.score(self.made)}

    @property
    def made(self) -> int:
        return len(self.steps)

    def passed(self, scores):
        return all(v >= self.line for v in scores.values())


def _train(spec, check, **kw):
    torch.manual_seed(0)
    return train(PosBenchLM(spec.model), spec, spec.tasks[0].build(), progress=False, log_every=5, check=check, **kw)


def test_a_run_below_the_line_at_steps_trains_on_in_chunks_and_stops_at_the_first_pass():
    """Checks at 10 and 20 (= steps) fail, 30 and 40 fail, 50 passes: training stops after 50 steps,
    its checks are every 10 steps and its last logged step is 49; the bar's total grows once.

    Mutation check: in suite/training/loop.py ``stop = stop or (done >= t.steps and
    check.passed(scores))`` -> ``stop = stop`` makes this fail (it trains to the cap)."""
    spec = make_spec(*QUICK)
    extended = []
    result = _train(spec, Scripted(lambda k: 0.95 if k >= 5 else 0.5), on_extend=extended.append)
    assert result.status == "ok" and result.steps_done == 50
    assert [c["step"] for c in result.checks] == [10, 20, 30, 40, 50]
    assert [c["scores"]["copy"] for c in result.checks] == [0.5, 0.5, 0.5, 0.5, 0.95]
    assert result.history[-1]["step"] == 49 and extended == [80]


def test_a_pass_before_steps_does_not_stop_training_early():
    """A check passing from the first one still trains the recipe's ``steps``.

    Mutation check: ``done >= t.steps and`` dropped from the stop rule in suite/training/loop.py
    makes this fail (it stops at 10)."""
    spec = make_spec(*QUICK)
    result = _train(spec, Scripted(lambda k: 1.0))
    assert result.steps_done == 20 and [c["step"] for c in result.checks] == [10, 20]
    assert result.history[-1]["step"] == 19


def test_the_cap_holds():
    """A run that never passes trains round(cap * steps) steps, checked every check_every steps and at
    the cap (train.cap=2.5 with steps 20: 50 steps, checks 10 to 50).

    Mutation check: ``TrainSpec.cap_steps`` returning ``int(round(self.cap * self.steps)) +
    self.check_every`` in suite/config/run_spec.py makes this fail."""
    spec = make_spec(*QUICK, "train.cap=2.5")
    check = Scripted(lambda k: 0.0)
    result = _train(spec, check)
    assert result.steps_done == 50 == spec.train.cap_steps
    assert [c["step"] for c in result.checks] == [10, 20, 30, 40, 50]
    assert result.history[-1]["step"] == 49


def test_checks_change_no_weight_and_until_learned_false_is_todays_training():
    """A run whose real checks pass before ``steps`` (a line of 0) ends with the weights, losses and
    steps of the same run with ``train.until_learned=false``, which makes no check. The scheme is
    randomized positions, whose positions differ between train and eval mode, so a check that left
    the model in eval mode would change the training.

    Mutation check: deleting ``model.train()`` from ``Check.__call__`` in suite/evaluation/check.py
    makes this fail."""
    overrides = [*QUICK, "position=randomized"]
    on, off = make_spec(*overrides), make_spec(*overrides, "train.until_learned=false")
    task = on.tasks[0]
    models = []
    for spec in (on, off):
        torch.manual_seed(0)
        model = PosBenchLM(spec.model)
        tasks = [(task, task.build())]
        check = make_check(spec, tasks, {"copy": 0.0}, torch.device("cpu"))
        assert (check is None) == (spec is off)
        models.append((model, train(model, spec, [t for _, t in tasks], progress=False, log_every=5, check=check)))
    (a, ra), (b, rb) = models
    assert [c["step"] for c in ra.checks] == [10, 20] and rb.checks == []
    assert ra.steps_done == rb.steps_done == 20
    assert [h["train/loss"] for h in ra.history] == [h["train/loss"] for h in rb.history]
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_a_check_leaves_torchs_random_state_and_the_train_mode_as_they_were():
    """A model that draws random numbers in its forward is checked; torch's random state afterwards is
    the one before, and the model is back in train mode.

    Mutation check: deleting ``torch.set_rng_state(cpu_rng)`` in ``Check.__call__`` makes this fail."""
    spec = make_spec(*QUICK)
    task = spec.tasks[0]

    class Drawing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = PosBenchLM(spec.model)

        def forward(self, tokens):
            torch.rand(3)
            return self.lm(tokens)

    model = Drawing()
    check = make_check(spec, [(task, task.build())], {"copy": 0.9}, torch.device("cpu"))
    torch.manual_seed(7)
    before = torch.get_rng_state()
    scores = check(model)
    assert torch.equal(torch.get_rng_state(), before) and model.training
    assert set(scores) == {"copy"} and 0.0 <= scores["copy"] <= 1.0


class Tiny(Task):
    """A task of two tokens from {4, 5, 6}: nine examples in all, so draws repeat eval examples often."""

    name = "tiny"
    primary_metric = "exact_match"

    def generate(self, rng, length):
        return Example(tokens=[int(t) for t in rng.integers(4, 7, size=2)], answer_spans=[(1, 2)])


def test_the_check_set_is_apart_from_the_eval_set_and_from_its_own_stream():
    """No check example has an eval example's tokens, even for a task whose draws repeat; a copy check
    set is what ``[seed, length, CHECK_STREAM]`` draws, not the eval set's ``[seed, length]``.

    Mutation check: ``not in taken`` -> ``is not None`` in ``check_set`` (suite/evaluation/check.py)
    makes this fail; so does seeding it with ``[seed, length]``."""
    tiny = Tiny()
    evals = generate(tiny, 2, 1234, 5)
    checks = check_set(tiny, 2, 1234, 30, evals)
    taken = {tuple(e.tokens) for e in evals}
    assert len(checks) == 30 and not any(tuple(c.tokens) in taken for c in checks)
    assert len(taken) < 9  # room left for the check set to draw from

    copy = make_spec(*QUICK).tasks[0].build()
    evals = generate(copy, 16, 1234, 20)
    checks = check_set(copy, 16, 1234, 20, evals)
    rng = np.random.default_rng([1234, 16, CHECK_STREAM])
    assert [c.tokens for c in checks] == [copy.generate(rng, 16).tokens for _ in range(20)]
    assert not {tuple(c.tokens) for c in checks} & {tuple(e.tokens) for e in evals}


def test_a_task_whose_every_draw_is_an_eval_example_is_refused():
    """A check set that cannot be drawn apart from the eval set is an error, not an endless loop.

    Mutation check: deleting the ``raise ValueError`` in ``check_set`` makes this fail."""
    tiny = Tiny()
    every = [Example([a, b], [(1, 2)]) for a in (4, 5, 6) for b in (4, 5, 6)]
    with pytest.raises(ValueError, match="apart from the eval set"):
        check_set(tiny, 2, 1234, 3, every)


def _scripted_runs(monkeypatch, score):
    """``make_check`` replaced by a ``Scripted`` check of ``score`` (its line the run's own)."""
    made = []

    def fake(spec, tasks, lines, device):
        made.append(Scripted(score, lines["copy"]))
        return made[-1]

    monkeypatch.setattr(lifecycle, "make_check", fake)
    return made


def test_a_run_stores_check_score_steps_to_learn_and_its_criterion(tmp_path, monkeypatch):
    """Passing first at the fourth check (step 40): rows ``check_score`` 0.95 (the last check's) and
    ``steps_to_learn`` 40 at the training length, and the record's ``criterion``.

    Mutation check: ``c["scores"][name] >= self.lines[name]`` -> ``c["scores"][name] > 0`` in
    ``RunLifecycle.check_rows`` (suite/lifecycle.py) makes this fail (it says 10)."""
    _scripted_runs(monkeypatch, lambda k: [0.3, 0.5, 0.89, 0.95][min(k, 4) - 1])
    payload = store.read_run(execute(make_spec(*QUICK), results_dir=tmp_path, progress=False))
    rows = {r["metric"]: r for r in payload["rows"] if r["metric"] in ("check_score", "steps_to_learn")}
    assert {m: (r["value"], r["task"], r["eval_len"], r["len_ratio"], r["slice"], r["n"], r["status"])
            for m, r in rows.items()} == {"check_score": (0.95, "copy", 16, 1.0, "all", 8, "ok"),
                                          "steps_to_learn": (40.0, "copy", 16, 1.0, "all", 8, "ok")}
    criterion = payload["run"]["criterion"]
    assert {k: v for k, v in criterion.items() if k != "checks"} == {
        "line": LEARNED_AT, "check_every": 10, "cap_steps": 80, "check_examples": 8, "steps": 40}
    assert [(c["step"], c["scores"]["copy"]) for c in criterion["checks"]] == [(10, 0.3), (20, 0.5), (30, 0.89), (40, 0.95)]


def test_a_run_that_never_passes_has_no_steps_to_learn_row(tmp_path, monkeypatch):
    """Never reaching the line: ``check_score`` is the cap's check, no ``steps_to_learn`` row, 80 steps.

    Mutation check: ``if first is not None:`` -> ``if True:`` in ``RunLifecycle.check_rows``
    (suite/lifecycle.py) makes this fail."""
    _scripted_runs(monkeypatch, lambda k: 0.1 * k / 8)
    payload = store.read_run(execute(make_spec(*QUICK), results_dir=tmp_path, progress=False))
    rows = [(r["metric"], r["value"]) for r in payload["rows"] if r["metric"] in ("check_score", "steps_to_learn")]
    assert rows == [("check_score", 0.1)]
    assert payload["run"]["criterion"]["steps"] == 80 and payload["run"]["history"][-1]["step"] == 79


def test_a_run_killed_mid_extension_resumes_to_the_uninterrupted_end(tmp_path, monkeypatch):
    """Killed after its checkpoint at step 30 (past ``steps`` = 20, training on), a resumed run ends
    with the uninterrupted run's weights, history, checks and rows (the real check: a tiny model
    stays below the line, so both train to the cap of 60).

    Mutation check: ``"checks": [...]`` -> ``"checks": []`` in ``save_checkpoint``
    (suite/training/checkpoint.py) makes this fail."""
    spec = make_spec(*QUICK, "train.cap=3", "sweep_name=crit")
    straight_path, resumed_path = killed_and_resumed(spec, tmp_path, monkeypatch, kill_at=33)
    straight, resumed = store.read_run(straight_path), store.read_run(resumed_path)

    assert resumed["run"]["resumed_from"] == 30 and straight["run"]["criterion"]["steps"] == 60
    assert resumed["run"]["criterion"] == straight["run"]["criterion"]
    numbers = ("step", "train/loss", "train/lr", "train/grad_norm")
    assert [[h[k] for k in numbers] for h in resumed["run"]["history"]] == \
           [[h[k] for k in numbers] for h in straight["run"]["history"]]
    assert [(r["metric"], r["value"]) for r in resumed["rows"]] == [(r["metric"], r["value"]) for r in straight["rows"]]
    weights = [torch.load(p.parent / "_work" / p.name.removesuffix(".json") / "model.pt", weights_only=True)
               for p in (straight_path, resumed_path)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_natural_text_makes_no_checks_and_trains_its_steps(tmp_path):
    """Bits per byte has no learned line: a text run with ``until_learned`` on trains ``steps`` steps,
    makes no check, stores no check rows and no ``criterion``.

    Mutation check: ``if metric(task.primary_metric).judged`` dropped from ``learned_lines``
    (suite/lifecycle.py) makes this fail."""
    spec = make_spec("task=code", "model.n_layers=2", "model.d_model=32", "model.n_heads=2", "model.d_ff=64",
                     "train.steps=3", "train.batch_size=2", "eval.n_examples=2", "eval.multiples=[1]",
                     "logger=none", "train.check_every=1")
    assert spec.train.until_learned
    payload = store.read_run(execute(spec, results_dir=tmp_path, progress=False))
    assert "criterion" not in payload["run"]
    assert payload["run"]["history"][-1]["step"] == 2
    assert not [r for r in payload["rows"] if r["metric"] in ("check_score", "steps_to_learn")]


def test_off_a_terminal_the_progress_lines_count_to_the_new_total_once_a_run_trains_on(tmp_path, monkeypatch, caplog):
    """The plain progress lines of a run that trains past ``steps`` count to ``steps`` ('step 16/20')
    until its check there fails, then to the cap ('step 20/80', ..., 'step 80/80').

    Mutation check: ``on_extend=log_step.extend if plain else None`` -> ``on_extend=None`` in
    ``RunLifecycle.train_or_restore`` (suite/lifecycle.py) makes this fail."""
    import logging
    import re

    caplog.set_level(logging.INFO, logger="posbench")
    _scripted_runs(monkeypatch, lambda k: 0.0)
    execute(make_spec(*QUICK), results_dir=tmp_path, progress=False, log_every=5)
    counts = [m.groups() for m in (re.search(r" step (\d+)/(\d+) ", r.getMessage()) for r in caplog.records) if m]
    assert ("16", "20") in counts and ("20", "80") in counts and counts[-1] == ("80", "80")
    assert any(f"ok after 80 steps (8 checks, cap 80)" in r.getMessage() for r in caplog.records)


def test_the_progress_bar_counts_to_the_cap_once_a_run_trains_on(capsys):
    """On a terminal the bar shows ``steps`` as its total until the check there fails, then the cap.

    Mutation check: deleting ``meter.extend(total)`` in suite/training/loop.py makes this fail."""
    spec = make_spec(*QUICK)
    torch.manual_seed(0)
    train(PosBenchLM(spec.model), spec, spec.tasks[0].build(), progress=True, log_every=5, check=Scripted(lambda k: 0.0))
    bar = capsys.readouterr().err
    assert "/20 " in bar and "80/80 " in bar and "/80 " in bar.split("/20 ")[-1]


def test_the_options_default_to_the_protocol_and_refuse_values_outside_their_rules():
    """Checks on, every 125 steps, a cap of 4 x steps (7,000 for the CPU recipe's 1,750), 100 check
    examples; a cap below 1, a check every 0 steps or an empty check set is refused by name.

    Mutation check: ``cap: float = option(4.0, ge=1`` -> ``ge=0`` in suite/config/run_spec.py makes this fail."""
    from suite.config.build import SpecError

    t = make_spec().train
    assert (t.until_learned, t.check_every, t.cap, t.check_examples, t.cap_steps) == (True, 125, 4.0, 100, 7000)
    assert [t.is_check_step(s) for s in (125, 1750, 1875, 7000, 1751)] == [True, True, True, True, False]
    for bad in ("train.cap=0.5", "train.check_every=0", "train.check_examples=0"):
        with pytest.raises(SpecError, match=bad.split("=")[0]):
            make_spec(bad)
