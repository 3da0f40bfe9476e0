"""The lm-eval model's cached greedy decoding against PosBenchLM's own forward, for every position
scheme and span: same logits at every step, same greedy tokens as decoding by recomputing the
forward over the whole sequence at each step (the decoding it replaces).

Decoding is the model's own forward with a cache (suite/model/cache.py), so these tests hold the
cached path of suite/model/lm.py and suite/model/attention.py to the uncached one.

Mutation check: in suite/model/lm.py PosBenchLM.forward, the new tokens' positions
pos_k[cache.length :] -> pos_k[:T] (counted from 0 at every step) makes
test_cached_logits_are_the_forwards fail; in
suite/model/position/rope.py RoPE._rotation, rotating keys at other positions than the queries by the
frequencies before p-RoPE's zeroing makes both cached tests fail for "rope drop_low yarn 2"; in
suite/model/position/xpos.py, centering positions on half the sequence (x-transformers) instead of
train_len // 2 makes test_cached_logits_are_the_forwards fail for "xpos full/swa/chunked"."""
from functools import lru_cache

import pytest
import torch

from suite.lmeval.generation import Generation, decode_greedy
from suite.lmeval.kv_cache import extend, prefill
from suite.model.cache import length_invariant
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES as POSITION_SCHEMES
from tasks.base import EOS_ID, VOCAB
from tests.conftest import CLASSIC, fast_or_exhaustive, make_spec

BASE = ["model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=16",
        "eval.multiples=[1,4]", "task=copy"]
SCHEMES = sorted(POSITION_SCHEMES)  # every registered scheme
SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=4"], "chunked": ["span=chunked", "span.chunk=5"]}
MORE = {
    "rope partial interleaved": ["position=rope", "position.fraction=0.5", "position.layout=interleaved"],
    "rope yarn dynamic": ["position=rope", "position.scaling=yarn"],
    "rope linear factor 2": ["position=rope", "position.scaling=linear", "position.factor=2"],
    "rope drop_low yarn 2": ["position=rope", "position.drop_low=0.5", "position.scaling=yarn", "position.factor=2"],
    "nope log_scale swa": ["position=nope", "position.log_scale=true", "span=swa", "span.window=4"],
    "rope_in_swa": ["pattern=rope_in_swa", "pattern.window=4"],
    "llama4": ["pattern=llama4", "pattern.chunk=4", "model.n_layers=4"],
    "qwen3_next": ["pattern=qwen3_next", "pattern.chunk_size=4", "model.n_layers=4"],  # gated delta state cache
    "gla_nope": ["pattern=gla_nope", "pattern.chunk_size=4"],
}
CASES = {f"{scheme} {span}": [f"position={scheme}", *overrides] for scheme in SCHEMES for span, overrides in SPANS.items()}
CASES.update(MORE)
# make test: the classic six on one span each (scheme k on span k mod 3) and every case of MORE (RoPE's
# options, a scaled NoPE, the hybrids and the state caches); the rest of the scheme x span grid under
# make test-exhaustive, every scheme there on every span
FAST = {f"{scheme} {list(SPANS)[k % 3]}" for k, scheme in enumerate(CLASSIC)} | set(MORE)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@lru_cache(maxsize=None)
def model_spec(overrides: tuple[str, ...]):
    return make_spec(*BASE, *overrides).model


def model_of(overrides) -> PosBenchLM:
    """An untrained model with weights drawn wide enough that its logits and biases differ
    clearly between tokens and positions (T5's table included)."""
    torch.manual_seed(0)
    model = PosBenchLM(model_spec(tuple(overrides))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def recomputed_greedy(model, tokens, n, max_length=None):
    """Greedy decoding by the model's forward over the whole sequence at each step, up to ``n``
    tokens or ``</s>``."""
    tokens, out = list(tokens), []
    while len(out) < n and EOS_ID not in out:
        window = tokens[-max_length:] if max_length else tokens
        with torch.no_grad():
            out.append(int(model(torch.tensor([window]))[0, -1].argmax()))
        tokens.append(out[-1])
    return out


@pytest.mark.parametrize("case", fast_or_exhaustive(list(CASES), FAST))
def test_cached_logits_are_the_forwards(case):
    model = model_of(CASES[case])
    tokens = torch.randint(3, 300, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)  # (2, 40, V)
    logits, cache = prefill(model, tokens[:, :11], block=4)
    steps = [logits] + [extend(model, tokens[:, t : t + 1], cache)[:, -1] for t in range(11, 40)]
    cached = torch.stack(steps, dim=1)
    if length_invariant(model, 40):
        torch.testing.assert_close(cached, full[:, 10:], rtol=1e-4, atol=1e-4)
    else:  # the hooks change with the length: a cache cannot hold them, decoding recomputes (next test)
        assert case == "rope yarn dynamic" and not torch.allclose(cached, full[:, 10:], atol=1e-2)


@pytest.mark.parametrize("case", fast_or_exhaustive(list(CASES), FAST))
def test_cached_greedy_equals_recomputed_greedy(case):
    model = model_of(CASES[case])
    gen = torch.Generator().manual_seed(2)
    contexts = [torch.randint(3, 300, (n,), generator=gen).tolist() for n in (7, 12, 12, 12, 20)]
    jobs = [Generation(list(c), limit, []) for c, limit in zip(contexts, (25, 30, 9, 30, 28))]
    decode_greedy(model, jobs, batch_size=2)
    for context, job in zip(contexts, jobs):
        assert job.generated == recomputed_greedy(model, context, job.limit)
        assert job.tokens == context + job.generated


def test_a_length_dependent_scheme_is_recognized():
    dynamic = model_of(MORE["rope yarn dynamic"])
    assert length_invariant(dynamic, 16) and not length_invariant(dynamic, 40)  # scaling starts past train_len=16
    assert length_invariant(model_of(MORE["rope linear factor 2"]), 40)  # a fixed factor does not move


@pytest.mark.exhaustive  # make test: test_cached_logits_are_the_forwards allows no scheme of its fast cases to vary
def test_every_scheme_but_dynamic_scaling_is_length_invariant_on_a_window():
    assert all(length_invariant(model_of([f"position={s}", "span=swa", "span.window=4"]), 64) for s in SCHEMES)


def test_learned_positions_past_the_table_decode_the_last_max_length_tokens():
    model = model_of(["position=learned", "position.max_positions=12", "train.seq_len=12", "eval.multiples=[1]"])
    assert model.max_length() == 12
    gen = torch.Generator().manual_seed(3)
    contexts = [torch.randint(3, 300, (n,), generator=gen).tolist() for n in (5, 9, 15)]
    jobs = [Generation(list(c), 10, []) for c in contexts]
    decode_greedy(model, jobs, batch_size=4, max_length=12)
    for context, job in zip(contexts, jobs):
        assert job.generated == recomputed_greedy(model, context, 10, max_length=12)


def test_rows_leave_the_batch_at_eos_limit_or_until():
    model = model_of(["position=alibi"])
    context = torch.randint(3, 300, (10,), generator=torch.Generator().manual_seed(4)).tolist()
    free = recomputed_greedy(model, context, 12)
    assert EOS_ID not in free
    stop = VOCAB[free[5]]
    cut = next(k for k, t in enumerate(free) if VOCAB[t] == stop or stop in VOCAB[t])
    jobs = [Generation(list(context), 12, []), Generation(list(context), 3, []), Generation(list(context), 12, [stop]),
            Generation(list(context), 0, [])]
    decode_greedy(model, jobs, batch_size=4)
    assert jobs[0].generated == free
    assert jobs[1].generated == free[:3]
    assert jobs[2].generated == free[: cut + 1]
    assert jobs[3].generated == []
    assert Generation([1], 5, [], generated=[4, EOS_ID]).finished()


@pytest.mark.parametrize("case,recomputes", [("rope swa", False), ("t5 full", False), ("rope yarn dynamic", True)])
def test_decoding_runs_the_full_forward_only_when_the_hooks_move(case, recomputes, monkeypatch):
    model = model_of(CASES[case])
    calls = []
    forward = model.forward

    def counted(tokens, *args, cache=None):  # counts the forwards without a cache
        if cache is None:
            calls.append(tokens.shape)
        return forward(tokens, *args, cache=cache)

    monkeypatch.setattr(model, "forward", counted)
    job = Generation(torch.randint(3, 300, (12,), generator=torch.Generator().manual_seed(5)).tolist(), 20, [])
    decode_greedy(model, [job], batch_size=1)
    assert len(calls) == (len(job.generated) if recomputes else 0)
