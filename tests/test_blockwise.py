"""The blockwise sliding-window and chunked paths equal the reference and never build T x T.

Mutation check: in suite/model/attention.py blockwise_attention, ks = max(0, qs - reach + 1) ->
max(0, qs - reach + 2) drops the oldest key of each block's window and makes
test_blockwise_equals_reference_values_and_gradients fail for swa."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from suite.model.attention import BLOCK, Context
from suite.model.lm import PosBenchLM
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent


def _model(scheme, span):
    spec = make_spec(f"position={scheme}", *span, "model.n_layers=2", "model.d_model=32", "model.n_heads=4")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    for p in model.schemes.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return model


@pytest.mark.parametrize("length", [3 * BLOCK, 3 * BLOCK + 37])  # a multiple of the block size, and not
@pytest.mark.parametrize("span", [["span=swa", "span.window=50"], ["span=chunked", "span.chunk=96"]])
@pytest.mark.parametrize("scheme", ["nope", "rope", "alibi", "t5"])
def test_blockwise_equals_reference_values_and_gradients(scheme, span, length):
    model = _model(scheme, span)
    tokens = torch.randint(9, model.spec.vocab_size, (1, length))
    grads, outs = {}, {}
    for impl in ("reference", "sdpa"):
        model.zero_grad()
        outs[impl] = model(tokens, Context(pos=torch.arange(length), impl=impl))
        outs[impl].logsumexp(-1).mean().backward()
        grads[impl] = [p.grad.clone() for p in model.parameters()]
    assert torch.allclose(outs["reference"], outs["sdpa"], atol=1e-5)
    for a, b in zip(grads["reference"], grads["sdpa"]):
        assert torch.allclose(a, b, atol=1e-5)


def test_the_sdpa_path_for_a_window_never_asks_for_a_t_by_t_mask(monkeypatch):
    model = _model("alibi", ["span=swa", "span.window=40"])
    shapes = []
    span = model.blocks[0].span
    original = type(span).allowed
    monkeypatch.setattr(type(span), "allowed", lambda self, pq, pk: shapes.append((len(pq), len(pk))) or original(self, pq, pk))
    T = 5 * BLOCK
    with torch.no_grad():
        model(torch.randint(9, 300, (1, T)), Context(pos=torch.arange(T), impl="sdpa"))
    assert shapes and max(q * k for q, k in shapes) <= BLOCK * (BLOCK + 40)


def _peak_growth_mb(*probes: tuple[str, int]) -> list[float]:
    """How far one forward raises the resident high-water mark, for each (span, length), in one
    fresh process (the mark is reset just before each forward, so nothing earlier, an earlier
    probe included, can hide that forward's peak)."""
    code = (
        "import torch\n"
        "from suite.bench.perf import peak_rss_mb, reset_peak_rss, rss_mb\n"
        "from tests.conftest import make_spec\n"
        "from suite.model.lm import PosBenchLM\n"
        f"for span, length in {list(probes)!r}:\n"
        "    spec = make_spec(f'span={span}', *(['span.window=64'] if span == 'swa' else []), 'position=alibi',\n"
        "                     'model.n_layers=1')\n"
        "    m = PosBenchLM(spec.model).eval()\n"
        "    tokens = torch.randint(0, 300, (1, length))\n"
        "    with torch.no_grad():\n"
        "        m(tokens[:, :256])\n"
        "        before = rss_mb(); reset_peak_rss()\n"
        "        m(tokens)\n"
        "    print(peak_rss_mb() - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return [float(line) for line in out.stdout.strip().splitlines()[-len(probes):]]


def test_a_16k_sliding_window_forward_stays_far_below_one_t_by_t_tensor():
    window, full = _peak_growth_mb(("swa", 16384), ("full", 4096))
    # one float32 T x T tensor at T = 16384 is 1024 MiB; the blockwise path needs a few tens
    assert window < 256
    # the probe sees a quadratic path: full-attention ALiBi at 4096 tokens holds its 4-head
    # 4096 x 4096 float32 mask (256 MiB)
    assert full > 256
