"""``python -m suite.commands.diagnose <overrides> [--stored]``: recency gaps per layer of a model.

Builds the model a config describes, freshly initialized with its seed (or, with ``--stored``,
the trained weights of that run from ``results/<sweep>/_work/<run_id>/model.pt``), runs the
diagnostics on its evaluation examples at the training length and prints, per layer, the
recency gap f(1) - f(L) of the hidden states at each site and of the attention logits. A layer
whose mixer is a gated linear recurrence has no attention logits: its logits cell says so.
"""
from __future__ import annotations

import sys
from collections import defaultdict

from suite import files
from suite.commandline import Refused, command
from suite.commands.configured import configured, overrides_parser
from suite.commands.describe import layer_kind

# torch, the model and the diagnostics are imported where they are used, so --help answers before they load


def stored_weights(results_dir, spec, overrides: list[str]) -> dict:
    """The trained weights of the run ``spec`` describes, once its result file counts as stored
    (``store.verified_run``) and its ``model.pt`` is the file its training wrote
    (``checkpoint.trained_record``); else a refusal naming the file (exit 1)."""
    import torch

    from suite.results import store
    from suite.results.identity import run_id
    from suite.training.checkpoint import trained_record

    rid = run_id(spec)
    path = files.work_dir(results_dir, spec.sweep, rid) / "model.pt"
    if not path.exists():
        raise Refused(f"no stored model at {path}: run it first (python -m suite.run {' '.join(overrides)})", 1)
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
    args = parser.parse_intermixed_args(argv)
    import torch

    from suite.evaluation.diagnostics import SITES, diagnostic_examples, diagnostic_rows
    from suite.evaluation.slices import parse_slice
    from suite.model.lm import PosBenchLM

    cfg, spec = configured(args.overrides, "run", runs_model=True)  # on the CPU whatever the run's device
    torch.manual_seed(spec.seed)
    model = PosBenchLM(spec.model)
    stage = "init"
    if args.stored:
        model.load_state_dict(stored_weights(cfg.results_dir, spec, args.overrides))
        stage = "trained"
    tasks = [(t, t.build()) for t in spec.tasks]
    task_name, examples = diagnostic_examples(spec, tasks, cfg.results_dir)
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
