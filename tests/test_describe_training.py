"""``posbench describe`` says how a run trains: to criterion (its steps, then on to at most its cap
until the check passes, with the check's schedule and the worst case: the cap's steps, cap x the
recipe's training time, every check on the way), or a fixed budget and why."""
import dataclasses

from suite import cli
from suite.commands import describe
from tests.conftest import make_spec


def _training(capsys, *overrides) -> str:
    assert cli.main(["describe", *overrides]) == 0
    return capsys.readouterr().out.splitlines()[-1]


def test_a_run_trained_to_criterion_names_its_cap_its_checks_and_its_worst_case(capsys):
    """Mutation check: in suite/commands/describe.py ``training_line``, ``at most {t.cap_steps}
    steps`` written with ``t.steps`` makes this fail; main without the training line makes it fail."""
    assert _training(capsys, "train.steps=1000", "train.check_every=300", "train.cap=2.5") == (
        "training: 1000 steps, trained on to at most 2500 steps until the check passes (a check of copy on 100 "
        "examples at L = 32 every 300 steps; passes at 0.9 of the best value); worst case 2500 steps, 2.5 x the "
        "recipe's training time, and 10 checks")


def test_the_worst_case_counts_every_check_the_training_loop_makes():
    """``checks_made`` equals the checks ``TrainSpec.is_check_step`` makes from step 1 to the cap:
    every check_every steps, at steps and at the cap, each once.

    Mutation check: in suite/commands/describe.py ``checks_made``, dropping the ``sum(...)`` term
    (the checks at steps and at the cap off the check_every grid) makes this fail."""
    base = make_spec().train
    for steps, every, cap in [(1750, 125, 4.0), (1000, 300, 2.5), (9, 3, 2.0), (10, 4, 1.0), (7, 100, 3.0), (5, 1, 1.5)]:
        t = dataclasses.replace(base, steps=steps, check_every=every, cap=cap)
        assert describe.checks_made(t) == sum(t.is_check_step(done) for done in range(1, t.cap_steps + 1)), (steps, every, cap)


def test_a_fixed_budget_says_so_and_why(capsys):
    """Checks off, or no task with a learned line (natural text: bits per byte), trains exactly
    its steps.

    Mutation check: in suite/commands/describe.py ``training_line``, dropping the ``if not judged``
    branch makes this fail; ``judged_tasks`` keeping every task (no ``.judged`` filter) makes it
    fail too."""
    assert _training(capsys, "train.until_learned=false") == \
        "training: 1750 steps, a fixed budget (train.until_learned=false: no checks)"
    assert _training(capsys, "task=code") == ("training: 1750 steps, a fixed budget (no task here has a learned line "
                                              "to check, as natural text's bits per byte has none)")
