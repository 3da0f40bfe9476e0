"""``make bench-numerics``: what the numeric pins (``suite.pins``) cost and what they change.

The same run (RoPE copy on the tiny model, one thread, ``--steps`` training steps, scored at L and
1.25 L) is trained ``--repeats`` times in fresh processes with the pins and without them,
alternating, so both share whatever else the machine is doing. Prints and writes
``reports/perf/numerics.csv`` and ``numerics.md``: per setting the median run wall time (the run's
own, training and evaluation) and the median CPU time of its whole process (start-up included;
the steadier figure on a busy machine), the
ATen CPU capability the process dispatched to, whether every repeat gave the same floats, and
the cost ratios pinned / unpinned, a fingerprint of the first repeat's floats (the same on two
machines when they compute the same numbers bit for bit); and whether the two settings agree. On a CPU whose
widest SIMD is AVX2 the two settings take the same paths; on an AVX512 CPU they differ, which is
the difference two such machines show without pins.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from suite.commandline import check_output, command, parser
from suite.files import write_atomic
from suite.pins import SWITCH

SETTINGS = {"pinned": "1", "unpinned": "0"}


def one_run(steps: int, switch: str, folder: Path) -> dict:
    """Train the bench's run in a fresh process under ``POSBENCH_NUMERIC_PINS=switch``; its wall
    time, capability and scores (every stored float)."""
    env = {**os.environ, SWITCH: switch}
    for key in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA"):
        env.pop(key, None)  # each setting decides them itself
    cmd = [sys.executable, "-m", "suite.run", "+arch=rope", "task=copy", f"train.steps={steps}",
           "eval.multiples=[1,1.25]", "eval.n_examples=50", "logger=none", "threads=1", "sweep_name=bench",
           f"results_dir={folder}", f"hydra.run.dir={folder / 'hydra'}", "hydra/job_logging=disabled",
           "hydra/hydra_logging=disabled"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (result,) = (folder / "bench").glob("*.json")
    payload = json.loads(result.read_text())
    values = sorted((r["task"], r["eval_len"], r["metric"], r["slice"], r["value"]) for r in payload["rows"])
    numeric = payload["run"]["numeric"]
    return {"wall_s": payload["rows"][0]["wall_s"], "cpu_s": cpu_s, "capability": numeric["cpu_capability"],
            "cpu": numeric.get("cpu"), "values": json.dumps(values)}


def fingerprint(values: str) -> str:
    """16 hex digits naming a run's stored floats: two machines that print the same fingerprint
    computed the same numbers bit for bit."""
    return hashlib.sha256(values.encode()).hexdigest()[:16]


def measure(steps: int, repeats: int) -> tuple[pd.DataFrame, bool]:
    runs = {name: [] for name in SETTINGS}
    for _ in range(repeats):
        for name, switch in SETTINGS.items():
            with tempfile.TemporaryDirectory() as tmp:
                runs[name].append(one_run(steps, switch, Path(tmp)))
    rows = []
    for name, got in runs.items():
        rows.append({"setting": name, "cpu": got[0]["cpu"], "capability": got[0]["capability"], "repeats": len(got),
                     "median_wall_s": statistics.median(r["wall_s"] for r in got),
                     "median_cpu_s": statistics.median(r["cpu_s"] for r in got),
                     "repeats_identical": len({r["values"] for r in got}) == 1,
                     "fingerprint": fingerprint(got[0]["values"])})
    table = pd.DataFrame(rows)
    base = table.set_index("setting").loc["unpinned"]
    table["wall_vs_unpinned"] = table.median_wall_s / base.median_wall_s
    table["cpu_vs_unpinned"] = table.median_cpu_s / base.median_cpu_s
    across = runs["pinned"][0]["values"] == runs["unpinned"][0]["values"]
    return table, across


@command
def main(argv: list[str] | None = None) -> int:
    p = parser("python -m suite.bench.numerics", __doc__)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="reports/perf")
    args = p.parse_args(argv)
    check_output(p.prog, "--out", args.out)  # before any work
    table, across = measure(args.steps, args.repeats)
    text = table.to_markdown(index=False, floatfmt=".3f")
    verdict = (f"pinned and unpinned runs give {'the same' if across else 'different'} floats on this machine "
               f"({args.steps} training steps)")
    print(text)
    print(verdict)
    out = Path(args.out)
    write_atomic(out / "numerics.csv", table.round(4).to_csv(index=False))
    write_atomic(out / "numerics.md", f"# Numeric pins: cost and effect\n\n`make bench-numerics`\n\n{text}\n\n{verdict}.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
