"""Diagnostics on constructed cases with known answers.

Mutation check: in suite/diagnostics.py logit_profile, logits.diagonal(offset=-d) -> offset=d makes
test_logit_profile_recovers_an_alibi_slope fail; segment_share .sum(-1) -> .mean(-1) makes
test_segment_shares_under_uniform_causal_attention_count_the_keys_seen fail."""
import numpy as np
import pytest
import torch

from suite import diagnostics as dg
from suite.model import PosBenchLM
from tasks import build_task
from tests.conftest import make_spec


def test_lag_grid_is_roughly_logarithmic():
    assert dg.lag_grid(40) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]


def test_window_averages_of_iid_vectors_follow_one_minus_d_over_w():
    torch.manual_seed(0)
    x = torch.randn(8, 256, 512)  # i.i.d. token vectors
    w = 16
    lags = dg.lag_grid(64)
    got = dg.cosine_profile(dg.uniform_window_average(x, w)[:, w:], lags)
    assert torch.allclose(got, dg.expected_window_profile(lags, w), atol=0.03)
    assert dg.recency_gap(got, lags, far=32) == pytest.approx(1 - 1 / w, abs=0.03)  # f(1) - f(32)


def test_uniform_causal_attention_decays_far_more_slowly():
    torch.manual_seed(0)
    x = torch.randn(8, 256, 512)
    lags = dg.lag_grid(64)
    window = dg.cosine_profile(dg.uniform_window_average(x, 16)[:, 16:], lags)
    causal = dg.cosine_profile(dg.uniform_window_average(x, None)[:, 16:], lags)
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


def test_logit_profile_recovers_an_alibi_slope():
    model = PosBenchLM(make_spec("position=alibi", "model.n_layers=1").model)
    with torch.no_grad():  # zero the content term: logits are the bias alone
        model.blocks[0].attn.qkv.weight.zero_()
    tokens = torch.randint(9, 300, (2, 24))
    prof = dg.logit_profile(model.attention_logits(tokens)[0])
    slopes = model.schemes[0].slopes
    expected = -slopes[:, None] * torch.arange(24, dtype=torch.float32)[None, :]
    assert torch.allclose(prof, expected, atol=1e-5)


def test_hidden_sites_and_recency_rows_cover_every_layer_and_site():
    spec = make_spec("pattern=command_a", "model.n_layers=4")
    torch.manual_seed(0)
    model = PosBenchLM(spec.model)
    tokens = torch.randint(9, 300, (4, 32))
    sites = dg.hidden_sites(model, tokens)
    assert set(sites) == {(layer, site) for layer in range(4) for site in dg.SITES}
    # the residual after the block is the residual after attention plus the MLP output
    assert torch.allclose(sites[(1, "resid_out")], sites[(1, "resid_mid")] + sites[(1, "mlp_out")], atol=1e-6)
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


def test_a_run_with_diagnostics_stores_init_and_trained_rows_and_the_report_shows_them(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from suite import store
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
    cli = subprocess.run([sys.executable, "-m", "suite.diagnose", "pattern=rope_in_swa", "pattern.window=4",
                          "task=niah_single", f"results_dir={tmp_path}"], capture_output=True, text=True,
                         cwd=Path(__file__).parent.parent)
    assert cli.returncode == 0 and "recency gap f(1) - f(16) at init" in cli.stdout and "masked" in cli.stdout


def test_diagnostics_every_n_steps_adds_mid_training_rows(tmp_path):
    from suite import store
    from suite.run import execute

    spec = make_spec("task=niah_single", "train.steps=6", "train.batch_size=4", "eval.n_examples=4",
                     "eval.multiples=[1]", "eval.diagnostics=true", "eval.diagnostics_every=2", "logger=none")
    df = store.load(execute(spec, results_dir=tmp_path, progress=False).parent)
    stages = {s.split(",")[0] for s in df[df.metric == "recency_gap"].slice}
    assert stages == {"at=init", "at=step2", "at=step4", "at=trained"}
