"""Progress a person sees anywhere, not only on a terminal.

On a terminal the training loop draws a tqdm bar. Off one (a joblib worker, a SLURM job, output
redirected to a file) ``StepLog`` writes a plain line every ``log_every`` steps: the step, the
loss, tokens per second and the time left. ``finished_line`` is the one line a sweep prints per
finished run: its id, status, wall time and headline scores.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional


def duration(seconds: float) -> str:
    """'45s', '3m12s', '2h05m'."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


LINES_PER_RUN = 10  # plain progress lines a run writes, about: a sweep's log stays readable


def calls_per_line(total_steps: int, log_every: int) -> int:
    """Every how many ``log`` calls a plain line is written, so a run writes about LINES_PER_RUN."""
    return max(1, (total_steps // max(1, log_every) + 1) // LINES_PER_RUN)


class StepLog:
    """A ``log(metrics, step)`` callback for ``suite.training.loop.train`` that writes a plain line through
    ``write`` on every ``every``-th call and on the last step, and hands every call's metrics on
    to ``forward`` (the W&B tracker).

    The time left is the steps still to run at the pace measured since the first call (a run
    resumed from a checkpoint measures from where it resumed); the first line has none yet."""

    def __init__(self, name: str, total_steps: int, write: Callable[[str], None],
                 forward: Optional[Callable[[dict, int], None]] = None, clock: Callable[[], float] = time.perf_counter,
                 every: int = 1):
        self.name, self.total, self.write, self.forward, self.clock = name, total_steps, write, forward, clock
        self.every, self._calls = max(1, every), 0
        self._first: Optional[tuple[float, int]] = None

    def eta(self, step: int) -> Optional[float]:
        """Seconds left after ``step`` (0-based) finished, or None before the pace is known."""
        now = self.clock()
        if self._first is None:
            self._first = (now, step)
            return None
        t0, s0 = self._first
        if step <= s0:
            return None
        return (now - t0) / (step - s0) * (self.total - 1 - step)

    def line(self, metrics: dict, step: int) -> str:
        """'<name> step 120/1750 (7%) loss 1.2345 tok/s 12,345 ETA 3m12s' after 0-based ``step``."""
        done = step + 1
        eta = self.eta(step)
        loss = metrics.get("train/loss", math.nan)
        tok_s = metrics.get("train/tokens_per_s", math.nan)
        return (f"{self.name} step {done}/{self.total} ({100 * done / self.total:.0f}%) loss {loss:.4f} "
                f"tok/s {tok_s:,.0f} ETA {'-' if eta is None else duration(eta)}")

    def __call__(self, metrics: dict, step: int) -> None:
        line = self.line(metrics, step)  # every call, so the pace is measured from the first
        if self._calls % self.every == 0 or step + 1 >= self.total:
            self.write(line)
        self._calls += 1
        if self.forward is not None:
            self.forward(metrics, step)


def headline_scores(rows: list[dict], tasks, train_len: int) -> dict[str, tuple[str, float]]:
    """Each task's headline metric (the task's ``primary_metric``) at the training length, over
    all examples: ``{task name: (metric, value)}``; NaN where the run stored none (a diverged run)."""
    wanted = {spec.name: task.primary_metric for spec, task in tasks}
    found = {(r["task"], r["metric"]): r["value"] for r in rows
             if r.get("slice") == "all" and r.get("eval_len") == train_len and r["task"] in wanted}
    return {name: (metric, float(found.get((name, metric), math.nan))) for name, metric in wanted.items()}


def finished_line(run_id: str, status: str, wall_s: float, rows: list[dict], tasks, train_len: int) -> str:
    """'done <run id>: ok in 12.3s | copy token_accuracy@32 0.8750', one score per task of a task
    set (their headline metrics differ, so they are not averaged)."""
    parts = [f"{name} {metric}@{train_len} {'-' if math.isnan(value) else f'{value:.4f}'}"
             for name, (metric, value) in headline_scores(rows, tasks, train_len).items()]
    return f"done {run_id}: {status} in {wall_s:.1f}s | " + ", ".join(parts)
