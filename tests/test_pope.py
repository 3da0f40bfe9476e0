"""PoPE (Gopalakrishnan et al. 2025; x-transformers' ``PolarEmbedding`` / ``apply_polar_pos_emb``)
against a naive float64 loop over its equation, for every query/key pair:

    logit(i, j) = d^-1/2 sum_c softplus(q_ic) softplus(k_jc) cos((p_i - p_j) theta_c - delta_c),
    theta_c = theta^(-c/d), c < d, delta = the learned key phase clamped to [-2 pi, 0].

Every span, attention path, the KV cache and torch.compile run through the generic tests
(tests/test_attention.py, tests/test_lmeval_kv_cache.py, tests/test_randomized.py; ``-k pope``).

Mutation check (each made alone in suite/model/position/pope.py; the named tests fail):
* drop the softplus (``F.softplus(q.to(work))`` -> ``q.to(work)``, likewise for k):
  test_logits_are_the_papers_sum_for_every_pair, test_gradients_are_the_naive_loops;
* drop the phase (``+ delta`` removed from the key angles): the same two and
  test_the_phase_is_read_clamped_to_its_range;
* wrong sign of the phase (``+ delta`` -> ``- delta``): test_logits_are_the_papers_sum_for_every_pair;
* wrong sign of the query's angle (``self._angles(pos_q, work)`` -> ``-self._angles(pos_q, work)``,
  so the sum reads cos((p_i + p_j) theta_c + delta_c)): test_logits_depend_on_the_offset_only and
  test_logits_are_the_papers_sum_for_every_pair;
* no clamp (``key_phase`` returns the raw phase): test_the_phase_is_read_clamped_to_its_range,
  test_logits_are_the_papers_sum_for_every_pair;
* a straight-through clamp (``p + (p.clamp(...) - p).detach()``, the gradient of the raw phase past
  the ends): test_the_phase_is_read_clamped_to_its_range;
* wrong scale (``* Q_SCALE`` dropped, logits over sqrt(2d)): test_logits_are_the_papers_sum_for_every_pair;
* RoPE's frequency spacing (theta^(-2c/d): ``torch.arange(head_dim, ...)`` -> ``2 * torch.arange(head_dim,
  ...)`` in ``pope_inv_freq``): test_logits_are_the_papers_sum_for_every_pair;
* a phase detached from its parameter (``self.key_phase().detach()``): test_gradients_are_the_naive_loops;
* the phase stored as (H, d): test_the_phase_is_not_weight_decayed;
* ``held_floats`` returning 0: test_the_preflight_counts_the_doubled_query_and_key_width;
* ``PopeConfig.__post_init__`` without the theta rule: test_bad_options_name_the_value_and_the_range;
* the transform in the input's dtype (``work = q.dtype``): test_compute_runs_in_float32_below_it;
* in suite/model/attention.py ``sdpa``, values not padded to q's width (the branch removed):
  test_the_fused_paths_run_the_flash_kernel.
"""
from __future__ import annotations

import math

import pytest
import torch

from suite.config.resources import _held_bytes, estimate_bytes
from suite.model.attention import BLOCK, Context, reference_attention, sdpa
from suite.model.position import SCHEMES, Dims
from suite.model.position.pope import PHASE_MAX, PHASE_MIN
from suite.training.loop import build_optimizer
from tests.conftest import make_spec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

POPE = SCHEMES["pope"]
H, D = 3, 4  # heads, head dimensions (frequencies)


def _scheme(phase=None, theta=10000.0, phase_init="zero") -> torch.nn.Module:
    """A float64 PoPE scheme of H heads of D dimensions with the given raw phase (H, D)."""
    scheme = POPE(POPE.Config(theta=theta, phase_init=phase_init), Dims(H * D, H, D, 16)).double()
    if phase is not None:
        with torch.no_grad():
            scheme.phase.copy_(torch.as_tensor(phase, dtype=torch.float64).reshape(-1))
    return scheme


def _logits(scheme, q, k, pos_q, pos_k) -> torch.Tensor:
    """The suite's reference logits (scaled q'.k' over every pair, nothing masked): (B, H, Tq, Tk)."""
    qq, kk = scheme.qk(q, k, pos_q, pos_k)
    v = torch.zeros(*k.shape[:-1], D, dtype=q.dtype)
    allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)
    return reference_attention(qq, kk, v, None, allowed)[1]


def _clamped(p: torch.Tensor) -> torch.Tensor:
    """The reference's clamp, written out: the raw phase inside [-2 pi, 0] (ends included, with
    its gradient), the nearer end (a constant, no gradient) outside."""
    if p.item() < PHASE_MIN:
        return torch.tensor(PHASE_MIN, dtype=p.dtype)
    if p.item() > PHASE_MAX:
        return torch.tensor(PHASE_MAX, dtype=p.dtype)
    return p


def _naive_logits(q, k, phase, pos_q, pos_k, theta=10000.0) -> torch.Tensor:
    """The paper's equation, one pair and one frequency at a time, in float64."""
    B, n_heads, Tq, d = q.shape
    Tk = k.shape[-2]
    out = [[[[None] * Tk for _ in range(Tq)] for _ in range(n_heads)] for _ in range(B)]
    for b in range(B):
        for h in range(n_heads):
            for i in range(Tq):
                for j in range(Tk):
                    total = torch.zeros((), dtype=torch.float64)
                    for c in range(d):
                        freq = theta ** (-c / d)
                        angle = (int(pos_q[i]) - int(pos_k[j])) * freq - _clamped(phase[h, c])
                        total = total + (torch.log1p(torch.exp(q[b, h, i, c])) * torch.log1p(torch.exp(k[b, h, j, c]))
                                         * torch.cos(angle))
                    out[b][h][i][j] = total / math.sqrt(d)
    return torch.stack([torch.stack([torch.stack([torch.stack(row) for row in head]) for head in batch]) for batch in out])


# raw phases: inside the range, at both ends, and past both ends
PHASE = [[-0.3, -2.0, -5.9, -1.0], [0.0, PHASE_MIN, 0.7, -8.0], [-3.1, -0.01, -6.0, 2.5]]


@pytest.mark.parametrize("case", ["self", "cached", "far"])
def test_logits_are_the_papers_sum_for_every_pair(case):
    """Values against the naive loop on every (query, key) pair, future pairs included: queries
    over their own keys; the last 3 of 7 positions over all 7 (a KV cache's step); positions
    from 1,000 (larger angles)."""
    gen = torch.Generator().manual_seed(1)
    pos_k = {"self": torch.arange(6), "cached": torch.arange(7), "far": torch.arange(1000, 1006)}[case]
    pos_q = pos_k[-3:] if case == "cached" else pos_k
    q = torch.randn(2, H, len(pos_q), D, generator=gen, dtype=torch.float64) * 2
    k = torch.randn(2, H, len(pos_k), D, generator=gen, dtype=torch.float64) * 2
    scheme = _scheme(PHASE)
    got = _logits(scheme, q, k, pos_q, pos_k)
    want = _naive_logits(q, k, torch.tensor(PHASE, dtype=torch.float64), pos_q, pos_k)
    assert (got - want).abs().max().item() < 1e-12
    # the fused path's output is the softmax of those logits over the values
    qq, kk = scheme.qk(q, k, pos_q, pos_k)
    v = torch.randn(2, H, len(pos_k), D, generator=gen, dtype=torch.float64)
    out = sdpa(qq, kk, v)
    assert qq.shape[-1] == kk.shape[-1] == 2 * D and out.shape == v.shape[:-2] + (len(pos_q), D)
    assert torch.allclose(out, torch.softmax(want, dim=-1) @ v, atol=1e-12, rtol=0)


def test_gradients_are_the_naive_loops():
    """d/dq, d/dk and d/d(phase) of a weighted sum of the logits, against autograd through the
    naive loop; the phase is inside the range for some entries and past either end for others
    (no gradient there, as torch.clamp in the reference)."""
    gen = torch.Generator().manual_seed(2)
    pos = torch.arange(5)
    q = (torch.randn(1, H, 5, D, generator=gen, dtype=torch.float64) * 2).requires_grad_()
    k = (torch.randn(1, H, 5, D, generator=gen, dtype=torch.float64) * 2).requires_grad_()
    weights = torch.randn(1, H, 5, 5, generator=gen, dtype=torch.float64)
    phase = [[-0.3, -2.0, -5.9, -1.0], [-0.5, -7.0, 0.7, -4.0], [-3.1, -0.01, -6.0, 2.5]]
    scheme = _scheme(phase)
    (_logits(scheme, q, k, pos, pos) * weights).sum().backward()
    got = (q.grad.clone(), k.grad.clone(), scheme.phase.grad.view(H, D).clone())
    q.grad = k.grad = None
    naive_phase = torch.tensor(phase, dtype=torch.float64, requires_grad=True)
    (_naive_logits(q, k, naive_phase, pos, pos) * weights).sum().backward()
    want = (q.grad, k.grad, naive_phase.grad)
    for g, w in zip(got, want):
        assert (g - w).abs().max().item() < 1e-12
    assert (want[2] != 0).sum() == 9  # 9 of the 12 phases are inside the range and learn


def test_logits_depend_on_the_offset_only():
    """For fixed content (one q and one k vector at every position), logit(i, j) is a function
    of i - j: equal along every diagonal, and unchanged when every position moves by 1,000."""
    gen = torch.Generator().manual_seed(3)
    T = 12
    q = torch.randn(1, H, 1, D, generator=gen, dtype=torch.float64).expand(1, H, T, D)
    k = torch.randn(1, H, 1, D, generator=gen, dtype=torch.float64).expand(1, H, T, D)
    scheme = _scheme(torch.empty(H, D).uniform_(PHASE_MIN, PHASE_MAX, generator=gen))
    pos = torch.arange(T)
    logits = _logits(scheme, q, k, pos, pos)[0]  # (H, T, T)
    for offset in range(-(T - 1), T):
        diagonal = logits.diagonal(offset, dim1=-2, dim2=-1)  # (H, T - |offset|)
        assert torch.allclose(diagonal, diagonal[:, :1].expand_as(diagonal), atol=1e-12, rtol=0)
    assert torch.allclose(_logits(scheme, q, k, pos + 1000, pos + 1000)[0], logits, atol=1e-10, rtol=0)
    # and position matters: the offsets do not all give one value
    assert logits[:, -1, :].std(dim=-1).min() > 1e-3


def test_the_phase_is_read_clamped_to_its_range():
    """delta is the phase clamped to [-2 pi, 0]: a phase past an end reads as that end, with no
    gradient; at either end, and inside, the gradient passes (torch.clamp, the reference's), so
    the reference's zero start trains."""
    raw = [[0.5, 0.0, -1.0, -7.0], [3.0, PHASE_MIN, -9.0, -2.0], [-0.2, -6.0, 1e-3, -6.3]]
    ends = [[0.0, 0.0, -1.0, PHASE_MIN], [0.0, PHASE_MIN, PHASE_MIN, -2.0], [-0.2, -6.0, 0.0, PHASE_MIN]]
    scheme = _scheme(raw)
    assert torch.equal(scheme.key_phase().detach(), torch.tensor(ends, dtype=torch.float64))
    gen = torch.Generator().manual_seed(4)
    pos = torch.arange(6)
    q, k = (torch.randn(1, H, 6, D, generator=gen, dtype=torch.float64) for _ in range(2))
    assert torch.equal(_logits(scheme, q, k, pos, pos), _logits(_scheme(ends), q, k, pos, pos))
    (_logits(scheme, q, k, pos, pos) * torch.randn(1, H, 6, 6, generator=gen, dtype=torch.float64)).sum().backward()
    passes = torch.tensor([[False, True, True, False], [False, True, False, True], [True, True, False, False]])
    grad = scheme.phase.grad.view(H, D)
    assert torch.all(grad[~passes] == 0) and torch.all(grad[passes] != 0)


@pytest.mark.parametrize("phase_init", ["zero", "uniform"])
def test_the_phase_starts_as_the_reference_does(phase_init):
    """zero: every phase 0 (the reference default); uniform: in [-2 pi, 0], spread over it."""
    torch.manual_seed(0)
    scheme = POPE(POPE.Config(phase_init=phase_init), Dims(64, 4, 16, 32))
    phase = scheme.phase.detach()
    assert phase.shape == (4 * 16,)
    if phase_init == "zero":
        assert torch.all(phase == 0)
    else:
        assert phase.min() >= PHASE_MIN and phase.max() <= PHASE_MAX and phase.max() - phase.min() > math.pi


def test_the_phase_is_not_weight_decayed():
    """The phase is an angle: the optimizer's decay group (every parameter of two or more
    dimensions) leaves it out, as the reference's Adam has no decay; one table serves every
    layer of the configuration, as one PolarEmbedding serves the reference's layer stack."""
    from suite.model.lm import PosBenchLM

    spec = make_spec("+arch=pope", "model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64",
                     "train.seq_len=32")
    model = PosBenchLM(spec.model)
    phases = [p for name, p in model.named_parameters() if name.endswith("phase")]
    assert len(phases) == 1 and phases[0].shape == (4 * 8,)
    groups = build_optimizer(model, spec, torch.device("cpu")).param_groups
    no_decay = next(g for g in groups if g["weight_decay"] == 0.0)["params"]
    assert any(p is phases[0] for p in no_decay)


def test_the_preflight_counts_the_doubled_query_and_key_width():
    """q and k leave the hook 2d wide and the fused paths pad v to match: the estimate holds
    10 C floats per token per layer in training (q', k', the padded v and the wide output, the
    softplus magnitudes) plus the keys' cos/sin (2 C per position), 8 C per token at evaluation;
    it exceeds RoPE's by those and the phase's 16 bytes a parameter."""
    overrides = ["model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=32",
                 "train.batch_size=3"]
    pope, rope = make_spec("+arch=pope", *overrides), make_spec("+arch=rope", *overrides)
    B, T, C = 3, 32, 32
    assert _held_bytes(pope, B, T, True) == 2 * 4 * (10 * B * T * C + 2 * T * C)
    assert _held_bytes(pope, B, 64, False) == 4 * (8 * B * 64 * C)
    assert estimate_bytes(pope)["train"] - estimate_bytes(rope)["train"] == 16 * C + _held_bytes(pope, B, T, True)


@pytest.mark.parametrize("span,length", [(["span=full"], 40), (["span=swa", "span.window=5"], 2 * BLOCK + 13)],
                         ids=["causal sdpa", "blockwise"])
def test_the_fused_paths_run_the_flash_kernel(span, length):
    """q and k 2d wide, v d wide: SDPA's flash kernel (no T x T scores) takes one width for all
    three, so ``sdpa`` pads v; with only that kernel allowed, the causal and blockwise paths run
    and equal the reference path."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from suite.model.lm import PosBenchLM

    spec = make_spec("+arch=pope", *span, "model.n_layers=1", "model.d_model=32",
                     "model.n_heads=4", "model.d_ff=64", f"train.seq_len={length}")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model).eval()
    torch.nn.init.uniform_(model.schemes[0].phase, PHASE_MIN, PHASE_MAX)
    tokens = torch.randint(0, spec.model.vocab_size, (2, length))
    pos = torch.arange(length)
    with torch.no_grad():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            fused = model(tokens, Context(pos=pos, impl="sdpa"))
        reference = model(tokens, Context(pos=pos, impl="reference"))
    assert torch.allclose(fused, reference, atol=1e-5)


def test_compute_runs_in_float32_below_it():
    """A bf16 q and k are transformed in float32 (the reference disables autocast) and returned in
    bf16: the result is the float32 transform rounded once."""
    gen = torch.Generator().manual_seed(5)
    scheme = POPE(POPE.Config(phase_init="uniform"), Dims(H * D, H, D, 16))
    q, k = (torch.randn(2, H, 40, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    pos = torch.arange(40)
    low, full = scheme.qk(q, k, pos, pos), scheme.qk(q.float(), k.float(), pos, pos)
    for a, b in zip(low, full):
        assert a.dtype == torch.bfloat16 and torch.equal(a, b.to(torch.bfloat16))


@pytest.mark.parametrize("kwargs,message", [
    ({"theta": 1.0}, r"pope.theta=1.0: must be > 1"),
    ({"theta": -5.0}, r"pope.theta=-5.0: must be > 1"),
    ({"phase_init": "random"}, r"unknown pope.phase_init 'random'; valid: zero, uniform"),
])
def test_bad_options_name_the_value_and_the_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        POPE.Config(**kwargs)


def test_a_small_head_is_no_degenerate_shape():
    """Every head dimension is a frequency of its own (none is 0), so a head of one dimension
    still sees positions: ``check`` passes it, and its logits vary with the offset."""
    dims = Dims(4, 4, 1, 16)
    cfg = POPE.Config()
    assert POPE.check(cfg, 16, (16, 32), dims) is cfg
    scheme = POPE(cfg, dims)
    q = torch.ones(1, 4, 8, 1)
    qq, kk = scheme.qk(q, q, torch.arange(8), torch.arange(8))
    row = (qq @ kk.transpose(-2, -1))[0, 0, -1]
    assert row.std() > 0.1
