"""``python -m suite.diagnose <overrides> [--stored]``: recency gaps per layer of a model.

Builds the model a config describes, freshly initialized with its seed (or, with ``--stored``,
the trained weights of that run from ``results/<sweep>/_work/<run_id>/model.pt``), runs the
diagnostics on its evaluation examples at the training length and prints, per layer, the
recency gap f(1) - f(L) of the hidden states at each site and of the attention logits.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import torch
from hydra.errors import HydraException

from suite import files
from suite.config.compose import compose_config
from suite.describe import layer_kind
from suite.evaluation.diagnostics import SITES, diagnostic_examples, diagnostic_rows
from suite.model.lm import PosBenchLM
from suite.results.identity import run_id
from suite.evaluation.slices import parse_slice
from suite.config.build import SpecError
from suite.config.preflight import preflight
from suite.config.resources import ResourceError


def main(argv: list[str] | None = None, prog: str = "python -m suite.diagnose") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0].split(": ", 1)[-1])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m suite.run (pattern=rnope)")
    parser.add_argument("--stored", action="store_true", help="use the trained weights of the run (results/<sweep>/_work/<run_id>/model.pt)")
    args = parser.parse_intermixed_args(argv)
    stored, overrides = args.stored, args.overrides
    try:
        cfg = compose_config(overrides)
        spec, _ = preflight(cfg, here=False)  # it runs on the CPU whatever the run's device
    except (SpecError, HydraException) as err:
        print(f"bad configuration: {err}", file=sys.stderr)
        return 2
    except ResourceError as err:
        print(f"cannot run here: {err}", file=sys.stderr)
        return 2
    torch.manual_seed(spec.seed)
    model = PosBenchLM(spec.model)
    stage = "init"
    if stored:
        path = files.work_dir(cfg.results_dir, spec.sweep, run_id(spec)) / "model.pt"
        if not path.exists():
            print(f"no stored model at {path}: run it first (python -m suite.run {' '.join(overrides)})", file=sys.stderr)
            return 1
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
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
    # 'masked': the far lag lies outside the layer's window or chunk, so it has no logit there
    for i, layer in enumerate(spec.model.layers):
        cells = [f"{gaps[i][c]:>11.3f}" if gaps[i][c] == gaps[i][c] else f"{'masked':>11}" for c in columns]
        print(f"{i:>5} {layer_kind(layer):<20}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
