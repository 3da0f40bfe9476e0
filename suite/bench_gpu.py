"""The GPU part of ``make bench``: bf16 training throughput and model FLOPs utilization (MFU).

Runs only where CUDA is available. Training uses the ``train=gpu`` recipe's path (bf16 autocast,
``torch.compile``, fused AdamW, FlexAttention); MFU is 6 x parameters x tokens/s (attention
FLOPs left out, as in the usual estimate) over the bf16 matmul peak measured in the same run.
"""
from __future__ import annotations

import torch

from suite.config import compose_config
from suite.model import PosBenchLM
from suite.spec import build
from suite.timing import bf16_matmul_peak_tflops, cuda_time, training_flops

CONFIGS = [("base", "rope", "full"), ("base", "alibi", "full"), ("base", "rope", "swa")]
SPAN_ARGS = {"full": ["span=full"], "swa": ["span=swa", "span.window=128"]}


def gpu_rows(seq_len: int = 1024, batch: int = 8, steps: int = 20) -> tuple[list[dict], float]:
    peak = bf16_matmul_peak_tflops()
    rows = []
    for size, scheme, span in CONFIGS:
        spec = build(compose_config([f"model={size}", f"position={scheme}", *SPAN_ARGS[span], "train=gpu",
                                     f"train.seq_len={seq_len}"]))
        torch.manual_seed(0)
        model = PosBenchLM(spec.model).cuda()
        compiled = torch.compile(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        tokens = torch.randint(9, spec.model.vocab_size, (batch, seq_len), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = compiled(tokens)
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        tok_s = tokens.numel() / cuda_time(step, steps)
        params = sum(p.numel() for p in model.parameters())
        rows.append({"kind": "gpu_train", "model": size, "scheme": scheme, "span": span, "path": "flex+compile+bf16",
                     "tokens_per_s": tok_s, "params": params, "mfu": training_flops(params, tok_s) / (peak * 1e12)})
    return rows, peak
