"""The training step a sweep runs, timed against a same-shape Hugging Face Llama put through it.

Both models train through ``suite.train.train`` itself: the same batches (a default-sweep task
under the CPU recipe's length protocol), AdamW, gradient clipping, learning-rate schedule and
answer-only loss, on one torch thread as a sweep worker has. Only the model differs, so the
ratio of their training tokens/s (batch generation included) is what a sweep would gain.
"""
from __future__ import annotations

import torch
from torch import nn

from suite.config import compose_config
from suite.model import PosBenchLM
from suite.spec import build
from suite.train import train

STEPS = {"tiny": 200, "small": 40}  # timed steps per run: a few seconds to tens of seconds each


def hf_llama(model_spec):
    """A randomly initialized ``LlamaForCausalLM`` of the model spec's shape (RoPE, SwiGLU, RMSNorm)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    m = model_spec
    cfg = LlamaConfig(vocab_size=m.vocab_size, hidden_size=m.d_model, intermediate_size=m.d_ff,
                      num_hidden_layers=m.n_layers, num_attention_heads=m.n_heads, num_key_value_heads=m.n_heads,
                      max_position_embeddings=max(4096, m.train_len), rms_norm_eps=m.norm_eps, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


class LogitsOnly(nn.Module):
    """A Hugging Face causal LM called as PosBench models are: ``model(tokens) -> logits (B, T, V)``."""

    def __init__(self, hf: nn.Module):
        super().__init__()
        self.hf = hf

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.hf(tokens).logits


def sweep_step_rows(sizes=("tiny", "small"), tasks=("copy", "vt"), steps: dict | None = None,
                    rounds: int = 2) -> list[dict]:
    """Training tokens/s of PosBench (RoPE, full attention) and of the same-shape HF Llama through
    ``train``, per model size and task; the two are timed in turn, ``rounds`` times, each keeping
    its best round."""
    steps = {**STEPS, **(steps or {})}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for size in sizes:
            for task in tasks:
                spec = build(compose_config([f"model={size}", "position=rope", f"task={task}",
                                             f"train.steps={steps[size]}"]))
                makers = {"posbench": lambda: PosBenchLM(spec.model), "hf_llama": lambda: LogitsOnly(hf_llama(spec.model))}
                best = dict.fromkeys(makers, 0.0)
                for _ in range(rounds):
                    for name, make in makers.items():
                        torch.manual_seed(spec.seed)
                        result = train(make(), spec, [t.build() for t in spec.tasks], progress=False,
                                       log_every=steps[size])
                        best[name] = max(best[name], result.history[-1]["train/tokens_per_s"])
                rows += [{"kind": "sweep_step", "model": size, "scheme": "rope", "span": "full", "task": task,
                          "path": name, "tokens_per_s": value, "steps": steps[size]} for name, value in best.items()]
    finally:
        torch.set_num_threads(threads)
    return rows
