"""``python -m suite.commands.describe <overrides> [--json]``: print the per-layer table a config builds.

One row per layer: position scheme (with log-length temperature if on), span, its size as the
span class declares it (suite/model/span/base.py): ``w=16`` for a sliding window, ``c=16`` for a
chunk, ``-`` for full attention, and the token mixer. A training schedule is one line per
phase, with the step it starts at. The JSON rows carry ``window`` and ``chunk`` like the result
columns (suite/results/identity.py). Use it to check what a pattern and overrides really resolve to
before training.

A line says how the run trains. Trained to criterion (``train.until_learned``, the default, with
a task whose headline metric has a learned line): 'N steps, trained on to at most C steps until
the check passes', the check's schedule, and the worst case a run can cost: the cap's steps,
cap x the recipe's training time, and every check it would make on the way. Otherwise exactly
``steps`` steps, and why (checks off, or no task with a learned line: natural text's bits per
byte keeps a fixed budget).
"""
from __future__ import annotations

import json
import sys

from suite.commandline import command
from suite.commands.configured import configured, overrides_parser
from suite.model.span_kinds import KINDS  # not suite.model.span: --help answers before torch loads


def layer_kind(layer) -> str:
    """'rope/swa w=16', 'rope/chunked c=16', 'nope/full': scheme, span and the span's size;
    'gated_delta' for a layer whose mixer is not softmax attention (it takes neither)."""
    return f"{layer.position}/{layer.span} {layer.span_label}".strip() if layer.softmax else layer.mixing


def layer_table(spec) -> list[dict]:
    return [
        {"layer": i, "position": layer.position, "span": layer.span, "mixer": layer.mixer,
         **{kind: layer.span_size if layer.span_kind == kind else None for kind in KINDS},
         "log_scale": bool(layer.position_cfg.log_scale)}
        for i, layer in enumerate(spec.model.layers)
    ]


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.describe") -> int:
    parser = overrides_parser(prog, __doc__)
    parser.add_argument("--json", action="store_true", help="print the layer rows as JSON")
    args = parser.parse_intermixed_args(argv)
    _, spec = configured(args.overrides, "check")  # a config for another machine describes too
    rows = layer_table(spec)
    if args.json:
        print(json.dumps(rows))
        return 0
    m = spec.model
    print(f"model {m.name}: {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, pattern {m.pattern}, "
          f"train_len {m.train_len}, run id {spec.run_id}")
    print(f"{'layer':>5}  {'position':<12} {'span':<8} {'size':>6}  {'log_scale':<9}  mixer")
    for r, layer in zip(rows, m.layers):
        size = layer.span_label or "-"
        print(f"{r['layer']:>5}  {r['position']:<12} {r['span']:<8} {size:>6}  {'yes' if r['log_scale'] else 'no':<9}  {r['mixer']}")
    for line in schedule_lines(spec):
        print(line)
    print(training_line(spec, judged_tasks(spec)))
    return 0


def judged_tasks(spec) -> list[str]:
    """The run's tasks whose headline metric has a learned line (bounded, higher is better): the
    tasks a run trained to criterion checks."""
    from suite.data.metrics import metric

    return [t.name for t in spec.tasks if metric(t.build().primary_metric).judged]


def checks_made(train) -> int:
    """How many checks a run trained to criterion makes when it trains to its cap: one after every
    ``check_every`` steps, at ``steps`` and at the cap (``TrainSpec.is_check_step``)."""
    cap, every = train.cap_steps, train.check_every
    return cap // every + sum(1 for done in {train.steps, cap} if done % every)


def training_line(spec, judged: list[str]) -> str:
    """'training: 1750 steps, trained on to at most 7000 steps until the check passes (...)', or
    'training: 1750 steps, a fixed budget (...)', for the tasks with a learned line ``judged``."""
    from suite.data.metrics import LEARNED_AT

    t = spec.train
    if not t.until_learned:
        return f"training: {t.steps} steps, a fixed budget (train.until_learned=false: no checks)"
    if not judged:
        return (f"training: {t.steps} steps, a fixed budget (no task here has a learned line to check, as natural "
                f"text's bits per byte has none)")
    return (f"training: {t.steps} steps, trained on to at most {t.cap_steps} steps until the check passes (a check of "
            f"{', '.join(judged)} on {t.check_examples} examples at L = {t.seq_len} every {t.check_every} steps; passes "
            f"at {LEARNED_AT} of the best value); worst case {t.cap_steps} steps, {t.cap:g} x the recipe's training "
            f"time, and {checks_made(t)} checks")


def schedule_lines(spec) -> list[str]:
    """'steps 0-1399: rope on the layers of the position group', then each later phase, the last
    the run's own (the table's schemes); none without a schedule."""
    schedule, steps = spec.train.schedule, spec.train.steps
    if not schedule:
        return []
    starts = (0, *spec.train.switch_steps(), steps)
    names = [p.position for p in schedule] + ["the table's schemes"]
    return [f"schedule: steps {starts[k]}-{starts[k + 1] - 1}: {names[k]}" + (" on the position group's layers" if k < len(schedule) else "")
            for k in range(len(names))]


if __name__ == "__main__":
    sys.exit(main())
