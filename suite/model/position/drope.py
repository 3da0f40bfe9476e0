"""DroPE: a model trained with RoPE, then without any position encoding, with an inference temperature.

Gelberg, Eguchi, Akiba & Cetin 2025, "Extending the Context of Pretrained LLMs by Dropping Their
Positional Embeddings" (arXiv 2512.12167). RoPE is a scaffold: train with it, drop every position
encoding, and recalibrate (keep training) at the training length; the model then runs as NoPE,
causal masking alone carrying order, and generalizes zero-shot past its training length. At
inference a temperature beta = 1 + c * ln(C_test / C_train) multiplies the attention logits.

In PosBench the drop is a schedule, not this scheme: ``conf/arch/drope.yaml`` trains RoPE until
``train.schedule[0].until`` of the steps and this scheme after it (``suite.config.run_spec.Phase``).
This scheme is the dropped model: NoPE plus the temperature.

* Where beta acts: on the logits, q·k / sqrt(d) times beta, applied here as the per-query
  ``temperature`` hook that multiplies the queries (the same for a scheme without a bias). The
  authors' code (github.com/SakanaAI/DroPE, ``custom_models/attention.py``, ``NoPEAttention``:
  RoPE nulled with cos = 1, sin = 0; ``from_source`` sets the attention's logit ``scaling`` from
  a ``softmax_scale`` config entry) scales the logits by a constant chosen for the evaluation;
  the length rule itself was not readable here beyond the paper's abstract, so it follows the
  formula as stated above.
* What C_test is: the query's own context, the ``i + 1`` tokens query ``i`` sees, not the
  length of the whole sequence. The last query of a sequence of C_test tokens, the one that
  answers a needle-in-a-haystack prompt, gets exactly the formula's beta; an earlier query's
  weights never depend on how many tokens follow it, so the model stays causal and a KV cache
  stays exact (``suite.model.cache.length_invariant`` probes the temperature).
* Below the training length: beta = max(1, ...): a query that sees at most C_train tokens is the
  recalibrated model unchanged (the formula is stated for extension, C_test > C_train), so
  training, at lengths up to C_train, never sees the temperature.
* ``c`` (default 0.1, YaRN's coefficient of ln s in its attention factor, Peng et al. 2023, for
  the same log-length form, since the paper's value was not readable here): 0 is plain NoPE.

The base class's ``log_scale`` still applies and multiplies with beta.

No learned parameter, so no position-indexed entry to train (``position_entries``: None,
the base class's default).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from suite.model.position.base import PositionConfig, PositionScheme
from suite.options import option

C_MAX = 10.0  # beta at 8 x the training length is 1 + 10 ln 8 = 21.8: far sharper than any useful setting


def drope_beta(context: torch.Tensor, train_len: int, c: float) -> torch.Tensor:
    """beta = max(1, 1 + c * ln(context / train_len)) for each query's context length (float32)."""
    return (1.0 + c * torch.log(context.to(torch.float32) / train_len)).clamp(min=1.0)


@dataclass(frozen=True)
class DropeConfig(PositionConfig):
    """``c``: the inference temperature's coefficient, beta = 1 + c ln(C_test / C_train), in [0, C_MAX]."""

    c: float = option(0.1, ge=0, le=C_MAX)

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.c <= C_MAX:
            raise ValueError(f"drope.c={self.c}: must be in [0, {C_MAX:g}]")


class DroPE(PositionScheme):
    name = "drope"
    Config = DropeConfig

    def temperature(self, pos_q: torch.Tensor) -> Optional[torch.Tensor]:
        """Per-query logit multiplier (Tq, 1): beta of each query's context ``pos_q + 1`` against
        the training length, times ``log_scale``'s when set; None when neither acts (c = 0)."""
        base = super().temperature(pos_q)
        if self.cfg.c == 0:
            return base
        beta = drope_beta(pos_q + 1, self.dims.train_len, self.cfg.c).unsqueeze(-1)  # (Tq, 1)
        return beta if base is None else base * beta
