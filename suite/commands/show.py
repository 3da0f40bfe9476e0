"""``python -m suite.commands.show <task> --length N --seed S [--json] [key=value ...]``: print one example of a task.

Prints the example as text with each answer span in [brackets], or as JSON with the keys
tokens, text, answer_spans, answers and meta. Extra ``key=value`` arguments set task parameters.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import yaml

from suite.commandline import Refused, command, parser as command_parser
from tasks import TASKS, build_task
from tasks.base import VOCAB


def _parse_params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"task parameters are key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        params[key] = yaml.safe_load(value)
    return params


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
    parser.add_argument("--length", type=int, default=64, help="the example's length in tokens (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed: one seed, one example (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print tokens, text, answer_spans, answers and meta as one JSON object")
    parser.add_argument("params", nargs="*", help="task parameters as key=value")
    args = parser.parse_intermixed_args(argv)
    if args.seed < 0 or args.length < 1:
        parser.error(f"--seed {args.seed} must be >= 0" if args.seed < 0 else f"--length {args.length} must be >= 1")
    try:
        task = build_task(args.task, **_parse_params(args.params))
        ex = task.generate(np.random.default_rng(args.seed), args.length)
    except ValueError as err:
        raise Refused(f"error: {err}") from None
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
