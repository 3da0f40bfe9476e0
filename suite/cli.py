"""The ``posbench`` command: one entry point for the suite's tools, each subcommand the module's own
``main(argv, prog)`` (the ``python -m`` forms do the same).

    posbench run <overrides>          train and evaluate (suite.run, Hydra: --help, --cfg, -m, --shell-completion)
    posbench report <sweep>           build reports/<sweep>/ (suite.report)
    posbench summary <folder>         the leaderboard in the terminal (suite.report.summary)
    posbench describe <overrides>     the layers a config builds (suite.commands.describe)
    posbench diagnose <overrides>     recency gaps per layer (suite.commands.diagnose)
    posbench show <task>              one example of a task (suite.commands.show)
    posbench lmeval --run <run> ...   score a run with lm-eval (suite.lmeval)
    posbench compare A B [C ...]      sweeps side by side (suite.report.compare)
    posbench curve <run or folder>    learning curves of a run or of each cell (suite.commands.curve)
    posbench reproduce <sweep>        rerun published runs or whole cells here, judged statistically (suite.reproduce)
    posbench rank <overrides> --board B   place a new scheme on a published board, like for like (suite.commands.rank)
    posbench export <board or folder>     the leaderboard as a paper's wide table, CSV or LaTeX (suite.commands.export)

Tab completion: ``eval "$(posbench run -sc install=bash)"``; the first word completes to a subcommand,
the overrides after ``run`` to Hydra's keys and values, the arguments of the others to file paths.
"""
from __future__ import annotations

import importlib
import os
import re
import sys

from suite.commandline import Refused, check_working_folder

# subcommand -> (module, one-line help); modules are imported only when their subcommand runs
COMMANDS = {
    "run": ("suite.run", "train and evaluate one run or a Hydra multirun"),
    "report": ("suite.report.__main__", "build a sweep's report under reports/<sweep>/"),
    "summary": ("suite.report.summary", "print a results folder's leaderboard"),
    "describe": ("suite.commands.describe", "print the layers a config builds"),
    "diagnose": ("suite.commands.diagnose", "print recency gaps per layer at init or trained"),
    "show": ("suite.commands.show", "print one example of a task"),
    "lmeval": ("suite.lmeval.__main__", "score a stored run or a model with lm-eval"),
    "compare": ("suite.report.compare", "two or more sweeps in one table and one plot"),
    "curve": ("suite.commands.curve", "plot loss and in-distribution score against steps, per run or cell"),
    "reproduce": ("suite.reproduce", "rerun published runs or cells here: prediction interval, or Welch by cell"),
    "rank": ("suite.commands.rank", "train a new scheme on a board's grid and place it among its published schemes"),
    "export": ("suite.commands.export", "the leaderboard as a paper's wide table: CSV or LaTeX, schemes by columns"),
}
COMPLETION = ("-sc", "--shell-completion")


def usage() -> str:
    lines = ["usage: posbench <command> [args]   (posbench <command> --help for its options)", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def completions(line: str, point: str | None = None) -> list[str] | None:
    """The words bash completion offers for ``line`` (the shell's ``COMP_LINE``, read up to
    ``COMP_POINT``): the subcommands that start with the first word after the program; nothing
    after any other subcommand than ``run`` (bash's ``-o default`` then offers file paths, as
    ``posbench summary res<TAB>`` wants); None after ``run``, whose overrides Hydra completes."""
    before = line[: int(point)] if point is not None and point.isdigit() else line
    words = before.split()
    if not before or before[-1].isspace():
        words.append("")  # the word being completed is a new, empty one
    if len(words) < 2:
        return []
    if len(words) == 2:
        return [name for name in COMMANDS if name.startswith(words[1])]
    return None if words[1] == "run" else []


def _run(args: list[str]) -> int:
    """Hydra's ``suite.run`` under ``posbench run``. Hydra's bash completion calls
    ``posbench -sc query=bash`` with ``COMP_LINE='posbench run ...'``: the word ``run`` is taken
    out of the line so Hydra completes the overrides after it. Help and completion are answered by
    Hydra over the schema's snapshot (``suite.config.store_snapshot``: no torch, well under a
    second; rebuilt and cached by the first call after a scheme, task or conf/ YAML changed), else,
    when no snapshot can be built, by ``suite.run`` itself."""
    line = os.environ.get("COMP_LINE")
    if line is not None:
        os.environ["COMP_LINE"] = re.sub(r"^(\s*\S+)\s+run(\s|$)", r"\1\2", line)
    run_main = None
    from suite.config import store_snapshot

    if line is None and (text := store_snapshot.help_text(args)) is not None:
        print(text, end="")
        return 0
    if store_snapshot.asks_help_or_completion(args, completing=line is not None):
        run_main = store_snapshot.hydra_main()  # None when no snapshot can be built: the full path answers
    if run_main is None:
        from suite.run import main as run_main, override_problem

        if line is None and (problem := override_problem(args)) is not None:
            print(problem, file=sys.stderr)
            return 2
    argv_before, sys.argv = sys.argv, ["posbench", *args]
    try:
        run_main()
    finally:
        sys.argv = argv_before
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    try:  # before a subcommand imports torch, which fails to load in a folder that no longer exists
        check_working_folder(f"posbench {command}")
    except Refused as refusal:
        print(refusal, file=sys.stderr)
        return refusal.code
    if command in COMPLETION:  # the completion script calls the bare command
        line = os.environ.get("COMP_LINE")
        if line is not None and (words := completions(line, os.environ.get("COMP_POINT"))) is not None:
            print("\n".join(words), end="\n" if words else "")
            return 0
        return _run(argv)
    if command not in COMMANDS:
        print(f"posbench: unknown command {command!r}; valid: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    if command == "run":
        return _run(rest)
    return int(importlib.import_module(COMMANDS[command][0]).main(rest, prog=f"posbench {command}") or 0)


if __name__ == "__main__":
    sys.exit(main())
