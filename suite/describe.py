"""``python -m suite.describe <overrides> [--json]``: print the per-layer table a config builds.

One row per layer: position scheme (with log-length temperature if on), span, and window or
chunk size. Use it to check what a pattern and overrides really resolve to before training.
"""
from __future__ import annotations

import json
import sys

from hydra.errors import HydraException

from suite.config import compose_config
from suite.spec import SpecError, build


def layer_table(spec) -> list[dict]:
    return [
        {"layer": i, "position": layer.position, "span": layer.span, "window": layer.span_size,
         "log_scale": bool(getattr(layer.position_cfg, "log_scale", False))}
        for i, layer in enumerate(spec.model.layers)
    ]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    overrides = [a for a in argv if a != "--json"]
    try:
        spec = build(compose_config(overrides))
    except (SpecError, HydraException) as err:
        print(f"bad configuration: {err}", file=sys.stderr)
        return 2
    rows = layer_table(spec)
    if as_json:
        print(json.dumps(rows))
        return 0
    m = spec.model
    print(f"model {m.name}: {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, pattern {m.pattern}, "
          f"train_len {m.train_len}, run id {spec.run_id}")
    print(f"{'layer':>5}  {'position':<12} {'span':<8} {'window':>6}  log_scale")
    for r in rows:
        window = "-" if r["window"] is None else str(r["window"])
        print(f"{r['layer']:>5}  {r['position']:<12} {r['span']:<8} {window:>6}  {'yes' if r['log_scale'] else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
