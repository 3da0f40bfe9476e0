"""``python -m suite.commands.diagnose <overrides> [--stored [--sweep NAME] [--results DIR]]``: recency gaps per layer of a model.

Builds the model a config describes, freshly initialized with its seed (or, with ``--stored``,
the trained weights of that run from ``<results>/<sweep>/_work/<run_id>/model.pt``), runs the
diagnostics on its evaluation examples at the training length and prints, per layer, the
recency gap f(1) - f(L) of the hidden states at each site and of the attention logits. A layer
whose mixer is a gated linear recurrence has no attention logits: its logits cell says so.

The sweep is ``dev`` unless a ``sweep_name=`` override names another; ``--sweep NAME`` composes
the config as ``make sweep SWEEP=NAME`` does (``+sweep=NAME``: its task set, recipe and name, so
``--sweep hybrids +arch=rope_in_swa seed=1`` is that sweep's run), and ``--results DIR`` reads
another results folder than ``results``. A run with no stored model is refused (exit 1) naming
the folder and file looked for and the command that trains it.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from suite import files
from suite.commandline import Refused, command
from suite.commands.configured import configured, overrides_parser
from suite.commands.describe import layer_kind

# torch, the model and the diagnostics are imported where they are used, so --help answers before they load
SWEEPS = Path(__file__).resolve().parents[2] / "conf" / "sweep"  # the sweeps `make sweep SWEEP=<name>` runs
SCHEME_KEYS = ("arch", "position", "pattern")  # the overrides and sweep axes that choose a scheme


def sweep_names(folder: Path = SWEEPS) -> list[str]:
    """The sweeps ``make sweep SWEEP=<name>`` can run: conf/sweep/<name>.yaml."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def check_sweep(prog: str, name: str, folder: Path = SWEEPS) -> str:
    """``name`` when conf/sweep/<name>.yaml exists; ``Refused`` (exit 2) naming it and the sweeps otherwise."""
    if name not in sweep_names(folder):
        raise Refused(f"{prog}: error: --sweep {name!r}: no sweep file {folder / (name + '.yaml')}; valid: "
                      f"{', '.join(sweep_names(folder)) or 'none'}")
    return name


def sweeps_training(overrides: list[str], folder: Path = SWEEPS) -> list[str]:
    """The sweeps whose grid lists every scheme value of ``overrides`` (``pattern=rope_in_swa`` is
    on hybrids' ``+arch`` axis); none when the overrides choose no scheme."""
    import yaml

    wanted = [o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+~") in SCHEME_KEYS]
    found = []
    for name in sweep_names(folder) if wanted else []:
        params = ((yaml.safe_load((folder / f"{name}.yaml").read_text()) or {}).get("hydra") or {})
        params = (params.get("sweeper") or {}).get("params") or {}
        values = {v.strip() for k, text in params.items() if str(k).lstrip("+~") in SCHEME_KEYS
                  for v in str(text).split(",")}
        if all(w in values for w in wanted):
            found.append(name)
    return found


def make_sweep(sweep: str, results_dir) -> str:
    """The command that trains ``sweep`` into ``results_dir`` (``make sweep SWEEP=<sweep>``, with
    ``ARGS=results_dir=<dir>`` for a folder other than results)."""
    elsewhere = Path(results_dir) != Path("results")
    return f"make sweep SWEEP={sweep}" + (f" ARGS=results_dir={results_dir}" if elsewhere else "")


def missing_model(results_dir, spec, overrides: list[str], sweep: str | None, path: Path) -> str:
    """What to say when ``path``, the run's trained model, is not there: where it looked, and the
    command that trains it (the sweep's ``make sweep`` under ``--sweep``; else ``posbench run`` and
    the sweeps whose grid holds the scheme, or the sweep a ``sweep_name=`` override names, each to
    be read with ``--sweep``)."""
    folder = files.sweep_dir(results_dir, spec.sweep)
    head = f"no stored model of {' '.join(overrides) or 'the default configuration'} under {folder}/ (looked for {path})"
    elsewhere = Path(results_dir) != Path("results")
    if sweep is not None:
        return f"{head}: train it with `{make_sweep(sweep, results_dir)}` (if the sweep's grid holds this run)"
    named = any(o.partition("=")[0] == "results_dir" for o in overrides)
    run = " ".join(["posbench run", *overrides, *([f"results_dir={results_dir}"] if elsewhere and not named else [])])
    sweeps = [s for s in sweep_names() if s == spec.sweep] + [s for s in sweeps_training(overrides) if s != spec.sweep]
    also = "; ".join(f"or `{make_sweep(s, results_dir)}` for {files.sweep_dir(results_dir, s)}/, read with --sweep {s}"
                     for s in sweeps)
    return f"{head}: train it with `{run}`" + (f" ({also})" if also else "")


def stored_weights(results_dir, spec, overrides: list[str], sweep: str | None = None) -> dict:
    """The trained weights of the run ``spec`` describes, once its result file counts as stored
    (``store.verified_run``) and its ``model.pt`` is the file its training wrote
    (``checkpoint.trained_record``); else a refusal naming the file (exit 1) and, for a model not
    there, the command that trains it (``missing_model``; ``sweep``: the ``--sweep`` given)."""
    import torch

    from suite.results import store
    from suite.results.identity import run_id
    from suite.training.checkpoint import trained_record

    rid = run_id(spec)
    path = files.work_dir(results_dir, spec.sweep, rid) / "model.pt"
    if not path.exists():
        raise Refused(missing_model(results_dir, spec, overrides, sweep, path), 1)
    try:
        store.verified_run(files.result_path(results_dir, spec.sweep, rid), rid, spec.run_id)
        trained_record(path.parent, spec.run_id)
    except store.NotStored as err:
        raise Refused(f"{err}; rerun it (python -m suite.run {' '.join(overrides)})", 1) from None
    except ValueError as err:
        raise Refused(f"refused {path}: {err}", 1) from None
    return torch.load(path, map_location="cpu", weights_only=True)


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.diagnose") -> int:
    parser = overrides_parser(prog, __doc__)
    parser.add_argument("--stored", action="store_true", help="use the trained weights of the run (results/<sweep>/_work/<run_id>/model.pt)")
    parser.add_argument("--sweep", default=None, help="compose the config as `make sweep SWEEP=NAME` does and read its "
                                                      "runs from results/NAME/ (default: dev, or sweep_name=)")
    parser.add_argument("--results", default=None, help="the results folder to read (default: results, or results_dir=)")
    args = parser.parse_intermixed_args(argv)
    sweep = None if args.sweep is None else check_sweep(parser.prog, args.sweep)
    if args.results is not None and not str(args.results).strip():
        raise Refused(f"{parser.prog}: error: --results '': empty; name a results folder (results, or another)")
    import torch

    from suite.evaluation.diagnostics import SITES, diagnostic_examples, diagnostic_rows
    from suite.evaluation.slices import parse_slice
    from suite.model.lm import PosBenchLM

    composed = ([f"+sweep={sweep}"] if sweep else []) + args.overrides
    cfg, spec = configured(composed, "run", runs_model=True)  # on the CPU whatever the run's device
    results_dir = cfg.results_dir if args.results is None else args.results
    torch.manual_seed(spec.seed)
    model = PosBenchLM(spec.model)
    stage = "init"
    if args.stored:
        model.load_state_dict(stored_weights(results_dir, spec, args.overrides, sweep))
        stage = "trained"
    tasks = [(t, t.build()) for t in spec.tasks]
    task_name, examples = diagnostic_examples(spec, tasks, results_dir)
    rows = diagnostic_rows(model, examples, stage)
    gaps = defaultdict(dict)
    far = None
    for r in rows:
        fields = parse_slice(r["slice"])
        if r["metric"] == "recency_gap" or (r["metric"] == "logit_gap" and fields["head"] == "mean"):
            far = fields["far"]
            gaps[int(fields["layer"])][fields.get("site", "logits")] = r["value"]
    print(f"recency gap f(1) - f({far}) at {stage}, {len(examples)} {task_name} examples of {spec.train.seq_len} tokens")
    columns = [*SITES, "logits"]
    print(f"{'layer':>5} {'kind':<20}" + "".join(f"{c:>11}" for c in columns))
    # 'masked': the far lag lies outside the layer's window or chunk, so it has no logit there;
    # 'no softmax': the layer's mixer is a gated linear recurrence, which has no attention logits
    for i, layer in enumerate(spec.model.layers):
        cells = [f"{'no softmax':>11}" if c not in gaps[i] else
                 f"{gaps[i][c]:>11.3f}" if gaps[i][c] == gaps[i][c] else f"{'masked':>11}" for c in columns]
        print(f"{i:>5} {layer_kind(layer):<20}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
