"""The initialization every weight the model draws shares: GPT-2's normal(0, 0.02) (Radford et
al. 2019), with residual output projections scaled by 1/sqrt(2 n_layers)."""
from __future__ import annotations

import contextlib
import math
from typing import Optional

import torch
from torch import nn

INIT_STD = 0.02


def init_normal_(weight: torch.Tensor, residual_layers: Optional[int] = None) -> torch.Tensor:
    """Draw ``weight`` from normal(0, INIT_STD), divided by sqrt(2 * residual_layers) for a layer
    that writes into the residual stream of that many blocks."""
    std = INIT_STD if residual_layers is None else INIT_STD / math.sqrt(2 * residual_layers)
    return nn.init.normal_(weight, std=std)


class _SkipInit(torch.overrides.TorchFunctionMode):
    """Under ``torch.device("meta")``: every in-place call on a meta tensor (``normal_``,
    ``uniform_``, ``zero_``, ``nn.init.*``) is a no-op. On the meta device these would only run
    torch's Python reference kernels, which import the compiler on first use (seconds per process)
    to fill nothing. (Arithmetic on meta tensors takes that path too: schemes initialize in place.)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name, first = getattr(func, "__name__", ""), args[0] if args else kwargs.get("tensor")
        if name.endswith("_") and not name.startswith("__") and isinstance(first, torch.Tensor) and first.is_meta:
            return first
        return func(*args, **kwargs)


@contextlib.contextmanager
def shapes_only():
    """Build modules on the meta device without initializing them: parameter shapes and counts
    at no memory and no compute."""
    with torch.device("meta"), _SkipInit():
        yield
