"""What the bench writers print: plain table headers, CSV numbers to 4 significant digits, and
only module names that exist. The texts are rendered from the shipped measurements
(reports/perf/bench.csv, reports/perf-gpu/bench.csv), measuring nothing.

Mutation checks: in suite/bench/perf.py report, `suite.training.loop.train` written back as
`suite.train.train` (or `suite.bench.gpu` as `suite.bench_gpu`) makes
test_every_module_a_bench_report_names_exists fail; in suite/bench/gpu.py report,
flex_vs.to_markdown(floatfmt=".2f") instead of plain_table(flex_vs) makes
test_the_gpu_report_has_one_plain_header_row_per_table fail; in suite/bench/tables.py csv_text,
leaving float columns unrounded makes test_bench_csv_numbers_carry_four_significant_digits fail;
perf.main writing bench.csv with df.to_csv again makes test_the_bench_writers_write_csv_only_through_csv_text fail."""
import ast
import importlib
import importlib.util
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from suite.bench import gpu, perf, tables

ROOT = Path(__file__).resolve().parent.parent
MODULE_NAME = re.compile(r"\bsuite(?:\.[A-Za-z_]\w*)+")


def _texts() -> dict[str, str]:
    """Each bench writer's Markdown, from the shipped measurements; perf's with a sweep breakdown."""
    cpu = pd.read_csv(ROOT / "reports/perf/bench.csv")
    sweep = (pd.DataFrame({"phase": ["training", "evaluation"], "seconds": [9.0, 1.0], "share": [0.9, 0.1]}),
             {"sweep": "default", "started": "2026-01-01", "runs": 36, "wall_s": 100.0, "parallel": 2, "worker_s": 190.0})
    on_gpu = pd.read_csv(ROOT / "reports/perf-gpu/bench.csv")
    return {"perf": perf.report(cpu, float(cpu.matmul_peak_gflops.iloc[0]), sweep),
            "perf-gpu": gpu.report(on_gpu, 800.0, 989.0, "NVIDIA H200",
                                   command="python -m suite.bench.gpu --budget 150")}


def resolves(name: str) -> bool:
    """Whether ``name`` is a module (found by importlib.util.find_spec) or a module followed by
    attributes it has ('suite.training.loop.train')."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent is a module, not a package
            found = False
        if found:
            obj = importlib.import_module(module)
            for attribute in parts[cut:]:
                if not hasattr(obj, attribute):
                    return False
                obj = getattr(obj, attribute)
            return True
    return False


def test_every_module_a_bench_report_names_exists():
    named = {writer: set(MODULE_NAME.findall(text)) for writer, text in _texts().items()}
    assert {"suite.training.loop.train", "suite.bench.gpu"} <= named["perf"] and "suite.bench.gpu" in named["perf-gpu"]
    for writer, names in named.items():
        assert [n for n in sorted(names) if not resolves(n)] == [], writer
    assert not resolves("suite.train.train") and not resolves("suite.bench_gpu")  # the stale names fail


def test_the_gpu_report_has_one_plain_header_row_per_table():
    text = _texts()["perf-gpu"]
    lines = text.splitlines()
    headers = [line for i, line in enumerate(lines) if line.startswith("|") and i + 1 < len(lines)
               and lines[i + 1].startswith("|:")]
    assert len(headers) == 2
    assert [c.strip() for c in headers[1].strip("|").split("|")] == ["scheme", "span", "flex", "sdpa", "flex/sdpa"]
    rows = [line for line in lines if line.startswith("| rope") and "chunked" in line]
    assert rows[-1].split("|")[1:6] == [" rope     ", " chunked ", " 592412 ", " 524447 ", "        1.13 "]
    assert "('" not in text and "tokens/s" in headers[0]


def _significant_digits(field: str) -> int:
    digits = field.lstrip("-").replace(".", "").split("e")[0].lstrip("0").rstrip("0")
    return len(digits)


def test_bench_csv_numbers_carry_four_significant_digits():
    df = pd.DataFrame({"scheme": ["rope", "alibi", "t5"], "params": [1234567, 89, 10],
                       "tokens_per_s": [21999.110861889945, 156.21894973734987, float("nan")],
                       "ratio": [0.000123456789, 1.0, 12.3456789]})
    text = tables.csv_text(df)
    back = pd.read_csv(pd.io.common.StringIO(text))
    assert back.params.tolist() == [1234567, 89, 10] and back.scheme.tolist() == ["rope", "alibi", "t5"]
    assert back.tokens_per_s[:2].tolist() == [22000.0, 156.2] and math.isnan(back.tokens_per_s[2])
    assert back.ratio.tolist() == [0.0001235, 1.0, 12.35]
    floats = [f for line in text.splitlines()[1:] for f in line.split(",")[2:] if f]
    assert floats and max(_significant_digits(f) for f in floats) <= 4


@pytest.mark.parametrize("writer", ["perf", "gpu"])
def test_the_bench_writers_write_csv_only_through_csv_text(writer, tmp_path):
    tree = ast.parse((ROOT / "suite" / "bench" / f"{writer}.py").read_text())
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "") for n in ast.walk(tree)
             if isinstance(n, ast.Call)}
    assert "to_csv" not in calls and "write_report" in calls
    tables.write_report(tmp_path, pd.DataFrame({"x": [1 / 3]}), "# t\n")
    assert (tmp_path / "bench.csv").read_text() == "x\n0.3333\n" and (tmp_path / "index.md").read_text() == "# t\n"
