"""Timers and FLOP counts shared by ``make bench`` (CPU) and its GPU part (``suite.bench.gpu``)."""
from __future__ import annotations

import time

import torch


def time_steps(step, steps: int, warmup: int = 2, sync=lambda: None) -> float:
    """Seconds per call of ``step`` after ``warmup`` calls; ``sync`` waits for queued device work."""
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) / steps


def cuda_time(step, steps: int) -> float:
    """``time_steps`` on a CUDA device: three warm-up calls, synchronized before and after."""
    return time_steps(step, steps, warmup=3, sync=torch.cuda.synchronize)


def matmul_peak_gflops(n: int = 1024, reps: int = 20) -> float:
    """fp32 matrix-multiply rate of this machine now: 2 n^3 FLOPs per n x n product."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n ** 3 / time_steps(lambda: a @ b, reps) / 1e9


def bf16_matmul_peak_tflops(n: int = 8192, reps: int = 20) -> float:
    """bf16 matrix-multiply rate of the CUDA device now."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return 2 * n ** 3 / cuda_time(lambda: a @ b, reps) / 1e12


def training_flops(params: int, tokens_per_s: float) -> float:
    """Training FLOP/s by the usual estimate, 6 x parameters x tokens/s (attention left out;
    Kaplan et al. 2020, "Scaling Laws for Neural Language Models")."""
    return 6 * params * tokens_per_s
