"""The initialization every weight the model draws shares: GPT-2's normal(0, 0.02) (Radford et
al. 2019), with residual output projections scaled by 1/sqrt(2 n_layers)."""
from __future__ import annotations

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
