"""Why schemes behave as they do: recency profiles, attention-logit profiles, attention mass.

* Recency profile: the mean cosine similarity f(d) between hidden states at positions i and
  i - d, per layer and per site (attention output, residual after attention, normalized input
  of the MLP, MLP output, block output). Sliding-window layers plant a recency bias in the
  residual stream (f falls with d); the recency gap is f(1) - f(L) for a stated far lag L. This
  follows the analysis of how NoPE global layers in local/global hybrids still see position: the
  local layers' averaging makes nearby states alike, normalization and MLPs carry it, and the
  global layer's query/key projections turn it into a logit that falls with distance.
* Logit profile: the mean pre-softmax attention logit at each distance, per layer and head.
* Attention mass: the share of attention that answer-predicting queries put on the first token,
  the needle, the rest of the context and the question (the segment analysis of long-context
  RoPE/NoPE hybrid studies), and the attention entropy per layer.

A layer whose token mixer is a gated linear recurrence has a recency profile like any other (its
mixer's output is hooked at the ``attn_out`` site, where attention's output is), but no softmax
and so no logits: the logit profile and attention mass cover the softmax-attention layers only,
numbered by their place in the stack, and ``skipped_layers`` names the rest.

Everything here reads a model and writes no file of its own; ``diagnostic_examples`` picks the
examples the diagnostics read from the run's eval set (``suite.evaluation.evalcache``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from suite.config.run_spec import RunSpec
from suite.data.batch import collate
from suite.evaluation.evalcache import eval_set
from suite.evaluation.slices import format_slice


SITES = ("attn_out", "resid_mid", "mlp_in", "mlp_out", "resid_out")


def lag_grid(length: int) -> list[int]:
    """Lags 1, 2, 3, 4, 6, 8, 12, 16, 24, ... below ``length`` (roughly logarithmic)."""
    lags, k = [], 0
    while True:
        for base in (1, 1.5):
            lag = int(base * 2 ** k)
            if lag >= length:
                return sorted(set(lags))
            lags.append(lag)
        k += 1


def cosine_profile(h: torch.Tensor, lags: Iterable[int]) -> torch.Tensor:
    """Mean over batch and positions i >= d of cos(h[:, i], h[:, i - d]), for each lag d.

    ``h`` is (B, T, C); returns a tensor of len(lags).
    """
    h = F.normalize(h.float(), dim=-1)
    return torch.stack([(h[:, d:] * h[:, :-d]).sum(-1).mean() for d in lags])


def recency_gap(profile: Sequence[float] | torch.Tensor, lags: Sequence[int], far: int) -> float:
    """f(1) - f(far): how much more alike neighbours are than states ``far`` apart.

    ``profile[k]`` is f at lag ``lags[k]``: a cosine profile over the lag grid, or a logit
    profile over every distance (``lags = range(len(profile))``), the gap of the analysis.
    """
    return float(profile[lags.index(1)] - profile[lags.index(far)])


@torch.no_grad()
def hidden_sites(model, tokens: torch.Tensor) -> dict[tuple[int, str], torch.Tensor]:
    """Hidden states (B, T, C) at every layer and site of ``SITES``, captured with hooks."""
    out: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    for i, block in enumerate(model.blocks):
        def save(name, i=i):
            return lambda module, args, result: out.__setitem__((i, name), result.detach())
        handles += [
            block.attn.register_forward_hook(save("attn_out")),
            block.mlp_norm.register_forward_pre_hook(
                lambda module, args, i=i: out.__setitem__((i, "resid_mid"), args[0].detach())),
            block.mlp_norm.register_forward_hook(save("mlp_in")),
            block.mlp.register_forward_hook(save("mlp_out")),
            block.register_forward_hook(save("resid_out")),
        ]
    try:
        model.eval()
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return out


def recency_profiles(model, tokens: torch.Tensor, lags: list[int] | None = None) -> list[dict]:
    """Rows ``{layer, site, lag, value}`` of the recency profile of every layer and site."""
    lags = lags or lag_grid(tokens.shape[1])
    rows = []
    for (layer, site), h in sorted(hidden_sites(model, tokens).items()):
        for lag, value in zip(lags, cosine_profile(h, lags).tolist()):
            rows.append({"layer": layer, "site": site, "lag": lag, "value": value})
    return rows


def logit_profile(logits: torch.Tensor, max_distance: int | None = None) -> torch.Tensor:
    """Mean finite pre-softmax logit at each distance d = i - j, per head: (H, D) from (B, H, T, T)."""
    T = logits.shape[-1]
    D = min(T, max_distance or T)
    prof = torch.full((logits.shape[1], D), float("nan"))
    for d in range(D):
        diag = logits.diagonal(offset=-d, dim1=-2, dim2=-1)  # (B, H, T - d)
        finite = torch.isfinite(diag)
        count = finite.sum(dim=(0, 2))
        total = torch.where(finite, diag, torch.zeros_like(diag)).sum(dim=(0, 2))
        prof[:, d] = torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))
    return prof


def segment_share(probs: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Attention on the keys ``keys`` marks (bool, (Tk,)) at each query position, averaged over
    batch and heads: (Tq,) from (B, H, Tq, Tk). Key 0 alone is the first-token (sink) share."""
    return probs[..., keys].float().sum(-1).mean(dim=(0, 1))


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Attention entropy (nats) per query position, averaged over batch and heads: (T,)."""
    p = probs.float()
    return -(p * torch.log(p.clamp(min=1e-30))).sum(-1).mean(dim=(0, 1))


def segment_masks(example, length: int) -> dict[str, np.ndarray]:
    """Key segments of a retrieval example: the first token, the needle (``meta["needle_pos"]``,
    three tokens ``key = value``), the question (from the last ``?`` or ``|`` before the first
    answer) and the rest of the context."""
    from tasks.base import QUERY_ID, SEP_ID

    tokens, first_answer = example.tokens, example.answer_spans[0][0]
    markers = [i for i in range(first_answer) if tokens[i] in (QUERY_ID, SEP_ID)]
    first, needle, question = (np.zeros(length, dtype=bool) for _ in range(3))
    first[0] = True
    if "needle_pos" in example.meta:
        needle[example.meta["needle_pos"] : example.meta["needle_pos"] + 3] = True
    question[(markers[-1] if markers else first_answer):] = True
    return {"first": first, "needle": needle, "context": ~(first | needle | question), "question": question}


def skipped_layers(model) -> list[int]:
    """The layers the logit profile and attention mass skip: those whose mixer has no softmax."""
    softmax = set(model.softmax_layers())
    return [i for i in range(len(model.blocks)) if i not in softmax]


@torch.no_grad()
def attention_probs(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Post-softmax attention per softmax-attention layer (``model.softmax_layers()``), (B, H, T, T),
    from the reference path's logits."""
    return [torch.softmax(l.float(), dim=-1) for l in model.attention_logits(tokens)]


@torch.no_grad()
def attention_mass(model, examples) -> list[dict]:
    """Rows ``{layer, segment, value}``: the share of attention that each answer-predicting
    query puts on each segment of ``segment_masks`` (``segment_share``), plus its ``entropy``,
    averaged over heads and queries, then over examples; softmax-attention layers only."""
    tokens, _ = collate(examples)
    probs = attention_probs(model, tokens)
    rows = []
    T = tokens.shape[1]
    for layer, p in zip(model.softmax_layers(), probs):  # (B, H, T, T)
        sums: dict[str, list[float]] = {}
        for b, ex in enumerate(examples):
            pq = p[b : b + 1, :, [s - 1 for s, e in ex.answer_spans]]  # (1, H, Q, T): answer-predicting queries
            for name, mask in segment_masks(ex, T).items():
                sums.setdefault(name, []).append(segment_share(pq, torch.from_numpy(mask)).mean().item())
            sums.setdefault("entropy", []).append(entropy(pq).mean().item())
        rows += [{"layer": layer, "segment": name, "value": float(np.mean(v))} for name, v in sums.items()]
    return rows


def far_lag(lags: list[int], length: int) -> int:
    """The stated far lag L of the recency gap: the largest grid lag at most half the length."""
    return max(lag for lag in lags if lag <= max(1, length // 2))


@torch.no_grad()
def diagnostic_rows(model, examples, stage: str) -> list[dict]:
    """Result rows (metric, slice, value) of every diagnostic on ``examples``, tagged ``at=stage``.

    Metrics: ``recency_cos`` (slice ``at,layer,site,lag``), ``recency_gap`` (``at,layer,site,far``),
    ``logit_profile`` (``at,layer,head,lag``; head ``mean`` averages the heads), ``logit_gap``
    (``at,layer,head,far``) and, when the examples mark a needle, ``attn_mass``
    (``at,layer,segment``; segment ``entropy`` holds the attention entropy). The last three cover
    softmax-attention layers only (``skipped_layers`` names the others). Slices are written
    by ``suite.evaluation.slices.format_slice``; both gaps are ``recency_gap`` of their profile.
    """
    tokens, _ = collate(examples)
    T = tokens.shape[1]
    lags = lag_grid(T)
    far = far_lag(lags, T)
    rows = []
    by_site: dict[tuple[int, str], list[float]] = {}  # f at each lag of ``lags``, in order
    for r in recency_profiles(model, tokens, lags):
        by_site.setdefault((r["layer"], r["site"]), []).append(r["value"])
        rows.append({"metric": "recency_cos", "value": r["value"],
                     "slice": format_slice(at=stage, layer=r["layer"], site=r["site"], lag=r["lag"])})
    for (layer, site), prof in sorted(by_site.items()):
        rows.append({"metric": "recency_gap", "value": recency_gap(prof, lags, far),
                     "slice": format_slice(at=stage, layer=layer, site=site, far=far)})
    for layer, logits in zip(model.softmax_layers(), model.attention_logits(tokens)):
        per_head = logit_profile(logits)  # (H, T)
        profiles = [(str(h), per_head[h]) for h in range(per_head.shape[0])] + [("mean", per_head.nanmean(dim=0))]
        for head, prof in profiles:
            for lag in [0, *lags]:
                rows.append({"metric": "logit_profile", "value": float(prof[lag]),
                             "slice": format_slice(at=stage, layer=layer, head=head, lag=lag)})
            rows.append({"metric": "logit_gap", "value": recency_gap(prof, range(len(prof)), far),
                         "slice": format_slice(at=stage, layer=layer, head=head, far=far)})
    if all("needle_pos" in ex.meta for ex in examples):
        for r in attention_mass(model, examples):
            rows.append({"metric": "attn_mass", "value": r["value"],
                         "slice": format_slice(at=stage, layer=r["layer"], segment=r["segment"])})
    return rows


def diagnostic_examples(spec: RunSpec, tasks, results_dir) -> tuple[str, list]:
    """(task name, examples) the diagnostics read: up to 32 eval examples at the training length,
    from niah_single when the run has it (its needle gives the attention-mass segments)."""
    names = [t.name for t, _ in tasks]
    task_spec, task = tasks[names.index("niah_single")] if "niah_single" in names else tasks[0]
    examples, _ = eval_set(task_spec.name, dict(task_spec.params), task, spec.train.seq_len, spec.eval.seed,
                           spec.eval.n_examples, Path(results_dir) / "_evalsets")
    return task_spec.name, examples[:32]
