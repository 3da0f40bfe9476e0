"""Numeric pins: the environment settings that make a CPU run take the same floating-point code
paths on every x86-64 machine with AVX2, so a published number can be recomputed bit for bit
elsewhere (``suite.results.signature`` records what a run computed under).

Without them, ATen dispatches its vectorized kernels to the widest SIMD the CPU has
(``ATEN_CPU_CAPABILITY``: AVX512 here, AVX2 on older or other machines), and MKL and oneDNN choose
their kernels per CPU too (``MKL_CBWR``, Intel's conditional numerical reproducibility;
``ONEDNN_MAX_CPU_ISA``). Kernels of different widths sum in different orders, so the same run ends
a few ulps apart, and training amplifies that into different scores. Pinning every one of them
to AVX2, the width every x86-64 server CPU since 2013 offers, removes that source of difference;
the torch build and version, and the thread count, remain part of the signature.

The pins are set when ``suite`` is imported, before torch is (``suite/__init__.py``), and apply to
every worker a sweep starts; ``POSBENCH_NUMERIC_PINS=0`` turns them off, and a value already in
the environment is kept. ``python -m suite.bench.numerics`` measures their cost and effect.
"""
from __future__ import annotations

import os
import platform

PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
SWITCH = "POSBENCH_NUMERIC_PINS"


def apply(environ=os.environ) -> dict:
    """Set every pin not already set (x86-64 only, unless ``POSBENCH_NUMERIC_PINS=0``); returns
    the pins now in force."""
    if environ.get(SWITCH, "1") != "0" and platform.machine().lower() in ("x86_64", "amd64"):
        for key, value in PINS.items():
            environ.setdefault(key, value)
    return {k: environ[k] for k in PINS if environ.get(k)}
