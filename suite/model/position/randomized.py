"""Randomized positions over any base scheme: train on positions a longer sequence would have.

Ruoss et al. 2023 (ACL), "Randomized Positional Encodings Boost Length Generalization of
Transformers". In training, the n tokens of a sequence get the positions of a sorted uniform
sample of n distinct integers from [0, ``max_len``) instead of 0 .. n-1, so every position up
to ``max_len`` - 1 is trained and a sequence longer than the training length brings no unseen
position. The wrapper holds a base scheme (``base``), maps token indices to sampled positions
and hands those to every hook of the base that takes positions: ``embed``, ``qk``, ``bias``,
``score_mod``, ``temperature``. Any scheme of the catalogue can be the base but the wrapper
itself, a scheme whose positions are counted from the logits (``needs_logits``: CoPE) and one
whose positions come from the data (``data_dependent``: FoX, stick-breaking, PaTH): they take no
token positions to sample, and the memory pre-flight reads both flags from the layer's scheme
class, which a wrapper could not set per base.

* Evaluation: ``eval_positions="identity"`` (default) gives positions 0 .. n-1;
  ``"random"`` samples as in training, which is what the authors' code does at test time. Here
  the test-time sample is fixed per length (drawn from the run's seed and n), so an evaluation
  is a function of the model and its inputs, not of batch order; the authors draw a fresh one
  per batch. A random sample covers a whole sequence: decoding with a KV cache (lm-eval
  generation) cannot extend it and is refused.
* One sample per forward, shared by every example of the batch and every layer: the suite's
  hooks take one (T,) position vector per forward. The authors' code also draws one sample
  per batch, but draws it afresh in every attention layer for rotary and ALiBi encodings.
* Causal port: the authors' noisy relative (Transformer-XL) encoding is non-causal (their code
  refuses causal attention), and their noisy ALiBi samples the offsets i - j themselves, on
  both sides of a query, for an encoder without a causal mask. Here the sampled positions go
  to the base scheme: a causal bias (ALiBi, T5) sees their differences p_i - p_j, RoPE rotates
  by them, absolute schemes add their encodings, as the authors' sin/cos, learned and rotary
  variants do.
* ``embed`` draws the sample: ``PosBenchLM.forward`` calls every scheme's ``embed`` once per
  forward, before any layer, with the token indices 0 .. T-1; the later hooks of that forward
  index the sample with the indices they receive (slices of them on the blockwise path).
* The base is named by the config's ``base`` field, which a run's code digest reads
  (``suite.config.codedigest.pieces_of``): an edit to RoPE changes the id of a randomized run over RoPE.
* The base takes its own defaults, with the wrapper's ``log_scale`` and ``log_scale_base``.
  A base with a position table (``learned``'s ``max_positions``) gets one row per position in
  [0, ``max_len``); a base that still cannot reach ``max_len`` is refused. A base whose buckets
  follow the training length (``t5``'s ``max_distance``) gets ``max_len``: the offsets training
  draws reach ``max_len`` - 1, so they keep buckets of their own up to there.
* Learned position-indexed entries (``position_entries``) are the base's: in training, those of
  ``max_len`` tokens (the drawn positions reach ``max_len`` - 1); at evaluation, those of the
  sequence's own length with ``identity``, and with ``random`` those of ``max_len`` (a superset
  of what the fixed sample reads, all of it drawn in training). So a randomized run reads no
  untrained entry at any supported length.
* ``max_len`` (null: 8 x the training length, the longest eval length of the default sweep;
  ``check`` resolves it and refuses one below the training length) bounds every sequence: a
  longer one raises ``LengthUnsupported``.

Reproducible and resumable: sample k of a run is a pure function of two persistent buffers,
``seed`` (the global torch seed at construction, which the runner sets to the run's seed; read,
not drawn, so the global generator that initializes the weights is left as it was) and ``draws`` (samples drawn
so far, saved in every checkpoint). The sample is computed on the device with integer hashes:
the same on every device, with no host read and no graph break under ``torch.compile``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch

from suite.model.position.base import SCHEMES, LengthUnsupported, PositionConfig, PositionScheme
from suite.options import LENGTH_MAX, option

EVAL_POSITIONS = ("identity", "random")
MAX_LEN_MULTIPLE = 8  # default max_len, in training lengths: the default sweep evaluates up to 8x
M32 = 0xFFFFFFFF


def bases() -> list[str]:
    """The schemes the wrapper can hold: the catalogue but itself and those whose positions are
    read from the logits (``needs_logits``, CoPE's counts of gated keys) or from the data
    (``data_dependent``: FoX, stick-breaking, PaTH), which take no token positions to sample.
    The catalogue (``base.SCHEMES``) is filled once the package has imported every scheme."""
    return sorted(name for name, cls in SCHEMES.items()
                  if name != Randomized.name and not cls.needs_logits and not cls.data_dependent)


@dataclass(frozen=True)
class RandomizedConfig(PositionConfig):
    base: str = "rope"
    max_len: Optional[int] = option(None, le=LENGTH_MAX)  # None: MAX_LEN_MULTIPLE x the training length
    eval_positions: str = "identity"

    def __post_init__(self):
        super().__post_init__()
        if self.base == Randomized.name:
            raise ValueError(f"randomized.base={self.base!r}: the wrapper cannot hold itself; valid: {', '.join(bases())}")
        if self.base not in bases():
            raise ValueError(f"unknown randomized.base {self.base!r} (or one whose positions come from the logits or the data); "
                             f"valid: {', '.join(bases())}")
        if self.max_len is not None and self.max_len < 1:
            raise ValueError(f"randomized.max_len={self.max_len}: must be >= 1 (or null for {MAX_LEN_MULTIPLE} x train.seq_len)")
        if self.eval_positions not in EVAL_POSITIONS:
            raise ValueError(f"unknown randomized.eval_positions {self.eval_positions!r}; valid: {', '.join(EVAL_POSITIONS)}")


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """x * c mod 2^32 for int64 x in [0, 2^32) and a 32-bit c, in two 16-bit halves of c so no
    product leaves int64 (signed overflow is undefined in compiled kernels)."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A bijection of 32-bit integers with good avalanche (Wellons' "lowbias32"), on int64 tensors."""
    x = x & M32
    x = _mul32(x ^ (x >> 16), 0x7FEB352D)
    x = _mul32(x ^ (x >> 15), 0x846CA68B)
    return x ^ (x >> 16)


def sample_positions(seed: torch.Tensor, stream: torch.Tensor, n: int, max_len: int) -> torch.Tensor:
    """n sorted distinct positions, uniform over the n-subsets of [0, max_len): the indices of
    the n smallest of max_len hashed keys. ``seed`` and ``stream`` are int64 scalars; for one
    seed, each stream gives its own keys, and the keys of one stream are distinct (mix32 is a
    bijection), so no tie decides a sample."""
    c1 = mix32(seed ^ mix32(stream ^ 0x9E3779B9))
    c2 = mix32(stream ^ mix32(seed ^ 0x85EBCA6B))
    keys = mix32(mix32(torch.arange(max_len, device=seed.device) ^ c1) ^ c2)  # (max_len,)
    return torch.topk(keys, n, largest=False, sorted=False).indices.sort().values  # (n,)


def _base_config(cfg: RandomizedConfig, max_len: int) -> PositionConfig:
    """The base's config: its defaults, the wrapper's log-length temperature, a position table
    (``max_positions``) of ``max_len`` rows and T5's ``max_distance`` at ``max_len``."""
    cls = SCHEMES[cfg.base]
    params = {"log_scale": cfg.log_scale, "log_scale_base": cfg.log_scale_base}
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    for sized in ("max_positions", "max_distance"):  # a table's rows, T5's last bucket: max_len, as drawn
        if sized in fields:
            params[sized] = max_len
    return cls.Config(**params)


def _base_scheme(cfg: RandomizedConfig, dims, max_len: int) -> PositionScheme:
    """The base scheme, with its config from ``_base_config``."""
    return SCHEMES[cfg.base](_base_config(cfg, max_len), dims)


class Randomized(PositionScheme):
    name = "randomized"
    Config = RandomizedConfig

    @classmethod
    def check(cls, cfg, train_len, eval_lens, dims=None):
        """``max_len`` resolved (null: MAX_LEN_MULTIPLE x the training length) and refused below the
        training length, and the base's own check passed (a rotary base with no pair to rotate is
        refused as the base would be). Evaluation lengths past it are "unsupported"
        (``max_length``), not an error."""
        max_len = cfg.max_len or MAX_LEN_MULTIPLE * train_len
        if max_len < train_len:
            raise ValueError(f"randomized.max_len={max_len} is shorter than train.seq_len={train_len}; "
                             f"valid: null ({MAX_LEN_MULTIPLE} x train.seq_len) or at least {train_len}")
        if dims is not None:
            try:
                SCHEMES[cfg.base].check(_base_config(cfg, max_len), train_len, eval_lens, dims)
            except ValueError as err:
                raise ValueError(f"randomized.base={cfg.base!r}: {err}") from None
        return dataclasses.replace(cfg, max_len=max_len)

    @classmethod
    def held_floats(cls, cfg, dims, batch, length, training):
        """One hashed int64 key per position of [0, max_len), and the top-k over them: 6 floats each."""
        return 6.0 * (cfg.max_len or MAX_LEN_MULTIPLE * dims.train_len)

    def __init__(self, cfg, dims):
        super().__init__(cfg, dims)
        self.max_len = self.check(cfg, dims.train_len, ()).max_len
        self.base = _base_scheme(cfg, dims, self.max_len)
        limit = self.base.max_length()
        if limit is not None and limit < self.max_len:
            raise ValueError(f"randomized.base={cfg.base!r} represents {limit} positions, fewer than max_len={self.max_len}")
        self.flex_kernel_options = self.base.flex_kernel_options
        self.register_buffer("seed", torch.tensor(torch.initial_seed() & M32))
        self.register_buffer("draws", torch.zeros((), dtype=torch.long))
        self._sample: Optional[torch.Tensor] = None  # (T,) positions of the current forward

    def sampling(self) -> bool:
        """Whether token indices map to sampled positions (training, or eval_positions=random)."""
        return self.training or self.cfg.eval_positions == "random"

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        """The positions of token indices ``pos`` in the current forward."""
        if not self.sampling():
            return pos
        if self._sample is None:
            raise RuntimeError("randomized: no positions drawn yet; embed() draws them once per forward, before any layer")
        return self._sample[pos]

    def _fits(self, n: int) -> None:
        if n > self.max_len:
            raise LengthUnsupported(f"randomized positions reach max_len={self.max_len}; asked for {n} tokens")

    def _draw(self, pos: torch.Tensor) -> None:
        """Set the sample of this forward, whose token indices are ``pos`` = 0 .. T-1."""
        n = pos.shape[0]
        if self.training:
            self._fits(n)
            self._sample = sample_positions(self.seed, self.draws, n, self.max_len)
            self.draws.add_(1)
        elif self.cfg.eval_positions == "random":
            if not torch.compiler.is_compiling() and int(pos[0]) != 0:
                raise ValueError("randomized.eval_positions=random draws the positions of a whole sequence; a KV cache "
                                 "cannot extend it (decode by recomputing the forward, or use eval_positions=identity)")
            self._fits(n)
            self._sample = sample_positions(self.seed, torch.full_like(self.draws, -n), n, self.max_len)
        elif not torch.compiler.is_compiling():  # identity: a KV cache passes the new tokens' indices
            self._fits(int(pos.max()) + 1)

    def embed(self, x, pos):  # x: (B, T, C), pos: (T,)
        self._draw(pos)
        return self.base.embed(x, self.positions(pos))

    def qk(self, q, k, pos_q, pos_k):
        mapped_q = self.positions(pos_q)
        return self.base.qk(q, k, mapped_q, mapped_q if pos_k is pos_q else self.positions(pos_k))

    def bias(self, pos_q, pos_k):
        return self.base.bias(self.positions(pos_q), self.positions(pos_k))

    def temperature(self, pos_q):
        return self.base.temperature(self.positions(pos_q))

    def max_length(self):
        return self.max_len

    def position_entries(self, length, training=False):
        """The base's entries at the positions this length takes: ``max_len``'s in training and
        with ``eval_positions=random`` (every position drawn lies below ``max_len``), the
        sequence's own with ``identity``."""
        drawn = training or self.cfg.eval_positions == "random"
        return self.base.position_entries(self.max_len if drawn else length, training)

    def score_mod(self, pos):
        """The base's score_mod at the sampled positions. A learned bias under gradients is built
        once per forward at those positions, (H, T, T), and gathered, as T5 trains; otherwise
        the base's score_mod over positions 0 .. max_len-1 is read at the sampled indices (the
        base's own cost at ``max_len``: none for ALiBi, an (H, max_len) vector for T5)."""
        if not self.sampling():
            return self.base.score_mod(pos)
        sample = self.positions(pos)
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.base.parameters()):
            bias = self.base.bias(sample, sample)
            if bias is None:
                return None

            def randomized_dense(score, b, h, q_idx, kv_idx):
                return score + bias[h, q_idx, kv_idx]

            return randomized_dense
        inner = self.base.score_mod(torch.arange(self.max_len, device=pos.device))
        if inner is None:
            return None

        def randomized(score, b, h, q_idx, kv_idx):
            return inner(score, b, h, sample[q_idx], sample[kv_idx])

        return randomized
