"""``python -m suite.commands.show <task> --length N --seed S [--json] [key=value ...]``: print one example of a task.

Prints the example as text with each answer span in [brackets], or as JSON with the keys
tokens, text, answer_spans, answers and meta. Extra ``key=value`` arguments set task parameters.

Every value is typed by its declared type and judged by the rules a run's config obeys
(``suite.options``): the flags by ``Flags`` (``--length`` at most ``LENGTH_MAX`` tokens), the task
parameters by the task class's fields (``depth=nan`` is the number nan, refused as not finite,
``depth=1e3`` the number 1000), then by the task's own checks, before an example is generated.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np
import yaml

from suite.commandline import Refused, command, flag_values, parser as command_parser
from suite.options import LENGTH_MAX, option, typed_options
from tasks import TASKS, build_task
from tasks.base import VOCAB


@dataclass(frozen=True)
class Flags:
    """``show``'s flags, declared as options: typed and judged as every value is (``flag_values``)."""

    length: int = option(64, ge=1, le=LENGTH_MAX, doc="the example's length in tokens")
    seed: int = option(0, ge=0, doc="the generator's seed: one seed, one example")


def _parse_params(prog: str, pairs: list[str]) -> dict:
    """``key=value`` arguments as a mapping, each value read as YAML (``[1, 2]``, ``null``, ``true``)."""
    params = {}
    for pair in pairs:
        if "=" not in pair:
            raise Refused(f"{prog}: error: task parameters are key=value, got {pair!r}", 2)
        key, value = pair.split("=", 1)
        try:
            params[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            params[key] = value  # a text: its field's type reads it, or names it
    return params


def task_of(prog: str, name: str, params: dict):
    """Task ``name`` with ``params`` typed by its class's declared fields and judged by their rules
    (``suite.options.typed_options``, keys named ``<task>.<option>``), then by the task's own checks."""
    if name not in TASKS:
        raise Refused(f"{prog}: error: unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}", 2)
    try:
        return build_task(name, **typed_options(TASKS[name], params, name))
    except ValueError as err:
        raise Refused(f"{prog}: error: {err}", 2) from None


def marked_text(example) -> str:
    words = [VOCAB[t] for t in example.tokens]
    for start, end in example.answer_spans:
        words[start] = "[" + words[start]
        words[end - 1] = words[end - 1] + "]"
    return " ".join(words)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.show") -> int:
    parser = command_parser(prog, __doc__)
    parser.add_argument("task", help=f"one of: {', '.join(sorted(TASKS))}")
    parser.add_argument("--length", default="64", help=f"the example's length in tokens, 1 to {LENGTH_MAX:,} (default 64)")
    parser.add_argument("--seed", default="0", help="the generator's seed: one seed, one example (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print tokens, text, answer_spans, answers and meta as one JSON object")
    parser.add_argument("params", nargs="*", help="task parameters as key=value")
    args = parser.parse_intermixed_args(argv)
    flags = flag_values(parser.prog, Flags, {"length": args.length, "seed": args.seed})
    task = task_of(parser.prog, args.task, _parse_params(parser.prog, args.params))
    try:
        ex = task.generate(np.random.default_rng(flags["seed"]), flags["length"])
    except ValueError as err:
        raise Refused(f"{parser.prog}: error: {err}") from None
    if args.json:
        print(json.dumps({"tokens": [int(t) for t in ex.tokens], "text": ex.text,
                          "answer_spans": [list(s) for s in ex.answer_spans], "answers": ex.answers,
                          "meta": ex.meta}, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    else:
        print(marked_text(ex))
        print(f"\nanswers: {ex.answers}   meta: {ex.meta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
