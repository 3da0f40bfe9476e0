"""One forward pass: KV-cache decoding is the model's own forward with a cache, so lm-eval holds no
model code, and a scheme or span added to the model decodes with a cache without an lm-eval edit.

Mutation check: in suite/lmeval/kv_cache.py prefill, ``KVCache(model.spec.n_layers)`` ->
``KVCache(len(model.blocks))``, or ``from suite.model.attention import reference_attention`` added
there, makes test_lmeval_reaches_no_scheme_span_or_layer fail; in suite/model/attention.py
Attention.forward, dropping ``x = cache.append_input(x)`` (a step's signal reads only the new
tokens) makes test_a_scheme_and_span_defined_outside_the_suite_decode_with_a_cache fail; dropping
the check in Context.__post_init__ makes test_cached_keys_run_only_on_the_reference_path fail, and
the ``ctx is not None`` check in PosBenchLM.forward test_a_cached_forward_builds_its_own_context."""
import ast
import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from suite.lmeval.generation import Generation, decode_greedy
from suite.lmeval.kv_cache import extend, prefill
from suite.model.attention import Context
from suite.model.cache import KVCache
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES, PositionConfig, PositionScheme
from suite.model.span import SPANS, Span, SpanConfig
from suite.model.spec import LayerSpec
from tests.conftest import make_spec

ROOT = Path(__file__).resolve().parent.parent
LMEVAL = sorted((ROOT / "suite" / "lmeval").rglob("*.py"))
# what lm-eval may take from the model package: the model, the cache, and the block size of a prefill
MODEL_NAMES = {"PosBenchLM", "KVCache", "length_invariant", "BLOCK"}
# the ways from a model to its layers, schemes and spans, and the hooks the forward calls on them
LAYER_ACCESS = {"schemes", "blocks", "attn", "qkv", "span", "signal"}
HOOKS = {"embed", "qk", "bias", "temperature", "logit_term", "signal_bias", "attend", "score_mod", "allowed",
         "mask_mod", "reach"}

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_hook_list_names_real_hooks():
    assert HOOKS <= set(vars(PositionScheme)) | set(vars(Span))


def test_lmeval_reaches_no_scheme_span_or_layer():
    """lm-eval imports the model and its cache only, reads no layer, scheme, span or hook, and
    names no scheme or span: adding one to the model needs no edit under suite/lmeval."""
    names = set(SCHEMES) | set(SPANS)
    assert len(LMEVAL) >= 5
    for path in LMEVAL:
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("suite.model"):
                assert {alias.name for alias in node.names} <= MODEL_NAMES, (where, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("suite.model") for a in node.names), where
            elif isinstance(node, ast.Attribute):
                assert node.attr not in LAYER_ACCESS | HOOKS, (where, node.lineno, node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names, (where, node.lineno, node.value)


class Gate(nn.Module):
    """A per-token, per-head scalar read from the layer's input and the token before it."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.proj = nn.Linear(2 * d_model, n_heads)

    def forward(self, x):  # (B, T, C) -> (B, H, T, 1)
        before = torch.cat((torch.zeros_like(x[:, :1]), x[:, :-1]), dim=1)
        return torch.tanh(self.proj(torch.cat((x, before), dim=-1))).transpose(1, 2).unsqueeze(-1)


class EveryHook(PositionScheme):
    """A scheme the suite does not ship, with every hook a cached step must reproduce: an
    embedding, a rotation-like q/k transform, a distance bias, a temperature and a
    data-dependent separable bias whose query term sums over every earlier token."""

    name = "every_hook"

    def embed(self, x, pos):  # (B, T, C)
        return x + torch.sin(pos[:, None] * 0.37 + torch.arange(x.shape[-1]) * 0.11)

    def qk(self, q, k, pos_q, pos_k):
        return q * torch.cos(pos_q * 0.2)[:, None], k * (1 + 0.1 * torch.sin(pos_k * 0.5))[:, None]

    def bias(self, pos_q, pos_k):  # (H, Tq, Tk)
        d = (pos_q[:, None] - pos_k[None, :]).float()
        return -0.3 * d.abs().sqrt() * torch.arange(1, self.dims.n_heads + 1)[:, None, None]

    def temperature(self, pos_q):
        return 1 + 0.05 * torch.log1p(pos_q.float())[:, None]

    def signal(self):
        return Gate(self.dims.d_model, self.dims.n_heads)

    def signal_bias(self, signal):
        c = signal[..., 0].cumsum(-1)  # (B, H, T)
        return c, -0.5 * c


class Strided(Span):
    """A span the suite does not ship: the last two keys, then every third one before them."""

    name = "strided"

    def allowed(self, pos_q, pos_k):
        d = pos_q[:, None] - pos_k[None, :]
        return (d >= 0) & ((d < 2) | (d % 3 == 0))


def test_a_scheme_and_span_defined_outside_the_suite_decode_with_a_cache(monkeypatch):
    monkeypatch.setitem(SCHEMES, EveryHook.name, EveryHook)
    monkeypatch.setitem(SPANS, Strided.name, Strided)
    spec = make_spec("model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=16").model
    layer = LayerSpec(EveryHook.name, PositionConfig(), Strided.name, SpanConfig())
    torch.manual_seed(0)
    model = PosBenchLM(dataclasses.replace(spec, layers=(layer, layer))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    tokens = torch.randint(3, 300, (2, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)  # (2, 30, V)
    logits, cache = prefill(model, tokens[:, :9], block=4)
    steps = [logits] + [extend(model, tokens[:, t : t + 1], cache)[:, -1] for t in range(9, 30)]
    assert cache.length == 30
    torch.testing.assert_close(torch.stack(steps, dim=1), full[:, 8:], rtol=1e-4, atol=1e-4)
    job = Generation(tokens[0, :10].tolist(), 12, [])
    decode_greedy(model, [job], batch_size=1)
    expected, seq = [], tokens[0, :10].tolist()
    with torch.no_grad():
        for _ in range(12):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
            expected.append(seq[-1])
    assert job.generated == expected


def test_cached_keys_run_only_on_the_reference_path():
    """The fused paths take as many keys as queries; a context with cached keys is refused on them."""
    pos_k = torch.arange(5)
    assert Context(pos=pos_k[3:], pos_k=pos_k, impl="reference").key_pos is pos_k
    plain = Context(pos=pos_k)
    assert plain.key_pos is plain.pos
    for impl in ("auto", "sdpa", "flex"):
        with pytest.raises(ValueError, match="reference"):
            Context(pos=pos_k[3:], pos_k=pos_k, impl=impl)


def test_a_cached_forward_builds_its_own_context():
    model = PosBenchLM(make_spec("model.n_layers=1", "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
                                 "train.seq_len=8").model)
    tokens = torch.randint(3, 300, (1, 4))
    with pytest.raises(ValueError, match="KV cache"):
        model(tokens, Context(pos=torch.arange(4)), cache=KVCache(1))
