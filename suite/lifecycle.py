"""One run's life once it holds its lock: set up, train (or restore a finished training), save the
trained model, evaluate, store. Each step is a method that reads top to bottom; ``suite.run``
calls them in order and W&B is closed whatever happens.

Training to criterion (``train.until_learned``): each task whose headline metric is judged
(``Metric.judged``: bounded, higher is better) has a line, ``LEARNED_AT`` of the metric's best
value; the training loop checks it (``suite.evaluation.check``) and trains on past ``steps`` until
every line is reached or the cap. The run stores, per judged task at the training length, its
``check_score`` at the last check and its ``steps_to_learn`` (the first check step at or above
the line; no row when none was), and its record's ``criterion`` holds every check."""
from __future__ import annotations

import dataclasses
import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import torch

from suite import files
from suite.training import distributed

from suite.results import signature, store
from suite.training.checkpoint import load_trained, save_trained
from suite.evaluation.check import make_check
from suite.evaluation.diagnostics import diagnostic_examples, diagnostic_rows
from suite.evaluation.evaluate import evaluate
from suite.evaluation.slices import ALL
from suite.results.identity import run_columns
from suite.data.metrics import LEARNED_AT, metric
from suite.model.lm import PosBenchLM
from suite.progress import StepLog, calls_per_line, finished_line, run_label
from suite.config.run_spec import RunSpec
from suite.tracking import Tracker, wandb_config, wandb_dir, wandb_id
from suite.training.loop import TrainResult, train

log = logging.getLogger("posbench")


def learned_lines(tasks) -> dict[str, float]:
    """Task name -> the score at which a run has learned it (its headline metric's ``learned_line``),
    for each task whose headline metric is judged; ``tasks``: (TaskSpec, task) pairs."""
    lines = {spec.name: metric(task.primary_metric).learned_line for spec, task in tasks}
    return {name: line for name, line in lines.items() if line is not None}


class RunLifecycle:
    """The state one run carries from setup to its result file; ``timing`` records where its wall
    time goes and is stored with it. A resumed run stores the run's time, not the resumed
    process's: a run killed during evaluation resumes from ``trained.json``, which holds the work's
    time up to it (``worked``); one killed during training resumes from its checkpoint, which
    holds the training's time up to it (``TrainResult.earlier_s``); the resumed process adds its
    own share."""

    def __init__(self, spec: RunSpec, rid: str, results_dir, logger_cfg: Optional[dict], device: torch.device):
        self.spec, self.rid, self.results_dir, self.device = spec, rid, results_dir, device
        self.columns = run_columns(spec)
        self.label = run_label(self.columns, spec.taskset)
        self.main_rank = distributed.is_main()
        self.timing: dict[str, float] = {}
        self.earlier: dict[str, float] = {}  # wall_s and timing of an earlier process's work on this run
        mark = time.perf_counter()
        cfg = (logger_cfg if self.main_rank else None) or {"name": "none"}
        self.tracker = Tracker(cfg, name=rid, group=spec.sweep, config=wandb_config(spec, self.columns),
                               tags=[self.columns["positions"], self.columns["spans"], spec.model.pattern, spec.taskset],
                               run_id=wandb_id(spec.sweep, rid), directory=wandb_dir(cfg, results_dir, spec.sweep))
        self.timing["log_s"] = time.perf_counter() - mark

    def setup(self) -> None:
        """Seed, model, tasks, the run's work folder, and the diagnostics at initialization."""
        self.t0 = time.perf_counter()
        torch.manual_seed(self.spec.seed)
        self.model = PosBenchLM(self.spec.model)
        self.tasks = [(t, t.build()) for t in self.spec.tasks]
        self.lines = learned_lines(self.tasks)
        self.work = files.work_dir(self.results_dir, self.spec.sweep, self.rid)
        self.work.mkdir(parents=True, exist_ok=True)
        wanted = self.spec.eval.diagnostics and self.main_rank
        self.probe = diagnostic_examples(self.spec, self.tasks, self.results_dir) if wanted else None
        self.diag_rows = diagnostic_rows(self.model, self.probe[1], "init") if self.probe else []
        self.timing["setup_s"] = time.perf_counter() - self.t0

    def _during_training(self, step: int) -> None:
        every = self.spec.eval.diagnostics_every
        if self.probe and every and step % every == 0 and step < self.spec.train.steps:
            self.diag_rows.extend(diagnostic_rows(self.model, self.probe[1], f"step{step}"))
            self.model.train()

    def train_or_restore(self, ckpt_every: int, log_every: int, progress: bool) -> tuple[TrainResult, bool]:
        """(training result, whether it was trained now): a training that finished before a failed
        evaluation or store is restored from ``model.pt`` instead of run again."""
        finished = None if distributed.active() else load_trained(self.work, self.model, self.spec.run_id)
        if finished is not None:
            result, self.diag_rows = TrainResult(**finished["result"]), finished["diag_rows"]
            # a record from before the work's time was kept holds the training's time only
            self.earlier = finished.get("worked") or {"wall_s": result.wall_s, "batches_s": result.batch_s,
                                                      "train_s": result.wall_s - result.batch_s}
            log.info("%s: training finished earlier (%s); evaluating the stored model", self.rid, self.work / "model.pt")
            return result, False
        # off a terminal (no tqdm bar) the main process writes a plain progress line per logged step
        plain = not progress and self.main_rank
        log_step = (StepLog(f"{self.rid} ({self.label})", self.spec.train.steps, log.info, self.tracker.log,
                            every=calls_per_line(self.spec.train.steps, log_every)) if plain else self.tracker.log)
        check = self.check()
        result = train(self.model, self.spec, [task for _, task in self.tasks], ckpt_path=self.work / "ckpt.pt",
                       ckpt_every=ckpt_every, log=log_step, log_every=log_every, progress=progress,
                       on_step=self._during_training, label=self.label, check=check,
                       on_extend=log_step.extend if plain else None)
        self.timing["batches_s"], self.timing["train_s"] = result.batch_s, result.wall_s - result.batch_s
        self.earlier = {"wall_s": result.earlier_s}  # a killed process's training before the checkpoint resumed
        return result, True

    def worked(self) -> tuple[float, dict[str, float]]:
        """(wall seconds, timing) of the work on this run so far: this process's since ``setup``,
        plus an earlier process's that finished its training."""
        wall = time.perf_counter() - self.t0 + self.earlier.get("wall_s", 0.0)
        keys = dict.fromkeys([*self.timing, *self.earlier])
        return wall, {k: self.timing.get(k, 0.0) + self.earlier.get(k, 0.0) for k in keys if k != "wall_s"}

    def save(self, result: TrainResult) -> None:
        """The finished training, atomically, before anything can fail in evaluation; it records
        the work's time so far, which a process resuming from it adds to its own."""
        mark = time.perf_counter()
        wall, timing = self.worked()
        save_trained(self.work, self.model, {"result": dataclasses.asdict(result), "diag_rows": self.diag_rows,
                                             "worked": {"wall_s": wall, **timing}}, self.spec.run_id)
        self.timing["store_s"] = time.perf_counter() - mark

    def score(self, result: TrainResult) -> list[dict]:
        """The run's result rows: evaluated when training ended ok, else marked diverged."""
        mark = time.perf_counter()
        rows = [*self.evaluate(), *self.check_rows(result)] if result.status == "ok" else self.diverged_rows(result)
        self.timing["eval_s"] = time.perf_counter() - mark - self.timing.get("eval_sets_s", 0.0)
        return rows

    def evaluate(self) -> list[dict]:
        """Every task at every eval length, plus the trained diagnostics when the run has a probe."""
        rows = evaluate(self.model, self.spec, self.tasks, self.device, cache_dir=Path(self.results_dir) / "_evalsets",
                        timing=self.timing)
        if self.probe:
            self.diag_rows += diagnostic_rows(self.model, self.probe[1], "trained")
            rows += [{**r, "task": self.probe[0], "eval_len": self.spec.train.seq_len, "len_ratio": 1.0,
                      "n": len(self.probe[1]), "status": "ok"} for r in self.diag_rows]
            self.tracker.log({f"diag/{r['metric']}/{r['slice']}": r["value"] for r in self.diag_rows
                              if r["metric"] in ("recency_gap", "logit_gap")})
        return rows

    def check(self):
        """The run's check of training to criterion (``suite.evaluation.check``), built once; None
        when it makes none."""
        if not hasattr(self, "_check"):
            self._check = make_check(self.spec, self.tasks, self.lines, self.device)
        return self._check

    def check_rows(self, result: TrainResult) -> list[dict]:
        """Training to criterion's rows, per judged task at the training length: ``check_score``, the
        check set's score at the last check (where training stopped), and ``steps_to_learn``, the
        first check step whose score reached the task's line (no row when none did); each names its
        check set's hash as its ``eval_set``."""
        if not result.checks:
            return []
        digests = getattr(self.check(), "digests", {})
        base = {"eval_len": self.spec.train.seq_len, "len_ratio": 1.0, "slice": ALL, "n": self.spec.train.check_examples,
                "status": "ok"}
        rows = []
        for name, score in result.checks[-1]["scores"].items():
            named = {**base, "task": name, "eval_set": digests.get(name)}
            rows.append({**named, "metric": "check_score", "value": float(score)})
            first = next((c["step"] for c in result.checks if c["scores"][name] >= self.lines[name]), None)
            if first is not None:
                rows.append({**named, "metric": "steps_to_learn", "value": float(first)})
        return rows

    def criterion(self, result: TrainResult) -> Optional[dict]:
        """The record's account of training to criterion, or None for a run that made no checks."""
        if not result.checks:
            return None
        t = self.spec.train
        return {"line": LEARNED_AT, "check_every": t.check_every, "cap_steps": t.cap_steps,
                "check_examples": t.check_examples, "checks": result.checks, "steps": result.steps_done}

    def diverged_rows(self, result: TrainResult) -> list[dict]:
        """A diverged run stays on the leaderboard, marked, with the step it diverged at."""
        return [{"task": t.name, "eval_len": self.spec.train.seq_len, "len_ratio": 1.0, "slice": "all",
                 "metric": metric, "value": value, "n": 0, "status": result.status}
                for t, task in self.tasks
                for metric, value in [*((m, float("nan")) for m in task.metrics),
                                      ("diverged_at_step", result.steps_done)]]

    def store(self, result: TrainResult, rows: list[dict]) -> Path:
        """The result file first, then what is optional (W&B rows); one line says how it ended. Each
        row names its task's headline metric, so the stored run ranks without the task's code. The
        run's record holds its whole training history (``history``: every ``log_every``-th step and
        the last, with loss, learning rate, gradient norm and tokens per second; a resumed run's
        from its first step, carried by the checkpoint), what ``posbench curve`` draws."""
        wall, timing = self.worked()
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        headline = {t.name: task.primary_metric for t, task in self.tasks}
        rows = [{**row, "headline": headline[row["task"]], "wall_s": round(wall, 2), "timestamp": stamp} for row in rows]
        meta = {**self.columns, "timing": {k: round(v, 3) for k, v in timing.items()}, "wall_s": round(wall, 2),
                "timestamp": stamp, "train_status": result.status, "resumed_from": result.resumed_from,
                "final_loss": result.final_loss, "history": result.history, "processes": distributed.world_size() if distributed.active() else 1,
                "numeric": signature.signature(), "spec": self.spec.to_dict()}
        criterion = self.criterion(result)
        if criterion is not None:
            meta["criterion"] = criterion
        corpora = {t.name: record for t, task in self.tasks if (record := task.corpus_record()) is not None}
        if corpora:  # natural text: the corpus's digest, size and training and held-out documents
            meta["corpora"] = corpora
        path = store.write_run(self.results_dir, self.spec.sweep, self.rid, meta, rows)
        (self.work / "ckpt.pt").unlink(missing_ok=True)
        self.tracker.log_rows(rows)
        self.tracker.finish()
        status = result.status if result.status == "ok" else f"{result.status} at step {result.steps_done}"
        if criterion is not None and result.status == "ok":
            status += f" after {result.steps_done} steps ({len(result.checks)} checks, cap {criterion['cap_steps']})"
        log.info("%s -> %s", finished_line(self.rid, status, meta["wall_s"], rows, self.tasks, self.spec.train.seq_len), path)
        return path
