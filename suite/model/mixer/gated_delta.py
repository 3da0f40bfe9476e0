"""The gated delta rule (Gated DeltaNet: Yang, Kautz & Hatamizadeh, ICLR 2025; the linear layers
of Qwen3-Next) as a layer's token mixer:

    S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,   a_t = exp(g_t)

written as the references write it: decay the state, read what it holds at k_t, and write beta_t
times the difference to v_t (transformers ``torch_recurrent_gated_delta_rule``, flash-linear-attention
``fla/ops/gated_delta_rule/naive.py``). The layer and both forms of the recurrence are shared with
``gla`` (``suite/model/mixer/_gated_linear.py``, whose docstring derives the chunked form).
"""
from __future__ import annotations

import torch

from suite.model.mixer._gated_linear import GatedLinearMixer, Rule


class DeltaRule(Rule):
    uses_beta = True

    def chunk_terms(self, k, v, beta, gamma, decay):
        # (I + A) U = beta V - (beta Gamma K) S_0, A_ij = beta_i (Gamma_i / Gamma_j) k_i . k_j for j < i
        A = ((k @ k.transpose(-1, -2)) * decay * beta[..., :, None]).tril(-1)  # (B, H, N, C, C)
        L = A + torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        base = torch.linalg.solve_triangular(L, beta[..., None] * v, upper=False, unitriangular=True)
        corr = torch.linalg.solve_triangular(L, (beta * gamma)[..., None] * k, upper=False, unitriangular=True)
        return base, corr

    def step_value(self, state, k, v, beta):
        held = (state * k[..., :, None]).sum(-2)  # S^T k: (B, H, Dv)
        return beta[..., None] * (v - held)


class GatedDelta(GatedLinearMixer):
    name = "gated_delta"
    rule = DeltaRule
