"""The frozen run spec: model, training recipe, tasks, evaluation grid and seed, hashed into the run id.

Each training and evaluation option is declared once, here, on the field that holds it, with its
default and rules (``suite.options.option``); the Hydra schema's ``train`` and ``eval`` groups are
derived from these classes (``suite/config/schema.py``), as ``model`` is from ``ModelSpec``
(``suite/model/spec.py``). The hash leaves out fields at their declared default, so this file is
part of every run's code digest: a changed default gives every run a new id.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from suite.model.spec import ModelSpec
from suite.options import LENGTH_MAX, option

PRECISIONS = ("fp32", "bf16")
# Stated maxima of the options whose time grows with their value (the pre-flight sizes memory):
# ten million steps is 2,000 x the GPU recipe's 5,000 (days of training at any size), and a million
# examples per task and length puts a share's standard error below 0.0005.
STEPS_MAX = 10 ** 7
EXAMPLES_MAX = 10 ** 6
LOSS_ON = ("answer", "all")


def switch_step(until: float, steps: int) -> int:
    """The first step of the phase after one that ends at ``until`` (a fraction) of ``steps``."""
    return int(round(until * steps))


@dataclass(frozen=True)
class Phase:
    """One earlier phase of a training schedule (``train.schedule``): it lasts until ``until``
    of ``train.steps`` (a fraction in (0, 1); the phases' ``until`` strictly increase) and changes
    what its keys set. ``position`` (with its scheme's options, ``position_cfg``, checked by the
    scheme's own ``Config`` and ``check``): the scheme of every layer whose scheme is the run's
    ``position`` group's; the run's own groups are the last phase, the one evaluated. A key a
    later schedule needs (a shorter training length, ``seq_len``) is a field here, a name in
    ``CHANGES`` and its use in the training loop."""

    until: float
    position: Optional[str] = None
    position_cfg: Any = None  # the scheme's Config (suite.model.position), set with ``position``


PHASE_KEYS = ("until", "position")  # what a phase's entry may set besides its scheme's options
CHANGES = ("position",)  # the keys that change something; a phase must set at least one


def eval_length(multiple: float, train_len: int) -> int:
    """The evaluation length at ``multiple`` x the training length, to the nearest token."""
    return int(round(multiple * train_len))


@dataclass(frozen=True)
class TrainSpec:
    """Defaults are the CPU recipe (``conf/train/cpu.yaml``); ``train=gpu`` overrides what differs."""

    name: str = option(doc="the recipe's name: cpu | gpu")
    seq_len: int = option(32, ge=8, le=LENGTH_MAX, doc="training length")
    min_len: Optional[int] = option(4, ge=1, le=LENGTH_MAX, doc="each batch draws its length from [min_len, seq_len]; null: seq_len")
    steps: int = option(1750, ge=1, le=STEPS_MAX)
    batch_size: int = option(32, ge=1)
    lr: float = option(1.0e-3, gt=0)
    warmup: int = option(200, ge=0, doc="linear learning-rate warmup steps (200: the recipe under which every seed learns, conf/sweep/recipe.yaml)")
    min_lr_ratio: float = option(0.1, ge=0, le=1, doc="cosine decay ends at lr * min_lr_ratio")
    weight_decay: float = option(0.1, ge=0)
    grad_clip: float = option(1.0, gt=0)
    betas: tuple[float, float] = option((0.9, 0.95), ge=0, lt=1, each=True, length=2)
    loss_on: str = option("answer", choices=LOSS_ON, doc="answer: loss on the answer spans only; all: every next token")
    device: str = option("cpu", doc="cpu | cuda | cuda:N")
    precision: str = option("fp32", choices=PRECISIONS)
    compile: bool = option(False, doc="torch.compile the model; needs one training length (min_len: null)")
    fused_optimizer: bool = option(False)
    until_learned: bool = option(True, doc="train to criterion: check the headline score of each judged task at seq_len "
                                           "on a check set apart from the eval set; a run below the learned line at "
                                           "steps trains on, checked every check_every steps, up to cap x steps; "
                                           "false: exactly steps steps, no checks")
    check_every: int = option(125, ge=1, doc="with until_learned: a check every this many steps from the start of training")
    cap: float = option(4.0, ge=1, le=100, doc="with until_learned: a run trains at most round(cap * steps) steps")
    check_examples: int = option(100, ge=1, le=EXAMPLES_MAX, doc="with until_learned: examples in the check set")
    # a tuple of ``Phase`` once built; the config gives a list of mappings (``Any``: a phase's keys
    # include its scheme's options, which the scheme's Config types)
    schedule: tuple[Any, ...] = option((), doc="earlier phases of training, in order, each {until: the fraction of "
                                               "train.steps it ends at, in (0, 1), position: a scheme, and that "
                                               "scheme's options}; the position group is the last phase (DroPE: "
                                               "[{until: 0.8, position: rope}] with position=drope)")

    @property
    def cap_steps(self) -> int:
        """The most steps a run trains to criterion: round(cap * steps)."""
        return int(round(self.cap * self.steps))

    def is_check_step(self, done: int) -> bool:
        """Whether training to criterion checks after ``done`` steps: every ``check_every`` steps,
        at ``steps`` and at the cap."""
        return done % self.check_every == 0 or done in (self.steps, self.cap_steps)

    def switch_steps(self) -> tuple[int, ...]:
        """The first step of each phase after the first, one per ``schedule`` entry."""
        return tuple(switch_step(phase.until, self.steps) for phase in self.schedule)

    def phase_at(self, step: int) -> int:
        """The phase training step ``step`` (from 0) is in: 0 to len(schedule), the last the run's own."""
        return sum(1 for first in self.switch_steps() if step >= first)


@dataclass(frozen=True)
class EvalSpec:
    multiples: tuple[float, ...] = option((1.0, 1.25, 1.5, 2.0, 4.0, 8.0), ge=1, each=True,
                                          doc="evaluate at these multiples of the training length")
    extra_multiples: Optional[tuple[float, ...]] = option(
        None, ge=1, each=True, doc="appended to multiples when the spec is built: a sweep that reaches further than its "
                                   "tasks' own grids (the hybrids board: [16]); a built spec holds one list and null here")
    n_examples: int = option(100, ge=1, le=EXAMPLES_MAX, doc="per task and length; a share's standard error is at most sqrt(0.25 / n)")
    batch_size: int = option(20, ge=1)
    seed: int = option(1234, ge=0)
    diagnostics: bool = option(False, doc="recency / logit / attention-mass diagnostics at init and after training")
    diagnostics_every: int = option(0, ge=0, doc="with diagnostics: also every N training steps (0: only init and end)")

    def lengths(self, train_len: int) -> list[int]:
        """The evaluation lengths, one per multiple, in order."""
        return [eval_length(x, train_len) for x in self.multiples]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def build(self):
        from tasks import build_task  # here, not at the top: reading stored specs needs no task code

        return build_task(self.name, **dict(self.params))


@dataclass(frozen=True)
class RunSpec:
    model: ModelSpec
    train: TrainSpec
    tasks: tuple[TaskSpec, ...]  # trained on as an even mixture, evaluated one by one
    taskset: str  # the task set's name, or the task's name for a single task
    eval: EvalSpec
    seed: int
    sweep: str = field(default="dev", compare=False)
    code: str = ""  # digest of the code that computes the numbers (suite.config.codedigest), part of the id

    @property
    def eval_lengths(self) -> list[int]:
        return self.eval.lengths(self.train.seq_len)

    def to_dict(self, drop_defaults: bool = False) -> dict:
        """The spec as plain data; ``drop_defaults`` leaves out fields at their declared default."""
        def convert(obj):
            if dataclasses.is_dataclass(obj):
                return {f.name: convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                        if not (drop_defaults and f.default is not dataclasses.MISSING and getattr(obj, f.name) == f.default)}
            if isinstance(obj, (list, tuple)):
                return [convert(x) for x in obj]
            return obj

        d = convert(self)
        d.pop("sweep", None)
        return d

    @property
    def run_id(self) -> str:
        """Hash of the resolved spec and the code digest. Fields at their declared defaults are
        left out, so adding an option to the suite does not change the id of runs that do not use it."""
        return _hash(self.to_dict(drop_defaults=True))

    @property
    def config_hash(self) -> str:
        """Hash of everything but the seed: runs with equal config hashes form one leaderboard cell."""
        return _hash({k: v for k, v in self.to_dict(drop_defaults=True).items() if k != "seed"})


def _hash(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]
