"""make bench's measuring tools measure what they claim (no timing assertions here)."""
import subprocess
import sys
from pathlib import Path

import pandas as pd

from suite.bench import targets

ROOT = Path(__file__).parent.parent


def test_peak_memory_sees_a_temporary_allocation_after_a_reset():
    code = """
import torch
from suite.bench import peak_rss_mb, reset_peak_rss, rss_mb
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

    from suite.bench_step import LogitsOnly, hf_llama, sweep_step_rows
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

    for name in ("bench_gpu", "bench_step", "timing"):
        tree = ast.parse((ROOT / "suite" / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "suite.bench" not in imported, name
