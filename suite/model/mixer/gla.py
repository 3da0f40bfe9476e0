"""Scalar-gated linear attention as a layer's token mixer:

    S_t = a_t S_{t-1} + k_t v_t^T,   a_t = exp(g_t), one gate per head and token

the gated linear recurrence of the hybrid-model studies' "gated linear attention" local layers, in
its scalar-gated form (flash-linear-attention ``fla/ops/simple_gla``; Mamba-2's state-space
duality has the same update). It departs from GLA proper (Yang et al., ICML 2024,
``fla/ops/gla/naive.py``), whose gate is a vector over the key dimensions: one gate per head keeps
the chunked form's decays a (C, C) matrix per head, shared with the gated delta rule, and leaves
the delta rule's correction as the only difference between the two mixers, so a board compares
exactly that. Everything else (projections, convolution, normalized q and k, the decay's
parametrization, the gated output norm) is the gated delta layer's
(``suite/model/mixer/_gated_linear.py``); this rule draws no beta.
"""
from __future__ import annotations

from suite.model.mixer._gated_linear import GatedLinearMixer, Rule


class ScalarGatedRule(Rule):
    uses_beta = False

    def chunk_terms(self, k, v, beta, gamma, decay):
        return v, None  # every position writes its value: U = V

    def step_value(self, state, k, v, beta):
        return v


class GatedLinearAttention(GatedLinearMixer):
    name = "gla"
    rule = ScalarGatedRule
