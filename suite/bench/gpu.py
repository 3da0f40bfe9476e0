"""``make bench-gpu``: bf16 training throughput, MFU, and FlexAttention against SDPA for every span.

Each configuration trains through the sweep's own step (``suite.training.step.train_step``) under the
``train=gpu`` recipe: bf16 autocast, ``torch.compile``, fused AdamW, the recipe's batch and length
(64 x 1024 tokens, ``base`` model), on a batch of the ``gpu`` sweep's tasks. MFU is 6 x parameters
x tokens/s (attention FLOPs left out, the usual estimate) over two peaks, both printed: the bf16
matrix-multiply rate measured in the same run, and the device's datasheet figure where known.
Configurations are timed in order until ``--budget`` seconds are spent; the rest are listed as
skipped, so the command ends in bounded time on any GPU.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.commandline import check_output, command, parser
from suite.data.batch import make_batch
from suite.config.compose import CONF_DIR, compose_config
from suite.model.lm import PosBenchLM
from suite.config.build import build
from suite.config.resources import parameter_count
from suite.training.step import train_step
from suite.bench.tables import plain_table, write_report
from suite.bench.timing import bf16_matmul_peak_tflops, time_steps, training_flops
from suite.training.loop import build_optimizer

SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=128"], "chunked": ["span=chunked", "span.chunk=128"]}
# (scheme, span, attention path): every span on both paths with RoPE, then the bias schemes
CONFIGS = [("rope", span, impl) for span in SPANS for impl in ("flex", "sdpa")]
CONFIGS += [("alibi", "full", "flex"), ("t5", "full", "flex"), ("alibi", "swa", "flex")]
# dense bf16 tensor-core peaks from the vendors' datasheets, TFLOP/s (SXM parts)
DATASHEET_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0}


def datasheet_peak(name: str) -> float | None:
    return next((v for k, v in DATASHEET_BF16_TFLOPS.items() if k in name), None)


def config_spec(scheme: str, span: str, impl: str, *extra: str):
    return build(compose_config(["+sweep=gpu", f"position={scheme}", *SPANS[span], f"model.attention={impl}", *extra]))


def step_rows(configs=CONFIGS, extra=(), device: str = "cuda", backend: str = "inductor", steps: int = 10,
              budget_s: float = 360.0) -> list[dict]:
    """Training tokens/s of each (scheme, span, path) through ``train_step``, compiled with
    ``backend``; configurations past ``budget_s`` are listed with ``skipped`` set."""
    rows, start = [], time.perf_counter()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for scheme, span, impl in configs:
        row = {"kind": "gpu_train", "scheme": scheme, "span": span, "path": impl}
        if time.perf_counter() - start > budget_s:
            rows.append({**row, "skipped": f"over the {budget_s:.0f} s budget"})
            continue
        spec = config_spec(scheme, span, impl, *extra, f"train.device={device}")
        t = spec.train
        torch.compiler.reset()
        torch.manual_seed(0)
        model = PosBenchLM(spec.model).to(device).train()
        forward = torch.compile(model, backend=backend)
        opt = build_optimizer(model, spec, torch.device(device))
        tokens, mask = make_batch([task.build() for task in spec.tasks], np.random.default_rng(0), t.seq_len, t.batch_size)
        tokens, mask = tokens.to(device), mask.to(device)
        autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=t.precision == "bf16")
        params = list(model.parameters())
        mark = time.perf_counter()
        seconds = time_steps(lambda: train_step(forward, opt, params, tokens, mask, grad_clip=t.grad_clip,
                                                autocast=autocast, check=False), steps, warmup=3, sync=sync)
        rows.append({**row, "model": spec.model.name, "batch": t.batch_size, "seq_len": t.seq_len,
                     "params": sum(p.numel() for p in params), "tokens_per_s": tokens.numel() / seconds,
                     "wall_s": time.perf_counter() - mark})
    return rows


def _whole(tokens_per_s: pd.Series) -> pd.Series:
    """Tokens/s as whole numbers: a rate measured to a few per cent has no decimals to show."""
    return tokens_per_s.round().astype("Int64")


def report(df: pd.DataFrame, measured: float, datasheet: float | None, device: str, command: str | None = None) -> str:
    """``reports/perf-gpu/index.md``: each configuration's tokens/s and MFU, then FlexAttention
    against SDPA; ``command``: the command line that measured them, named first."""
    done = df[df.get("skipped").isna()] if "skipped" in df else df
    done = done.assign(
        mfu_measured=training_flops(done.params, done.tokens_per_s) / (measured * 1e12),
        mfu_datasheet=(training_flops(done.params, done.tokens_per_s) / (datasheet * 1e12)) if datasheet else float("nan"))
    done = done.astype({"batch": int, "seq_len": int})
    lines = ["# PosBench on one GPU", "", *([f"Written by `{command}`.", ""] if command else []),
             f"Device: {device}; torch {torch.__version__}. bf16 matmul peak measured in this run "
             f"(8192 x 8192): {measured:.0f} TFLOP/s; datasheet dense bf16: "
             f"{f'{datasheet:.0f} TFLOP/s' if datasheet else 'not known for this device'}.",
             "MFU = 6 x params x tokens/s over each peak (attention FLOPs left out).", "",
             plain_table(done[["model", "scheme", "span", "path", "batch", "seq_len", "tokens_per_s", "mfu_measured",
                               "mfu_datasheet"]].assign(tokens_per_s=_whole(done.tokens_per_s)), floatfmt=".3f"), ""]
    flex_vs = done.pivot_table(index=["scheme", "span"], columns="path", values="tokens_per_s")
    if {"flex", "sdpa"} <= set(flex_vs.columns):
        flex_vs["flex/sdpa"] = flex_vs["flex"] / flex_vs["sdpa"]
        flex_vs[["flex", "sdpa"]] = flex_vs[["flex", "sdpa"]].apply(_whole)
        lines += ["## FlexAttention against SDPA (training tokens/s)", "", plain_table(flex_vs), ""]
    for row in df[df.get("skipped").notna()].itertuples() if "skipped" in df else []:
        lines.append(f"- skipped {row.scheme} {row.span} {row.path}: {row.skipped}")
    return "\n".join(lines) + "\n"


def sweep_plan(sweep: str = "gpu", peak_tflops: float = 989.0, mfu: float = 0.4) -> dict:
    """Training FLOPs of one run of ``sweep`` (6 x parameters x tokens) and the time it and the
    whole sweep take on one GPU at ``mfu`` of ``peak_tflops`` (evaluation left out)."""
    from hydra import compose, initialize_config_dir

    from suite.config.validate import sweep_jobs

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"+sweep={sweep}"], return_hydra_config=True)
    runs = len(sweep_jobs(cfg))
    spec = build(compose_config([f"+sweep={sweep}"]))
    params = parameter_count(spec)
    t = spec.train
    tokens = t.steps * t.batch_size * t.seq_len
    flops = training_flops(params, 1.0) * tokens
    run_s = flops / (mfu * peak_tflops * 1e12)
    return {"sweep": sweep, "params": params, "tokens_per_run": tokens, "flops_per_run": flops, "runs": runs,
            "peak_tflops": peak_tflops, "mfu": mfu, "run_minutes": run_s / 60, "sweep_hours": runs * run_s / 3600}


@command
def main(argv=None) -> int:
    p = parser("python -m suite.bench.gpu", __doc__)
    p.add_argument("--out", default="reports/perf-gpu")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--only", default="", help="scheme:span:path,... to time instead of every configuration")
    p.add_argument("--budget", type=float, default=360.0, help="seconds of configurations before the rest are skipped")
    p.add_argument("--plan", action="store_true", help="print the gpu sweep's FLOPs and time at --mfu of --peak-tflops")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="with --plan (default: an H200's datasheet bf16)")
    p.add_argument("--mfu", type=float, default=0.4, help="with --plan")
    args = p.parse_args(argv)
    check_output(p.prog, "--out", args.out)  # before any work
    if args.plan:
        plan = sweep_plan("gpu", args.peak_tflops, args.mfu)
        print(f"gpu sweep: {plan['runs']} runs of {plan['params'] / 1e6:.0f}M parameters x {plan['tokens_per_run']:.3g} "
              f"tokens = {plan['flops_per_run']:.2g} training FLOPs each; at {plan['mfu']:.0%} of {plan['peak_tflops']:.0f} "
              f"TFLOP/s: {plan['run_minutes']:.1f} min per run, {plan['sweep_hours']:.1f} h for the sweep on one GPU "
              "(evaluation not counted)")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: the GPU bench needs one (make bench measures the CPU)", file=sys.stderr)
        return 2
    torch.set_float32_matmul_precision("high")
    name = torch.cuda.get_device_name()
    measured = bf16_matmul_peak_tflops()
    configs = [tuple(c.split(":")) for c in args.only.split(",")] if args.only else CONFIGS
    df = pd.DataFrame(step_rows(configs, steps=args.steps, budget_s=args.budget))
    text = report(df, measured, datasheet_peak(name), name, command=" ".join([p.prog, *(sys.argv[1:] if argv is None else argv)]))
    write_report(Path(args.out), df.assign(bf16_peak_measured_tflops=measured,
                                           bf16_peak_datasheet_tflops=datasheet_peak(name)), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
