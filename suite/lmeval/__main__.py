"""``python -m suite.lmeval``: lm-eval's own CLI with PosBench's model and tasks registered.

    python -m suite.lmeval --run <result file, _work/<run_id> folder or run id> --tasks posbench_core
    python -m suite.lmeval --model hf --model_args pretrained=<local dir> --tasks posbench_core --output_path out

With ``--run`` it adds ``--model posbench --model_args pretrained=<run id>`` (with the run's
``results_dir`` and ``sweep``, so lm-eval names the model, and the folder it writes under an
``--output_path`` folder, after the run id), writes results to
``<sweep>/_work/<run_id>/lmeval/results_<time>.json`` (and ``samples_<task>_<time>.jsonl`` with
``--log_samples``) unless ``--output_path`` is given, batches 32 documents (unless
``--batch_size`` is given) and sets the task metadata ``lengths``, ``n_examples``, ``data_seed``
and ``params`` to the run's own evaluation lengths (its training length times its
``eval.multiples``), examples per length (``eval.n_examples``), eval seed and task parameters,
so the documents are the run's own evaluation sets; a key given with
``--metadata`` replaces the run's. Without ``--run`` the arguments go to lm-eval unchanged.
Either way ``--include_path`` is the PosBench task YAMLs. When every task asked for is a
PosBench one, lm-eval indexes only those: its index of its ~14,700 built-in task YAMLs is most
of its start-up time (``ours_only``). Results are written and printed with their lengths in
numeric order (``suite.lmeval.order``). Every other argument is lm-eval's (``lm-eval run --help``).

Before lm-eval starts, the arguments lm-eval would fail on after loading a model are refused
with exit 2 and the valid choices (``argument_problem``): a ``--tasks`` naming no task or an
empty one (``posbench_copy,,posbench_vt``), a ``--limit`` that is not a positive count or share,
neither ``--run`` nor ``--model``, a ``--batch_size`` that is not a count, ``auto`` or ``auto:N``,
a ``--model_args`` key lm-eval also passes from its own flag (``batch_size``, ``device``,
``max_batch_size``) or, for the ``posbench`` model, a key or value its declaration refuses, a
``--metadata`` that is not a JSON object or ``key=value`` pairs or gives a value the
declarations refuse (``suite.lmeval.arguments``: typed and judged as a run's options are,
``lengths`` within ``LENGTH_MAX``, a task's ``params`` by that task's own options; with
PosBench's tasks alone, a key they do not read), and an ``--output_path`` that cannot be written
(``suite.commandline.check_output``).
"""
from __future__ import annotations

import contextlib
import json
import math
import sys

from suite.commandline import Refused, check_output, comma_problem, command, parser
from suite.lmeval.order import length_order

# torch, lm-eval, datasets and the task registry are imported where they are used, so --help
# (and an argument error) answers before they load


def _given(rest: list[str], *flags: str) -> bool:
    return any(a in flags or a.split("=", 1)[0] in flags for a in rest)


def _last(args: list[str], *flags: str) -> str | None:
    """The value of the last of ``flags`` in ``args`` (``--flag value`` or ``--flag=value``), as
    argparse keeps it; None when no flag is given."""
    found = None
    for i, arg in enumerate(args):
        if arg in flags:
            found = args[i + 1] if i + 1 < len(args) else None
        elif arg.split("=", 1)[0] in flags and "=" in arg:
            found = arg.split("=", 1)[1]
    return found


def flag_groups(args: list[str], *flags: str) -> list[list[str]]:
    """The values of each of ``flags`` in ``args`` (lm-eval's ``--metadata``, ``--model_args`` and
    ``--tasks`` take one or more: up to the next ``-`` argument), ``--flag=value`` as one."""
    groups, i = [], 0
    while i < len(args):
        if args[i] in flags:
            j = i + 1
            while j < len(args) and not args[j].startswith("-"):
                j += 1
            groups.append(args[i + 1 : j])
            i = j
            continue
        if "=" in args[i] and args[i].split("=", 1)[0] in flags:
            groups.append([args[i].split("=", 1)[1]])
        i += 1
    return groups


def dict_argument(args: list[str], *flags: str) -> dict:
    """The mapping ``flags`` (``--metadata``, ``--model_args``) give, merged as lm-eval merges it
    with its own parsers (a JSON object, or ``key=value`` pairs); a ValueError saying what is
    wrong otherwise."""
    from lm_eval._cli.utils import key_val_to_dict, try_parse_json

    merged: dict = {}
    for values in flag_groups(args, *flags):
        if not values:
            raise ValueError("no value")
        first = try_parse_json(values[0])
        if isinstance(first, dict):
            merged.update(first)
            continue
        for value in values:
            merged.update(key_val_to_dict(value))
    return merged


def metadata(args: list[str]) -> dict:
    """The task metadata ``--metadata`` gives (``dict_argument``)."""
    return dict_argument(args, "--metadata")


def task_names(args: list[str]) -> list[str]:
    """Every name ``--tasks`` (``-t``) gives, split at commas as lm-eval splits them."""
    return [name.strip() for values in flag_groups(args, "--tasks", "-t") for value in values for name in value.split(",")]


def posbench_task_names() -> list[str]:
    """PosBench's lm-eval task and group names (``posbench_<task>``, ``posbench_<task set>``: the
    YAMLs ``suite.lmeval.yamls`` writes), read from the task registry and ``conf/taskset/``
    without writing them (which loads torch)."""
    from pathlib import Path

    from tasks import TASKS

    sets = [p.stem for p in (Path(__file__).resolve().parents[2] / "conf" / "taskset").glob("*.yaml")]
    return sorted(f"posbench_{name}" for name in [*TASKS, *sets])


def tasks_problem(args: list[str]) -> str | None:
    """Why ``--tasks`` names no task lm-eval can look up, or None: no name, or an empty one in a
    comma list (``posbench_copy,,posbench_vt``), with the valid form and PosBench's tasks."""
    for values in flag_groups(args, "--tasks", "-t"):
        if (problem := comma_problem("--tasks", ",".join(values))) is not None:
            return f"{problem}; PosBench's: {', '.join(posbench_task_names())}"
    return None


def limit_problem(args: list[str]) -> str | None:
    """Why ``--limit`` is not a positive count of documents or a share of them below 1, or None."""
    limit = _last(args, "--limit", "-L")
    if limit is None:
        return None
    try:
        value = float(limit)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0 and (value < 1 or value == int(value))):
        return (f"--limit {limit!r}: must be a whole number of documents per task (1, 2, ...) "
                "or a share of them below 1 (0.5)")
    return None


MODEL_FORM = ("give --run <run id, hash or result file> to score a stored PosBench run, or --model <name> with "
              "--model_args pretrained=<model> for any model lm-eval loads (--model hf --model_args pretrained=/path)")


def model_problem(args: list[str], run: str | None) -> str | None:
    """Why the model lm-eval would build from ``args`` cannot be built, or None: neither ``--run``
    nor ``--model`` (lm-eval would build ``hf`` with nothing to load), a ``--batch_size`` that is
    not a count, ``auto`` or ``auto:N``, or ``--model_args`` the model cannot take
    (``arguments.model_args_problem``)."""
    from suite.lmeval import arguments

    model = _last(args, "--model", "-M")
    if run is None and model is None:
        return f"no model: {MODEL_FORM}"
    if (size := _last(args, "--batch_size", "-b")) is not None and (problem := arguments.batch_size_problem(size)):
        return problem
    try:
        given = dict_argument(args, "--model_args", "-a")
    except ValueError as err:
        return f"--model_args: {(str(err).splitlines() or [''])[0]}; give a JSON object or key=value pairs"
    flags = {flag for flag, _ in arguments.FLAG_ARGS.values() if _given(args, flag)}
    if run is not None:
        given = {"pretrained": run, **given}
    return arguments.model_args_problem(given, flags, posbench=run is not None or model == "posbench")


def argument_problem(args: list[str], run: str | None = None) -> str | None:
    """Why lm-eval would fail on ``args`` (the lm-eval arguments; ``run``: ``--run``'s value), or
    None: ``--tasks`` naming no task or an empty one, ``--limit`` not a positive count or a share
    below 1, no model (``model_problem``), or a ``--metadata`` that does not parse or gives a
    PosBench key a value its declaration refuses (``arguments.metadata_values``: typed and judged
    as a run's options are; with PosBench's tasks alone, a key they do not read is refused too)."""
    for problem in (tasks_problem(args), limit_problem(args), model_problem(args, run)):
        if problem is not None:
            return problem
    try:
        given = metadata(args)
    except ValueError as err:
        from suite.lmeval.arguments import METADATA_FORM

        return f"--metadata: {(str(err).splitlines() or [''])[0]}; {METADATA_FORM}"
    from suite.lmeval.arguments import metadata_values

    try:
        metadata_values(given, own_only=only_posbench_tasks(args))
    except ValueError as err:
        return f"--metadata {err}"
    return None


def output_path_problem(prog: str, args: list[str]) -> None:
    """Refuse (exit 2) an ``--output_path`` that cannot be written: lm-eval writes a path ending
    in ``.json`` as that file, any other as a folder of result files."""
    out = _last(args, "--output_path", "-o")
    if out is not None:
        check_output(prog, "--output_path", out, kind="file" if out.endswith(".json") else "folder")


def unknown_posbench_tasks(args: list[str]) -> list[str]:
    """The ``posbench_*`` names in ``--tasks`` that are no PosBench task or task set."""
    from suite.lmeval.yamls import include_dir

    known = {path.stem for path in include_dir().glob("posbench_*.yaml")}
    return [t for t in task_names(args) if t.startswith("posbench_") and t not in known]


def only_posbench_tasks(args: list[str]) -> bool:
    """Whether ``--tasks`` names PosBench tasks and groups (``posbench_*``) only."""
    names = task_names(args)
    return bool(names) and all(t.startswith("posbench_") for t in names)


@contextlib.contextmanager
def ours_only():
    """lm-eval's task manager, while the block runs, indexing the include path without lm-eval's
    built-in tasks (``include_defaults=False``)."""
    import lm_eval.tasks as lm_tasks

    builtin = lm_tasks.TaskManager

    class PosBenchTasks(builtin):
        def __init__(self, *args, include_defaults: bool = False, **kwargs):
            super().__init__(*args, include_defaults=include_defaults, **kwargs)

    lm_tasks.TaskManager = PosBenchTasks
    try:
        yield
    finally:
        lm_tasks.TaskManager = builtin


def run_args(run: str, results_dir: str, rest: list[str]) -> list[str]:
    """The lm-eval arguments that score stored run ``run``, followed by ``rest``."""
    from suite.config.build import run_spec_from_dict
    from suite.lmeval.model import resolve_run
    from suite.results.store import verified_run

    rest = list(rest)
    for i, arg in enumerate(rest):
        if arg == "--model" or arg.startswith("--model="):
            given = arg.split("=", 1)[1] if "=" in arg else (rest[i + 1] if i + 1 < len(rest) else "")
            if given != "posbench":
                raise ValueError(f"--run scores a stored PosBench run with --model posbench; got --model {given!r}")
            del rest[i : i + (1 if "=" in arg else 2)]
            break
    path = resolve_run(run, results_dir).resolve()
    stored = verified_run(path)["run"].get("spec")
    metadata = {}
    if stored:
        spec = run_spec_from_dict(stored)
        metadata = {"lengths": spec.eval_lengths, "n_examples": spec.eval.n_examples, "data_seed": spec.eval.seed,
                    "params": {t.name: dict(t.params) for t in spec.tasks}}
    model_args = {"pretrained": path.stem, "results_dir": str(path.parent.parent), "sweep": path.parent.name}
    out = ["--model", "posbench", "--model_args", json.dumps(model_args), "--metadata", json.dumps(metadata)]
    if not _given(rest, "--output_path", "-o"):
        out += ["--output_path", str(path.parent / "_work" / path.stem / "lmeval" / "results.json")]
    if not _given(rest, "--batch_size", "-b"):
        out += ["--batch_size", "32"]
    return out + rest


def include_args(rest: list[str]) -> list[str]:
    """``--include_path <PosBench YAML folder>`` and ``rest``; lm-eval takes one include path, so
    other task YAMLs go into ``--tasks`` as file or folder paths."""
    from suite.lmeval.yamls import include_dir

    if _given(rest, "--include_path"):
        raise ValueError(f"--include_path is set to {include_dir()}; give other task YAMLs to --tasks as paths")
    return ["--include_path", str(include_dir()), *rest]


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.lmeval") -> int:
    """lm-eval over the arguments; the folder of task YAMLs it wrote is removed when it ends,
    however it ends (``yamls.remove_include_dir``)."""
    try:
        return _main(argv, prog)
    finally:
        if "suite.lmeval.yamls" in sys.modules:  # only a call that got as far as the YAMLs wrote them
            sys.modules["suite.lmeval.yamls"].remove_include_dir()


def _main(argv: list[str] | None, prog: str) -> int:
    p = parser(prog, __doc__, whole_doc=True)
    p.add_argument("--run", help="a run's result JSON, its _work/<run_id> folder, or a run id under --results_dir")
    p.add_argument("--results_dir", default="results", help="where run ids are looked up (default: results)")
    args, rest = p.parse_known_args(argv)
    if (problem := argument_problem(rest, args.run)) is not None:  # before a model loads
        raise Refused(f"{p.prog}: error: {problem}", 2)
    from suite.lmeval.model import WeightsRefused, load_run  # registers the posbench model with lm-eval
    from suite.lmeval.yamls import include_dir

    try:
        lm_args = include_args(run_args(args.run, args.results_dir, rest) if args.run else list(rest))
        if args.run:
            load_run(args.run, args.results_dir)  # missing or damaged weights are named before lm-eval starts
    except WeightsRefused as err:  # a run whose weights are not its own: it failed, the arguments did not
        print(f"{p.prog}: error: --run {args.run}: {err}", file=sys.stderr)
        sys.exit(1)
    except ValueError as err:
        p.error(f"--run {args.run}: {err}" if args.run and str(args.run) not in str(err) else str(err))
    output_path_problem(p.prog, lm_args)  # the caller's, or the run's own lmeval folder
    unknown = unknown_posbench_tasks(lm_args)
    if unknown:
        known = sorted(path.stem for path in include_dir().glob("posbench_*.yaml"))
        p.error(f"--tasks: unknown PosBench task(s) {', '.join(unknown)}; valid: {', '.join(known)}")
    from lm_eval.__main__ import cli_evaluate

    argv_before, sys.argv = sys.argv, ["lm-eval", "run", *lm_args]
    try:
        with ours_only() if only_posbench_tasks(lm_args) else contextlib.nullcontext(), length_order():
            cli_evaluate()
    finally:
        sys.argv = argv_before
    return 0


if __name__ == "__main__":
    sys.exit(main())
