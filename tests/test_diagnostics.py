"""Diagnostics on constructed cases with known answers.

Mutation check: in suite/evaluation/diagnostics.py logit_profile, logits.diagonal(offset=-d) -> offset=d makes
test_logit_profile_recovers_an_alibi_slope fail; isfinite(diag) -> all True makes
test_logit_profile_averages_the_finite_logits_of_each_distance fail; segment_share .sum(-1) -> .mean(-1)
makes test_segment_shares_under_uniform_causal_attention_count_the_keys_seen fail; recency_gap
profile[lags.index(1)] -> profile[1] makes test_recency_gap_is_f_at_lag_one_minus_f_at_the_far_lag fail;
far_lag length // 2 -> length // 2 + 1 makes test_far_lag_is_the_largest_grid_lag_at_most_half_the_length
fail; cosine_profile without F.normalize makes test_cosine_profile_of_hand_built_states fail;
attention_probs softmax dim=-1 -> dim=-2 makes test_attention_probs_are_the_softmax_of_the_alibi_bias
fail; hidden_sites' resid_mid pre-hook on block.mlp_norm -> block.mlp makes
test_hidden_sites_and_recency_rows_cover_every_layer_and_site fail; segment_masks needle_pos + 3 -> + 2
makes test_segment_masks_of_a_hand_built_example fail; attention_mass queries s - 1 -> s makes
test_attention_mass_under_uniform_causal_attention_counts_each_segment fail; recency_profiles pairing
each lag with the profile of the reversed lags makes
test_recency_profiles_of_a_model_whose_states_are_its_embeddings fail; diagnostic_rows' logit gap over
range(len(prof)) -> over lags makes test_diagnostic_rows_of_a_model_whose_states_are_its_embeddings fail."""
import numpy as np
import pytest

from tests import forked_cli
import torch

from suite.evaluation import diagnostics as dg
from suite.model.lm import PosBenchLM
from suite.model.span import SPANS
from tasks import TASKS, build_task
from tasks.base import QUERY_ID, WORD_IDS, Example
from tests.conftest import fast_or_exhaustive, make_spec


def uniform_window_average(x: torch.Tensor, window: int | None) -> torch.Tensor:
    """Uniform causal attention over the last ``window`` positions (None: the whole prefix).

    x (B, T, C) -> (B, T, C): the idealized local (or global) averaging layer of the analysis,
    masked by the suite's own ``swa`` (or ``full``) span.
    """
    pos = torch.arange(x.shape[1])
    span = SPANS["full"](SPANS["full"].Config()) if window is None else SPANS["swa"](SPANS["swa"].Config(window=window))
    allowed = span.allowed(pos, pos).float()  # (T, T)
    return (allowed / allowed.sum(-1, keepdim=True)) @ x


def expected_window_profile(lags: list[int], window: int) -> torch.Tensor:
    """max(0, 1 - d / w): the cosine profile of window averages of i.i.d. vectors."""
    return torch.tensor([max(0.0, 1.0 - d / window) for d in lags])


def test_lag_grid_is_roughly_logarithmic():
    assert dg.lag_grid(40) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]


def test_window_averages_of_iid_vectors_follow_one_minus_d_over_w():
    torch.manual_seed(0)
    x = torch.randn(8, 256, 512)  # i.i.d. token vectors
    w = 16
    lags = dg.lag_grid(64)
    got = dg.cosine_profile(uniform_window_average(x, w)[:, w:], lags)
    assert torch.allclose(got, expected_window_profile(lags, w), atol=0.03)
    assert dg.recency_gap(got, lags, far=32) == pytest.approx(1 - 1 / w, abs=0.03)  # f(1) - f(32)


def test_uniform_causal_attention_decays_far_more_slowly():
    torch.manual_seed(0)
    x = torch.randn(8, 256, 512)
    lags = dg.lag_grid(64)
    window = dg.cosine_profile(uniform_window_average(x, 16)[:, 16:], lags)
    causal = dg.cosine_profile(uniform_window_average(x, None)[:, 16:], lags)
    far = lags.index(32)
    assert window[far] < 0.05 and causal[far] > 0.6  # the window forgot; the prefix average did not
    assert dg.recency_gap(causal, lags, 32) < 0.4 < dg.recency_gap(window, lags, 32)


def test_segment_shares_under_uniform_causal_attention_count_the_keys_seen():
    T = 50
    allowed = torch.tril(torch.ones(T, T))
    probs = (allowed / allowed.sum(-1, keepdim=True)).expand(2, 3, T, T)
    t = torch.arange(1, T + 1, dtype=torch.float32)  # position i sees t = i + 1 tokens
    first, last_two = torch.zeros(T, dtype=torch.bool), torch.zeros(T, dtype=torch.bool)
    first[0], last_two[-2:] = True, True
    assert torch.allclose(dg.segment_share(probs, first), 1.0 / t)  # the first-token share
    seen = torch.tensor([0.0] * (T - 2) + [1.0, 2.0])  # keys T-2 and T-1 are seen from those positions on
    assert torch.allclose(dg.segment_share(probs, last_two), seen / t)
    assert torch.allclose(dg.entropy(probs), torch.log(t), atol=1e-5)


def test_recency_gap_is_f_at_lag_one_minus_f_at_the_far_lag():
    assert dg.recency_gap([0.9, 0.7, 0.5, 0.2], [1, 2, 4, 8], far=4) == pytest.approx(0.4)
    # a logit profile is indexed by distance from 0: lags = range(len(profile))
    assert dg.recency_gap(torch.tensor([5.0, 3.0, 2.5, 1.0]), range(4), far=3) == pytest.approx(2.0)


def test_far_lag_is_the_largest_grid_lag_at_most_half_the_length():
    assert dg.far_lag([1, 2, 3, 4, 6, 8, 12, 16, 24], 32) == 16
    assert dg.far_lag([1, 2, 3, 4, 6, 8, 12, 16, 24], 31) == 12
    assert dg.far_lag([1], 2) == 1


def test_cosine_profile_of_hand_built_states():
    h = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]])  # (B=1, T=3, C=2)
    # lag 1: cos 45 degrees twice; lag 2: orthogonal
    assert torch.allclose(dg.cosine_profile(h, [1, 2]), torch.tensor([2 ** -0.5, 0.0]))


def test_logit_profile_averages_the_finite_logits_of_each_distance():
    inf = float("inf")
    logits = torch.tensor([[[[0.0, -inf, -inf], [2.0, 1.0, -inf], [-inf, -inf, 3.0]],   # head 0
                            [[1.0, -inf, -inf], [5.0, 1.0, -inf], [7.0, 6.0, 1.0]]]])  # head 1
    expected = torch.tensor([[(0 + 1 + 3) / 3, 2.0, float("nan")],  # -inf is masked; distance 2 all masked
                             [1.0, (5 + 6) / 2, 7.0]])
    assert torch.allclose(dg.logit_profile(logits), expected, equal_nan=True)
    assert dg.logit_profile(logits, max_distance=2).shape == (2, 2)


def test_logit_profile_recovers_an_alibi_slope():
    model = PosBenchLM(make_spec("position=alibi", "model.n_layers=1").model)
    with torch.no_grad():  # zero the content term: logits are the bias alone
        model.blocks[0].attn.qkv.weight.zero_()
    tokens = torch.randint(9, 300, (2, 24))
    prof = dg.logit_profile(model.attention_logits(tokens)[0])
    slopes = model.schemes[0].slopes
    expected = -slopes[:, None] * torch.arange(24, dtype=torch.float32)[None, :]
    assert torch.allclose(prof, expected, atol=1e-5)


def test_attention_probs_are_the_softmax_of_the_alibi_bias():
    model = PosBenchLM(make_spec("position=alibi", "model.n_layers=1").model)
    with torch.no_grad():  # zero the content term: logits are the bias alone
        model.blocks[0].attn.qkv.weight.zero_()
    probs = dg.attention_probs(model, torch.randint(9, 300, (2, 6)))[0]  # (B, H, T, T)
    d = torch.arange(6)[:, None] - torch.arange(6)[None, :]  # query i, key j: distance i - j
    for h, slope in enumerate(model.schemes[0].slopes.tolist()):
        w = torch.where(d >= 0, torch.exp(-slope * d.float()), torch.zeros(()))
        assert torch.allclose(probs[1, h], w / w.sum(-1, keepdim=True), atol=1e-6)


def test_hidden_sites_and_recency_rows_cover_every_layer_and_site():
    spec = make_spec("pattern=command_a", "model.n_layers=4")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    tokens = torch.randint(9, 300, (4, 32))
    sites = dg.hidden_sites(model, tokens)
    assert set(sites) == {(layer, site) for layer in range(4) for site in dg.SITES}
    # the residual after the block is the residual after attention plus the MLP output
    assert torch.allclose(sites[(1, "resid_out")], sites[(1, "resid_mid")] + sites[(1, "mlp_out")], atol=1e-6)
    # the residual after attention is the previous block's output plus the attention output
    assert torch.allclose(sites[(1, "resid_mid")], sites[(0, "resid_out")] + sites[(1, "attn_out")], atol=1e-6)
    assert torch.allclose(sites[(1, "mlp_in")], model.blocks[1].mlp_norm(sites[(1, "resid_mid")]))
    # the last block's output, normalized and projected, is the model's logits
    assert torch.allclose(model.head(model.norm(sites[(3, "resid_out")])), model(tokens), atol=1e-5)
    rows = dg.recency_profiles(model, tokens)
    assert len(rows) == 4 * len(dg.SITES) * len(dg.lag_grid(32))
    assert all(-1.0 <= r["value"] <= 1.0 for r in rows)


def test_attention_mass_segments_sum_to_one():
    spec = make_spec("position=nope", "model.n_layers=2")
    model = PosBenchLM(spec.model)
    task = build_task("niah_single")
    examples = [task.generate(np.random.default_rng(i), 32) for i in range(4)]
    rows = dg.attention_mass(model, examples)
    for layer in (0, 1):
        shares = {r["segment"]: r["value"] for r in rows if r["layer"] == layer}
        total = shares["first"] + shares["needle"] + shares["context"] + shares["question"]
        assert total == pytest.approx(1.0, abs=1e-5) and shares["entropy"] > 0


@pytest.mark.parametrize("name", fast_or_exhaustive(sorted(TASKS), {"niah_single", "niah_multivalue", "niah_multiquery"}))
def test_every_task_gives_the_diagnostics_one_needle_or_none(name):
    """The attention-mass segments read ``meta["needle_pos"]`` as one needle's start: a task whose
    examples hold several needles (niah_multivalue, niah_multiquery) names them ``needle_starts``,
    so a diagnostics run on it stores recency and logit rows and no attention mass."""
    task = build_task(name)
    length = 64
    example = task.generate(np.random.default_rng(0), length)
    assert isinstance(example.meta.get("needle_pos", 0), int), example.meta["needle_pos"]
    model = PosBenchLM(make_spec("position=nope", "model.n_layers=2", "model.d_model=32", "model.n_heads=2").model)
    metrics = {r["metric"] for r in dg.diagnostic_rows(model, [example], "init")}
    assert {"recency_gap", "logit_gap"} <= metrics
    assert ("attn_mass" in metrics) == ("needle_pos" in example.meta)


def _hand_example(length: int, needle_pos: int, query_pos: int, answer_spans) -> Example:
    """Filler words, a ``?`` at ``query_pos``, a needle marked at ``needle_pos``."""
    tokens = [int(WORD_IDS[0])] * length
    tokens[query_pos] = QUERY_ID
    return Example(tokens=tokens, answer_spans=answer_spans, meta={"needle_pos": needle_pos})


def test_segment_masks_of_a_hand_built_example():
    masks = dg.segment_masks(_hand_example(10, needle_pos=2, query_pos=6, answer_spans=[(8, 9)]), 12)
    on = {name: np.flatnonzero(mask).tolist() for name, mask in masks.items()}
    assert on == {"first": [0], "needle": [2, 3, 4], "context": [1, 5], "question": [6, 7, 8, 9, 10, 11]}


def test_attention_mass_under_uniform_causal_attention_counts_each_segment():
    model = PosBenchLM(make_spec("position=nope", "model.n_layers=2").model)
    with torch.no_grad():  # zero queries and keys: every query attends uniformly to the keys it sees
        for block in model.blocks:
            block.attn.qkv.weight.zero_()
    examples = [_hand_example(10, needle_pos=2, query_pos=6, answer_spans=[(8, 9), (9, 10)]),  # queries 7, 8
                _hand_example(8, needle_pos=1, query_pos=4, answer_spans=[(6, 8)])]  # query 5, padded to 10
    # query q sees q + 1 keys; per example the mean over its queries, then the mean over examples
    expected = {"first": ((1 / 8 + 1 / 9) / 2 + 1 / 6) / 2,
                "needle": ((3 / 8 + 3 / 9) / 2 + 3 / 6) / 2,  # keys 2-4; keys 1-3
                "context": ((2 / 8 + 2 / 9) / 2 + 0 / 6) / 2,  # keys 1, 5; none
                "question": ((2 / 8 + 3 / 9) / 2 + 2 / 6) / 2,  # keys 6 to q; keys 4, 5
                "entropy": ((np.log(8) + np.log(9)) / 2 + np.log(6)) / 2}
    for layer in (0, 1):
        got = {r["segment"]: r["value"] for r in dg.attention_mass(model, examples) if r["layer"] == layer}
        assert got == pytest.approx(expected, abs=1e-6)


def _embedding_model():
    """ALiBi, 2 layers, no content logits and no attention or MLP output: every hidden state is
    the token embedding and every logit is the ALiBi bias -slope * distance."""
    model = PosBenchLM(make_spec("position=alibi", "model.n_layers=2").model)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight.zero_()
            block.mlp.down.weight.zero_()
    gen = torch.Generator().manual_seed(0)
    return model, torch.randint(9, 300, (3, 32), generator=gen)


def _embedding_cos(model, tokens, d: int) -> float:
    e = model.embed.weight[tokens]  # (B, T, C)
    return torch.nn.functional.cosine_similarity(e[:, d:], e[:, :-d], dim=-1).mean().item()


def test_recency_profiles_of_a_model_whose_states_are_its_embeddings():
    model, tokens = _embedding_model()
    rows = dg.recency_profiles(model, tokens, [1, 4, 16])
    value = {(r["layer"], r["site"], r["lag"]): r["value"] for r in rows}
    for lag in (1, 4, 16):
        assert value[(1, "resid_out", lag)] == pytest.approx(_embedding_cos(model, tokens, lag), abs=1e-6)
        assert value[(0, "attn_out", lag)] == 0.0  # zero vectors have no direction


def test_diagnostic_rows_of_a_model_whose_states_are_its_embeddings():
    model, tokens = _embedding_model()
    rows = dg.diagnostic_rows(model, [Example(tokens=t, answer_spans=[(31, 32)]) for t in tokens.tolist()], "init")
    value = {(r["metric"], r["slice"]): r["value"] for r in rows}
    slopes = model.schemes[0].slopes.tolist()  # 4 heads
    assert rows[0]["slice"] == "at=init,layer=0,site=attn_out,lag=1" and len(value) == len(rows)
    # T = 32: lags 1, 2, 3, 4, 6, 8, 12, 16, 24 and far lag 16; 2 layers, 5 sites, 4 heads + mean
    assert [sum(r["metric"] == m for r in rows) for m in ("recency_cos", "recency_gap", "logit_profile", "logit_gap")] \
        == [2 * 5 * 9, 2 * 5, 2 * 5 * 10, 2 * 5]
    gap = _embedding_cos(model, tokens, 1) - _embedding_cos(model, tokens, 16)
    assert value[("recency_gap", "at=init,layer=1,site=resid_out,far=16")] == pytest.approx(gap, abs=1e-6)
    assert value[("logit_profile", "at=init,layer=0,head=2,lag=8")] == pytest.approx(-8 * slopes[2], abs=1e-5)
    for h in range(4):  # the bias falls by slope per token: f(1) - f(16) = 15 slope
        assert value[("logit_gap", f"at=init,layer=1,head={h},far=16")] == pytest.approx(15 * slopes[h], abs=1e-5)
    assert value[("logit_gap", "at=init,layer=0,head=mean,far=16")] == pytest.approx(15 * np.mean(slopes), abs=1e-5)
    assert not any(r["metric"] == "attn_mass" for r in rows)  # no needle marked


@pytest.mark.exhaustive  # a run, a report and the diagnose CLI; make test stores mid-training rows (below) and renders the section
def test_a_run_with_diagnostics_stores_init_and_trained_rows_and_the_report_shows_them(tmp_path):
    import sys
    from pathlib import Path

    from suite.results import store
    from suite.report import render
    from suite.run import execute

    spec = make_spec("pattern=rope_in_swa", "pattern.window=4", "task=niah_single", "train.steps=5",
                     "train.batch_size=4", "eval.n_examples=4", "eval.multiples=[1]", "eval.diagnostics=true",
                     "logger=none", "sweep_name=dg")
    execute(spec, results_dir=tmp_path, progress=False)
    df = store.load(tmp_path / "dg")
    gaps = df[df.metric == "recency_gap"]
    assert {s.split(",")[0] for s in gaps.slice} == {"at=init", "at=trained"}
    assert len(gaps) == 2 * 4 * len(dg.SITES)
    mass = df[(df.metric == "attn_mass") & df.slice.str.contains("segment=needle")]
    assert len(mass) == 2 * 4 and ((mass.value >= 0) & (mass.value <= 1)).all()
    out = render.write(df, "dg", tmp_path / "rep")
    assert "Recency gap" in (out / "index.md").read_text() and (out / "plots" / "recency.png").exists()
    assert (out / "plots" / "profiles.png").stat().st_size > 1000
    cli = forked_cli.run([sys.executable, "-m", "suite.commands.diagnose", "pattern=rope_in_swa", "pattern.window=4",
                          "task=niah_single", f"results_dir={tmp_path}"], capture_output=True, text=True,
                         cwd=Path(__file__).parent.parent)
    assert cli.returncode == 0 and "recency gap f(1) - f(16) at init" in cli.stdout and "masked" in cli.stdout


def test_diagnostics_every_n_steps_adds_mid_training_rows(tmp_path):
    from suite.results import store
    from suite.run import execute

    spec = make_spec("task=niah_single", "train.steps=6", "train.batch_size=4", "eval.n_examples=4",
                     "eval.multiples=[1]", "eval.diagnostics=true", "eval.diagnostics_every=2", "logger=none")
    df = store.load(execute(spec, results_dir=tmp_path, progress=False).parent)
    stages = {s.split(",")[0] for s in df[df.metric == "recency_gap"].slice}
    assert stages == {"at=init", "at=step2", "at=step4", "at=trained"}
