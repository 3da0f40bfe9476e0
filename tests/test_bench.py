"""make bench's measuring tools measure what they claim (no timing assertions here).

Mutation check: in suite/bench/perf.py targets, the swa evaluation-time ratio 16K / 4K -> 4K / 16K makes
test_targets_compare_the_measured_ratios fail."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.bench.perf import targets
from tests.conftest import fast_or_exhaustive

ROOT = Path(__file__).parent.parent


def test_peak_memory_sees_a_temporary_allocation_after_a_reset():
    code = """
import torch
from suite.bench.perf import peak_rss_mb, reset_peak_rss, rss_mb
big = torch.ones(64 * 2**20 // 4)  # 64 MB, raises the high-water mark
del big
before = rss_mb(); reset_peak_rss()
quiet = peak_rss_mb() - before
x = torch.ones(200 * 2**20 // 4); del x  # 200 MB, freed again
print(quiet, peak_rss_mb() - before, rss_mb() - before)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    quiet, peak, after = map(float, out.stdout.split())
    assert quiet < 20  # the earlier 64 MB no longer counts
    assert 190 < peak < 260 and after < 20  # the 200 MB tensor is seen although it is gone


def test_targets_compare_the_measured_ratios():
    rows = [
        {"kind": "train", "model": "tiny", "scheme": "rope", "span": "full", "path": "sdpa", "tokens_per_s": 120.0},
        {"kind": "train", "model": "tiny", "scheme": "rope", "span": "full", "path": "hf_llama", "tokens_per_s": 100.0},
        {"kind": "train", "model": "small", "scheme": "rope", "span": "full", "path": "sdpa", "tokens_per_s": 90.0},
        {"kind": "train", "model": "small", "scheme": "rope", "span": "full", "path": "hf_llama", "tokens_per_s": 100.0},
    ]
    for span, s4, s16, mem in (("full", 1.0, 16.0, 4000.0), ("swa", 1.0, 4.5, 300.0)):
        rows += [{"kind": "eval", "scheme": "alibi", "span": span, "length": 4096, "seconds": s4, "peak_mb": 50.0},
                 {"kind": "eval", "scheme": "alibi", "span": span, "length": 16384, "seconds": s16, "peak_mb": mem}]
    sweep = pd.DataFrame({"phase": ["training", "evaluation", "task generation"], "share": [0.7, 0.1, 0.2]})
    lines = targets(pd.DataFrame(rows), (sweep, {}))
    assert "`tiny`: fast path / HF Llama = 1.20 (target >= 1.0): met" in lines[0] + lines[1]
    assert "`small`: fast path / HF Llama = 0.90 (target >= 1.0): NOT met" in lines[0] + lines[1]
    assert any("alibi swa evaluation time 4K -> 16K: 4.50x (target <= 5x): met" in x for x in lines)
    assert any("300 MB vs full 4000 MB = 0.07 (target <= 0.25): met" in x for x in lines)
    assert lines[-1].startswith("- time outside training and evaluation in the sweep: 20.0%") and lines[-1].endswith(": met")


def test_the_hf_contender_goes_through_the_sweeps_own_training_step():
    import torch

    from suite.bench.step_vs_llama import LogitsOnly, hf_llama, sweep_step_rows
    from tests.conftest import make_spec

    spec = make_spec("model=tiny", "position=rope")
    torch.manual_seed(0)
    hf = hf_llama(spec.model)
    tokens = torch.randint(9, spec.model.vocab_size, (2, 12))
    assert torch.equal(LogitsOnly(hf)(tokens), hf(tokens).logits)
    threads = torch.get_num_threads()
    rows = sweep_step_rows(sizes=("tiny",), tasks=("copy",), steps={"tiny": 3}, rounds=1)
    assert torch.get_num_threads() == threads  # a sweep worker's one thread, then restored
    assert [(r["path"], r["task"], r["steps"]) for r in rows] == [("posbench", "copy", 3), ("hf_llama", "copy", 3)]
    assert all(r["tokens_per_s"] > 0 for r in rows)


def test_sweep_step_targets_use_the_ratio_of_the_two_models():
    rows = [{"kind": "sweep_step", "model": "tiny", "task": "copy", "path": "posbench", "tokens_per_s": 130.0},
            {"kind": "sweep_step", "model": "tiny", "task": "copy", "path": "hf_llama", "tokens_per_s": 100.0},
            {"kind": "sweep_step", "model": "small", "task": "vt", "path": "posbench", "tokens_per_s": 90.0},
            {"kind": "sweep_step", "model": "small", "task": "vt", "path": "hf_llama", "tokens_per_s": 100.0}]
    lines = targets(pd.DataFrame(rows).assign(scheme="rope", span="full", length=float("nan")), None)
    assert "- sweep step, `small` on vt: PosBench / HF Llama = 0.90 (target >= 1.3): NOT met" in lines
    assert "- sweep step, `tiny` on copy: PosBench / HF Llama = 1.30 (target >= 1.3): met" in lines


def test_bench_modules_import_in_one_direction():
    import ast

    for name in ("gpu", "step_vs_llama", "timing"):
        tree = ast.parse((ROOT / "suite" / "bench" / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "suite.bench.perf" not in imported, name


GPU_BENCH_CONFIGS = [("rope", "full", "sdpa"), ("alibi", "swa", "sdpa"), ("t5", "chunked", "sdpa")]


# make test compiles one span (a sliding window), make test-exhaustive every span
@pytest.mark.parametrize("spans", fast_or_exhaustive(["window", "every"], ["window"]))
def test_the_gpu_bench_trains_through_the_compiled_sweep_step_on_the_cpu(spans):
    from suite.bench.gpu import report, step_rows

    # the GPU command's code path, shrunk: tiny model, fp32, the aot_eager backend (no C++ compiler)
    configs = GPU_BENCH_CONFIGS if spans == "every" else GPU_BENCH_CONFIGS[1:2]
    extra = ["model=tiny", "train.seq_len=40", "train.batch_size=2", "train.precision=fp32", "eval.multiples=[1]"]
    rows = step_rows(configs, extra, device="cpu", backend="aot_eager", steps=1, budget_s=600)
    assert [(r["scheme"], r["span"], r["path"]) for r in rows] == configs
    assert all(r["tokens_per_s"] > 0 and r["batch"] == 2 and r["seq_len"] == 40 and r["model"] == "tiny" for r in rows)
    skipped = step_rows(configs[:1], extra, device="cpu", backend="aot_eager", steps=1, budget_s=-1)
    assert skipped[0]["skipped"].startswith("over the")
    text = report(pd.DataFrame(rows + skipped), measured=100.0, datasheet=None, device="cpu")
    assert "mfu_measured" in text and "not known for this device" in text and f"- skipped {' '.join(configs[0])}" in text


def test_the_gpu_bench_knows_the_datasheet_peak_of_common_devices():
    from suite.bench.gpu import datasheet_peak

    assert datasheet_peak("NVIDIA H200") == 989.0 and datasheet_peak("NVIDIA A100-SXM4-80GB") == 312.0
    assert datasheet_peak("Some Other GPU") is None


def test_a_runs_training_tokens_are_replayed_from_its_seeds():
    import numpy as np

    from suite.data.batch import make_batch
    from suite.bench.step_vs_llama import training_tokens
    from tests.conftest import make_spec

    spec = make_spec("task=copy", "train.steps=30", "seed=3")
    t, tasks = spec.train, [task.build() for task in spec.tasks]
    built = sum(make_batch(tasks, np.random.default_rng([3, step]), t.seq_len, t.batch_size, t.min_len)[0].numel()
                for step in range(t.steps))
    assert training_tokens(spec) == built and built != t.steps * t.batch_size * t.seq_len  # lengths vary


def test_the_sweep_level_ratio_counts_every_stored_run_of_the_latest_multirun(tmp_path):
    import json

    from suite.results import store
    from suite.bench.perf import _sweep_level_text
    from suite.bench.step_vs_llama import sweep_level_rows, training_tokens
    from suite.config.validate import sweep_log_path
    from tests.conftest import make_spec

    specs = [make_spec("task=copy", "seed=0"), make_spec("task=copy", "seed=1"), make_spec("task=vt", "seed=0")]
    for i, spec in enumerate(specs):
        store.write_run(tmp_path, "sw", f"r{i}", {"run_id": f"r{i}", "timestamp": "2026-01-01T00:01:00+00:00",
                                                 "timing": {"train_s": 1.0}, "spec": spec.to_dict()}, [])
    sweep_log_path(tmp_path, "sw").write_text(json.dumps(
        {"sweep": "sw", "started": "2026-01-01T00:00:00+00:00", "ended": "2026-01-01T00:02:00+00:00",
         "wall_s": 100.0, "parallel": 2}) + "\n")
    [row] = sweep_level_rows(tmp_path, "sw", steps=3, threads=1)
    assert row["runs"] == 3 and row["tokens"] == sum(training_tokens(s) for s in specs)
    assert row["posbench_tokens_per_s"] == row["tokens"] / 100.0 and row["hf_llama_s"] > 0
    ratio = row["posbench_tokens_per_s"] / row["hf_llama_tokens_per_s"]
    assert f"Ratio: **{ratio:.2f}**" in _sweep_level_text(pd.DataFrame([row]))
    [line] = [x for x in targets(pd.DataFrame([row]).assign(task=None, model="tiny", scheme="rope", span="full", path="", length=0), None) if "whole" in x]
    assert f"one run after another: {ratio:.2f} (target >= 2.0)" in line
    assert sweep_level_rows(tmp_path, "nothing") == []


def test_the_gpu_sweep_plan_is_six_n_d_over_the_given_rate():
    from suite.bench.gpu import sweep_plan
    from tests.conftest import make_spec

    plan = sweep_plan("gpu", peak_tflops=1000.0, mfu=0.5)
    t = make_spec("+sweep=gpu").train
    assert plan["runs"] == 9 * 3 and plan["tokens_per_run"] == t.steps * t.batch_size * t.seq_len
    assert plan["flops_per_run"] == 6 * plan["params"] * plan["tokens_per_run"]
    assert abs(plan["run_minutes"] * 60 * 0.5 * 1000e12 - plan["flops_per_run"]) < 1e6
    assert 110e6 < plan["params"] < 140e6  # the ~124M base model


def test_every_cpu_adamw_is_timed_through_the_sweep_step():
    from suite.bench.perf import _optimizer_table
    from suite.bench.step_vs_llama import OPTIMIZERS, optimizer_rows

    rows = optimizer_rows(steps=2, rounds=1)
    assert [r["path"] for r in rows] == list(OPTIMIZERS) and all(r["tokens_per_s"] > 0 for r in rows)
    assert "AdamW fused" in _optimizer_table(pd.DataFrame(rows))
