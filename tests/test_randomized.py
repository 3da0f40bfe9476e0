"""Randomized positions (Ruoss et al. 2023) over every base scheme: what a training forward
draws, what evaluation uses, reproducibility across a checkpoint, and every attention path.

Mutation check (each in suite/model/position/randomized.py, each makes the named test fail):
dropping ``.sort()`` in sample_positions: test_training_positions_are_sorted_distinct_and_in_range;
``torch.arange(max_len)`` -> ``torch.arange(max_len) // 2`` there (keys tie in pairs):
test_training_positions_are_uniform; in positions, ``self._sample[pos]`` -> ``sample_positions(self.seed,
self.draws, pos.shape[0], self.max_len)[pos]`` (a draw per hook):
test_one_forward_gives_every_layer_and_hook_the_same_positions; in sampling, ``self.training or`` ->
``True or``: test_evaluation_uses_positions_0_to_n_minus_1; ``draws`` registered with ``persistent=False``:
test_a_seed_reproduces_the_samples_and_a_resumed_run_continues_them; in positions, ``self._sample[pos]`` ->
``self._sample[: pos.shape[0]]``: test_a_blockwise_training_forward_equals_the_reference; in score_mod,
``if not self.sampling()`` -> ``if True`` (flex reads token indices):
test_every_training_path_equals_the_reference_with_the_same_sample; there,
``sample[kv_idx]`` -> ``kv_idx``: test_score_mod_is_the_bias_at_the_sampled_positions; dropping
``params["max_positions"] = max_len``: test_a_learned_base_gets_a_table_of_max_len_rows; in _fits,
``n > self.max_len`` -> ``n >= self.max_len``, or in check, ``MAX_LEN_MULTIPLE * train_len`` -> ``train_len``:
test_lengths_past_max_len_are_unsupported; dropping the ``base == Randomized.name`` check, or ``and not
cls.needs_logits`` in bases: test_config_errors_name_the_value_and_the_choices; ignoring the ``base`` field in suite/config/codedigest.py pieces_of: test_the_code_digest_covers_the_base_and_no_other_scheme; in qk, ``mapped_q if pos_k is pos_q else
self.positions(pos_k)`` -> ``mapped_q``: test_cached_decoding_equals_the_forward_for_every_base; dropping
the ``int(pos[0]) != 0`` check: test_random_eval_positions_are_one_sample_per_length; in _draw's training
branch, ``self._fits(n)`` -> ``self._fits(int(pos.max()) + 1)`` (a host read):
test_a_compiled_training_forward_draws_what_an_eager_one_draws."""
import math
import re
import warnings

import pytest
import torch
from scipy import stats

from suite.model.attention import BLOCK, Context
from suite.training.checkpoint import load_checkpoint, save_checkpoint
from suite.config.codedigest import ROOT, numeric_files, pieces_of, spec_digest
from suite.lmeval.kv_cache import extend, prefill
from suite.model.lm import PosBenchLM
from suite.model.position import SCHEMES, Dims, LengthUnsupported
from suite.model.position.randomized import Randomized, RandomizedConfig, bases, sample_positions
from suite.config.build import SpecError
from tests.conftest import fast_or_exhaustive, make_spec

BASES = bases()
FAST_BASES = ("rope", "t5")  # make test: a rotation and a learned bias; every other base under make test-exhaustive
SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=5"], "chunked": ["span=chunked", "span.chunk=6"]}
SMALL = ["model.n_layers=2", "model.d_model=32", "model.n_heads=4", "model.d_ff=64", "train.seq_len=32"]  # max_len 256

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _model(*overrides, seed=0) -> PosBenchLM:
    """A small model whose scheme parameters are wide enough to matter (T5's table starts at zero)."""
    torch.manual_seed(seed)
    model = PosBenchLM(make_spec(*SMALL, *overrides).model)
    for p in model.schemes.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return model


def _scheme(max_len=24, base="nope", **options) -> Randomized:
    return Randomized(RandomizedConfig(base=base, max_len=max_len, **options), Dims(8, 2, 4, 6)).train()


def _draw(scheme: Randomized, n: int) -> torch.Tensor:
    """The positions one training forward of ``n`` tokens gets."""
    pos = torch.arange(n)
    scheme.embed(torch.zeros(1, n, scheme.dims.d_model), pos)
    return scheme.positions(pos)


def _run(model, tokens, impl):
    return model(tokens, Context(pos=torch.arange(tokens.shape[1]), impl=impl))


def _restart(model):
    """Back to the first draw: the next forward draws the sample the last restart's did."""
    for scheme in model.schemes:
        scheme.draws.zero_()


def test_training_positions_are_sorted_distinct_and_in_range():
    scheme = _scheme(max_len=40)
    for n in (1, 7, 39, 40):
        for _ in range(20):
            p = _draw(scheme, n)
            assert p.shape == (n,) and p.dtype == torch.long
            assert torch.all(p[1:] > p[:-1]) and 0 <= int(p[0]) and int(p[-1]) < 40
    assert torch.equal(_draw(scheme, 40), torch.arange(40))  # n = max_len leaves one choice


def test_training_positions_are_uniform():
    """Over many draws every position is as frequent as every other, and the smallest position
    follows the law of the minimum of a uniform n-subset, P(min = k) = C(L-1-k, n-1) / C(L, n)."""
    L, n, draws = 24, 6, 4000
    scheme = _scheme(max_len=L)
    samples = torch.stack([_draw(scheme, n) for _ in range(draws)])  # (draws, n)
    counts = torch.bincount(samples.flatten(), minlength=L).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3
    law = [math.comb(L - 1 - k, n - 1) / math.comb(L, n) for k in range(L - n + 1)]
    cut = next(k for k, p in enumerate(law) if p * draws < 5)  # pool the tail into one cell
    expected = [p * draws for p in law[:cut]] + [sum(law[cut:]) * draws]
    observed = torch.bincount(samples[:, 0].clamp(max=cut), minlength=cut + 1).numpy()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert len({tuple(s.tolist()) for s in samples}) > 0.9 * draws  # draws are not repeats


@pytest.mark.parametrize("base", ["rope", "alibi", "learned"])
def test_one_forward_gives_every_layer_and_hook_the_same_positions(base, monkeypatch):
    model = _model("position=randomized", f"position.base={base}", "position.log_scale=true", "model.n_layers=3").train()
    scheme = model.schemes[0]
    seen = []
    for hook in ("embed", "qk", "bias", "temperature"):
        original = getattr(scheme.base, hook)
        monkeypatch.setattr(scheme.base, hook, lambda *a, _f=original, _h=hook: seen.append((_h, a)) or _f(*a))
    _run(model, torch.randint(9, 300, (2, 20)), "reference")
    sample = sample_positions(scheme.seed, torch.tensor(0), 20, scheme.max_len)
    positions = {"embed": [1], "qk": [2, 3], "bias": [0, 1], "temperature": [0]}
    assert [h for h, _ in seen].count("qk") == 3 and [h for h, _ in seen].count("temperature") == 3
    for hook, args in seen:
        for i in positions[hook]:
            assert torch.equal(args[i], sample), (hook, i)
    assert not torch.equal(sample, torch.arange(20))


@pytest.mark.parametrize("base", fast_or_exhaustive(BASES, FAST_BASES))
def test_evaluation_uses_positions_0_to_n_minus_1(base):
    """The wrapped model in evaluation is the base scheme's model with the same weights."""
    # the base as the wrapper sizes it: a table of max_len's rows, T5's last bucket at max_len
    table = {"learned": ["position.max_positions=256"], "t5": ["position.max_distance=256"]}.get(base, [])
    wrapped, plain = _model("position=randomized", f"position.base={base}"), _model(f"position={base}", *table, seed=1)
    state = {k.replace(".base.", "."): v for k, v in wrapped.state_dict().items() if not k.endswith((".seed", ".draws"))}
    plain.load_state_dict(state)
    tokens = torch.randint(9, 300, (2, 40))
    with torch.no_grad():
        assert torch.equal(wrapped.eval()(tokens), plain.eval()(tokens))
        assert not torch.allclose(wrapped.train()(tokens), plain.train()(tokens)) or base == "nope"
    assert int(wrapped.schemes[0].draws) == 1  # only the training forward drew


def test_a_seed_reproduces_the_samples_and_a_resumed_run_continues_them(tmp_path):
    def model(seed):
        return _model("position=randomized", "position.base=learned", seed=seed).train()

    def samples(m, k):
        out = []
        for _ in range(k):
            m(torch.randint(9, 300, (1, 30)))
            out.append(m.schemes[0].positions(torch.arange(30)).clone())
        return out

    first, again, other = samples(model(7), 6), samples(model(7), 6), samples(model(8), 6)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))
    interrupted = model(7)
    samples(interrupted, 3)
    optimizer = torch.optim.AdamW(interrupted.parameters())
    save_checkpoint(tmp_path / "ckpt.pt", interrupted, optimizer, step=3, owner="r")
    resumed = model(8)  # another seed: the checkpoint brings the run's
    load_checkpoint(tmp_path / "ckpt.pt", resumed, torch.optim.AdamW(resumed.parameters()), owner="r", steps=10)
    assert all(torch.equal(a, b) for a, b in zip(samples(resumed, 3), first[3:]))


@pytest.mark.parametrize("span", list(SPANS))
@pytest.mark.parametrize("base", fast_or_exhaustive(BASES, FAST_BASES))
def test_every_training_path_equals_the_reference_with_the_same_sample(base, span):
    model = _model("position=randomized", f"position.base={base}", *SPANS[span]).train()
    tokens = torch.randint(9, 300, (2, 23))
    outs = {}
    with torch.no_grad(), warnings.catch_warnings():  # FlexAttention has no backward on the CPU
        warnings.simplefilter("ignore")
        for impl in ("reference", "sdpa", "flex"):
            _restart(model)
            outs[impl] = _run(model, tokens, impl)
    assert torch.allclose(outs["reference"], outs["sdpa"], atol=1e-5)
    assert torch.allclose(outs["reference"], outs["flex"], atol=1e-4)


@pytest.mark.parametrize("base", ["rope", "alibi", "t5", "learned"])
def test_a_blockwise_training_forward_equals_the_reference(base):
    """Past 2 x BLOCK tokens a sliding window takes the blockwise path, whose hooks receive
    slices of the token indices: values and gradients equal the reference with the same sample."""
    model = _model("position=randomized", f"position.base={base}", "train.seq_len=64", "span=swa", "span.window=50").train()
    T = 2 * BLOCK + 37
    tokens = torch.randint(9, 300, (1, T))
    outs, grads = {}, {}
    for impl in ("reference", "sdpa"):
        _restart(model)
        model.zero_grad()
        outs[impl] = _run(model, tokens, impl)
        outs[impl].logsumexp(-1).mean().backward()
        grads[impl] = [p.grad.clone() for p in model.parameters()]
    assert torch.allclose(outs["reference"], outs["sdpa"], atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads["reference"], grads["sdpa"]))


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("base", ["alibi", "t5"])
def test_score_mod_is_the_bias_at_the_sampled_positions(base, grad):
    scheme = Randomized(RandomizedConfig(base=base), Dims(16, 4, 4, 16)).train()
    for p in scheme.parameters():
        torch.nn.init.normal_(p, std=0.5)
    T = 12
    sample = _draw(scheme, T)
    h, q, kv = torch.arange(4)[:, None, None], torch.arange(T)[None, :, None], torch.arange(T)[None, None, :]
    with torch.set_grad_enabled(grad):
        got = scheme.score_mod(torch.arange(T))(torch.zeros(4, T, T), 0, h, q, kv)
    causal = q.squeeze(0) >= kv.squeeze(0)  # T5's distance vector only holds the causal pairs
    want = scheme.base.bias(sample, sample)
    assert torch.allclose(got[:, causal], want[:, causal], atol=1e-6)


def test_a_learned_base_gets_a_table_of_max_len_rows():
    model = _model("position=randomized", "position.base=learned", "position.max_len=100").train()
    scheme = model.schemes[0]
    assert scheme.base.table.num_embeddings == 100 == scheme.max_length() == model.max_length()
    for _ in range(10):  # positions up to 99 reach the table, and training reaches them
        model(torch.randint(9, 300, (1, 90))).sum().backward()
    assert scheme.base.table.weight.grad[90:].abs().sum() > 0


def test_lengths_past_max_len_are_unsupported():
    model = _model("position=randomized", "position.max_len=40")
    tokens = torch.randint(9, 300, (1, 41))
    for mode in (model.train, model.eval):
        mode()
        model(tokens[:, :40])
        with pytest.raises(LengthUnsupported, match="max_len=40"):
            model(tokens)
    with pytest.raises(SpecError, match="layer 0: randomized.max_len=16 is shorter than train.seq_len=32; valid: null"):
        make_spec(*SMALL, "position=randomized", "position.max_len=16")
    assert make_spec(*SMALL, "position=randomized").model.layers[0].position_cfg.max_len == 8 * 32  # null resolved


@pytest.mark.parametrize("override,message", [
    ("position.base=bogus", "unknown randomized.base 'bogus' (or one whose positions come from the logits or the data); "
                            f"valid: {', '.join(BASES)}"),
    ("position.base=cope", "unknown randomized.base 'cope' (or one whose positions come from the logits or the data); valid:"),
    ("position.base=randomized", "randomized.base='randomized': the wrapper cannot hold itself; valid: alibi,"),
    ("position.eval_positions=sometimes", "unknown randomized.eval_positions 'sometimes'; valid: identity, random"),
    ("position.max_len=0", "randomized.max_len=0: must be >= 1"),
])
def test_config_errors_name_the_value_and_the_choices(override, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        make_spec("position=randomized", override)


@pytest.mark.parametrize("base", fast_or_exhaustive(BASES, FAST_BASES))
def test_the_code_digest_covers_the_base_and_no_other_scheme(base):
    """A randomized run's id changes with its base's file (the config's ``base`` names it)."""
    spec = make_spec("position=randomized", f"position.base={base}")
    files = {f.relative_to(ROOT).as_posix() for f in numeric_files(**pieces_of(spec.to_dict()))}
    alone = {f.relative_to(ROOT).as_posix() for f in numeric_files(position=[base])}  # the base and what it imports
    assert f"suite/model/position/{SCHEMES[base].__module__.rsplit('.', 1)[1]}.py" in alone
    wrapper = {f.relative_to(ROOT).as_posix() for f in numeric_files(position=["randomized"])}
    schemes = {f for f in files if f.startswith("suite/model/position/")}
    assert schemes == {f for f in alone | wrapper if f.startswith("suite/model/position/")}
    assert "suite/model/position/randomized.py" in schemes and "suite/model/position/cope.py" not in schemes
    assert spec.code == spec_digest(spec.to_dict())


@pytest.mark.parametrize("base", fast_or_exhaustive(BASES, FAST_BASES))
def test_cached_decoding_equals_the_forward_for_every_base(base):
    """lm-eval decodes with a KV cache: with positions 0 .. n-1 it equals the forward."""
    model = _model("position=randomized", f"position.base={base}", "span=swa", "span.window=4").eval()
    tokens = torch.randint(9, 300, (2, 30))
    with torch.no_grad():
        full = model(tokens)
    logits, cache = prefill(model, tokens[:, :11], block=4)
    steps = [logits] + [extend(model, tokens[:, t : t + 1], cache)[:, -1] for t in range(11, 30)]
    torch.testing.assert_close(torch.stack(steps, dim=1), full[:, 10:], rtol=1e-4, atol=1e-4)


def test_random_eval_positions_are_one_sample_per_length():
    """eval_positions=random: a sorted sample as in training, the same for every forward of a
    length, drawn without advancing the training draws; a KV cache cannot extend it."""
    model = _model("position=randomized", "position.eval_positions=random").eval()
    scheme, tokens = model.schemes[0], torch.randint(9, 300, (2, 30))
    with torch.no_grad():
        first = model(tokens)
        p = scheme.positions(torch.arange(30))
        assert torch.equal(model(tokens), first) and int(scheme.draws) == 0
        model(tokens[:, :20])
        assert not torch.equal(scheme.positions(torch.arange(20)), p[:20])
    assert torch.all(p[1:] > p[:-1]) and int(p[-1]) < scheme.max_len and not torch.equal(p, torch.arange(30))
    with pytest.raises(ValueError, match="KV cache"):
        prefill(model, tokens, block=8)


def test_a_compiled_training_forward_draws_what_an_eager_one_draws():
    """The GPU recipe compiles the training step: the draws stay in one graph, compiled once,
    and advance as in eager mode."""
    torch._dynamo.reset()
    model = _model("position=randomized", "position.base=alibi").train()
    tokens, graphs = torch.randint(9, 300, (2, 23)), []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    step = torch.compile(lambda t: _run(model, t, "sdpa"), backend=count, fullgraph=True)
    with torch.no_grad():
        compiled = [step(tokens) for _ in range(3)]
        assert int(model.schemes[0].draws) == 3 and len(graphs) == 1
        _restart(model)
        eager = [_run(model, tokens, "sdpa") for _ in range(3)]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(compiled, eager))
    assert not torch.allclose(eager[0], eager[1])
