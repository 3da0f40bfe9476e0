"""Training checkpoints: written atomically, read back into the model and optimizer, and a bad
one reported and set aside so the run starts over. A checkpoint records the run it belongs to
(its spec hash) and its step; the finished training's ``trained.json`` records the run and the
SHA-256 of its ``model.pt``. Another run's file, a step outside the run, weights that are not
finite or not the recorded ones, times that are not times, garbage bytes, or a FIFO or folder in
a file's place (named, never waited on) are refused with a warning that says why, and the run
trains again. Storage only: a checkpoint restores exactly
the state it saved (the SIGKILL-resume test holds a resumed run to an uninterrupted one), so
this module is not part of the code digest that stamps results."""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from suite.files import open_regular, read_regular, set_aside, write_json_atomic, writing


def _save(obj, path: Path) -> None:
    """``torch.save`` through the one write rule (``suite.files.writing``): any failure to write,
    an OSError or torch's own RuntimeError (a full disk gives "file write failed" or
    "basic_ios::clear: iostream error", whatever the wording), is the OSError every other write
    raises, naming the file: "No space left on device" when its disk is full."""
    with writing(path, also=(RuntimeError,)):
        torch.save(obj, path)


def save_checkpoint(path: Path, model, optimizer, step: int, owner: str, spent: Optional[dict] = None,
                    history: Optional[list] = None, checks: Optional[list] = None) -> None:
    """Atomic: write a temporary file, then rename over the old checkpoint. ``owner``: the run's
    spec hash; ``spent``: the training's time up to ``step`` (``wall_s``, ``batch_s``), which a
    process resuming from it adds to its own; ``history``: the logged steps before ``step`` (one
    dict of numbers each, ``TrainResult.history``), which a resumed process continues, so the
    run's record holds its whole training history; ``checks``: the checks of training to criterion
    made up to ``step`` (``TrainResult.checks``), which decide where a resumed run stops."""
    tmp = path.with_suffix(".tmp")
    try:
        _save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
               "torch_rng": torch.get_rng_state(), "run": owner, "spent": dict(spent or {}),
               "history": [dict(h) for h in history or []],
               "checks": [{"step": c["step"], "scores": dict(c["scores"])} for c in checks or []]}, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _torch_load(path: Path):
    """``torch.load`` of ``path`` (weights only) when it is a regular file; a FIFO or a folder there
    is an ``OSError`` naming it, never waited on (``suite.files.open_regular``)."""
    with open_regular(path) as fh:
        return torch.load(fh, map_location="cpu", weights_only=True)


def _garbage(state, owner: str, steps: int) -> str | None:
    """Why a loaded checkpoint is not one this run (``owner``, at most ``steps`` steps) wrote, or
    None: a mapping of this run, at a step it saves, with finite weights and times >= 0."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a checkpoint"
    if state.get("run") != owner:
        return f"it belongs to run {state.get('run')!r}, not {owner!r}"
    step = state.get("step")
    if not isinstance(step, int) or not 0 < step < steps:
        return f"its step {step!r} is not one a run of {steps} steps saves (1 to {steps - 1})"
    weights = state.get("model")
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        return "it holds no model weights"
    if not all(torch.isfinite(t).all() for t in weights.values() if t.is_floating_point()):
        return "its model weights hold NaN or inf"
    spent = state.get("spent") or {}
    if not isinstance(spent, dict):
        return f"its time spent {spent!r} is not a mapping of times"
    for key in ("wall_s", "batch_s"):
        value = spent.get(key, 0.0)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < float("inf"):
            return f"its time spent {key} {value!r} is not a time (a finite number of seconds >= 0)"
    return None


def load_checkpoint(path: Path, model, optimizer, owner: str, steps: int) -> tuple[int, dict, list, list]:
    """(the checkpoint's step, the training's time up to it, its logged history before it, the
    checks made up to it), its state restored; ValueError when it is not one this run wrote
    (``_garbage``: another run's, a step this run of at most ``steps`` steps never saves (1 to
    steps - 1), weights that are not finite, a time that is not one); OSError when it is not a
    regular file. A checkpoint written before the history (or the checks) were kept gives an
    empty list."""
    state = _torch_load(path)
    if (why := _garbage(state, owner, steps)) is not None:
        raise ValueError(why)
    step = state["step"]
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    spent = state.get("spent") or {}  # a checkpoint written before the time was kept holds none
    history = [h for h in state.get("history") or [] if isinstance(h, dict) and h.get("step", steps) < step]
    checks = [c for c in state.get("checks") or [] if isinstance(c, dict) and c.get("step", steps) <= step]
    return int(state["step"]), {k: float(spent.get(k, 0.0)) for k in ("wall_s", "batch_s")}, history, checks


def resume(path: Optional[Path], model, make_optimizer: Callable[[], torch.optim.Optimizer], owner: str, steps: int):
    """(optimizer, first step, the training's time before it, the logged history before it, the
    checks made up to it): the checkpoint's state when ``path`` holds a readable one of this run
    (``owner``, a run of at most ``steps`` steps), else a fresh optimizer at step 0 with an empty
    history and no checks. Any other checkpoint is reported, removed and ignored (the model keeps
    its initial weights)."""
    optimizer = make_optimizer()
    nothing = {"wall_s": 0.0, "batch_s": 0.0}
    if path is None or not os.path.lexists(path):
        return optimizer, 0, nothing, [], []
    initial = {k: v.clone() for k, v in model.state_dict().items()}  # restored if the checkpoint is bad
    try:
        return (optimizer, *load_checkpoint(path, model, optimizer, owner, steps))
    except Exception as err:  # noqa: BLE001 - any unreadable checkpoint means: start over
        first_line = (str(err).splitlines() or [""])[0]
        warnings.warn(f"checkpoint {path} could not be loaded ({type(err).__name__}: {first_line}); "
                      f"{_discard(path)}; training this run from scratch", stacklevel=3)
        model.load_state_dict(initial)
        return make_optimizer(), 0, nothing, [], []


def _discard(path: Path) -> str:
    """Take what is at ``path`` out of the run's way: a file or a FIFO is removed, anything else
    (a folder) set aside (``suite.files.set_aside``); returns what was done, for the warning."""
    try:
        path.unlink(missing_ok=True)
        return "it was removed"
    except OSError:
        try:
            return f"it was set aside as {set_aside(path)}"
        except OSError as err:
            return f"it was left in place ({err.strerror or err}): remove it"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_trained(work: Path, model, record: dict, owner: str) -> None:
    """The finished training: ``model.pt`` (the weights, what lm-eval loads) and then
    ``trained.json`` (``record``: the training result, with the run and the weights' SHA-256),
    each written atomically, the marker last, so a ``trained.json`` always stands beside a whole
    ``model.pt``."""
    tmp = work / "model.pt.tmp"
    try:
        _save(model.state_dict(), tmp)
        sha = _sha256(tmp)
        os.replace(tmp, work / "model.pt")
    finally:
        tmp.unlink(missing_ok=True)
    write_json_atomic(work / "trained.json", {**record, "run": owner, "model_sha256": sha})


def trained_record(work: Path, owner: str) -> dict:
    """The record (``trained.json``) of run ``owner``'s finished training in ``work``, after
    checking that ``model.pt`` beside it is the file that training wrote: the record names run
    ``owner`` and the SHA-256 of ``model.pt`` equals the one it records. Else ValueError,
    one line naming both files (and both digests when they differ). Every reader of a trained
    ``model.pt`` (the run restoring its training, lm-eval, diagnose) calls this first."""
    model, marker = work / "model.pt", work / "trained.json"
    if not model.is_file():
        raise ValueError(f"no trained weights at {model}")
    try:
        record = json.loads(read_regular(marker))  # a FIFO there is named, not waited on
    except (OSError, ValueError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ValueError(f"{model} cannot be checked: {marker}, which records its SHA-256, cannot be read ({why})") from None
    if not isinstance(record, dict) or record.get("run") != owner:
        named = record.get("run") if isinstance(record, dict) else None
        raise ValueError(f"it records run {named!r}, not {owner!r} ({marker})")
    actual, recorded = _sha256(model), record.get("model_sha256")
    if actual != recorded:
        raise ValueError(f"model.pt is not the file this training wrote: {model} has SHA-256 {actual}, "
                             f"{marker} records {recorded}")
    return record


def load_trained(work: Path, model, owner: str) -> Optional[dict]:
    """The record ``save_trained`` wrote for run ``owner``, with the model's weights restored from
    ``model.pt``; None when there is none, or (with a warning that says why) when it cannot be
    read, belongs to another run, or ``model.pt`` is not the file it recorded (``trained_record``)."""
    marker = work / "trained.json"
    if not marker.exists():
        return None
    try:
        record = trained_record(work, owner)
        model.load_state_dict(_torch_load(work / "model.pt"))
        return record
    except Exception as err:  # noqa: BLE001 - an unreadable finished training means: train again
        warnings.warn(f"finished training in {work} could not be loaded ({type(err).__name__}: {err}); "
                      f"{marker.name}: {_discard(marker)}; training this run again", stacklevel=2)
        return None
