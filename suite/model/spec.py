"""What the model is built from: a frozen ``ModelSpec`` of per-layer ``LayerSpec``s.

A layer whose position scheme changes during training (a schedule, ``train.schedule``: DroPE
trains with RoPE, then without) lists the schemes of the schedule's earlier phases in ``earlier``,
one per phase in order; its ``position`` is the last phase's, the one it is evaluated with. The
model holds every phase's scheme from the start and uses the one of the phase it is set to
(``PosBenchLM.set_phase``); which phase a training step is in is the recipe's
(``suite.config.run_spec.TrainSpec.phase_at``).

The model never reads config; the configuration stage (``suite/config/build.py``) builds this
spec. The size options are declared here once, with their rules (``suite.options.option``); the
Hydra schema's ``model`` group is derived from them (``suite/config/schema.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from suite.model.mixer import MIXERS, MixerConfig
from suite.model.position import PositionConfig
from suite.model.span import SPANS, Span, SpanConfig
from suite.options import option

ATTENTION_IMPLS = ("auto", "reference", "sdpa", "flex")
# The deepest stack a run may ask for: layer resolution and the pre-flight's meta-device build are
# linear in the depth, and the deepest published decoders have about 128 layers.
LAYERS_MAX = 1024


@dataclass(frozen=True)
class LayerSpec:
    """One layer: its position scheme, its span and its token mixer (softmax attention unless
    the pattern names another, ``suite/model/mixer/``), each with its own config. The mixer's
    fields default to attention, so a layer of attention hashes as it did before mixers existed
    (a run id leaves out fields at their default)."""

    position: str
    position_cfg: PositionConfig
    span: str
    span_cfg: SpanConfig
    # (scheme name, its config) of each earlier phase of a schedule, in order; () for a layer whose
    # scheme never changes. Its default keeps the id of every run without a schedule.
    earlier: tuple[tuple[str, PositionConfig], ...] = ()

    @property
    def phases(self) -> tuple[tuple[str, PositionConfig], ...]:
        """(name, config) of this layer's scheme in every phase, the last phase's (its own) last."""
        return (*self.earlier, (self.position, self.position_cfg))

    mixer: str = "attention"
    mixer_cfg: MixerConfig = MixerConfig()

    @property
    def softmax(self) -> bool:
        """Whether this layer's mixer is softmax attention (its span and scheme then apply)."""
        return MIXERS[self.mixer].softmax

    @property
    def mixing(self) -> str:
        """What mixes this layer's tokens: its span ('full', 'swa') under softmax attention, else
        its mixer ('gated_delta', 'gla'), which takes no span."""
        return self.span if self.softmax else self.mixer

    @property
    def span_kind(self) -> Optional[str]:
        """What bounds this layer's span ("window", "chunk"), as its class declares (suite/model/span/base.py)."""
        return SPANS[self.span].kind

    @property
    def span_size(self) -> Optional[int]:
        """The span's window or chunk in tokens, from its own config (None for full attention)."""
        return self._span().size

    @property
    def span_label(self) -> str:
        """'w=16', 'c=16', or '' for full attention."""
        return self._span().label

    def _span(self) -> Span:
        return SPANS[self.span](self.span_cfg)


@dataclass(frozen=True)
class ModelSpec:
    """Fields made with ``option`` are the ``model`` config group; the rest the build fills in."""

    name: str = option(doc="the size the others start from, a model of conf/model (tiny | small | base); the "
                           "spec's name is derived: that model's name when every size is its, else the name "
                           "with the sizes that differ, as tiny(n_heads=2)")
    n_layers: int = option(ge=1, le=LAYERS_MAX)
    d_model: int = option(ge=1)
    n_heads: int = option(ge=1, doc="must divide d_model")
    d_ff: int = option(ge=1)
    vocab_size: int
    train_len: int
    pattern: str
    layers: tuple[LayerSpec, ...]
    attention: str = option("auto", choices=ATTENTION_IMPLS, doc="auto: flex on CUDA, sdpa on the CPU")
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads
