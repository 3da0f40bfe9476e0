"""The token-mixer interface: what a layer mixes its tokens with, beside its position scheme and span.

A mixer is a class with a ``name``, a frozen ``Config`` and ``build``, which makes the layer's
module. That module is called as softmax attention is (``suite.model.attention.Attention``):
``forward(x, scheme, span, ctx, cache)`` maps the normed input (B, T, C) to the layer's output
(B, T, C), and with a ``LayerCache`` (decoding) it takes the tokens after the cached ones.

A mixer owns its facts:

* ``softmax``: whether it computes softmax attention, whose pre-softmax logits the diagnostics
  read (``PosBenchLM.attention_logits``) and whose span and position scheme apply;
* ``check_layer``: which position schemes and spans a layer of it may name (a recurrence has no
  score matrix for a span to mask nor a bias to add), refused with the valid choices;
* ``held_floats``: what one layer holds at once beyond an attention layer's activations, for the
  memory pre-flight (``suite.config.resources``).

``MIXERS`` (``suite/model/mixer/__init__.py``) maps names to classes; adding a mixer is one file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import nn


@dataclass(frozen=True)
class MixerConfig:
    """Options every mixer has: none."""


class Mixer:
    name: ClassVar[str]
    Config: ClassVar[type] = MixerConfig
    softmax: ClassVar[bool] = True

    @classmethod
    def build(cls, cfg: MixerConfig, d_model: int, n_heads: int, n_layers: int,
              signal: nn.Module | None = None) -> nn.Module:
        raise NotImplementedError

    @classmethod
    def check_layer(cls, position: str, position_cfg, span: str) -> None:
        """ValueError naming the bad choice and the valid ones when a layer of this mixer cannot
        take scheme ``position`` (with its config) or span ``span``. Default: any."""

    @classmethod
    def held_floats(cls, cfg: MixerConfig, d_model: int, n_heads: int, batch: int, length: int,
                    training: bool) -> float:
        """Floats one layer of this mixer holds at once beyond the per-token activations every
        layer keeps (suite/config/resources.py counts attention scores separately). Default: none."""
        return 0.0
