"""CoPE (Golovneva et al. 2024) against the paper's equations, worked by hand and by explicit loops.

Mutation check: each one-line change below makes the named test fail. In suite/model/position/cope.py:
dropping ``/ math.sqrt(q.shape[-1])`` from the term, gates off sigmoid(2 * logits) (the unscaled
q.k at head_dim 4), or the forward ``gates.cumsum(-1)`` for the reverse sum:
test_three_tokens_worked_by_hand; clamp(max=npos_max - 1) -> clamp(max=npos_max):
test_counts_past_the_table_take_its_last_column; ``frac = (p - floor).detach()``:
test_term_and_gradients_equal_the_papers_loops; ``self.table.detach()`` in the term:
test_training_reaches_the_table; a randn table at init: test_an_untrained_table_attends_as_nope;
``npos_max < 2`` -> ``< 1`` in CoPEConfig: test_bad_npos_max_names_the_value_and_range; the default
table ``dims.train_len + 1`` -> ``2 * dims.train_len`` (or the former fixed 64):
test_counts_beyond_the_training_length_read_columns_training_reaches.
In suite/model/attention.py: calling ``logit_term`` before the ``masked_fill`` in reference_attention:
test_masked_keys_have_no_gate_and_add_nothing_to_the_count; dropping ``scheme.logit_term`` from
Attention._attend's reference call: test_a_cope_layer_in_a_pattern_records_logits_with_its_term;
the ``needs_logits`` routing made ``if False``: tests/test_attention.py
test_every_path_equals_the_reference[cope-full]. (KV-cache decoding runs that same reference call.)"""
import math

import pytest
import torch

from suite.model.attention import reference_attention
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES, Dims
from suite.model.span.swa import SlidingWindow
from tests.conftest import make_spec

COPE = SCHEMES["cope"]
INF = float("inf")


def _scheme(npos_max=4, head_dim=4):
    return COPE(COPE.Config(npos_max=npos_max), Dims(head_dim, 1, head_dim, 32))


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _masked_logits(q, k, allowed):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, -INF)


def cope_by_loops(q, logits, table):
    """The paper's equations one pair at a time: q (T, D), logits (T, T) scaled and masked,
    table (D, npos). Returns the term (T, T), 0 where masked."""
    T, D, npos = q.shape[0], table.shape[0], table.shape[1]
    term = torch.zeros(T, T, dtype=q.dtype)
    for i in range(T):
        for j in range(T):
            if logits[i, j] == -INF:
                continue
            p = sum(torch.sigmoid(logits[i, t]) for t in range(j, i + 1) if logits[i, t] > -INF)
            p = torch.clamp(p, max=npos - 1)
            lo, hi = math.floor(p.item()), math.ceil(p.item())
            e = table[:, lo] * (1 - (p - lo)) + table[:, hi] * (p - lo)
            term[i, j] = q[i] @ e / math.sqrt(D)
    return term


def test_three_tokens_worked_by_hand():
    """Head dim 4 (sqrt 2). Query 2 = (2,0,0,0) against keys (ln 3,0,0,0), 0, (-ln 3,0,0,0):
    scaled logits ln 3, 0, -ln 3; gates 3/4, 1/2, 1/4; positions 1.5, 0.75, 0.25. Column n of
    the table's first row holds n^2, so q.e[n] / 2 = n^2 and the interpolated terms are
    (1 + 4) / 2 = 2.5, 0.75 * 1 = 0.75, 0.25 * 1 = 0.25. Query 1 = (0,2,0,0) sees logits 0, 0,
    gates 1/2, positions 1, 0.5; the second row holds n, so its terms are 1, 0.5. Query 0 = 0."""
    ln3 = math.log(3)
    q = torch.tensor([[0.0, 0, 0, 0], [0, 2, 0, 0], [2, 0, 0, 0]]).view(1, 1, 3, 4)
    k = torch.tensor([[ln3, 0, 0, 0], [0, 0, 0, 0], [-ln3, 0, 0, 0]]).view(1, 1, 3, 4)
    v = torch.eye(4)[:3].view(1, 1, 3, 4)  # the output row is the attention weights
    scheme = _scheme(npos_max=4)
    with torch.no_grad():
        scheme.table.zero_()
        scheme.table[0] = torch.tensor([0.0, 1, 4, 9])
        scheme.table[1] = torch.tensor([0.0, 1, 2, 3])
    logits = _masked_logits(q, k, _causal(3))
    p = scheme.positions(logits)[0, 0]
    assert torch.allclose(p[2], torch.tensor([1.5, 0.75, 0.25])) and torch.allclose(p[1, :2], torch.tensor([1.0, 0.5]))
    term = scheme.logit_term(q, logits)[0, 0]
    assert torch.allclose(term[2], torch.tensor([2.5, 0.75, 0.25])) and torch.allclose(term[1, :2], torch.tensor([1.0, 0.5]))
    out, with_term = reference_attention(q, k, v, None, _causal(3), scheme.logit_term)
    row2 = torch.softmax(torch.tensor([ln3 + 2.5, 0.75, -ln3 + 0.25]), 0)
    row1 = torch.softmax(torch.tensor([1.0, 0.5]), 0)
    assert torch.allclose(out[0, 0, 2, :3], row2) and torch.allclose(out[0, 0, 1, :2], row1)
    assert torch.allclose(out[0, 0, 0], torch.tensor([1.0, 0, 0, 0]))
    assert torch.isinf(with_term[0, 0, 0, 1:]).all() and with_term[0, 0, 2, 0].item() == pytest.approx(ln3 + 2.5)


def test_masked_keys_have_no_gate_and_add_nothing_to_the_count():
    """All logits 0 (gates 1/2) under a sliding window of 2: every visible pair counts only the
    keys from itself to the query, never the future ones: positions 1 (older key), 1/2 (self)."""
    T, D = 4, 4
    q = torch.randn(1, 1, T, D, generator=torch.Generator().manual_seed(0))
    k, v = torch.zeros(1, 1, T, D), torch.eye(T).view(1, 1, T, D)  # the output row is the attention weights
    window = SlidingWindow(SlidingWindow.Config(window=2)).allowed(torch.arange(T), torch.arange(T))
    scheme = _scheme(npos_max=4)
    torch.nn.init.normal_(scheme.table)
    seen = []
    out, _ = reference_attention(q, k, v, None, window, lambda q_, a, b: seen.append(a) or scheme.logit_term(q_, a, b))
    p = scheme.positions(seen[0])[0, 0]
    assert torch.equal(torch.sigmoid(seen[0])[0, 0][~window], torch.zeros(int((~window).sum())))
    for i in range(1, T):
        assert p[i, i - 1].item() == 1.0 and p[i, i].item() == 0.5
    e = scheme.table.detach()
    for i in range(1, T):  # the term and the output, from the table columns 1 and 1/2 way to 1
        terms = torch.stack([q[0, 0, i] @ e[:, 1], q[0, 0, i] @ (e[:, 0] + e[:, 1]) / 2]) / 2
        assert torch.allclose(out[0, 0, i, i - 1 : i + 1], torch.softmax(terms, 0), atol=1e-6)


def test_counts_past_the_table_take_its_last_column():
    """Gates near 1 over 12 keys count up to 12; with npos_max 3 every count past 2 reads column 2."""
    T, D = 12, 4
    q = torch.full((1, 1, T, D), 10.0)
    k = torch.ones(1, 1, T, D)
    scheme = _scheme(npos_max=3)
    torch.nn.init.normal_(scheme.table)
    logits = _masked_logits(q, k, _causal(T))
    p = scheme.positions(logits)[0, 0]
    assert p.max().item() == 2.0 and p[T - 1, 0].item() == 2.0 and p[T - 1, T - 1].item() == 1.0
    term = scheme.logit_term(q, logits)[0, 0]
    assert torch.allclose(term[T - 1, 0], q[0, 0, 0] @ scheme.table[:, 2].detach() / 2)
    assert scheme.max_length() is None  # any length runs


def test_counts_beyond_the_training_length_read_columns_training_reaches():
    """The reference's table: training length + 1 columns. Gates near 1 make the largest counts a
    sequence can: at L = 32 they reach column 32, and every column an 8x sequence reads
    (its counts capped at 32) is one that a training-length backward gave a gradient."""
    D, L = 4, 32
    scheme = COPE(COPE.Config(), Dims(D, 1, D, L))
    assert tuple(scheme.table.shape) == (D, L + 1)

    def gated(T):
        q, k = torch.full((1, 1, T, D), 10.0), torch.ones(1, 1, T, D)
        return q, _masked_logits(q, k, _causal(T))

    q, logits = gated(L)
    scheme.logit_term(q, logits)[0, 0][_causal(L)].sum().backward()
    trained = set((scheme.table.grad.abs().sum(0) > 0).nonzero().flatten().tolist())
    p = scheme.positions(gated(8 * L)[1])[0, 0][_causal(8 * L)]
    read = set(p.floor().long().tolist()) | set(p.ceil().long().tolist())
    assert max(read) == L and read <= trained


def test_bad_npos_max_names_the_value_and_range():
    with pytest.raises(ValueError, match=r"cope.npos_max=1: must be >= 2"):
        COPE.Config(npos_max=1)


def test_term_and_gradients_equal_the_papers_loops():
    """Random q, k and table against ``cope_by_loops``, values and the gradients of both the
    table and the logits (through the gates and the interpolation weight)."""
    gen = torch.Generator().manual_seed(1)
    T, D = 7, 4
    q, k = torch.randn(T, D, generator=gen), torch.randn(T, D, generator=gen)
    table = torch.randn(D, 5, generator=gen)
    scheme = _scheme(npos_max=5)
    with torch.no_grad():
        scheme.table.copy_(table)
    table.requires_grad_(True)
    grads = {}
    for name, fn in (("loops", lambda qq, a: cope_by_loops(qq, a, table)),
                     ("scheme", lambda qq, a: scheme.logit_term(qq.view(1, 1, T, D), a.view(1, 1, T, T))[0, 0])):
        logits = _masked_logits(q, k, _causal(T)).requires_grad_(True)
        term = fn(q, logits).masked_fill(~_causal(T), 0.0)
        (term * torch.randn(T, T, generator=torch.Generator().manual_seed(2))).sum().backward()
        param = table if name == "loops" else scheme.table
        grads[name] = (term.detach(), logits.grad.masked_fill(~_causal(T), 0.0), param.grad.clone())
    for a, b in zip(grads["loops"], grads["scheme"]):
        assert torch.allclose(a, b, atol=1e-5)
    assert grads["scheme"][2].abs().sum() > 0 and grads["scheme"][1].abs().sum() > 0


def _model(*overrides, seed=0):
    spec = make_spec("model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64",
                     "train.seq_len=32", *overrides)
    torch.manual_seed(seed)
    return PosBenchLM(spec.model)


def test_an_untrained_table_attends_as_nope():
    """The reference initializes the table to zeros: the term is 0 until it trains."""
    tokens = torch.randint(0, 300, (2, 17))
    cope, nope = _model("position=cope", "model.attention=reference"), _model("position=nope", "model.attention=reference")
    assert torch.equal(cope.schemes[0].table, torch.zeros_like(cope.schemes[0].table))
    with torch.no_grad():
        assert torch.equal(cope(tokens), nope(tokens))


def test_training_reaches_the_table():
    model = _model("position=cope", "span=swa", "span.window=6").train()
    model(torch.randint(0, 300, (2, 20))).logsumexp(-1).sum().backward()
    assert model.schemes[0].table.grad.abs().sum() > 0


def test_a_cope_layer_in_a_pattern_records_logits_with_its_term():
    """CoPE as one layer kind of a pattern (sliding window), RoPE on the other: the first layer's
    recorded logits are its scaled, masked q.k plus the term the loops give."""
    layers = "pattern.layers=[{position: cope, span: swa}, {position: rope}]"
    model = _model("position=rope", layers, "+pattern.window=4")
    assert [type(s).name for s in model.schemes] == ["cope", "rope"]
    torch.nn.init.normal_(model.schemes[0].table, std=0.5)
    tokens = torch.randint(0, 300, (1, 9))
    recorded = model.attention_logits(tokens)[0][0]  # (H, T, T)
    with torch.no_grad():
        h = model.blocks[0].attn_norm(model.embed(tokens))
        q, k, _ = model.blocks[0].attn.qkv(h).view(1, 9, 3, 4, 8).permute(2, 0, 3, 1, 4)
        allowed = model.blocks[0].span.allowed(torch.arange(9), torch.arange(9))
        for head in range(4):
            logits = _masked_logits(q[0, head], k[0, head], allowed)
            want = logits + cope_by_loops(q[0, head], logits, model.schemes[0].table)
            assert torch.allclose(recorded[head], want, atol=1e-5)
