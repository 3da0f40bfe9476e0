"""``make bench``: speed and memory, each figure measured side by side in one run.

Writes ``reports/perf/bench.csv`` and ``reports/perf/index.md``:

* the step a sweep runs (``suite.training.loop.train``, default-sweep tasks and lengths, one thread) with
  PosBench's model and with a same-shape Hugging Face ``LlamaForCausalLM`` (``suite.bench.step_vs_llama``);
* training tokens/s for scheme x span on ``tiny`` and ``small``: PosBench's fast path, its
  reference path, and (RoPE, full attention) the same HF Llama, in a bare step, with the ratios;
* evaluation time and peak memory against length (batch 1, ``small``) for full, sliding-window and
  chunked attention, with the growth from 4K to 16K tokens;
* the fraction of the machine's matrix-multiply peak (measured here) that training reaches;
* where the default sweep's wall time went (``suite.bench.sweep_time``), from its stored run timings.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pandas as pd
import torch

from suite.commandline import check_output, command, parser
from suite.model.attention import Context
from suite.bench.step_vs_llama import hf_llama, optimizer_rows, sweep_level_rows, sweep_step_rows
from suite.config.compose import compose_config
from suite.model.lm import PosBenchLM
from suite.config.build import build
from suite.files import write_atomic
from suite.training.step import train_step
from suite.bench.sweep_time import breakdown
from suite.bench.tables import plain_table, write_report
from suite.bench.timing import matmul_peak_gflops, time_steps, training_flops

SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=64"], "chunked": ["span=chunked", "span.chunk=64"]}


def spec_for(model: str, scheme: str, span: str, seq_len: int):
    return build(compose_config([f"model={model}", f"position={scheme}", *SPANS[span], f"train.seq_len={seq_len}"]))


def train_tokens_per_s(model, tokens, impl: str | None, steps: int) -> float:
    """Tokens/s of ``suite.training.step.train_step`` (the sweep's step) on ``tokens`` with every next
    token scored; ``impl`` None: a Hugging Face model."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params, mask = list(model.parameters()), torch.ones_like(tokens, dtype=torch.bool)
    if impl is None:
        forward = lambda t: model(t).logits  # noqa: E731
    else:
        forward = lambda t: model(t, Context(pos=torch.arange(t.shape[1]), impl=impl))  # noqa: E731
    return tokens.numel() / time_steps(lambda: train_step(forward, opt, params, tokens, mask, grad_clip=1.0), steps)


def training_rows(steps: int, batch: int, seq_len: int, rounds: int = 2) -> list[dict]:
    """Tokens/s per (model, scheme, span, path). The paths compared with each other are timed in
    turn, ``rounds`` times, and each keeps its best round, so a slow moment of the machine does
    not land on one side of a ratio only."""
    rows = []
    for size in ("tiny", "small"):
        for scheme in ("nope", "rope", "alibi", "t5"):
            for span in ("full", "swa"):
                spec = spec_for(size, scheme, span, seq_len)
                torch.manual_seed(0)
                model = PosBenchLM(spec.model)
                tokens = torch.randint(9, spec.model.vocab_size, (batch, seq_len))
                contenders = {impl: (model, impl) for impl in ("sdpa", "reference")}
                if scheme == "rope" and span == "full":
                    try:
                        contenders["hf_llama"] = (hf_llama(spec.model), None)
                    except ImportError:
                        pass
                best = {name: 0.0 for name in contenders}
                for _ in range(rounds):
                    for name, (m, impl) in contenders.items():
                        best[name] = max(best[name], train_tokens_per_s(m, tokens, impl, steps))
                for name, (m, _) in contenders.items():
                    rows.append({"kind": "train", "model": size, "scheme": scheme, "span": span, "path": name,
                                 "tokens_per_s": best[name], "params": sum(p.numel() for p in m.parameters())})
    return rows


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc)."""
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    """This process's peak resident memory since start or since ``reset_peak_rss``."""
    return _status_mb("VmHWM")


def reset_peak_rss() -> None:
    """Reset the kernel's high-water mark of resident memory to the current size (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


_MEMORY_CHILD = """
import json, sys, torch
from suite.bench.perf import peak_rss_mb, reset_peak_rss, rss_mb, spec_for
from suite.model.lm import PosBenchLM
scheme, span, length = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(2)
spec = spec_for("small", scheme, span, 1024)
model = PosBenchLM(spec.model).eval()
tokens = torch.randint(9, spec.model.vocab_size, (1, length))
with torch.no_grad():
    model(tokens[:, :256])  # first-call work (kernels, allocator) out of the way
    before = rss_mb()
    reset_peak_rss()
    model(tokens)
print(json.dumps({"peak_mb": peak_rss_mb() - before}))  # what the long forward needed on top
"""

_TIME_CHILD = """
import json, sys, time, torch
from suite.bench.perf import spec_for
from suite.model.lm import PosBenchLM
scheme, span, rounds, passes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lengths = [int(x) for x in sys.argv[5].split(",")]
torch.set_num_threads(2)
spec = spec_for("small", scheme, span, 1024)
model = PosBenchLM(spec.model).eval()
best = {n: float("inf") for n in lengths}
with torch.no_grad():
    model(torch.randint(9, spec.model.vocab_size, (1, 256)))
    for _ in range(rounds):  # the lengths in turn, so a slow moment does not land on one length only
        for n in lengths:
            tokens = torch.randint(9, spec.model.vocab_size, (1, n))
            for _ in range(passes):
                t0 = time.perf_counter(); model(tokens); best[n] = min(best[n], time.perf_counter() - t0)
print(json.dumps(best))
"""


def _child(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def eval_rows(lengths: list[int], schemes=("rope", "alibi"), max_quadratic_gib: float = 10.0,
              rounds: int = 2, passes: int = 2) -> list[dict]:
    """Evaluation time and peak memory (batch 1, ``small``). Time: one process per scheme x span
    runs the lengths in turn, ``rounds`` times, keeping each length's fastest pass. Memory: each
    point in a fresh process, so no earlier allocation hides its peak. A full-attention bias
    scheme materializes an H x T x T mask; lengths whose mask would exceed ``max_quadratic_gib``
    are skipped and say so."""
    rows = []
    mask_gib = {n: 8 * n * n * 4 / 2 ** 30 for n in lengths}  # small has 8 heads, float32
    for scheme in schemes:
        for span in ("full", "swa", "chunked"):
            fits = [n for n in lengths if span != "full" or scheme == "rope" or mask_gib[n] <= max_quadratic_gib]
            seconds = _child(_TIME_CHILD, scheme, span, rounds, passes, ",".join(map(str, fits)))
            for n in lengths:
                row = {"kind": "eval", "model": "small", "scheme": scheme, "span": span, "length": n}
                if n not in fits:
                    rows.append({**row, "seconds": float("nan"), "peak_mb": float("nan"),
                                 "note": f"skipped: a {mask_gib[n]:.0f} GiB mask"})
                    continue
                rows.append({**row, "seconds": seconds[str(n)], "peak_mb": _child(_MEMORY_CHILD, scheme, span, n)["peak_mb"]})
    return rows


def _bare_step_sections(df: pd.DataFrame, peak: float) -> list[str]:
    """Bare-step tokens/s by path, and training FLOPs against the measured matmul peak."""
    train = df[df.kind == "train"].pivot_table(index=["model", "scheme", "span"], columns="path", values="tokens_per_s")
    train["fast/reference"] = train["sdpa"] / train["reference"]
    if "hf_llama" in train:
        train["fast/hf_llama"] = train["sdpa"] / train["hf_llama"]
    flops = df[(df.kind == "train") & (df.path == "sdpa")].assign(
        gflops=lambda d: training_flops(d.params, d.tokens_per_s) / 1e9)
    flops["fraction_of_matmul_peak"] = flops.gflops / peak
    return [
        "## Training tokens/s (bare step)", "",
        "Batch and length as in `bench.csv`; `sdpa` is PosBench's fast path, `reference` its "
        "materialized-logits path, `hf_llama` a Hugging Face `LlamaForCausalLM` of the same shape. "
        "Paths compared in a ratio are timed in turn and keep their best round.", "",
        plain_table(train), "",
        "## Training FLOPs (6 x params x tokens/s) as a fraction of the matmul peak", "",
        plain_table(flops[["model", "scheme", "span", "gflops", "fraction_of_matmul_peak"]], floatfmt=".3f"), "",
    ]


def _eval_sections(df: pd.DataFrame) -> list[str]:
    """Evaluation time and peak memory against length, one table per scheme."""
    lines = ["## Evaluation: time (s) and peak memory (MB) against length, batch 1, `small`", "",
             "Peak memory is the growth of the process's resident high-water mark during the forward, "
             "each point in a fresh process.", ""]
    for scheme, e in df[df.kind == "eval"].groupby("scheme", sort=False):
        table = e.pivot_table(index="length", columns="span", values=["seconds", "peak_mb"], dropna=False)
        lines += [f"### {scheme}", "", plain_table(table), ""]
        for note in e.dropna(subset=["note"]).itertuples() if "note" in e else []:
            lines.append(f"- {scheme} {note.span} at {note.length}: {note.note}")
    return lines


def report(df: pd.DataFrame, peak: float, sweep: Optional[tuple]) -> str:
    """``reports/perf/index.md``: every measurement of one ``make bench`` run, then the targets."""
    lines = [
        "# PosBench performance", "",
        f"Measured in one run of `make bench` on {platform.machine()} ({os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}).",
        f"Matrix-multiply peak measured in the same run: {peak:.1f} GFLOP/s (1024 x 1024 fp32).", "",
        "## The sweep's training step against a same-shape HF Llama", "",
        "Both models train through `suite.training.loop.train` (the same batches of the default sweep's task "
        "under the CPU recipe's lengths, AdamW, clipping, schedule, answer-only loss; one torch thread, "
        "as a sweep worker), timed in turn, best of two rounds; tokens/s includes batch generation.", "",
        _sweep_step_table(df), "",
        "## AdamW implementations in the sweep step", "",
        "`tiny` on copy, the default sweep's batches, one thread; timed in turn, best of two rounds. "
        "The CPU recipe uses the for-loop implementation (`train.fused_optimizer` applies on CUDA only).", "",
        _optimizer_table(df), "",
        "## The whole sweep against the same runs trained by HF Llama", "",
        _sweep_level_text(df), "",
        *_bare_step_sections(df, peak), *_eval_sections(df),
        "", "## GPU", "", "`make bench-gpu` on a CUDA machine measures bf16 training, MFU and FlexAttention "
        "against SDPA (`suite.bench.gpu`, written to `reports/perf-gpu/`).", "", "## Targets", "",
        *targets(df, sweep),
    ]
    if sweep is not None:
        table, record = sweep
        lines += ["", f"## Where the `{record['sweep']}` sweep's wall time goes", "",
                  f"Multirun of {record['started']}: {record['runs']} runs in {record['wall_s']:.0f} s on "
                  f"{record['parallel']} parallel jobs ({record['worker_s']:.0f} worker-seconds).", "",
                  plain_table(table, floatfmt=".3f")]
    return "\n".join(lines) + "\n"


def _sweep_step_table(df: pd.DataFrame) -> str:
    s = df[df.kind == "sweep_step"]
    if s.empty:
        return "Not measured."
    t = s.astype({"steps": int}).pivot_table(index=["model", "task", "steps"], columns="path", values="tokens_per_s")
    t["posbench/hf_llama"] = t["posbench"] / t["hf_llama"]
    return plain_table(t)


def _optimizer_table(df: pd.DataFrame) -> str:
    o = df[df.kind == "optimizer"] if "kind" in df else df.iloc[0:0]
    if o.empty:
        return "Not measured."
    o = o[["path", "tokens_per_s"]].rename(columns={"path": "optimizer"})
    return plain_table(o.assign(relative=o.tokens_per_s / o.tokens_per_s.iloc[0]))


def _sweep_level_text(df: pd.DataFrame) -> str:
    s = df[df.kind == "sweep_level"] if "kind" in df else df.iloc[0:0]
    if s.empty:
        return "Not measured: no timed multirun of the sweep in the results store (run `make sweep` first)."
    r = s.iloc[0]
    return (f"The latest stored `{r.sweep}` multirun: {int(r.runs)} runs, {int(r.tokens):,} training tokens "
            f"(replayed from the runs' seeds) in {r.posbench_wall_s:.0f} s of wall time, every phase included, "
            f"on {int(r.parallel)} parallel jobs: {r.posbench_tokens_per_s:,.0f} tokens/s. The same runs trained "
            f"one after another by the same-shape HF Llama through `suite.training.loop.train` on {int(r.hf_threads)} "
            f"threads (the same cores; training only, at the tokens/s it reaches on each run's task): "
            f"{r.hf_llama_s:.0f} s, {r.hf_llama_tokens_per_s:,.0f} tokens/s. "
            f"Ratio: **{r.posbench_tokens_per_s / r.hf_llama_tokens_per_s:.2f}**.")


def targets(df: pd.DataFrame, sweep: Optional[tuple]) -> list[str]:
    """Each target of the performance issue, with the figure measured above and met / not met."""
    out = []
    verdict = lambda ok: "met" if ok else "NOT met"
    for (size, task), g in df[df.kind == "sweep_step"].groupby(["model", "task"]) if "task" in df else []:
        paths = g.set_index("path").tokens_per_s
        r = paths["posbench"] / paths["hf_llama"]
        out.append(f"- sweep step, `{size}` on {task}: PosBench / HF Llama = {r:.2f} (target >= 1.3): {verdict(r >= 1.3)}")
    for r in df[df.kind == "sweep_level"].itertuples():
        ratio = r.posbench_tokens_per_s / r.hf_llama_tokens_per_s
        out.append(f"- whole `{r.sweep}` sweep against HF Llama one run after another: {ratio:.2f} "
                   f"(target >= 2.0): {verdict(ratio >= 2.0)}")
    t = df[(df.kind == "train") & (df.scheme == "rope") & (df.span == "full")]
    for size, g in t.groupby("model"):
        paths = g.set_index("path").tokens_per_s
        if "hf_llama" in paths:
            r = paths["sdpa"] / paths["hf_llama"]
            out.append(f"- RoPE full attention, `{size}`: fast path / HF Llama = {r:.2f} (target >= 1.0): {verdict(r >= 1.0)}")
    e = df[df.kind == "eval"].set_index(["scheme", "span", "length"])
    for scheme in df[df.kind == "eval"].scheme.unique():
        k = (scheme, "swa")
        if (*k, 4096) in e.index and (*k, 16384) in e.index:
            g = e.seconds[(*k, 16384)] / e.seconds[(*k, 4096)]
            out.append(f"- {scheme} swa evaluation time 4K -> 16K: {g:.2f}x (target <= 5x): {verdict(g <= 5)}")
        full, swa = e.peak_mb.get((scheme, "full", 16384)), e.peak_mb.get((scheme, "swa", 16384))
        if full is not None and swa is not None and full == full and full > 0:
            out.append(f"- {scheme} swa peak memory at 16K: {swa:.0f} MB vs full {full:.0f} MB = {swa / full:.2f} "
                       f"(target <= 0.25): {verdict(swa / full <= 0.25)}")
            if scheme in ("rope", "nope"):
                out.append(f"  ({scheme} full attention runs on SDPA's fused causal kernel, whose memory is itself "
                           "linear in length: no T x T tensor exists to save. A bias scheme such as ALiBi must "
                           "materialize its H x T x T mask for full attention; that is what the blockwise "
                           "window avoids.)")
    if sweep is not None:
        table = sweep[0].set_index("phase")
        outside = 1 - table.share[["training", "evaluation"]].sum()
        out.append(f"- time outside training and evaluation in the sweep: {outside:.1%} (target <= 25%): "
                   f"{verdict(outside <= 0.25)}")
    return out


@command
def main(argv=None) -> int:
    p = parser("python -m suite.bench.perf", __doc__)
    p.add_argument("--out", default="reports/perf")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lengths", default="1024,4096,16384")
    p.add_argument("--results", default="results", help="results store holding the timed sweep")
    p.add_argument("--sweep", default="default", help="the sweep whose wall time is broken down")
    p.add_argument("--from-csv", default=None,
                   help="re-render index.md from a bench.csv an earlier run wrote, without measuring")
    args = p.parse_args(argv)
    check_output(p.prog, "--out", args.out)  # before any work
    out = Path(args.out)
    if args.from_csv:
        df = pd.read_csv(args.from_csv)
        text = report(df, float(df.matmul_peak_gflops.iloc[0]), breakdown(args.results, args.sweep))
        write_atomic(out / "index.md", text)
        print(text)
        return 0
    torch.set_num_threads(2)
    peak = matmul_peak_gflops()
    rows = sweep_step_rows()
    rows += sweep_level_rows(args.results, args.sweep)
    rows += optimizer_rows()
    rows += training_rows(args.steps, args.batch, args.seq_len)
    rows += eval_rows([int(x) for x in args.lengths.split(",")])
    df = pd.DataFrame(rows)
    text = report(df, peak, breakdown(args.results, args.sweep))
    write_report(out, df.assign(matmul_peak_gflops=peak, batch=args.batch, seq_len=args.seq_len), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
