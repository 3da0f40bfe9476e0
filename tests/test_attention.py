"""Spans hide what lies outside them, and every attention path equals the reference.

Mutation check: in suite/model/span/swa.py SlidingWindow.allowed, d < window -> d <= window makes
test_sliding_window_hides_keys_outside_the_window fail; in suite/model/attention.py reference_attention,
/ math.sqrt(q.shape[-1]) -> / q.shape[-1] makes test_every_path_equals_the_reference fail for
every scheme, the ``rope drop_low`` case included; SlidingWindow.kind "window" -> "chunk" makes
test_each_span_declares_its_kind_and_its_size_from_its_own_config fail; in suite/model/span/base.py
Span.__init_subclass__, skipping the KINDS check makes
test_a_span_of_an_unknown_kind_is_refused_naming_the_valid_kinds fail; a host read
(``int(pos.max().item())``) in suite/model/position/kerple.py KERPLE.bias makes
test_the_forward_compiles_as_one_graph fail for kerple-swa-blockwise and kerple-chunked-sdpa."""
import warnings

import pytest
import torch

from suite.model.attention import BLOCK, Context
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES
from suite.model.span import KINDS, SPANS, Span
from tests.conftest import fast_or_exhaustive, make_spec

SPAN_OVERRIDES = {"full": ["span=full"], "swa": ["span=swa", "span.window=5"], "chunked": ["span=chunked", "span.chunk=6"]}


def _model(*overrides, seed=0):
    spec = make_spec("model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64",
                     "train.seq_len=32", *overrides)
    torch.manual_seed(seed)
    model = PosBenchLM(spec.model)
    for scheme in model.schemes:  # give learned tables non-zero values so they matter
        for p in scheme.parameters():
            torch.nn.init.normal_(p, std=0.5)
    return model.eval()


def _run(model, tokens, impl):
    return model(tokens, Context(pos=torch.arange(tokens.shape[1]), impl=impl))


# every scheme at its defaults, and options that change a scheme's q/k transform
SCHEME_OVERRIDES = {name: [f"position={name}"] for name in sorted(SCHEMES)}
SCHEME_OVERRIDES["rope drop_low"] = ["position=rope", "position.drop_low=0.5"]


# make test: every scheme on one span (scheme k on span k mod 3), and the two classic biases, ALiBi
# and T5, on every span (a bias meets each mask); the rest of the grid under make test-exhaustive
REFERENCE_CASES = [(scheme, span) for scheme in SCHEME_OVERRIDES for span in SPAN_OVERRIDES]
FAST_REFERENCE = {(scheme, list(SPAN_OVERRIDES)[k % 3]) for k, scheme in enumerate(SCHEME_OVERRIDES)} | \
    {(scheme, span) for scheme in ("alibi", "t5") for span in SPAN_OVERRIDES}


@pytest.mark.parametrize("scheme,span", fast_or_exhaustive(REFERENCE_CASES, FAST_REFERENCE),
                         ids=["-".join(case) for case in REFERENCE_CASES])
def test_every_path_equals_the_reference(scheme, span):
    model = _model(*SCHEME_OVERRIDES[scheme], *SPAN_OVERRIDES[span])
    tokens = torch.randint(0, model.spec.vocab_size, (2, 23))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _run(model, tokens, "reference")
        sdpa = _run(model, tokens, "sdpa")
        flex = _run(model, tokens, "flex")  # eager FlexAttention on the CPU (forward only there)
    assert torch.allclose(ref, sdpa, atol=1e-5), (scheme, span)
    assert torch.allclose(ref, flex, atol=1e-4), (scheme, span)


@pytest.mark.parametrize("scheme", ["alibi", "t5", "rope"])
def test_sdpa_training_gradients_equal_the_reference(scheme):
    model = _model(f"position={scheme}", "span=swa", "span.window=7").train()
    tokens = torch.randint(0, model.spec.vocab_size, (2, 20))
    grads = {}
    for impl in ("reference", "sdpa"):
        model.zero_grad()
        _run(model, tokens, impl).logsumexp(-1).sum().backward()
        grads[impl] = [p.grad.clone() for p in model.parameters()]
    for a, b in zip(grads["reference"], grads["sdpa"]):
        assert torch.allclose(a, b, atol=1e-5)


def _output_change(model, tokens, changed_pos, query):
    other = tokens.clone()
    other[0, changed_pos] = (tokens[0, changed_pos] + 1) % model.spec.vocab_size
    a, b = model(tokens), model(other)
    return (a[0, query] - b[0, query]).abs().max().item()


@pytest.mark.parametrize("scheme", ["nope", "rope", "alibi"])
def test_sliding_window_hides_keys_outside_the_window(scheme):
    window, query = 4, 15
    model = _model(f"position={scheme}", "span=swa", f"span.window={window}", "model.n_layers=1")
    tokens = torch.randint(9, model.spec.vocab_size, (1, 20))
    assert _output_change(model, tokens, query - window, query) == 0.0  # just outside
    assert _output_change(model, tokens, 2, query) == 0.0  # far outside
    assert _output_change(model, tokens, query - window + 1, query) > 1e-6  # oldest visible key


@pytest.mark.parametrize("scheme", ["nope", "rope", "t5"])
def test_chunks_hide_earlier_chunks(scheme):
    chunk = 6
    model = _model(f"position={scheme}", "span=chunked", f"span.chunk={chunk}", "model.n_layers=1")
    tokens = torch.randint(9, model.spec.vocab_size, (1, 20))
    query = 14  # chunk [12, 18)
    assert _output_change(model, tokens, 11, query) == 0.0  # last token of the previous chunk
    assert _output_change(model, tokens, 12, query) > 1e-6  # first token of its own chunk
    assert _output_change(model, tokens, 16, query) == 0.0  # the future is causal-masked


@pytest.mark.parametrize("name,params,kind,size,label", [
    ("full", {}, None, None, ""),
    ("swa", {"window": 7}, "window", 7, "w=7"),
    ("chunked", {"chunk": 5}, "chunk", 5, "c=5"),
])
def test_each_span_declares_its_kind_and_its_size_from_its_own_config(name, params, kind, size, label):
    span = SPANS[name](SPANS[name].Config(**params))
    assert (span.kind, span.size, span.label) == (kind, size, label)


def test_every_span_is_in_the_facts_table_and_has_a_known_kind():
    assert set(SPANS) == {"full", "swa", "chunked"}  # a new span: add it to the table above
    for cls in SPANS.values():
        assert cls.kind is None or cls.kind in KINDS


def test_a_span_of_an_unknown_kind_is_refused_naming_the_valid_kinds():
    with pytest.raises(TypeError, match="kind='dilation'; valid: window, chunk or None"):
        type("Dilated", (Span,), {"name": "dilated", "kind": "dilation"})


def test_attention_logits_are_per_layer_with_masked_minus_inf():
    model = _model("position=alibi", "span=swa", "span.window=3")
    tokens = torch.randint(0, model.spec.vocab_size, (2, 10))
    logits = model.attention_logits(tokens)
    assert len(logits) == 2 and logits[0].shape == (2, 4, 10, 10)
    i, j = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    visible = (j <= i) & (i - j < 3)
    assert torch.all(torch.isinf(logits[0][..., ~visible]))
    assert torch.all(torch.isfinite(logits[0][..., visible]))


def test_rope_attention_logits_are_shift_invariant_in_a_model():
    """RoPE in place: the logits of a token pair depend on its offset, not on where it sits."""
    model = _model("position=rope", "model.n_layers=1")
    seq = torch.randint(9, model.spec.vocab_size, (1, 6))
    pad = torch.randint(9, model.spec.vocab_size, (1, 5))
    # The same 6 tokens at the start, and after 5 other tokens; compare their first-layer logits.
    a = model.attention_logits(seq)[0][0, :, :, :]
    b = model.attention_logits(torch.cat([pad, seq], dim=1))[0][0, :, 5:, 5:]
    # Layer-1 logits are functions of the two token embeddings and their offset only.
    assert torch.allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("scheme", ["alibi", "t5"])
def test_one_bias_scheme_on_layers_with_different_spans_equals_the_reference(scheme):
    # the fast path turns a fixed bias into a mask in place; a layer with another span must still
    # see the bias, not the first layer's mask
    layers = "pattern.layers=[{span: swa}, {span: full}, {span: chunked}, {span: full}]"
    model = _model(f"position={scheme}", "model.n_layers=4", layers, "+pattern.window=4", "+pattern.chunk=6")
    tokens = torch.randint(0, model.spec.vocab_size, (2, 23))
    with torch.no_grad():
        assert torch.allclose(_run(model, tokens, "reference"), _run(model, tokens, "sdpa"), atol=1e-5)


# (path, length): sdpa at a short length, the blockwise path (sdpa past 2 x BLOCK tokens for a
# bounded span), FlexAttention
COMPILED_PATHS = [("sdpa", 23), ("sdpa", 2 * BLOCK + 13), ("flex", 23)]


def _traced_without_host_reads(gm, example_inputs):
    """A compile backend: the aot_eager backend (traces like inductor without a C++ compiler),
    after checking that the graph reads no tensor value back to the host (a sync per step)."""
    reads = [n for n in gm.graph.nodes if (n.op == "call_method" and n.target in ("item", "tolist", "__int__"))
             or n.target is torch.ops.aten._local_scalar_dense.default]
    assert not reads, f"the graph reads tensor values to the host: {reads}"
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


# A graph break comes from a scheme on a path or from a span on a path, so the cases cover every
# (scheme, span), (scheme, path) and (span, path) pair: scheme k takes rotation k mod 3 of the
# three (span, path) pairings below, and the blockwise path always gets a bounded span in two of
# them. The full product (99 compiles) adds no pair these do not hold.
_PAIRINGS = [
    [("full", "flex"), ("swa", "blockwise"), ("chunked", "sdpa")],
    [("full", "sdpa"), ("swa", "flex"), ("chunked", "blockwise")],
    [("full", "blockwise"), ("swa", "sdpa"), ("chunked", "flex")],
]
_PATHS = dict(zip(["sdpa", "blockwise", "flex"], COMPILED_PATHS))
COMPILE_CASES = [(scheme, span, path) for k, scheme in enumerate(sorted(SCHEMES)) for span, path in _PAIRINGS[k % 3]]


def test_the_compile_cases_cover_every_pair():
    assert {(a, b) for a, b, _ in COMPILE_CASES} == {(a, b) for a in SCHEMES for b in SPAN_OVERRIDES}
    assert {(a, c) for a, _, c in COMPILE_CASES} == {(a, c) for a in SCHEMES for c in _PATHS}
    assert {(b, c) for _, b, c in COMPILE_CASES} == {(b, c) for b in SPAN_OVERRIDES for c in _PATHS}


# make test: RoPE (a rotation) and T5 (a learned bias) on every path, and ALiBi (a fixed bias) on the
# blockwise path, where a host read in a bias shows; NoPE, sinusoidal and learned add nothing inside
# attention. Every other pair, PaTH's 45 s compile among them, runs under make test-exhaustive.
FAST_COMPILE = {case for case in COMPILE_CASES
                if (case[2] == "blockwise" and case[0] == "alibi") or case[0] in ("rope", "t5")}


@pytest.mark.parametrize("scheme,span,path", fast_or_exhaustive(COMPILE_CASES, FAST_COMPILE),
                         ids=["-".join(case) for case in COMPILE_CASES])
def test_the_forward_compiles_as_one_graph(scheme, span, path):
    # the GPU recipe compiles the training step: no host sync or unsupported construct may split it
    impl, length = _PATHS[path]
    torch._dynamo.reset()
    # one layer: a graph break comes from what a layer does, and every layer does the same
    model = _model(f"position={scheme}", *SPAN_OVERRIDES[span], f"train.seq_len={length}", "model.n_layers=1").train()
    tokens = torch.randint(0, model.spec.vocab_size, (2, length))
    # positions enter as an input, so a read of their values (a host sync) cannot be constant-folded
    step = torch.compile(lambda t, pos: model(t, Context(pos=pos, impl=impl)),
                         backend=_traced_without_host_reads, fullgraph=True)
    # a scheme that draws positions in training (randomized) draws the same ones again once its
    # buffers are restored
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    # FlexAttention has no backward on the CPU, so its graph is traced without gradients
    with warnings.catch_warnings(), torch.set_grad_enabled(impl != "flex"):
        warnings.simplefilter("ignore")
        compiled = step(tokens, torch.arange(length))
        model.load_state_dict(buffers, strict=False)
        assert torch.allclose(compiled, _run(model, tokens, "reference"), atol=1e-4)
