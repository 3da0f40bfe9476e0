"""The numeric signature of the machine a run computed on: what decides whether two machines give
bit-identical floats for the same run. Recorded in every result file (``run.numeric``) and
summarized in each report's provenance, so a published number says where it is exact.

On the CPU the float results of one spec depend on the torch build and version, the SIMD kernels
ATen dispatches to (``torch.backends.cpu.get_cpu_capability()``: AVX2, AVX512, ...), the BLAS
and its settings (MKL picks code paths per CPU unless ``MKL_CBWR`` pins them: Intel's
"conditional numerical reproducibility") and the thread count, which changes reduction orders.
"""
from __future__ import annotations

import os
import platform
import re
from functools import lru_cache

import torch

from suite.pins import PINS


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def _build() -> dict:
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    return {"torch": torch.__version__, "blas": blas.group(1) if blas else "unknown",
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu": _cpu_model(),
            "machine": platform.machine()}


def signature() -> dict:
    """This process's numeric signature: torch version, BLAS, ATen's CPU capability, CPU model,
    architecture, torch threads, and the environment settings that pin numeric paths."""
    return {**_build(), "threads": torch.get_num_threads(),
            "pins": {k: os.environ[k] for k in PINS if os.environ.get(k)}}


def label(sig: dict) -> str:
    """'torch 2.13.0, mkl, AVX2, AMD EPYC, 1 thread' (and any pins): one line for a report."""
    pins = ", ".join(f"{k}={v}" for k, v in (sig.get("pins") or {}).items())
    threads = sig.get("threads")
    text = (f"torch {sig.get('torch')}, {sig.get('blas')}, {sig.get('cpu_capability')}, {sig.get('cpu')}, "
            f"{threads} thread{'s' if threads != 1 else ''}")
    return f"{text}, {pins}" if pins else text
