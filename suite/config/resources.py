"""Pre-flight checks on the machine a run will use: its device exists and the run's lengths and
batches fit in its memory. They run before anything trains, so a run that cannot fit is refused
with the estimate instead of swapping the machine to a halt or dying out of memory mid-sweep.

The estimate is deliberately coarse, meant to refuse what cannot fit rather than to predict a
peak; it counts what is held at once:

* weights, gradients and AdamW's two moments (16 bytes per parameter in fp32);
* training activations kept for the backward pass, per layer and token (2 bytes each under bf16);
* attention scores where the chosen path builds them: ``reference`` (and SDPA with a learned
  bias, which trains through the reference path, and every path for a scheme whose term reads
  the logits, ``needs_logits``) keeps ``B x H x T x T`` logits and probabilities per layer; a
  scheme with its own attention (``own_attention``: stick-breaking, PaTH) keeps what it declares
  per pair of tokens (``pair_floats``) on every path, and a data-dependent bias (FoX) adds one
  ``B x H x T x T`` tensor where it is materialized (the reference path; SDPA below float32);
  SDPA with a fixed bias or a window at most ``2 x BLOCK`` long builds one ``H x T x T`` mask;
  FlexAttention and SDPA's causal and blockwise kernels build none.

* what a scheme declares it holds beyond the scores (``held_floats``: CoPE's per-query table
  products, whose size grows with ``position.npos_max``; randomized positions' hashed keys);
* a layer whose token mixer is no softmax attention (a gated linear recurrence) builds no scores:
  it holds what its mixer declares (``Mixer.held_floats``: the chunk's C x C matrices per head,
  the state after each chunk, the convolution's and gates' outputs).

Evaluation runs without gradients, one layer's intermediates at a time, at the longest
evaluation length.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import torch

from suite.model.attention import BLOCK, choose_impl
from suite.model.init import shapes_only
from suite.model.mixer import MIXERS
from suite.model.position import SCHEMES, PositionScheme
from suite.model.position.base import Dims
from suite.config.spec import RunSpec
from suite.files import sweep_dir

GIB = 2 ** 30
FP32 = 4


class ResourceError(RuntimeError):
    """The machine cannot run this spec; the message says what is missing and what to change."""


def _bias_kind(spec: RunSpec, layer) -> str:
    """"none", "fixed" or "learned": whether the layer's scheme adds a score bias, and whether
    that bias has parameters (T5's bucket table does)."""
    cls = SCHEMES[layer.position]
    if cls.bias is PositionScheme.bias:
        return "none"
    m = spec.model
    with shapes_only():
        scheme = cls(layer.position_cfg, Dims(m.d_model, m.n_heads, m.head_dim, m.train_len))
    return "learned" if any(True for _ in scheme.parameters()) else "fixed"


def parameter_count(spec: RunSpec) -> int:
    """Exact, from the model built on the meta device (no memory allocated)."""
    from suite.model.lm import PosBenchLM

    with shapes_only():
        model = PosBenchLM(spec.model)
    return sum(p.numel() for p in model.parameters())


def _attention_bytes(spec: RunSpec, device: torch.device, batch: int, length: int, training: bool) -> float:
    impl = choose_impl(spec.model.attention, device)
    m = spec.model
    total, masks = 0.0, 0.0
    for layer in m.layers:
        mixer = MIXERS[layer.mixer]
        if not mixer.softmax:  # no scores: what the recurrence keeps, per layer for the backward
            held = mixer.held_floats(layer.mixer_cfg, m.d_model, m.n_heads, batch, length, training) * FP32
            total = total + held if training else max(total, held)
            continue
        cls = SCHEMES[layer.position]
        scores = batch * m.n_heads * length * length * FP32
        bias = _bias_kind(spec, layer)
        data_bias = cls.signal_bias is not PositionScheme.signal_bias
        below_fp32 = training and spec.train.precision == "bf16"
        on_reference = impl == "reference" or cls.needs_logits or cls.own_attention
        if on_reference or (impl == "sdpa" and training and bias == "learned"):
            # logits and probabilities (or what the scheme's own attention declares): kept per
            # layer for the backward, one layer at a time without
            floats = cls.pair_floats(m.head_dim, training) + (1 if data_bias else 0)
            total = total + floats * scores if training else max(total, floats * scores)
        elif impl == "sdpa" and data_bias and below_fp32:
            total = total + scores  # the bias a_i + b_j as a dense mask, one per layer
        elif impl == "sdpa" and (bias != "none" or (layer.span != "full" and length <= 2 * BLOCK)):
            masks = max(masks, m.n_heads * length * length * FP32)
    return total + masks + _held_bytes(spec, batch, length, training)


def _held_bytes(spec: RunSpec, batch: int, length: int, training: bool) -> float:
    """What each layer's scheme declares it holds beyond the scores (``held_floats``): kept per layer
    for the backward pass in training, one layer at a time without."""
    m = spec.model
    dims = Dims(m.d_model, m.n_heads, m.head_dim, m.train_len)
    held = [SCHEMES[layer.position].held_floats(layer.position_cfg, dims, batch, length, training) * FP32
            for layer in m.layers]
    return (sum(held) if training else max(held, default=0.0))


def estimate_bytes(spec: RunSpec, device: Optional[torch.device] = None) -> dict[str, float]:
    """{"train": bytes, "eval": bytes}: the peak each phase needs, coarsely."""
    device = device or torch.device(spec.train.device)
    m, t, e = spec.model, spec.train, spec.eval
    params = parameter_count(spec)
    width = 12 * m.d_model + 4 * m.d_ff  # values kept per token and layer for the backward pass
    act = 2 if t.precision == "bf16" else FP32
    logits = m.vocab_size * 3 * FP32  # logits, log-probabilities and their gradient, per token
    train = (16 * params + t.batch_size * t.seq_len * (m.n_layers * width * act + logits)
             + _attention_bytes(spec, device, t.batch_size, t.seq_len, training=True))
    longest = max(spec.eval_lengths)
    eval_ = (4 * params + e.batch_size * longest * (4 * m.d_model + 3 * m.d_ff + m.vocab_size) * FP32
             + _attention_bytes(spec, device, e.batch_size, longest, training=False))
    return {"train": train, "eval": eval_}


def available_bytes(device: torch.device) -> Optional[float]:
    """Memory a run can use on ``device`` (None when it cannot be read)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[1]) if torch.cuda.is_available() else None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_device(spec: RunSpec) -> torch.device:
    """The run's device, or ``ResourceError`` when this machine lacks it or the run's attention
    path cannot train on it (FlexAttention has no backward pass on the CPU)."""
    device = torch.device(spec.train.device)
    if spec.model.attention == "flex" and device.type != "cuda":
        raise ResourceError(f"model.attention=flex trains only on CUDA (FlexAttention has no backward pass on "
                            f"{device.type}); use model.attention=auto (sdpa on {device.type}) or sdpa")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ResourceError(f"train.device={spec.train.device!r} (recipe {spec.train.name!r}) needs a CUDA GPU and none "
                            "is available; use train=cpu on this machine")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ResourceError(f"train.device={spec.train.device!r} needs Apple's MPS backend, which this machine lacks; use train.device=cpu")
    return device


def check_memory(spec: RunSpec, available: Optional[float] = None, device: Optional[torch.device] = None) -> dict[str, float]:
    """Refuse a spec whose training or evaluation needs more memory than ``available`` (default:
    what the run's device has now). Returns the estimate."""
    device = device or torch.device(spec.train.device)
    need = estimate_bytes(spec, device)
    have = available if available is not None else available_bytes(device)
    if have is None:
        return need
    t, e = spec.train, spec.eval
    longest = max(spec.eval_lengths)
    where = {"train": f"training (train.batch_size={t.batch_size} x train.seq_len={t.seq_len})",
             "eval": f"evaluation (eval.batch_size={e.batch_size} x {longest} tokens, "
                     f"eval.multiples up to {max(e.multiples):g} x train.seq_len)"}
    weights = 16 * parameter_count(spec)  # weights, gradients and AdamW's two moments, at any batch and length
    if weights > have:
        m = spec.model
        raise ResourceError(f"the model ({m.n_layers} layers, model.d_model={m.d_model}) needs about "
                            f"{weights / GIB:.1f} GiB for its weights, gradients and AdamW moments alone, more than "
                            f"the {have / GIB:.1f} GiB available on {device.type} at any batch size or length; "
                            "choose a smaller model (model=tiny|small, or lower model.d_model / model.n_layers)")
    for phase, size in need.items():
        if size > have:
            training = phase == "train"
            held = _held_bytes(spec, t.batch_size if training else e.batch_size, t.seq_len if training else longest, training)
            schemes = sorted({layer.position for layer in spec.model.layers
                              if SCHEMES[layer.position].held_floats is not PositionScheme.held_floats})
            of_which = (f" ({held / GIB:.1f} GiB of it held by position scheme {', '.join(schemes)} beyond the attention "
                        "scores, for a table its options size, such as position.npos_max)") if held > size / 2 else ""
            raise ResourceError(f"{where[phase]} needs about {size / GIB:.1f} GiB{of_which}, more than the "
                                f"{have / GIB:.1f} GiB available on {device.type}; lower the batch size or the length"
                                f"{' or the table' if of_which else ''}")
    return need


def check_results_dir(results_dir, sweep: str) -> Path:
    """Create ``<results_dir>/<sweep>/`` and prove a file can be written there (then removed);
    ``ResourceError`` naming the folder otherwise: read-only, a file in the way, no space."""
    target = sweep_dir(results_dir, sweep)
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ResourceError(f"results_dir={str(results_dir)!r}: cannot write under {target} "
                            f"({err.strerror or err}{': ' + str(err.filename) if err.filename else ''}); "
                            "point results_dir= at a writable folder") from None
    return target
