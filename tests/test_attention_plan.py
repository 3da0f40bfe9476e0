"""One plan decides a layer's attention path; the model runs it and the memory estimate counts it.

Mutation checks: in suite/model/attention_plan.py plan, ``length > 2 * BLOCK`` -> ``>=`` makes
test_a_bounded_span_goes_block_by_block_past_twice_the_block_size fail. In suite/config/resources.py
layer_plan, ``grad=training`` -> ``grad=False`` (a learned bias counted as a mask while it trains)
makes test_the_model_runs_the_path_its_estimate_plans fail; so do, in suite/model/attention.py
Attention._attend, ``grad=torch.is_grad_enabled()`` -> ``grad=False`` (the model running the
masked path for T5 while training) and dropping ``p.logits`` from its blockwise_attention call (a
learned bias's blocks on SDPA where the plan keeps their logits). In _attention_bytes, ``p.keys``
-> ``length`` (T x T counted block by block) makes
test_a_learned_bias_trains_block_by_block_in_the_estimate_too fail."""
import pytest
import torch

import suite.model.attention as attention
from suite.config.resources import FP32, _attention_bytes, layer_plan
from suite.model.attention_plan import BLOCK, PATHS, Plan, plan
from suite.model.lm import PosBenchLM
from tests.conftest import fast_or_exhaustive, make_spec

CPU = torch.device("cpu")
WINDOW = 16
SPANS = {"full": ["span=full"], "swa": ["span=swa", f"span.window={WINDOW}"],
         "chunked": ["span=chunked", "span.chunk=24"]}
TINY = ["model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.batch_size=2",
        f"train.seq_len={2 * BLOCK + 1}", "train.min_len=null", "eval.multiples=[1]", "task=niah_single"]
LENGTHS = (2 * BLOCK - 1, 2 * BLOCK, 2 * BLOCK + 1)  # just below, at and just past where blockwise begins

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _facts(**changed) -> dict:
    facts = dict(own_attention=False, needs_logits=False, bias="none", data_bias=False, reach=WINDOW, full=False,
                 length=2 * BLOCK, want_logits=False, grad=True, below_fp32=False)
    return {**facts, **changed}


def test_a_bounded_span_goes_block_by_block_past_twice_the_block_size():
    """A windowed layer on SDPA builds one (1, H, T, T) float mask up to 2 x BLOCK tokens and runs
    block by block from 2 x BLOCK + 1, where each block of BLOCK queries sees BLOCK + window - 1
    keys; the estimate counts the mask, then one block's scores. An unbounded span never goes
    block by block. Guards ``length > 2 * BLOCK`` in plan against ``>=``: the plan and the bytes
    at 2 x BLOCK change."""
    assert plan("sdpa", "cpu", **_facts()) == Plan("masked", 2 * BLOCK, shared=True)
    assert plan("sdpa", "cpu", **_facts(length=2 * BLOCK + 1)) == Plan("blockwise", BLOCK + WINDOW - 1, BLOCK)
    assert plan("sdpa", "cpu", **_facts(length=4 * BLOCK, reach=None, full=True)).path == "causal"
    spec = make_spec(*TINY, *SPANS["swa"], "model.attention=sdpa")
    B, H = 3, spec.model.n_heads
    for training in (True, False):
        at = _attention_bytes(spec, CPU, B, 2 * BLOCK, training)
        past = _attention_bytes(spec, CPU, B, 2 * BLOCK + 1, training)
        assert at == H * (2 * BLOCK) ** 2 * FP32  # the mask, (1, H, T, T)
        assert past == B * H * BLOCK * (BLOCK + WINDOW - 1) * FP32  # one block's (B, H, BLOCK, keys)


def test_a_learned_bias_trains_block_by_block_in_the_estimate_too():
    """T5 on a window past 2 x BLOCK trains through the reference path one block at a time: the
    estimate keeps logits and probabilities of B x H x T x (BLOCK + window - 1) per layer, not of
    T x T, and without gradients only one block's scores. Guards the estimate's ``p.keys`` (the
    keys a block sees) against the full length."""
    spec = make_spec(*TINY, "position=t5", *SPANS["swa"], "model.attention=sdpa")
    B, H, T, L = 3, spec.model.n_heads, 4 * BLOCK, spec.model.n_layers
    keys = BLOCK + WINDOW - 1
    assert [layer_plan(spec, layer, CPU, T, True) for layer in spec.model.layers] == \
        [Plan("blockwise", keys, BLOCK, logits=True)] * L
    block = B * H * BLOCK * keys * FP32
    assert _attention_bytes(spec, CPU, B, T, True) == L * 2 * B * H * T * keys * FP32 + block
    assert _attention_bytes(spec, CPU, B, T, False) == block


def test_an_unknown_implementation_is_refused_naming_the_valid_ones():
    """Guards the plan's last check: a misspelt implementation is an error, not a silent path."""
    with pytest.raises(ValueError, match="unknown attention implementation 'sdp'; valid: auto, reference, sdpa, flex"):
        plan("sdp", "cpu", **_facts(reach=None, full=True))


def _record(monkeypatch, ran: list, inner: list, model: PosBenchLM) -> list:
    """Patch the path functions attention calls so each layer's first (outermost) call records
    its path in ``ran``, and the calls a block makes inside the blockwise path theirs in ``inner``;
    returns the plans the model computed, in layer order."""
    depth, planned = [0], []

    def wrap(function, path):
        def recorded(*args, **kwargs):
            name = path(kwargs) if callable(path) else path
            if depth[0] == 0:
                ran.append(name)
            elif depth[0] == 1 and ran[-1] == "blockwise":
                inner.append(name)
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
        return recorded

    for name, path in (("reference_attention", "reference"), ("blockwise_attention", "blockwise"),
                       ("flex_attention_path", "flex"),
                       ("sdpa", lambda kwargs: "causal" if kwargs.get("is_causal") else "masked")):
        monkeypatch.setattr(attention, name, wrap(getattr(attention, name), path))
    for cls in {type(s) for s in model.schemes if s.own_attention}:
        monkeypatch.setattr(cls, "attend", wrap(cls.attend, "own"))
    monkeypatch.setattr(attention, "plan", lambda *a, **k: planned.append(plan(*a, **k)) or planned[-1])
    return planned


CASES = [(scheme, span, impl) for scheme in ("nope", "alibi", "t5", "rope", "fox", "cope", "stickbreaking")
         for span in SPANS for impl in ("reference", "sdpa")]
# make test: every scheme on both implementations, the span turning with the case; the rest exhaustive
FAST = {case for k, case in enumerate(CASES) if case[1] == list(SPANS)[(k // 6) % 3]}


@pytest.mark.parametrize("scheme,span,impl", fast_or_exhaustive(CASES, FAST), ids=["-".join(c) for c in CASES])
def test_the_model_runs_the_path_its_estimate_plans(monkeypatch, scheme, span, impl):
    """Each layer runs the path the memory estimate's plan names (``layer_plan``, from the spec),
    and the plan the model computes from its tensors is that plan, at lengths around 2 x BLOCK,
    training (gradients on) and evaluating (off). Guards the estimate reading other facts than the
    model (gradients, the span's reach, the bias) and the model running another path than its plan."""
    spec = make_spec(*TINY, f"position={scheme}", *SPANS[span], f"model.attention={impl}")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    ran: list[str] = []
    inner: list[str] = []
    planned = _record(monkeypatch, ran, inner, model)
    for length in LENGTHS:
        tokens = torch.randint(9, spec.model.vocab_size, (1, length))
        for training in (True, False):
            ran.clear(), inner.clear(), planned.clear()
            with torch.set_grad_enabled(training):
                model.train(training)(tokens)
            expected = [layer_plan(spec, layer, CPU, length, training) for layer in spec.model.layers]
            assert ran == [p.path for p in expected], (length, training)
            assert planned == expected, (length, training)
            # block by block, the reference path exactly where the plan keeps logits (a learned bias trains)
            blocks = {"reference" if p.logits else "masked" for p in expected if p.path == "blockwise"}
            assert set(inner) == blocks and set(ran) <= set(PATHS), (length, training)
