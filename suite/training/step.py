"""One optimizer step: the training a sweep runs, and what ``make bench`` and its GPU part time.

Forward (under the recipe's autocast), the answer-span loss (``suite.data.batch.next_token_loss``),
backward, gradient clipping to ``grad_clip``, AdamW. A loss that is not finite stops the step
before any parameter changes; it is read back to the host only when ``check`` is set, so a
CUDA step that is not checked queues its work without waiting for it.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from suite.data.batch import next_token_loss


@dataclass
class StepOut:
    loss: torch.Tensor  # the step's loss, detached, still on the device
    grad_norm: Optional[torch.Tensor]  # before clipping; None when the step stopped
    loss_value: Optional[float] = None  # read back to the host when the step was checked
    finite: bool = True  # False: the loss was not finite and nothing was updated

    @property
    def stopped(self) -> bool:
        return not self.finite


def train_step(forward: Callable[[torch.Tensor], torch.Tensor], optimizer: torch.optim.Optimizer, params,
               tokens: torch.Tensor, mask: torch.Tensor, *, grad_clip: float, denominator=None,
               autocast=None, check: bool = True, reduce: Callable = lambda loss: loss) -> StepOut:
    """One step of ``optimizer`` on the loss of ``forward(tokens)`` over the tokens ``mask`` marks.

    ``params``: the parameters to clip (a list, not a generator: it is walked twice).
    ``denominator``: the global count of scored tokens when this process holds a share of the
    batch (see ``next_token_loss``). ``check``: read the loss to the host and stop, before the
    update, when it is not finite. ``reduce``: what is read back (under torchrun, the mean over
    processes, so every process stops together).
    """
    with autocast if autocast is not None else nullcontext():
        logits = forward(tokens)
    loss = next_token_loss(logits, tokens, mask, denominator=denominator)
    value = None
    if check:
        value = reduce(loss.detach()).item()
        if not math.isfinite(value):
            return StepOut(loss.detach(), None, value, finite=False)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    return StepOut(loss.detach(), grad_norm, value)
