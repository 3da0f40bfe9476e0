"""``make bench``: speed and memory, each figure measured side by side in one run.

Writes ``reports/perf/bench.csv`` and ``reports/perf/index.md``:

* training tokens/s for scheme x span on ``tiny`` and ``small``: PosBench's fast path, its
  reference path, and (RoPE, full attention) a Hugging Face ``LlamaForCausalLM`` of the same
  shape, with the ratios;
* evaluation time and peak memory against length (batch 1, ``small``) for full, sliding-window and
  chunked attention, with the growth from 4K to 16K tokens;
* the fraction of the machine's matrix-multiply peak (measured here) that training reaches.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from suite.attention import Context
from suite.config import compose_config
from suite.model import PosBenchLM
from suite.spec import build

SPANS = {"full": ["span=full"], "swa": ["span=swa", "span.window=64"], "chunked": ["span=chunked", "span.chunk=64"]}


def spec_for(model: str, scheme: str, span: str, seq_len: int):
    return build(compose_config([f"model={model}", f"position={scheme}", *SPANS[span], f"train.seq_len={seq_len}"]))


def _time_steps(step, steps: int) -> float:
    for _ in range(2):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def train_tokens_per_s(model, tokens, impl: str | None, steps: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        if impl is None:  # a Hugging Face model
            logits = model(tokens).logits
        else:
            logits = model(tokens, Context(pos=torch.arange(tokens.shape[1]), impl=impl))
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return tokens.numel() / _time_steps(step, steps)


def hf_llama(spec):
    from transformers import LlamaConfig, LlamaForCausalLM

    m = spec.model
    cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.d_model, intermediate_size=m.d_ff,
                      num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads, num_key_value_heads=m.n_heads,
                      max_position_embeddings=max(4096, m.train_len), rms_norm_eps=m.norm_eps, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


def matmul_peak_gflops(n: int = 1024, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    seconds = _time_steps(lambda: a @ b, reps)
    return 2 * n ** 3 / seconds / 1e9


def training_rows(steps: int, batch: int, seq_len: int) -> list[dict]:
    rows = []
    for size in ("tiny", "small"):
        for scheme in ("nope", "rope", "alibi", "t5"):
            for span in ("full", "swa"):
                spec = spec_for(size, scheme, span, seq_len)
                torch.manual_seed(0)
                model = PosBenchLM(spec.model)
                tokens = torch.randint(9, spec.model.vocab_size, (batch, seq_len))
                params = sum(p.numel() for p in model.parameters())
                for impl in ("sdpa", "reference"):
                    tps = train_tokens_per_s(model, tokens, impl, steps)
                    rows.append({"kind": "train", "model": size, "scheme": scheme, "span": span, "path": impl,
                                 "tokens_per_s": tps, "params": params})
                if scheme == "rope" and span == "full":
                    try:
                        hf = hf_llama(spec)
                    except ImportError:
                        continue
                    rows.append({"kind": "train", "model": size, "scheme": scheme, "span": span, "path": "hf_llama",
                                 "tokens_per_s": train_tokens_per_s(hf, tokens, None, steps),
                                 "params": sum(p.numel() for p in hf.parameters())})
    return rows


_EVAL_CHILD = """
import json, resource, sys, time, torch
from suite.bench import spec_for
from suite.model import PosBenchLM
span, length = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(2)
spec = spec_for("small", "rope", span, 1024)
model = PosBenchLM(spec.model).eval()
tokens = torch.randint(9, spec.model.vocab_size, (1, length))
with torch.no_grad():
    model(tokens[:, :256])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(3):  # the fastest of three passes
        t0 = time.perf_counter(); model(tokens); times.append(time.perf_counter() - t0)
    seconds = min(times)
# growth of the process's peak RSS over its peak before the long forward (0: stayed below it)
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak}))
"""


def eval_rows(lengths: list[int]) -> list[dict]:
    rows = []
    for span in ("full", "swa", "chunked"):
        for length in lengths:
            out = subprocess.run([sys.executable, "-c", _EVAL_CHILD, span, str(length)], capture_output=True,
                                 text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"kind": "eval", "model": "small", "scheme": "rope", "span": span, "length": length,
                         "seconds": r["seconds"], "peak_mb": r["peak_mb"]})
    return rows


def report(df: pd.DataFrame, peak: float, out: Path) -> str:
    train = df[df.kind == "train"].pivot_table(index=["model", "scheme", "span"], columns="path", values="tokens_per_s")
    train["fast/reference"] = train["sdpa"] / train["reference"]
    if "hf_llama" in train:
        train["fast/hf_llama"] = train["sdpa"] / train["hf_llama"]
    flops = df[(df.kind == "train") & (df.path == "sdpa")].assign(
        gflops=lambda d: 6 * d.params * d.tokens_per_s / 1e9)
    flops["fraction_of_matmul_peak"] = flops.gflops / peak
    ev = df[df.kind == "eval"].pivot_table(index="length", columns="span", values=["seconds", "peak_mb"])
    lines = [
        "# PosBench performance", "",
        f"Measured in one run on {platform.machine()} ({torch.get_num_threads()} torch threads, torch {torch.__version__}).",
        f"Matrix-multiply peak measured here: {peak:.1f} GFLOP/s (1024 x 1024 fp32).", "",
        "## Training tokens/s (batch x length as in bench.csv)", "", train.to_markdown(floatfmt=".2f"), "",
        "## Training FLOPs (6 x params x tokens/s) as a fraction of the matmul peak", "",
        flops[["model", "scheme", "span", "gflops", "fraction_of_matmul_peak"]].to_markdown(index=False, floatfmt=".3f"),
        "", "## Evaluation time (s) and growth of peak resident memory (MB) over the pre-forward peak, batch 1, small model, RoPE", "",
        ev.to_markdown(floatfmt=".2f"), "",
    ]
    for span in ("full", "swa", "chunked"):
        e = df[(df.kind == "eval") & (df.span == span)].set_index("length")
        if {4096, 16384} <= set(e.index):
            lines.append(f"- {span}: time grows {e.seconds[16384] / e.seconds[4096]:.2f}x from 4K to 16K tokens; "
                         f"peak memory at 16K {e.peak_mb[16384]:.0f} MB")
    e = df[df.kind == "eval"].set_index(["span", "length"])
    if ("full", 16384) in e.index and ("swa", 16384) in e.index:
        lines.append(f"- swa peak memory at 16K is {e.peak_mb[('swa', 16384)] / e.peak_mb[('full', 16384)]:.2f} of full's")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.bench")
    p.add_argument("--out", default="reports/perf")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lengths", default="1024,4096,16384")
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    peak = matmul_peak_gflops()
    rows = training_rows(args.steps, args.batch, args.seq_len)
    rows += eval_rows([int(x) for x in args.lengths.split(",")])
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.assign(matmul_peak_gflops=peak, batch=args.batch, seq_len=args.seq_len).to_csv(out / "bench.csv", index=False)
    text = report(df, peak, out)
    (out / "index.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
