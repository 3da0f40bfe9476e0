"""Learned absolute positions: one trained vector per position, up to ``max_positions``.

Used by GPT (Radford et al. 2018) and BERT (Devlin et al. 2019). By default the table covers the
longest evaluation length (``check``, called by the run spec), as Kazemnejad et al. 2023 did (their
``wpe``): rows past the training length are never trained, keep their initial values and are
scored. Positions past a shorter table have no vector, so that evaluation is ``unsupported`` rather
than a crash; a table shorter than the training length is refused before training.

Rows past the training length are untrained by construction, and that is the point of scoring
them: the suite does not fix it, it reports it. ``position_entries`` declares the rows a length
reads (0 .. n - 1, capped by the table), so evaluation stores their untrained share
(``untrained_positions``): at 2 L half the rows read never received a gradient, at 4 L three
quarters.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from suite.model.init import init_normal_
from suite.model.position.base import LengthUnsupported, PositionConfig, PositionScheme
from suite.options import LENGTH_MAX, option


@dataclass(frozen=True)
class LearnedConfig(PositionConfig):
    max_positions: Optional[int] = option(None, le=LENGTH_MAX)  # None: the training length (the run spec sets the longest eval length)

    def __post_init__(self):
        super().__post_init__()
        if self.max_positions is not None and self.max_positions < 1:
            raise ValueError(f"learned.max_positions={self.max_positions}: must be >= 1")


class Learned(PositionScheme):
    name = "learned"
    Config = LearnedConfig

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.table = nn.Embedding(cfg.max_positions or dims.train_len, dims.d_model)
        init_normal_(self.table.weight)  # the token embeddings' scale

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """A table left at ``max_positions: null`` sized to the longest eval length; one shorter
        than the training length (no vector for trained positions) refused."""
        if cfg.max_positions is None:
            cfg = dataclasses.replace(cfg, max_positions=max(eval_lens))
        if cfg.max_positions < train_len:
            raise ValueError(f"learned max_positions={cfg.max_positions} is shorter than train.seq_len={train_len}; "
                             f"valid: null (the longest eval length) or at least {train_len}")
        return cfg

    def max_length(self):
        return self.table.num_embeddings

    def position_entries(self, length, training=False):
        """Rows 0 .. length - 1 of the table, capped by the table (a longer sequence is refused,
        ``embed``): one row per position read."""
        return frozenset(range(min(length, self.table.num_embeddings)))

    def embed(self, x, pos):  # x: (B, T, C)
        # the check reads a value back to the host; compiled training (lengths fixed by the
        # recipe) skips it, evaluation (never compiled) keeps it
        if not torch.compiler.is_compiling() and int(pos.max()) >= self.table.num_embeddings:
            raise LengthUnsupported(
                f"learned table has {self.table.num_embeddings} positions; asked for position {int(pos.max())}"
            )
        return x + self.table(pos)
