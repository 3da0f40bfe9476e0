"""What names a run and describes it: its readable id and the per-run columns of every result row.

The ``spans`` column names each layer's span, or its token mixer where that is not softmax
attention (a gated linear layer has no span): ``gated_delta+full`` for Qwen3-Next's pattern, so a
board tells a gated-linear hybrid from an SWA one by the column it already breaks down by.
Shared by ``suite.run`` (which trains and stores runs) and ``suite.commands.diagnose`` (which
inspects them), so neither imports the other."""
from __future__ import annotations

import subprocess
from functools import lru_cache

from suite.config.compose import CONF_DIR
from suite.model.span import KINDS
from suite.config.run_spec import RunSpec


@lru_cache(maxsize=1)
def git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             cwd=CONF_DIR.parent, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _joined(values) -> str:
    """Distinct values in order of first appearance, joined by '+': 'rope+nope'."""
    return "+".join(dict.fromkeys(str(v) for v in values))


def span_columns(layers) -> dict:
    """One column per span kind (suite/model/span/base.py ``KINDS``: ``window``, ``chunk``): the smallest
    size of that kind over the layers, None when no layer has a span of that kind."""
    return {kind: min((layer.span_size for layer in layers if layer.span_kind == kind), default=None) for kind in KINDS}


def positions_label(spec: RunSpec) -> str:
    """The layers' schemes, 'rope+nope'; with a training schedule, each phase's, the fraction of the
    steps where the next begins after it: 'rope>drope@0.8' (RoPE, then DroPE from 0.8 of the steps)."""
    layers = spec.model.layers
    label = _joined(layer.phases[0][0] for layer in layers)
    for k, phase in enumerate(spec.train.schedule, start=1):
        label += f">{_joined(layer.phases[k][0] if layer.earlier else layer.position for layer in layers)}@{phase.until:g}"
    return label


def run_columns(spec: RunSpec) -> dict:
    """The per-run columns of every result row."""
    m = spec.model
    return {
        "run_id": run_id(spec), "sweep": spec.sweep, "spec_hash": spec.run_id, "config_hash": spec.config_hash,
        "code_digest": spec.code, "git_sha": git_sha(),
        "seed": spec.seed, "model": m.name, "n_layers": m.n_layers, "d_model": m.d_model, "n_heads": m.n_heads,
        "pattern": m.pattern, "positions": positions_label(spec),
        "spans": _joined(layer.mixing for layer in m.layers), **span_columns(m.layers),
        "train_len": spec.train.seq_len, "steps": spec.train.steps,
    }


def span_label(spec: RunSpec) -> str:
    """The layers' spans as a run id names them, distinct ones joined by '+': 'full', 'swa16'
    (a sliding window of 16 keys), 'chunked16', 'swa16+full' (command_a's pattern); a layer that
    is no softmax attention is named by its mixer, 'gated_delta+full', as the ``spans`` column is."""
    return _joined(f"{layer.mixing}{layer.span_size or ''}" for layer in spec.model.layers)


def run_id(spec: RunSpec) -> str:
    """Readable and unique: '<positions>-<pattern>-<spans>-<task or task set>-s<seed>-<spec hash>',
    as 'alibi-uniform-swa16-copy-s0-5ecd0a1b2c3d' or 'alibi-uniform-full-copy-s0-7b3d...': the
    spans (``span_label``) are always named, full attention too, so every id has its fields in the
    same places and two runs that differ only in their span differ before the hash. The positions
    carry their schedule (``positions_label``) written with '~' for '>', since a run id is a file
    name and a command-line argument ('rope~drope@0.8': '>' redirects in a shell and Windows
    refuses it in a name). The id is a name, never parsed: every reader takes a run's facts from
    its columns and its stored spec, so rows stored under an older form of the id read as before."""
    return (f"{positions_label(spec).replace('>', '~')}-{spec.model.pattern}-{span_label(spec)}-{spec.taskset}"
            f"-s{spec.seed}-{spec.run_id}")
