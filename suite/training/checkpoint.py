"""Training checkpoints: written atomically, read back into the model and optimizer, and a bad
one reported and set aside so the run starts over. Storage only: a checkpoint restores exactly
the state it saved (the SIGKILL-resume test holds a resumed run to an uninterrupted one), so
this module is not part of the code digest that stamps results."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from suite.files import write_json_atomic


def save_checkpoint(path: Path, model, optimizer, step: int) -> None:
    """Atomic: write a temporary file, then rename over the old checkpoint."""
    tmp = path.with_suffix(".tmp")
    try:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                    "torch_rng": torch.get_rng_state()}, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: Path, model, optimizer) -> int:
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"])


def resume(path: Optional[Path], model, make_optimizer: Callable[[], torch.optim.Optimizer]):
    """(optimizer, first step): the checkpoint's state when ``path`` holds a readable one, else a
    fresh optimizer at step 0. An unreadable checkpoint is reported, removed and ignored (the
    model keeps its initial weights)."""
    optimizer = make_optimizer()
    if path is None or not path.exists():
        return optimizer, 0
    initial = {k: v.clone() for k, v in model.state_dict().items()}  # restored if the checkpoint is bad
    try:
        return optimizer, load_checkpoint(path, model, optimizer)
    except Exception as err:  # noqa: BLE001 - any unreadable checkpoint means: start over
        first_line = (str(err).splitlines() or [""])[0]
        warnings.warn(f"checkpoint {path} could not be loaded ({type(err).__name__}: {first_line}); "
                      "training this run from scratch", stacklevel=3)
        path.unlink(missing_ok=True)
        model.load_state_dict(initial)
        return make_optimizer(), 0


def save_trained(work: Path, model, record: dict) -> None:
    """The finished training: ``model.pt`` (the weights, what lm-eval loads) and then
    ``trained.json`` (``record``: the training result), each written atomically, the marker last,
    so a ``trained.json`` always stands beside a whole ``model.pt``."""
    tmp = work / "model.pt.tmp"
    try:
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, work / "model.pt")
    finally:
        tmp.unlink(missing_ok=True)
    write_json_atomic(work / "trained.json", record)


def load_trained(work: Path, model) -> Optional[dict]:
    """The record ``save_trained`` wrote, with the model's weights restored from ``model.pt``;
    None when there is none, or (with a warning) when it cannot be read."""
    marker = work / "trained.json"
    if not marker.exists():
        return None
    try:
        record = json.loads(marker.read_text())
        model.load_state_dict(torch.load(work / "model.pt", map_location="cpu", weights_only=True))
        return record
    except Exception as err:  # noqa: BLE001 - an unreadable finished training means: train again
        warnings.warn(f"finished training in {work} could not be loaded ({type(err).__name__}: {err}); "
                      "training this run again", stacklevel=2)
        marker.unlink(missing_ok=True)
        return None
