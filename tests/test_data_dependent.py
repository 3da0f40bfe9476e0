"""Data-dependent schemes (FoX, stick-breaking, PaTH) held to naive loops over their papers'
equations, values and gradients in float64, on every span; what their signals do; how they
train and what the pre-flight counts.

Each naive reference below is written from the paper, a loop per query and key, independent of
the suite's vectorized code; a layer's output and the gradients of the loss with respect to its
input and every parameter must agree.

Mutation check: in suite/model/position/fox.py FoX.signal_bias, ``return c, -c`` -> ``return -c, c``
fails test_a_layer_equals_its_papers_equations[fox-*]; in suite/model/position/stickbreaking.py,
dropping ``- log_keep`` from ``later`` (a key breaks its own stick) or ``<`` -> ``<=`` in
``earlier`` (the current token takes a share too) fails it for stickbreaking; in
suite/model/position/path.py path_logits, ``at >= j`` -> ``at > j`` or ``j > 0`` -> ``j > 1``
(a query skips a transform), and ``[..., :T]`` -> ``[..., -T:]`` in Householder.forward (the
convolution reads later tokens), fail it for path."""
import math

import pytest
import torch

from suite.config.build import SpecError
from suite.config.resources import estimate_bytes
from suite.model.attention import Context
from suite.model.lm import PosBenchLM
from suite.run import execute
from suite.results import store
from tests.conftest import make_spec

SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=3"], "chunked": ["span=chunked", "span.chunk=4"]}
T, B, H, C = 7, 2, 2, 8
D = C // H


def _layer(scheme: str, span: str):
    spec = make_spec(f"position={scheme}", *SPANS[span], "model.n_layers=1", f"model.d_model={C}",
                     f"model.n_heads={H}", "model.d_ff=16", "train.seq_len=16")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    block = model.blocks[0]
    return block.attn, model.schemes[0], block.span


def _suite(attn, scheme, span, x):
    return attn(x, scheme, span, Context(pos=torch.arange(x.shape[1]), impl="reference"))


def _heads(attn, x):
    """q, k, v as lists [b][h] of (T, D) tensors, from the layer's own projection."""
    qkv = x @ attn.qkv.weight.T  # (B, T, 3C)
    q, k, v = qkv.split(C, dim=-1)
    split = lambda t: [[t[b, :, h * D:(h + 1) * D] for h in range(H)] for b in range(B)]  # noqa: E731
    return split(q), split(k), split(v)


def _project(attn, outs):
    """outs[b][h][i] (D,) -> the layer's output (B, T, C)."""
    rows = torch.stack([torch.stack([torch.cat([outs[b][h][i] for h in range(H)]) for i in range(T)]) for b in range(B)])
    return rows @ attn.out.weight.T


def naive_fox(attn, span, x):
    """Lin et al. 2025, eq. 1-3: f_t = sigmoid(w_f . x_t + b_f) per head; o_i = sum_j
    exp(q_i . k_j / sqrt(d) + sum_{l=j+1..i} log f_l) v_j / (the same sum without v_j)."""
    q, k, v = _heads(attn, x)
    f = torch.sigmoid(x @ attn.signal.proj.weight.T + attn.signal.proj.bias)  # (B, T, H)
    allowed = span.allowed(torch.arange(T), torch.arange(T))
    outs = [[[None] * T for _ in range(H)] for _ in range(B)]
    for b in range(B):
        for h in range(H):
            for i in range(T):
                scores = {}
                for j in range(i + 1):
                    if allowed[i, j]:
                        decay = sum((torch.log(f[b, l, h]) for l in range(j + 1, i + 1)), torch.zeros((), dtype=x.dtype))
                        scores[j] = q[b][h][i] @ k[b][h][j] / math.sqrt(D) + decay
                total = sum(torch.exp(s) for s in scores.values())
                outs[b][h][i] = sum(torch.exp(s) / total * v[b][h][j] for j, s in scores.items())
    return _project(attn, outs)


def naive_stickbreaking(attn, span, x):
    """Tan et al. 2025, eq. 2-3: beta_ij = sigmoid(q_i . k_j / sqrt(d)); A_ij = beta_ij
    prod_{j<k<i} (1 - beta_ik) over the keys before i; o_i = sum_j A_ij v_j + (1 - sum_j A_ij) v_i.
    A key the span hides takes no share and breaks nothing."""
    q, k, v = _heads(attn, x)
    allowed = span.allowed(torch.arange(T), torch.arange(T))
    outs = [[[None] * T for _ in range(H)] for _ in range(B)]
    for b in range(B):
        for h in range(H):
            for i in range(T):
                beta = {j: torch.sigmoid(q[b][h][i] @ k[b][h][j] / math.sqrt(D)) for j in range(i) if allowed[i, j]}
                out, taken = torch.zeros(D, dtype=x.dtype), torch.zeros((), dtype=x.dtype)
                for j, bj in beta.items():
                    a = bj
                    for kk in range(j + 1, i):
                        if kk in beta:
                            a = a * (1 - beta[kk])
                    out, taken = out + a * v[b][h][j], taken + a
                outs[b][h][i] = out + (1 - taken) * v[b][h][i]
    return _project(attn, outs)


def naive_path(attn, span, x):
    """Yang et al. 2025, eq. 4-6 with the reference layer's w and beta: w_s = l2norm(silu(conv(W x)_s))
    per head (a causal depthwise convolution over the last ``conv_size`` tokens), beta_s = 2
    sigmoid(w_b . x_s + b); H_s = I - beta_s w_s w_s^T; logit(i, j) = k_j^T (H_{j+1} ... H_i) q_i
    / sqrt(d); softmax over the keys the span shows."""
    q, k, v = _heads(attn, x)
    sig = attn.signal
    u = x
    for layer in sig.w_proj:
        u = u @ layer.weight.T  # (B, T, C)
    K = sig.conv.weight.shape[-1]
    allowed = span.allowed(torch.arange(T), torch.arange(T))
    outs = [[[None] * T for _ in range(H)] for _ in range(B)]
    for b in range(B):
        conv = [sum((sig.conv.weight[:, 0, m] * u[b, t - (K - 1) + m] for m in range(K) if t - (K - 1) + m >= 0),
                    torch.zeros(C, dtype=x.dtype)) for t in range(T)]
        beta = 2 * torch.sigmoid(x[b] @ sig.beta_proj.weight.T + sig.beta_proj.bias)  # (T, H)
        for h in range(H):
            w = []
            for t in range(T):
                a = torch.nn.functional.silu(conv[t][h * D:(h + 1) * D])
                w.append(a / torch.sqrt(a @ a + 1e-6))
            Hs = [torch.eye(D, dtype=x.dtype) - beta[s, h] * torch.outer(w[s], w[s]) for s in range(T)]
            for i in range(T):
                scores = {}
                for j in range(i + 1):
                    if allowed[i, j]:
                        P = torch.eye(D, dtype=x.dtype)
                        for s in range(j + 1, i + 1):
                            P = P @ Hs[s]
                        scores[j] = k[b][h][j] @ P @ q[b][h][i] / math.sqrt(D)
                total = sum(torch.exp(s) for s in scores.values())
                outs[b][h][i] = sum(torch.exp(s) / total * v[b][h][j] for j, s in scores.items())
    return _project(attn, outs)


NAIVE = {"fox": naive_fox, "stickbreaking": naive_stickbreaking, "path": naive_path}


@pytest.mark.parametrize("scheme,span", [(s, p) for s in NAIVE for p in SPANS])
def test_a_layer_equals_its_papers_equations(scheme, span):
    attn, pos_scheme, span_obj = _layer(scheme, span)
    torch.manual_seed(1)
    x = torch.randn(B, T, C, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(B, T, C, dtype=torch.float64)  # a loss that weighs every output differently
    params = [p for p in attn.parameters()]
    ours = _suite(attn, pos_scheme, span_obj, x)
    grads = torch.autograd.grad((ours * weights).sum(), [x, *params])
    theirs = NAIVE[scheme](attn, span_obj, x)
    expected = torch.autograd.grad((theirs * weights).sum(), [x, *params])
    assert torch.allclose(ours, theirs, atol=1e-10, rtol=0), (ours - theirs).abs().max()
    for name, a, b in zip(["x", *(n for n, _ in attn.named_parameters())], grads, expected):
        assert torch.allclose(a, b, atol=1e-10, rtol=0), (name, (a - b).abs().max())


def _with_nope_twin(scheme: str):
    """A layer of ``scheme``, a NoPE layer with the same attention weights, and an input."""
    attn, pos_scheme, span = _layer(scheme, "full")
    nope_attn, nope, nope_span = _layer("nope", "full")
    nope_attn.load_state_dict({k: v for k, v in attn.state_dict().items() if not k.startswith("signal.")})
    return (attn, pos_scheme, span), (nope_attn, nope, nope_span), torch.randn(B, T, C, dtype=torch.float64)


def test_a_forget_gate_held_open_attends_as_nope_and_a_closing_one_forgets():
    """f = 1 everywhere (log f = 0) adds nothing: the layer is NoPE's. f < 1 down-weights far keys
    by exactly sum log f between them: with every gate at sigmoid(0) = 1/2, key j's logit at query i
    drops by (i - j) log 2 against NoPE's, so the weight ratio of two keys scales by 2^(j1 - j2)."""
    (attn, fox, span), (nope_attn, nope, nope_span), x = _with_nope_twin("fox")
    with torch.no_grad():
        attn.signal.proj.weight.zero_()
        attn.signal.proj.bias.fill_(60.0)  # sigmoid(60) = 1 in float64 to 1e-26
        assert torch.allclose(_suite(attn, fox, span, x), _suite(nope_attn, nope, nope_span, x), atol=1e-12)
        attn.signal.proj.bias.zero_()  # every gate 1/2
        model_logits = []
        for a, s, sp in ((attn, fox, span), (nope_attn, nope, nope_span)):
            ctx = Context(pos=torch.arange(T), impl="reference", want_logits=True)
            a(x, s, sp, ctx)
            model_logits.append(ctx.logits[0])
    i, j = torch.tril_indices(T, T)
    drop = (model_logits[1] - model_logits[0])[..., i, j]
    assert torch.allclose(drop, (i - j).to(torch.float64) * math.log(2.0), atol=1e-12)


def test_path_with_every_beta_zero_attends_as_nope_and_a_reflection_turns_the_key():
    """beta = 0 makes every H the identity: NoPE. beta = 2 with one fixed w makes each H a
    reflection, so a key an odd number of tokens back is seen reflected (its component along w
    negated) and an even number back as it is."""
    (attn, path, span), (nope_attn, nope, nope_span), x = _with_nope_twin("path")
    with torch.no_grad():
        attn.signal.beta_proj.weight.zero_()
        attn.signal.beta_proj.bias.fill_(-60.0)  # beta = 2 sigmoid(-60) ~ 1e-26
        assert torch.allclose(_suite(attn, path, span, x), _suite(nope_attn, nope, nope_span, x), atol=1e-12)
        signal = attn.signal(x)
        w = torch.zeros(D, dtype=torch.float64)
        w[0] = 1.0
        signal[..., :D] = w
        signal[..., D] = 2.0
        q = torch.randn(1, 1, T, D, dtype=torch.float64)
        k = torch.randn(1, 1, T, D, dtype=torch.float64)
        _, logits = path.attend(q, k, k, signal[:1, :1], torch.ones(T, T, dtype=torch.bool).tril())
    flip = torch.ones(D, dtype=torch.float64)
    flip[0] = -1.0
    for i in range(T):
        for j in range(i + 1):
            seen = k[0, 0, j] * (flip if (i - j) % 2 else 1.0)
            assert torch.isclose(logits[0, 0, i, j], q[0, 0, i] @ seen / math.sqrt(D), atol=1e-12)


def test_stick_breaking_weights_sum_to_one_and_a_sure_key_hides_what_lies_behind_it():
    """The shares and the remainder sum to 1 for every query (the diagnostics' logits are their
    logs). Nearer keys break the stick first: a key with beta = 1 takes all that they leave, so
    the keys further back and the current token get nothing, and the nearer keys keep their
    shares."""
    _, sb, span = _layer("stickbreaking", "full")
    q = torch.randn(1, 1, T, D, dtype=torch.float64)
    k = torch.randn(1, 1, T, D, dtype=torch.float64)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    _, before = sb.attend(q, k, k, None, allowed)
    assert torch.allclose(before.exp().sum(-1), torch.ones(1, 1, T, dtype=torch.float64), atol=1e-12)
    k[0, 0, 3] = q[0, 0, 6] * 1e3  # z = |q|^2 1e3 / sqrt(d): sigmoid(z) = 1 for query 6
    _, after = sb.attend(q, k, k, None, allowed)
    w = after[0, 0, 6].exp()
    assert torch.allclose(w[4:6], before[0, 0, 6, 4:6].exp(), atol=1e-12)  # the nearer keys 4, 5 as before
    assert torch.isclose(w[3], 1 - w[4] - w[5], atol=1e-12) and w[3] > 0.01
    assert (w[:3] < 1e-100).all() and w[6] < 1e-100


@pytest.mark.parametrize("scheme", list(NAIVE))
def test_a_data_dependent_run_trains_and_stores_on_every_span(tmp_path, scheme):
    quick = ["train.steps=3", "train.batch_size=4", "train.seq_len=12", "eval.n_examples=3", "eval.batch_size=3",
             "eval.multiples=[1,2]", "model.n_layers=2", "model.d_model=16", "model.n_heads=2", "logger=none"]
    for span, overrides in SPANS.items():
        path = execute(make_spec(*quick, f"position={scheme}", *overrides, "sweep_name=t"), results_dir=tmp_path,
                       progress=False)
        rows = store.read_run(path)["rows"]
        assert {r["status"] for r in rows} == {"ok"} and {r["eval_len"] for r in rows} == {12, 24}
        assert {r["positions"] for r in rows} == {scheme} and {r["spans"] for r in rows} == {span}


def test_the_preflight_counts_what_the_data_dependent_paths_build():
    """SDPA takes FoX's bias as a key dimension (no T x T tensor over NoPE's estimate beyond its
    gates); stick-breaking keeps six floats per pair of tokens and layer, PaTH head_dim + 2 (the
    carried queries of every key step) while training and two when evaluating."""
    long = ["train.seq_len=256", "train.min_len=null", "eval.multiples=[1]", "task=niah_single"]
    spec = make_spec(*long)
    pairs = spec.train.batch_size * spec.model.n_heads * 256 * 256 * 4 * spec.model.n_layers
    nope = estimate_bytes(spec)

    def extra(scheme):
        s = make_spec(*long, f"position={scheme}")
        params = sum(p.numel() for p in PosBenchLM(s.model).parameters()) - sum(
            p.numel() for p in PosBenchLM(spec.model).parameters())
        return {phase: v - nope[phase] - (16 if phase == "train" else 4) * params for phase, v in estimate_bytes(s).items()}

    assert extra("fox")["train"] == pytest.approx(0, abs=1)
    assert extra("stickbreaking")["train"] == pytest.approx(6 * pairs, rel=1e-6)
    assert extra("path")["train"] == pytest.approx((spec.model.head_dim + 2) * pairs, rel=1e-6)
    eval_pairs = spec.eval.batch_size * spec.model.n_heads * 256 * 256 * 4
    assert extra("path")["eval"] == pytest.approx(2 * eval_pairs, rel=1e-6)


def test_the_decay_time_start_gives_each_head_its_decay_time_and_half_a_pair_is_refused():
    """The authors' initialization: with the bias b_h alone (w = 0), a key's weight falls by 1/e
    over tau_h tokens, tau log-spaced from the minimum to the maximum over the heads."""
    spec = make_spec("position=fox", "position.decay_time_min=2", "position.decay_time_max=256", "model.n_heads=4")
    gate = PosBenchLM(spec.model).blocks[0].attn.signal
    tau = -1 / torch.log(torch.sigmoid(gate.proj.bias.double()))
    assert torch.allclose(tau, torch.tensor([2.0, 2 * 128 ** (1 / 3), 2 * 128 ** (2 / 3), 256.0], dtype=torch.float64), rtol=1e-6)
    default = PosBenchLM(make_spec("position=fox", "model.n_heads=4").model).blocks[0].attn.signal
    assert torch.equal(default.proj.bias, torch.zeros(4))  # the authors' start: f = 1/2
    with pytest.raises(SpecError, match=r"fox.decay_time_min=2.0, fox.decay_time_max=None: set both \(tokens\) or neither"):
        make_spec("position=fox", "position.decay_time_min=2")
    with pytest.raises(SpecError, match=r"fox.decay_time_min=8.0, fox.decay_time_max=4.0: need 0 < min <= max"):
        make_spec("position=fox", "position.decay_time_min=8", "position.decay_time_max=4")


@pytest.mark.parametrize("scheme", list(NAIVE))
def test_lm_eval_and_diagnose_read_a_trained_data_dependent_run(tmp_path, scheme, capsys):
    """The lm-eval model scores and decodes a stored run through its KV cache as the model's own
    forward does, and ``suite.commands.diagnose --stored`` prints a recency gap for every layer."""
    import torch.nn.functional as F
    from lm_eval.api.instance import Instance

    from suite.commands import diagnose
    from suite.lmeval import PosBenchEvalLM
    from tasks.base import BOS_ID, VOCAB, encode

    overrides = ["model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "train.steps=3",
                 "train.batch_size=4", "train.seq_len=12", "eval.n_examples=3", "eval.batch_size=3",
                 "eval.multiples=[1]", "logger=none", "sweep_name=t", f"results_dir={tmp_path}", f"position={scheme}",
                 "task=copy"]
    path = execute(make_spec(*overrides), results_dir=tmp_path, progress=False)
    lm = PosBenchEvalLM(pretrained=str(path), batch_size=2)
    context, continuation = "apple fox 17 |", " apple fox"
    ((ll, _),) = lm.loglikelihood([Instance("loglikelihood", {}, (context, continuation), 0)])
    ctx, cont = [BOS_ID, *encode(context)], encode(continuation)
    with torch.no_grad():
        logprobs = F.log_softmax(lm.model(torch.tensor([ctx + cont])).float(), -1)[0][len(ctx) - 1:-1]
    assert ll == pytest.approx(sum(logprobs[i, t].item() for i, t in enumerate(cont)), abs=1e-4)
    ids, want = list(ctx), []
    with torch.no_grad():
        for _ in range(5):  # greedy by recomputing the whole forward at every step
            want.append(int(lm.model(torch.tensor([ids]))[0, -1].argmax()))
            ids.append(want[-1])
    (got,) = lm.generate_until([Instance("generate_until", {}, (context, {"until": [], "max_gen_toks": 5}), 0)])
    words = [VOCAB[t] for t in want]
    assert got.split() == words[:len(got.split())] and len(got.split()) >= 1
    capsys.readouterr()
    assert diagnose.main([*overrides, "--stored"]) == 0
    printed = capsys.readouterr().out
    rows = [line.split() for line in printed.splitlines() if line.split()[:1] in (["0"], ["1"])]
    assert [r[:2] for r in rows] == [["0", f"{scheme}/full"], ["1", f"{scheme}/full"]]
    # five sites' cosine gaps (each within [-2, 2]) and the logits' (finite)
    assert all(len(r) == 8 and all(abs(float(x)) <= 2 for x in r[2:7]) and math.isfinite(float(r[7])) for r in rows)
