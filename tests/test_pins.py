"""Numeric pins (``suite.pins``): set before torch loads, unless switched off or already set, and
recorded in the numeric signature of every run.

Mutation checks: ``apply`` overwriting a value already in the environment (``environ[key] = value``)
makes test_pins_fill_in_only_what_is_unset fail; ``suite/__init__.py`` not calling ``apply``
makes test_a_fresh_process_dispatches_to_avx2_and_records_it fail on an AVX512 machine and on any
other (the signature's pins are then empty).
"""
import json
import platform
import subprocess
import sys

import pytest

from suite import pins

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not X86, reason="the pins are x86-64 settings and are not applied elsewhere")
def test_pins_fill_in_only_what_is_unset():
    env = {"MKL_CBWR": "COMPATIBLE"}
    assert pins.apply(env) == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert env["MKL_CBWR"] == "COMPATIBLE"
    off = {pins.SWITCH: "0"}
    assert pins.apply(off) == {} and set(off) == {pins.SWITCH}


def _avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return " avx2" in fh.read()
    except OSError:
        return False


@pytest.mark.skipif(not (X86 and _avx2()), reason="needs an x86-64 CPU with AVX2")
@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_fresh_process_dispatches_to_avx2_and_records_it(switch):
    code = ("import suite, json, torch; from suite.results import signature; "
            "print(json.dumps(signature.signature()))")
    env = {k: v for k, v in __import__("os").environ.items() if k not in pins.PINS}
    out = subprocess.run([sys.executable, "-c", code], env={**env, pins.SWITCH: switch}, check=True,
                         capture_output=True, text=True).stdout
    sig = json.loads(out)
    if switch == "1":
        assert sig["cpu_capability"] == "AVX2" and sig["pins"] == pins.PINS
    else:
        assert sig["pins"] == {}
