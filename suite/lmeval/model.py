"""lm-eval model ``posbench``: a stored PosBench run behind lm-eval's ``TemplateLM`` interface.

Follows lm-eval's ``TemplateLM`` (lm_eval/api/model.py): ``tok_encode`` and ``_loglikelihood_tokens``
carry the model, ``loglikelihood_rolling`` uses lm-eval's rolling windows, ``generate_until``
decodes greedily with a key/value cache (``suite.lmeval.kv_cache``). Text is read with PosBench's
whitespace tokenizer (``tasks.base.encode``), so a word outside the vocabulary is an error naming
it, or, for a run of natural-text tasks (``byte_level``: code, prose), byte by byte
(``tasks.text.encode_bytes`` of the UTF-8 text); ``<s>`` starts every input, as in training.

Inputs longer than the model can represent (learned absolute positions have ``max_length()``)
are truncated from the left, keeping the last ``max_length`` tokens, as lm-eval's ``hf`` model
does; a warning says so once. A generation that outgrows ``max_length`` is recomputed on its
last ``max_length`` tokens at each step, which is what that truncation asks for.

Model args: ``pretrained`` (the run: a result JSON, a run's ``_work/<run_id>`` folder, or a run id
or its hash searched under ``results_dir``; lm-eval names the model, and so its ``--output_path``
folder, after it), ``results_dir`` (default ``results``), ``sweep`` (search only
``results_dir/<sweep>``), ``batch_size`` (default 32), ``device`` (default: CUDA when there is
one) and ``threads`` (torch CPU threads; default: the threads the run was trained with, its stored
numeric signature's ``threads``, as ``suite.reproduce`` reruns it; torch's own for a run that
stores none).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import lm_eval.models  # noqa: F401  (lm-eval's own models: registered only while its registry is empty)
import torch
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from suite.lmeval.arguments import MODEL_ARGS, model_args
from suite.lmeval.generation import Generation, decode_greedy
from suite.model.lm import PosBenchLM
from suite.progress import CountLines
from suite.config.build import model_spec_from_dict
from suite.results.store import verified_run
from suite.training.checkpoint import trained_record
from tasks import TASKS
from tasks.base import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, decode, encode
from tasks.text import decode_bytes, encode_bytes

log = logging.getLogger("posbench")
DEFAULT_BATCH = 32


def resolve_run(run: str | Path, results_dir: str | Path = "results", sweep: str | None = None) -> Path:
    """The result JSON of ``run``: that file, the file of a ``_work/<run_id>`` folder, or the one
    file under ``results_dir/<sweep>/`` (any sweep when ``sweep`` is None) whose run id is ``run``
    or ends with it (e.g. its hash)."""
    path = Path(run)
    if path.is_file():
        return path
    if path.is_dir():
        if path.parent.name == "_work" and (found := path.parent.parent / f"{path.name}.json").is_file():
            return found
        raise ValueError(f"run folder {path} is not a run's _work/<run_id> folder with a result file "
                         f"at {path.parent.parent / (path.name + '.json')}")
    root = Path(results_dir)
    pattern = f"{sweep}/*.json" if sweep else "*/*.json"
    files = [p for p in sorted(root.glob(pattern)) if not p.parent.name.startswith("_")]  # not _evalsets
    matches = [p for p in files if p.stem == str(run)] or [p for p in files if p.stem.endswith(f"-{run}")]
    if len(matches) == 1:
        return matches[0]
    where = root.resolve() / sweep if sweep else root.resolve()
    if matches:
        raise ValueError(f"run {run!r} matches several runs under {where}: {[str(p) for p in matches]}; "
                         "name one by its result file or with sweep=<sweep>")
    ids = [p.stem for p in files]
    shown = ", ".join(ids[:10]) + (f", ... ({len(ids)} in all)" if len(ids) > 10 else "")
    raise ValueError(f"no run {run!r}: not a file or folder, and no {where}/{'' if sweep else '<sweep>/'}<run_id>.json "
                     f"has that id; run ids there: {shown or 'none'}")


class WeightsRefused(ValueError):
    """The run's ``model.pt`` is not the file its training wrote (``trained_record``): a failed
    run (exit 1), not a bad argument."""


def load_run(run, results_dir="results", device="cpu", sweep=None) -> tuple[PosBenchLM, dict]:
    """(model with the run's trained weights, in eval mode; the result file's payload). The
    result file must count as stored (``verified_run``) and ``model.pt`` be the file the run's
    training wrote (``trained_record``: its SHA-256 is the one ``trained.json`` records)."""
    path = resolve_run(run, results_dir, sweep)
    payload = verified_run(path)
    spec = payload["run"].get("spec")
    if not spec:
        raise ValueError(f"{path} stores no run spec; it was written before specs were stored")
    weights = path.parent / "_work" / path.stem / "model.pt"
    if not weights.is_file():
        raise ValueError(f"run {path.stem} has no trained weights at {weights}")
    try:
        trained_record(weights.parent, payload["run"].get("spec_hash"))
    except ValueError as err:
        raise WeightsRefused(f"refused {weights}: {err}") from None
    if payload["run"].get("train_status", "ok") != "ok":
        log.warning("run %s ended with status %r; scoring its last weights", path.stem, payload["run"]["train_status"])
    model_spec = model_spec_from_dict(spec["model"])
    if model_spec.vocab_size != VOCAB_SIZE:
        raise ValueError(f"run {path.stem} has vocab_size={model_spec.vocab_size}, the PosBench vocabulary has {VOCAB_SIZE}")
    model = PosBenchLM(model_spec)
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as err:  # noqa: BLE001 - any unreadable file: name it, never suggest unsafe loading
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{weights} is not the state dict of run {path.stem} ({type(err).__name__}: {first}); "
                         f"rerun the run's command to train it again (remove {weights.parent} first)") from None
    return model.to(device).eval(), payload


def run_threads(payload: dict) -> int | None:
    """The torch threads a run was trained and scored with (its numeric signature), at most this
    machine's cores; None when the run stores none."""
    threads = (payload["run"].get("numeric") or {}).get("threads")
    return min(int(threads), os.cpu_count() or 1) if threads else None


def progress(total: int, kind: str, disable: bool = False):
    """A progress bar over ``total`` requests, as lm-eval's ``hf`` model shows; off when asked
    (``disable_tqdm``). Off a terminal, where tqdm draws nothing (``disable=None``), about ten
    plain lines on stderr say how many are done and the time left (``suite.progress.CountLines``):
    an evaluation of tens of thousands of requests is never silent."""
    desc = f"Running {kind} requests"
    bar = tqdm(total=total, desc=desc, disable=True if disable else None)
    if disable or sys.stderr.isatty():
        return bar
    return CountLines(bar, total, desc, lambda line: print(line, file=sys.stderr, flush=True))


def _device(device) -> torch.device:
    if device is None or (str(device).startswith("cuda") and not torch.cuda.is_available()):
        if device is not None:
            log.warning("device %r is not available; using the CPU", device)
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@register_model("posbench")
class PosBenchEvalLM(TemplateLM):
    """A trained PosBench run as an lm-eval model (lm-eval's ``TemplateLM`` interface)."""

    def __init__(self, pretrained=None, results_dir="results", sweep=None, batch_size=None, max_batch_size=None,
                 device=None, threads=None, **unknown):
        super().__init__()
        if unknown or pretrained is None:
            named = f"unknown model arg(s) {sorted(unknown)}" if unknown else "no model arg pretrained"
            raise ValueError(f"posbench: {named}; valid: {', '.join(MODEL_ARGS)} (pretrained: the run's id, "
                             "hash, result file or _work/<run_id> folder)")
        given = {k: v for k, v in dict(pretrained=pretrained, results_dir=results_dir, sweep=sweep, batch_size=batch_size,
                                       max_batch_size=max_batch_size, device=device, threads=threads).items() if v is not None}
        try:  # typed and judged by their declaration (suite.lmeval.arguments.ModelArgs), as the command line's are
            values = model_args(given)
        except ValueError as err:
            raise ValueError(f"posbench: model args {err}") from None
        batch_size, threads = values.get("batch_size"), values.get("threads")
        self._device = _device(device)
        self.model, self.payload = load_run(pretrained, results_dir, self._device, sweep)
        threads = threads or run_threads(self.payload)
        if threads and threads > (os.cpu_count() or 1):  # as a run clamps its threads (suite.run.usable_threads)
            log.warning("threads=%d is more than this machine's %d cores; using %d", threads, os.cpu_count() or 1, os.cpu_count() or 1)
            threads = os.cpu_count() or 1
        if threads:
            torch.set_num_threads(int(threads))
        self.run_id = self.payload["run"].get("run_id")
        names = [t["name"] for t in self.payload["run"]["spec"]["tasks"]]
        self.byte_level = all(n in TASKS and TASKS[n].byte_level for n in names)  # text read as bytes
        self.batch_size = batch_size or DEFAULT_BATCH  # "auto" (left out by model_args): the default
        self._warned = False

    # ---- tokenizer (TemplateLM)
    @property
    def eot_token_id(self) -> int:
        return EOS_ID

    @property
    def prefix_token_id(self) -> int:
        return BOS_ID

    @property
    def max_length(self) -> int | None:
        return self.model.max_length()

    @property
    def device(self) -> torch.device:
        return self._device

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """Whitespace tokens; ``<s>`` first unless ``add_special_tokens=False`` or already there."""
        ids = encode_bytes(string.encode("utf-8")) if self.byte_level else encode(string)
        if add_special_tokens is not False and (not ids or ids[0] != BOS_ID):
            ids = [BOS_ID, *ids]
        return ids

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(context, continuation) tokens. Bytes have no word boundaries to keep, so a byte-level
        run splits at the documents' own boundary: lm-eval's move of the context's trailing spaces
        into the continuation would score bytes outside the target."""
        if not self.byte_level:
            return super()._encode_pair(context, continuation)
        return self.tok_encode(context), encode_bytes(continuation.encode("utf-8"))

    def tok_decode(self, ids) -> str:
        return decode_bytes(ids).decode("utf-8", "replace") if self.byte_level else decode(ids)

    # ---- scoring
    def _window(self, ids: list[int], extra: int = 0) -> list[int]:
        """The last ``max_length + extra`` tokens (left truncation); warns the first time it cuts."""
        limit = self.max_length
        if limit is None or len(ids) <= limit + extra:
            return ids
        self._warn_cut()
        return ids[-(limit + extra) :]

    def _warn_cut(self) -> None:
        if not self._warned:
            log.warning("posbench: inputs longer than the model's max_length=%d are truncated from the left", self.max_length)
            self._warned = True

    @torch.no_grad()
    def _last_logprobs(self, inputs: list[list[int]], done=lambda n: None) -> list[torch.Tensor]:
        """Log-probabilities (len_i, V) for each input, batched with right padding (causal, so the
        padding never reaches a real position); ``done(n)`` as ``n`` more are computed."""
        out: list[torch.Tensor] = [None] * len(inputs)  # type: ignore[list-item]
        order = sorted(range(len(inputs)), key=lambda i: -len(inputs[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = len(inputs[chunk[0]])
            batch = torch.full((len(chunk), width), PAD_ID, dtype=torch.long)
            for row, i in enumerate(chunk):
                batch[row, : len(inputs[i])] = torch.tensor(inputs[i])
            logprobs = F.log_softmax(self.model(batch.to(self.device)).float(), dim=-1).cpu()
            for row, i in enumerate(chunk):
                out[i] = logprobs[row, : len(inputs[i])]
            done(len(chunk))
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        inputs, conts = [], []
        for _, context_enc, continuation_enc in requests:
            inp = self._window(context_enc + continuation_enc, extra=1)[:-1]
            if len(continuation_enc) > len(inp):
                raise ValueError(f"continuation of {len(continuation_enc)} tokens does not fit the model's "
                                 f"max_length={self.max_length}")
            inputs.append(inp)
            conts.append(continuation_enc)
        with progress(len(inputs), "loglikelihood", disable_tqdm) as bar:
            logprobs_of = self._last_logprobs(inputs, done=bar.update)
        results = []
        for (key, _, _), logprobs, cont in zip(requests, logprobs_of, conts):
            scored = logprobs[len(logprobs) - len(cont) :]
            target = torch.tensor(cont)
            answer = (float(scored.gather(1, target[:, None]).sum()), bool((scored.argmax(-1) == target).all()))
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, answer)
            results.append(answer)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Sum of log-probabilities of each text after ``<s>``, in lm-eval's disjoint rolling windows."""
        results = []
        bar = progress(len(requests), "loglikelihood_rolling", disable_tqdm)
        for req in requests:
            (string,) = req.args
            tokens = self.tok_encode(string, add_special_tokens=False)
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(
                token_list=tokens, prefix_token=BOS_ID, max_seq_len=self.max_length or max(len(tokens), 1),
                context_len=1)]
            scores = self._loglikelihood_tokens([(None, ctx, cont) for ctx, cont in windows], disable_tqdm=True)
            total = sum(ll for ll, _ in scores)
            self.cache_hook.add_partial("loglikelihood_rolling", (string,), total)
            results.append(total)
            bar.update(1)
        bar.close()
        return results

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy continuation of each context, cut at the first ``until`` string (``</s>`` always
        stops), at most ``max_gen_toks`` tokens (default 256). Contexts of one length are decoded
        together, ``batch_size`` at a time (``suite.lmeval.generation``), behind a progress bar."""
        jobs = []
        for req in requests:
            context, kwargs = req.args
            kwargs = dict(kwargs or {})
            if kwargs.get("do_sample"):
                raise ValueError("the posbench model decodes greedily; got do_sample=True")
            until = kwargs.get("until") or []
            jobs.append(Generation(self.tok_encode(context), int(kwargs.get("max_gen_toks", 256)),
                                   [until] if isinstance(until, str) else list(until)))
        with progress(len(jobs), "generate_until", disable_tqdm) as bar:
            decode_greedy(self.model, jobs, self.batch_size, self.max_length, done=bar.update)
        if self.max_length is not None and any(len(job.tokens) > self.max_length for job in jobs):
            self._warn_cut()
        results = []
        for req, job in zip(requests, jobs):
            gen = job.generated
            text = self.tok_decode(gen[:-1] if gen and gen[-1] == EOS_ID else gen)
            for stop in job.until:
                text = text.split(stop)[0] if stop else text
            self.cache_hook.add_partial("generate_until", req.args, text)
            results.append(text)
        return results


__all__ = ["PosBenchEvalLM", "load_run", "model_spec_from_dict", "resolve_run"]
