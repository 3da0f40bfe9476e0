"""Pre-flight checks on the machine a run will use: its device exists and the run's lengths and
batches fit in its memory. They run before anything trains, so a run that cannot fit is refused
with the estimate instead of swapping the machine to a halt or dying out of memory mid-sweep.

The estimate is deliberately coarse, meant to refuse what cannot fit rather than to predict a
peak; it counts what is held at once:

* weights, gradients and AdamW's two moments (16 bytes per parameter in fp32);
* training activations kept for the backward pass, per layer and token (2 bytes each under bf16);
* attention scores where the layer's path builds them. The path is the plan the model runs
  (``suite.model.attention_plan.plan``), read for each softmax layer by ``layer_plan`` from the
  spec (the scheme's flags, the span's ``reach`` and ``is_full``, the length, gradients on when
  training, bf16), and the estimate counts what that plan says is built:

  - scores kept per layer (the reference path, a scheme's own attention, a learned bias training
    block by block): ``pair_floats`` per pair (logits and probabilities; stick-breaking and PaTH
    declare more) over ``B x H x T x keys``, ``keys`` being T, or ``BLOCK + reach - 1`` block by block;
  - a data-dependent bias built dense (FoX on the reference path, or SDPA below float32): one more
    float per pair;
  - the largest of one ``H x T x T`` tensor shared by a scheme's layers (SDPA's float mask, the
    reference path's bias, FlexAttention's learned bias while training) and one block's
    ``B x H x BLOCK x keys`` on the blockwise path;

  FlexAttention and SDPA's causal kernel build none;
* what a scheme declares it holds beyond the scores (``held_floats``: CoPE's per-query table
  products, whose size grows with ``position.npos_max``; randomized positions' hashed keys);
* a layer whose token mixer is no softmax attention (a gated linear recurrence) builds no scores:
  it holds what its mixer declares (``Mixer.held_floats``: the chunk's C x C matrices per head,
  the state after each chunk, the convolution's and gates' outputs).

Evaluation runs without gradients, one layer's intermediates at a time, at the longest
evaluation length.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

import torch

from suite.model.attention_plan import Plan, plan
from suite.model.init import shapes_only
from suite.model.mixer import MIXERS
from suite.model.position import SCHEMES, PositionScheme
from suite.model.position.base import Dims
from suite.model.span import SPANS
from suite.config.run_spec import RunSpec
from suite.files import sweep_dir

GIB = 2 ** 30
FP32 = 4


class ResourceError(RuntimeError):
    """The machine cannot run this spec; the message says what is missing and what to change."""


def _bias_kind(spec: RunSpec, layer) -> str:
    """"none", "fixed" or "learned": whether the layer's scheme adds a score bias, and whether
    that bias has parameters (T5's bucket table does), from its class: a scheme that overrides
    ``bias`` counts as having one (a wrapper over a base without one is counted as with)."""
    cls = SCHEMES[layer.position]
    if cls.bias is PositionScheme.bias:
        return "none"
    m = spec.model
    with shapes_only():
        scheme = cls(layer.position_cfg, Dims(m.d_model, m.n_heads, m.head_dim, m.train_len))
    return "learned" if any(True for _ in scheme.parameters()) else "fixed"


@lru_cache(maxsize=16)
def parameter_count(spec: RunSpec) -> int:
    """Exact, from the model built on the meta device (no memory allocated), each distinct layer
    once: a layer's block holds the same parameters wherever it stands (the position schemes are
    the model's, not a block's), so the blocks are counted by kind and the depth costs nothing to
    build (a 1,024-layer model of gated layers took most of 15 s); once per spec (the estimate and
    the weights' check both ask)."""
    from suite.model.lm import PosBenchLM

    distinct = list(dict.fromkeys(spec.model.layers))
    with shapes_only():
        model = PosBenchLM(dataclasses.replace(spec.model, layers=tuple(distinct), n_layers=len(distinct)))
    per_kind = [sum(p.numel() for p in block.parameters()) for block in model.blocks]
    total = sum(p.numel() for p in model.parameters())
    return total - sum(per_kind) + sum(per_kind[distinct.index(layer)] for layer in spec.model.layers)


def layer_plan(spec: RunSpec, layer, device: torch.device, length: int, training: bool) -> Plan:
    """The attention plan of one softmax layer of ``spec`` at ``length`` tokens on ``device``, the
    model's own (``suite.model.attention_plan.plan``) for a forward with gradients (``training``) or
    without, read from the spec: the scheme's class flags, the span built from its config."""
    cls = SCHEMES[layer.position]
    span = SPANS[layer.span](layer.span_cfg)
    return plan(spec.model.attention, device.type, own_attention=cls.own_attention, needs_logits=cls.needs_logits,
                bias=_bias_kind(spec, layer), data_bias=cls.signal_bias is not PositionScheme.signal_bias,
                reach=span.reach, full=span.is_full, length=length, want_logits=False, grad=training,
                below_fp32=spec.train.precision == "bf16")


def _attention_bytes(spec: RunSpec, device: torch.device, batch: int, length: int, training: bool) -> float:
    """What the token mixers hold at ``length`` tokens: each softmax layer what its plan
    (``layer_plan``) builds, each recurrence what it declares; per layer for the backward when
    ``training`` (summed), one layer at a time without (the largest)."""
    m = spec.model
    total, once = 0.0, 0.0  # per layer (summed when training); the largest tensor built once
    for layer in m.layers:
        mixer = MIXERS[layer.mixer]
        if not mixer.softmax:  # no scores: what the recurrence keeps
            held = mixer.held_floats(layer.mixer_cfg, m.d_model, m.n_heads, batch, length, training) * FP32
        else:
            p = layer_plan(spec, layer, device, length, training)
            floats = (SCHEMES[layer.position].pair_floats(m.head_dim, training) if p.logits else 0) + p.dense
            held = floats * batch * m.n_heads * length * p.keys * FP32  # (B, H, T, keys), every block's rows
            shared = m.n_heads * length * length * FP32 if p.shared else 0.0  # (H, T, T)
            block = batch * m.n_heads * p.block * p.keys * FP32 if p.block else 0.0  # (B, H, BLOCK, keys)
            once = max(once, shared, block)
        total = total + held if training else max(total, held)
    return total + once + _held_bytes(spec, batch, length, training)


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


def weights_floor(spec: RunSpec) -> int:
    """A lower bound of the model's parameter count from its sizes alone, as Python integers
    (exact at any size): every layer's q, k, v and output projections (4 x d_model^2, whatever
    its mixer) and its SwiGLU (3 x d_model x d_ff), the embedding and the head. The memory check
    judges it before ``parameter_count`` builds the model on the meta device, where a tensor past
    2**63 elements (a width near ``COUNT_MAX``) would overflow instead of being refused."""
    m = spec.model
    return m.n_layers * (4 * m.d_model ** 2 + 3 * m.d_model * m.d_ff) + 2 * m.vocab_size * m.d_model


def _check_weights(spec: RunSpec, weights: float, have: float, device: torch.device, floor: bool = False,
                   training: bool = True) -> None:
    """Refuse a model whose ``weights`` (bytes: the weights, with ``training`` their gradients and
    AdamW's two moments too; with ``floor``, a lower bound of them) alone exceed ``have``: no batch
    size or length makes it fit."""
    if weights > have:
        m = spec.model
        held = "its weights, gradients and AdamW moments" if training else "its weights"
        raise ResourceError(f"the model ({m.n_layers} layers, model.d_model={m.d_model}, model.d_ff={m.d_ff}) needs "
                            f"{'at least' if floor else 'about'} {weights / GIB:.1f} GiB for {held} "
                            f"alone, more than the {have / GIB:.1f} GiB available on "
                            f"{device.type} at any batch size or length; choose a smaller model (model=tiny|small, or "
                            "lower model.d_model / model.d_ff / model.n_layers)")


def check_memory(spec: RunSpec, available: Optional[float] = None, device: Optional[torch.device] = None,
                 phases: tuple[str, ...] = ("train", "eval")) -> dict[str, float]:
    """Refuse a spec whose training or evaluation (``phases``: a command that only runs the model
    asks for ``("eval",)``) needs more memory than ``available`` (default: what the run's device
    has now). The sizes' lower bound (``weights_floor``) is judged first, before anything is built
    to estimate. Returns the estimate."""
    device = device or torch.device(spec.train.device)
    have = available if available is not None else available_bytes(device)
    training = "train" in phases
    per_param = 16 if training else 4  # gradients and AdamW's state only when training
    if have is not None:
        _check_weights(spec, float(per_param * weights_floor(spec)), have, device, floor=True, training=training)
    need = {phase: size for phase, size in estimate_bytes(spec, device).items() if phase in phases}
    if have is None:
        return need
    t, e = spec.train, spec.eval
    longest = max(spec.eval_lengths)
    where = {"train": f"training (train.batch_size={t.batch_size} x train.seq_len={t.seq_len})",
             "eval": f"evaluation (eval.batch_size={e.batch_size} x {longest} tokens, "
                     f"eval.multiples up to {max(e.multiples):g} x train.seq_len)"}
    _check_weights(spec, float(per_param * parameter_count(spec)), have, device, training=training)  # any batch, length
    for phase, size in need.items():
        if size > have:
            trains = phase == "train"
            held = _held_bytes(spec, t.batch_size if trains else e.batch_size, t.seq_len if trains else longest, trains)
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
