"""Softmax attention as a layer's token mixer: ``suite.model.attention.Attention``, unchanged,
with the layer's position scheme and span."""
from __future__ import annotations

from suite.model.attention import Attention
from suite.model.mixer.base import Mixer, MixerConfig


class SoftmaxAttention(Mixer):
    name = "attention"
    Config = MixerConfig
    softmax = True

    @classmethod
    def build(cls, cfg, d_model, n_heads, n_layers, signal=None):
        return Attention(d_model, n_heads, n_layers, signal)
