"""Progress a person sees anywhere, not only on a terminal.

On a terminal the training loop draws a tqdm bar. Off one (a joblib worker, a SLURM job, output
redirected to a file) ``StepLog`` writes a plain line every ``log_every`` steps: the step, the
loss, tokens per second and the time left; both name the run by ``run_label`` (scheme, span,
pattern, task, seed). ``finished_line`` is the one line a sweep prints per finished run: its id,
status, wall time and each task's headline score at every evaluation length.
"""
from __future__ import annotations

import errno
import json
import math
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

from suite.files import append_regular, read_regular


def duration(seconds: float) -> str:
    """'45s', '3m12s', '2h05m'."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def run_label(columns: dict, task: str) -> str:
    """A run as a person names it: scheme, span (with its window or chunk), the layer pattern when
    it is not ``uniform``, task (or task set) and seed, from the run's columns
    (``suite.results.identity.run_columns``): 'rope swa(w=16) copy seed 0',
    'rope+nope full rnope copy seed 1'."""
    sizes = ",".join(f"{short}={columns[kind]}" for kind, short in (("window", "w"), ("chunk", "c"))
                     if columns.get(kind) is not None)
    span = f"{columns['spans']}({sizes})" if sizes else str(columns["spans"])
    pattern = [] if columns.get("pattern") in (None, "uniform") else [str(columns["pattern"])]
    return " ".join([str(columns["positions"]), span, *pattern, task, f"seed {columns['seed']}"])


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

    def extend(self, total_steps: int) -> None:
        """A run that trains on past its planned steps (training to criterion): the most it may now take."""
        self.total = total_steps

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


def headline_scores(rows: list[dict], tasks, train_len: int) -> dict[str, tuple[str, dict[int, float]]]:
    """Each task's headline metric (the task's ``primary_metric``) at every evaluation length the
    run stored it at, over all examples: ``{task name: (metric, {eval length: value})}``, lengths
    in increasing order, the training length always among them; NaN where the run stored no value
    (a diverged run, a length the scheme cannot represent)."""
    wanted = {spec.name: task.primary_metric for spec, task in tasks}
    found = {(r["task"], r["metric"], int(r["eval_len"])): r.get("value") for r in rows
             if r.get("slice") == "all" and r.get("task") in wanted and r.get("eval_len") is not None}
    scores = {}
    for name, metric in wanted.items():
        lengths = sorted({train_len} | {n for task, m, n in found if (task, m) == (name, metric)})
        scores[name] = (metric, {n: _number(found.get((name, metric, n))) for n in lengths})
    return scores


def _number(value) -> float:
    """``value`` as a float, NaN for none (a row without a value stores null)."""
    return math.nan if value is None else float(value)


def finished_line(run_id: str, status: str, wall_s: float, rows: list[dict], tasks, train_len: int) -> str:
    """'done <run id>: ok in 12.3s | copy token_accuracy 32: 0.8750  64: 0.3125': each task's
    headline metric at every evaluation length ('-' where there is no score), one group per task
    of a task set, each after a '|' (their headline metrics differ, so they are not averaged)."""
    groups = [f"{name} {metric} " + "  ".join(f"{n}: {'-' if math.isnan(v) else f'{v:.4f}'}" for n, v in values.items())
              for name, (metric, values) in headline_scores(rows, tasks, train_len).items()]
    return f"done {run_id}: {status} in {wall_s:.1f}s | " + " | ".join(groups)


# A multirun's progress. Hydra numbers its jobs (``hydra.job.num``, 0-based, across the whole
# sweep) but tells no job how many there are, and with the joblib or submitit launcher each job
# runs in a worker process of its own. So the sweep's callback (``suite.config.validate``), which
# expands every job before the first starts, writes the count and the parallelism to a plan file in
# the sweep's folder (``hydra.sweep.dir``, one per invocation: ``validate.PLAN``), and every job
# appends one line to the ledger beside it when it ends. A job reads both: "run k of N" and the
# time left from the jobs done. A plan or ledger that is not a regular file (a FIFO) is named in one
# warning, never waited on (``suite.files.read_regular``, ``append_regular``).


class SweepProgress:
    """Job ``k`` (1-based) of a sweep of ``n`` jobs, ``parallel`` at a time, whose jobs record their
    end in ``ledger``. The time left is the runs not yet done times the mean wall time of the runs
    this invocation trained, divided by ``parallel``; runs found already stored (skipped, or copied
    from another sweep's folder) and jobs the sweep's ``skip`` list leaves out count as done but not
    in that mean, since they take no time."""

    def __init__(self, k: int, n: int, parallel: int, ledger=None):
        self.k, self.n, self.parallel = k, n, max(1, parallel)
        self.ledger = None if ledger is None else Path(ledger)  # None: kept in memory (one process's runs)
        self._kept: list[dict] = []
        self._said: set[str] = set()  # what was said about a ledger that cannot be read or appended to

    @classmethod
    def of_plan(cls, plan_file, job_num: int) -> Optional["SweepProgress"]:
        """Job ``job_num`` (Hydra's, 0-based) of the sweep whose plan (``{"jobs", "parallel"}``) is
        ``plan_file``, its ledger beside it (``<plan>.jsonl``); None when there is no readable plan
        (a sweep launched without the callback)."""
        try:
            plan = json.loads(read_regular(plan_file))  # a FIFO is named, never waited on
            return cls(int(job_num) + 1, int(plan["jobs"]), int(plan.get("parallel", 1)), Path(plan_file).with_suffix(".jsonl"))
        except OSError as err:
            if err.errno != errno.ENOENT:
                warnings.warn(f"sweep plan {plan_file} cannot be read ({err.strerror or err}): no run counts", stacklevel=2)
            return None
        except (ValueError, KeyError, TypeError):
            return None

    def done(self) -> list[dict]:
        """The ledger's lines: one per finished job, {"job", "trained", "wall_s"}."""
        if self.ledger is None:
            return list(self._kept)
        try:
            text = read_regular(self.ledger).decode(errors="replace")  # a FIFO is named, never waited on
        except OSError as err:
            if err.errno != errno.ENOENT:
                self._say_once(f"sweep ledger {self.ledger} cannot be read ({err.strerror or err}): runs done are not counted")
            return []
        out = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed job
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def status(self, done: Optional[list[dict]] = None) -> str:
        """'4 of 36 done (2 already stored), about 12m30s left at 1m15s a run, 2 at a time', from the
        ledger's lines (``done``, default: all of them now); jobs left out by the sweep are named
        apart ('(1 already stored, 3 left out)')."""
        done = self.done() if done is None else done
        trained = [float(e["wall_s"]) for e in done if e.get("trained")]
        left_out = sum(1 for e in done if e.get("left_out"))
        stored = len(done) - len(trained) - left_out
        said = [f"{stored} already stored"] * bool(stored) + [f"{left_out} left out"] * bool(left_out)
        count = f"{len(done)} of {self.n} done" + (f" ({', '.join(said)})" if said else "")
        if len(done) >= self.n:
            return count
        if not trained:
            return f"{count}, time left known after the first trained run"
        per_run = sum(trained) / len(trained)
        left = per_run * max(0, self.n - len(done)) / self.parallel
        return f"{count}, about {duration(left)} left at {duration(per_run)} a run, {self.parallel} at a time"

    def start_line(self, label: str) -> str:
        """'run 3 of 36: rope full copy seed 0 | 2 of 36 done, ...': what a job prints first."""
        return f"run {self.k} of {self.n}: {label} | {self.status()}"

    def finish(self, trained: bool, wall_s: float, left_out: bool = False) -> str:
        """Record this job's end in the ledger (one appended line) and return the line a job prints
        last; ``left_out``: the sweep's ``skip`` list left this job out."""
        entry = {"job": self.k, "trained": bool(trained), "wall_s": round(float(wall_s), 3)}
        if left_out:
            entry["left_out"] = True
        if self.ledger is None:
            self._kept.append(entry)
        else:
            self._append(json.dumps(entry) + "\n")
        done = self.done()  # up to this job's own line: what another job appends after it is its own news
        mine = max((i for i, e in enumerate(done) if e.get("job") == self.k), default=len(done) - 1)
        how = "finished" if trained else ("left out" if left_out else "already stored")
        return f"run {self.k} of {self.n} {how} | {self.status(done[:mine + 1])}"

    def _append(self, line: str) -> None:
        """One short append (whole lines, whatever the jobs' order); a ledger that cannot take it (a
        FIFO, a full disk) is named once, and the job goes on uncounted."""
        try:
            append_regular(self.ledger, line)
        except OSError as err:
            self._say_once(f"sweep ledger {self.ledger} cannot be appended to ({err.strerror or err}): this job's end is not counted")

    def _say_once(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            warnings.warn(line, stacklevel=3)


class CountLines:
    """A count of work items off a terminal (lm-eval's requests, which a tqdm bar shows only on
    one): a plain line through ``write`` about ``lines`` times, and at the end, 'Running
    loglikelihood requests 2,780/27,800 (10%) ETA 2m10s', the time left at the pace since it was
    made. Each update is also handed to ``bar`` (a tqdm bar, off here), so callers hold one object."""

    def __init__(self, bar, total: int, desc: str, write: Callable[[str], None],
                 clock: Callable[[], float] = time.perf_counter, lines: int = LINES_PER_RUN):
        self.bar, self.total, self.desc, self.write, self.clock = bar, int(total), desc, write, clock
        self.step = max(1, -(-self.total // max(1, lines)))  # ceil(total / lines)
        self.done, self.next, self.t0 = 0, self.step, clock()

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        self.done += n
        if self.done >= self.next or self.done >= self.total:
            self.next = (self.done // self.step + 1) * self.step
            elapsed = self.clock() - self.t0
            left = elapsed / self.done * max(0, self.total - self.done) if self.done else None
            self.write(f"{self.desc} {self.done:,}/{self.total:,} ({100 * self.done / max(1, self.total):.0f}%) "
                       f"ETA {'-' if left is None else duration(left)}")

    def close(self) -> None:
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
