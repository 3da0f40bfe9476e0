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
with exit 2 and the valid choices (``argument_problem``): an empty ``--tasks``, a ``--limit``
that is not a positive count or share, a ``--metadata`` that is not a JSON object or
``key=value`` pairs (or gives a PosBench key a value its tasks cannot take), and an
``--output_path`` that cannot be written (``suite.commandline.check_output``).
"""
from __future__ import annotations

import contextlib
import json
import math
import sys

from suite.commandline import Refused, check_output, command, parser
from suite.lmeval.order import length_order

# torch, lm-eval, datasets and the task registry are imported where they are used, so --help
# (and an argument error) answers before they load


def _given(rest: list[str], *flags: str) -> bool:
    return any(a in flags or a.split("=", 1)[0] in flags for a in rest)


def _value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


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


def _metadata_groups(args: list[str]) -> list[list[str]]:
    """The values of each ``--metadata`` in ``args`` (it takes one or more)."""
    groups, i = [], 0
    while i < len(args):
        if args[i] == "--metadata":
            j = i + 1
            while j < len(args) and not args[j].startswith("--"):
                j += 1
            groups.append(args[i + 1 : j])
            i = j
            continue
        if args[i].startswith("--metadata="):
            groups.append([args[i].split("=", 1)[1]])
        i += 1
    return groups


METADATA_FORM = ("give a JSON object ('{\"lengths\": [32, 64]}') or key=value pairs (lengths=[32,64] n_examples=8); "
                 "PosBench tasks read lengths, n_examples, data_seed and params")


def metadata(args: list[str]) -> dict:
    """The task metadata ``--metadata`` gives, merged as lm-eval merges it (its own parsers); a
    ValueError saying what is wrong otherwise."""
    from lm_eval._cli.utils import key_val_to_dict, try_parse_json

    merged: dict = {}
    for values in _metadata_groups(args):
        if not values:
            raise ValueError("no value")
        first = try_parse_json(values[0])
        if isinstance(first, dict):
            merged.update(first)
            continue
        for value in values:
            merged.update(key_val_to_dict(value))
    return merged


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def metadata_problem(given: dict) -> str | None:
    """Why the PosBench keys of ``given`` cannot be a task's metadata, or None."""
    lengths = given.get("lengths")
    if "lengths" in given and not ((_whole(lengths) and lengths > 0) or (
            isinstance(lengths, (list, tuple)) and lengths and all(_whole(x) and x > 0 for x in lengths))):
        return f"lengths={lengths!r}: must be a positive whole number or a non-empty list of them"
    if "n_examples" in given and not (_whole(given["n_examples"]) and given["n_examples"] > 0):
        return f"n_examples={given['n_examples']!r}: must be a positive whole number"
    if "data_seed" in given and not (_whole(given["data_seed"]) and given["data_seed"] >= 0):
        return f"data_seed={given['data_seed']!r}: must be a whole number >= 0"
    if "params" in given and not isinstance(given["params"], dict):
        return f"params={given['params']!r}: must be an object of {{task: {{option: value}}}}"
    return None


def argument_problem(args: list[str]) -> str | None:
    """Why lm-eval would fail on ``args`` (the lm-eval arguments, after ``run_args``), or None:
    ``--tasks`` naming no task, ``--limit`` not a positive count or a share below 1, or a
    ``--metadata`` that does not parse or gives a PosBench key a value its tasks cannot take."""
    tasks = _last(args, "--tasks", "-t")
    if tasks is not None and not [t for t in tasks.split(",") if t.strip()]:
        from suite.lmeval.yamls import include_dir

        known = sorted(path.stem for path in include_dir().glob("posbench_*.yaml"))
        return f"--tasks {tasks!r}: names no task; give task names separated by commas; PosBench's: {', '.join(known)}"
    limit = _last(args, "--limit", "-L")
    if limit is not None:
        try:
            value = float(limit)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0 and (value < 1 or value == int(value))):
            return (f"--limit {limit!r}: must be a whole number of documents per task (1, 2, ...) "
                    "or a share of them below 1 (0.5)")
    try:
        given = metadata(args)
    except ValueError as err:
        return f"--metadata: {(str(err).splitlines() or [''])[0]}; {METADATA_FORM}"
    if (problem := metadata_problem(given)) is not None:
        return f"--metadata {problem}"
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
    asked = [t.strip() for t in (_value(args, "--tasks") or "").split(",")]
    return [t for t in asked if t.startswith("posbench_") and t not in known]


def only_posbench_tasks(args: list[str]) -> bool:
    """Whether ``--tasks`` names PosBench tasks and groups (``posbench_*``) only."""
    tasks = _value(args, "--tasks")
    return bool(tasks) and all(t.strip().startswith("posbench_") for t in tasks.split(","))


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
    if (problem := argument_problem(rest)) is not None:  # before a model loads
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
