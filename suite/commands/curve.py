"""``posbench curve <run id | results folder | shipped file>`` (``python -m suite.commands.curve``): learning
curves, the training loss and the in-distribution score against the step, of one run or of each
cell (the mean over seeds with a min-max band).

Plots the training loss against the step and the in-distribution score (each task's headline
metric at the training length) for one run, or for every cell of a results folder or a shipped
``published/<sweep>.jsonl.gz`` (runs identical except for the seed, by ``config_hash``): the mean
over seeds with a band from the lowest to the highest seed at each logged step. Writes a PNG
(``--out``, its path printed) and prints a table: per run or cell, the seeds, the first and last
logged loss and the in-distribution score, each as mean [min, max] over seeds.

A run's stored record holds its whole training history (``run["history"]``: every
``log_every``-th step and the last, a resumed run's included); runs stored before the history was
kept are named and left out. For a run without checks the in-distribution score is measured once,
when training ends, so it is a point at the last step, not a curve.

A run trained to criterion (``train.until_learned``) stores every check it made in its record
(``run["criterion"]["checks"]``: the step and each judged task's headline score at the training
length L on the check set, drawn apart from the eval set). For such runs the score panel draws
that check score against the step, per cell the mean over the seeds that checked at each step with
the min-max band (a seed that passed and stopped leaves the mean after its last check), beside the
learned line (``LEARNED_AT`` of the metric's best value) that a check
must reach for training to stop. The table adds each task's steps to learn (the stored
``steps_to_learn`` rows: the first check step at or above the line) as mean [min, max] over the
seeds that learned, with how many of the seeds that made checks did.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from suite import files
from suite.commandline import Refused, check_output, comma_problem, command, parser, warnings_on_stderr
from suite.progress import run_label

LOSS = "train/loss"


@dataclass
class Curve:
    """One run's or one cell's curve: ``steps`` with the mean, lowest and highest loss over its runs
    there, and ``scores``: {task: (metric, mean, lowest, highest)} at ``final_step``."""

    label: str
    run_ids: list[str]
    seeds: list[int]
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)
    runs_at: list[int] = field(default_factory=list)  # how many runs logged each step
    final_step: int = 0
    train_len: int = 0
    scores: dict = field(default_factory=dict)
    # runs trained to criterion: {task: Checks} over the seeds that made checks, {task: learned line}
    # and {task: (steps to learn of each seed that learned, seeds that made checks, cap steps)}
    checks: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    learned: dict = field(default_factory=dict)


@dataclass
class Checks:
    """One task's check scores against the step: at each check step, the mean, lowest and highest
    score over the runs that checked there, and how many did."""

    steps: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)
    runs_at: list[int] = field(default_factory=list)


def find_run(name: str, results_dir) -> Path:
    """The result file of run ``name`` (its id, or the spec hash it ends with) under
    ``results_dir/<sweep>/``; ``Refused`` (1) when none or several match."""
    root = Path(results_dir)
    found = [p for p in sorted(root.glob("*/*.json")) if not p.parent.name.startswith("_")]
    matches = [p for p in found if p.stem == name] or [p for p in found if p.stem.endswith(f"-{name}")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise Refused(f"run {name!r} matches {len(matches)} result files: {', '.join(map(str, matches))}; "
                      "name one by its file", 1)
    from suite.results import store

    hint = store.first_run_hint(name, "posbench curve") if "/" in name else None
    raise Refused(f"no run {name!r}: not a results folder, a shipped file or a result file, and no "
                  f"{root}/<sweep>/<run id>.json has that id or hash (--results names the folder searched)"
                  + (f"\n{hint}" if hint else ""), 1)


def load_runs(source: str, results_dir="results") -> list[dict]:
    """The stored run payloads ``source`` names: a results folder or shipped file (every stored run
    in it, ``store.payloads``), a result file, or a run id or hash searched under ``results_dir``."""
    from suite.results import store

    path = Path(source)
    with warnings_on_stderr():
        if path.is_dir() or store.is_shipped(path):
            return [payload for _, payload in store.payloads(path)]
        file = path if path.is_file() else find_run(source, results_dir)
        try:
            return [store.verified_run(file)]
        except store.NotStored as err:
            raise Refused(str(err), 1) from None


def cell_key(run: dict) -> str:
    """What groups runs into a cell: their ``config_hash`` (the spec less the seed), else a hash of
    the stored spec less seed and sweep."""
    if run.get("config_hash"):
        return str(run["config_hash"])
    spec = {k: v for k, v in (run.get("spec") or {}).items() if k not in ("seed", "sweep")}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _task(run: dict) -> str:
    spec = run.get("spec") or {}
    return str(spec.get("taskset") or "+".join(t.get("name", "?") for t in spec.get("tasks", [])) or "?")


def of_tasks(payloads: list[dict], wanted: str, prog: str) -> list[dict]:
    """The payloads whose task (``_task``) is one of the comma-separated ``wanted``; an empty name
    (``copy,,vt``: ``comma_problem``, as lm-eval's ``--tasks``) or a name no run has is refused,
    naming the tasks there are."""
    there = sorted({_task(p["run"]) for p in payloads})
    if (problem := comma_problem("--task", wanted)) is not None:
        raise Refused(f"{prog}: {problem}; the tasks there are: {', '.join(there) or 'none'}", 2)
    names = [t.strip() for t in wanted.split(",")]
    unknown = [t for t in names if t not in there]
    if unknown:
        raise Refused(f"{prog}: --task {wanted!r}: no run of {', '.join(unknown)} here; "
                      f"the tasks there are: {', '.join(there) or 'none'}", 2)
    return [p for p in payloads if _task(p["run"]) in names]


def _final_scores(payload: dict) -> dict[str, tuple[str, float]]:
    """{task: (headline metric, value)} at the training length, over all examples."""
    run = payload["run"]
    out = {}
    for row in payload["rows"]:
        if row.get("slice") == "all" and row.get("eval_len") == run.get("train_len") and row.get("metric") == row.get("headline"):
            out[row["task"]] = (row["metric"], float(row["value"]) if row.get("value") is not None else math.nan)
    return out


def _line(payload: dict, task: str) -> float:
    """The score a check of ``task`` had to reach: the record's line (``LEARNED_AT``) times the best
    value of the task's headline metric, as the run stored it; NaN when the rows do not name it."""
    from suite.data.metrics import metric

    headline = next((r.get("headline") for r in payload["rows"] if r.get("task") == task and r.get("headline")), None)
    try:
        return float(payload["run"]["criterion"]["line"]) * metric(headline).high
    except (TypeError, ValueError, KeyError):
        return math.nan


def _steps_to_learn(payload: dict) -> dict[str, float]:
    """{task: the stored ``steps_to_learn``} of a run trained to criterion, for the tasks it learned."""
    return {r["task"]: float(r["value"]) for r in payload["rows"]
            if r.get("metric") == "steps_to_learn" and r.get("slice") == "all" and r.get("status", "ok") == "ok"
            and r.get("value") is not None}


def _criterion(curve: Curve, members: list[dict]) -> None:
    """Fill ``curve.checks``, ``lines`` and ``learned`` from the members that made checks."""
    checked = [p for p in members if (p["run"].get("criterion") or {}).get("checks")]
    at: dict[str, dict[int, list[float]]] = {}
    for p in checked:
        for check in p["run"]["criterion"]["checks"]:
            for task, score in check["scores"].items():
                at.setdefault(task, {}).setdefault(int(check["step"]), []).append(float(score))
    for task in sorted(at):
        c = curve.checks[task] = Checks()
        for step in sorted(at[task]):
            mean, low, high = _spread(at[task][step])
            c.steps.append(step)
            c.score.append(mean)
            c.low.append(low)
            c.high.append(high)
            c.runs_at.append(len(at[task][step]))
        with_task = [p for p in checked if any(task in ch["scores"] for ch in p["run"]["criterion"]["checks"])]
        lines = {_line(p, task) for p in with_task}
        curve.lines[task] = lines.pop() if len(lines) == 1 else math.nan
        caps = sorted({int(p["run"]["criterion"]["cap_steps"]) for p in with_task if "cap_steps" in p["run"]["criterion"]})
        learned = [s[task] for s in map(_steps_to_learn, with_task) if task in s]
        curve.learned[task] = (learned, len(with_task), caps)


def _spread(values: list[float]) -> tuple[float, float, float]:
    """(mean, min, max) of the finite values; NaN when there are none."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return sum(finite) / len(finite), min(finite), max(finite)


def curves(payloads: list[dict], by: str = "cell") -> tuple[list[Curve], list[str]]:
    """(one ``Curve`` per cell, or per run with ``by="run"``; the ids of the runs that store no
    history). A cell's band at a step is the lowest and highest loss its seeds logged there."""
    groups: dict[str, list[dict]] = {}
    without = []
    for payload in payloads:
        run = payload["run"]
        if not run.get("history"):
            without.append(str(run.get("run_id")))
            continue
        groups.setdefault(run["run_id"] if by == "run" else cell_key(run), []).append(payload)
    out = []
    for members in groups.values():
        members.sort(key=lambda p: p["run"].get("seed", 0))
        first = members[0]["run"]
        label = run_label(first, _task(first))
        if by != "run":
            label = label.rsplit(" seed ", 1)[0]
        curve = Curve(label, [p["run"]["run_id"] for p in members], [p["run"].get("seed") for p in members],
                      train_len=int(first.get("train_len") or 0))
        at: dict[int, list[float]] = {}
        for p in members:
            for h in p["run"]["history"]:
                at.setdefault(int(h["step"]), []).append(float(h[LOSS]))
        for step in sorted(at):
            mean, low, high = _spread(at[step])
            curve.steps.append(step)
            curve.loss.append(mean)
            curve.low.append(low)
            curve.high.append(high)
            curve.runs_at.append(len(at[step]))
        curve.final_step = max(int(p["run"]["history"][-1]["step"]) for p in members) + 1
        finals = [_final_scores(p) for p in members]
        for task in sorted({t for f in finals for t in f}):
            metric = next(f[task][0] for f in finals if task in f)
            curve.scores[task] = (metric, *_spread([f[task][1] for f in finals if task in f]))
        _criterion(curve, members)
        out.append(curve)
    out.sort(key=lambda c: c.label)
    return out, without


def _ranged(mean: float, low: float, high: float, n: int) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:.3f}" if n == 1 else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def learned_text(task: str, steps: list[float], checked: int, caps: list[int]) -> str:
    """'copy 250 [125, 375] (3 of 3 learned)': a task's steps to learn, mean [min, max] over the
    seeds that learned (the mean alone for one), how many of the ``checked`` seeds that made checks
    learned, and the cap of those that never did."""
    never = checked - len(steps)
    cap = f"cap {', '.join(map(str, caps)) or 'not recorded'} steps"
    if not steps:
        return f"{task} never learned (0 of {checked}, {cap})"
    mean, low, high = _spread(steps)
    value = f"{mean:.0f}" if len(steps) == 1 else f"{mean:.0f} [{low:.0f}, {high:.0f}]"
    return f"{task} {value} ({len(steps)} of {checked} learned" + (f"; {never} never, {cap})" if never else ")")


def table(found: list[Curve], by: str = "cell") -> str:
    """The printed table: one line per run or cell (``by``); a column of steps to learn when a run
    in it was trained to criterion."""
    from tabulate import tabulate

    rows = []
    criterion = any(c.learned for c in found)
    for c in found:
        n = len(c.run_ids)
        first, last = (c.loss[0], c.low[0], c.high[0]), (c.loss[-1], c.low[-1], c.high[-1])
        scores = "; ".join(f"{task} {metric} {_ranged(mean, low, high, n)}" for task, (metric, mean, low, high) in c.scores.items())
        rows.append([c.label, ",".join(str(s) for s in c.seeds), len(c.steps), c.final_step,
                     _ranged(*first, n), _ranged(*last, n), scores or "-"])
        if criterion:
            rows[-1].append("; ".join(learned_text(task, *found) for task, found in c.learned.items()) or "-")
    headers = [by, "seeds", "points", "steps", "first loss", "last loss", "in-distribution score at the end"]
    return tabulate(rows, headers=headers + (["steps to learn"] if criterion else []), tablefmt="simple",
                    disable_numparse=True)


def plot(found: list[Curve], title: str) -> bytes:
    """The PNG of ``figure``."""
    import io

    import matplotlib.pyplot as plt

    fig = figure(found, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _draw(c: Curve, look, tasks: list[str], loss_ax, score_ax) -> None:
    """One cell's lines: its loss (with a min-max band over seeds), each task's check scores (with
    their band), and for a task without checks the score at the last step (a point with a bar)."""
    loss_ax.plot(c.steps, c.loss, color=look.color, label=c.label, linewidth=1.4)
    if len(c.run_ids) > 1:
        loss_ax.fill_between(c.steps, c.low, c.high, color=look.color, alpha=0.18, linewidth=0)
    for task, checks in c.checks.items():
        score_ax.plot(checks.steps, checks.score, color=look.color, marker=look.marker, markersize=3, linewidth=1.2)
        if max(checks.runs_at) > 1:
            score_ax.fill_between(checks.steps, checks.low, checks.high, color=look.color, alpha=0.18, linewidth=0)
        if len(tasks) > 1:  # a task set: each curve names its task at its end
            score_ax.annotate(task, (checks.steps[-1], checks.score[-1]), xytext=(3, 0), textcoords="offset points",
                              fontsize=6, color=look.color, va="center")
    for i, task in enumerate(tasks):
        if task not in c.scores or task in c.checks:
            continue
        _, mean, low, high = c.scores[task]
        x = c.final_step * (1 + 0.05 * (i - (len(tasks) - 1) / 2))  # a task set's tasks side by side
        score_ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], color=look.color, marker=look.marker,
                          capsize=3, linestyle="none")
        if len(tasks) > 1:  # a task set: each point names its task
            score_ax.annotate(task, (x, high), xytext=(0, 5), textcoords="offset points", fontsize=6,
                              color=look.color, ha="center", va="bottom", rotation=90)


def figure(found: list[Curve], title: str):
    """Two panels: the loss against the step (mean line, min-max band over seeds), and each task's
    in-distribution score: for runs trained to criterion, the check score at L against the step
    (mean line, min-max band over the seeds that checked there) under the dashed learned line; for
    other runs, the score at the last step (a point with a min-max bar)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from suite.report.styles import style_map
    from suite.data.metrics import LEARNED_AT

    looks = style_map([c.label for c in found])
    legend_rows = max(1, math.ceil(len(found) / 3))
    fig, (loss_ax, score_ax) = plt.subplots(1, 2, figsize=(11, 4.2 + 0.22 * legend_rows),
                                            gridspec_kw={"width_ratios": [3, 2]})
    tasks = sorted({t for c in found for t in c.scores})
    for c in found:
        _draw(c, looks[c.label], tasks, loss_ax, score_ax)
    loss_ax.set_xlabel("training step")
    loss_ax.set_ylabel("training loss (mean; band: min to max over seeds)")
    loss_ax.set_title(title, fontsize=9)
    metrics = sorted({m for c in found for m, *_ in c.scores.values()})
    score_ax.set_xlabel("training step")
    score_ax.set_ylabel(f"in-distribution score ({metrics[0]})" if len(metrics) == 1
                        else "in-distribution score (each task's headline metric)")
    lines = sorted({v for c in found for v in c.lines.values() if math.isfinite(v)})
    for k, line in enumerate(lines):
        score_ax.axhline(line, color="0.35", linestyle="--", linewidth=1,
                         label=f"learned line ({LEARNED_AT} of the best value)" if k == 0 else None)
    if lines:
        score_ax.legend(loc="best", fontsize=7, frameon=False)
    checked = [c for c in found if c.checks]
    if checked:
        lengths = sorted({c.train_len for c in checked})
        at = f"L = {lengths[0]}" if len(lengths) == 1 else "each run's L"
        score_ax.set_title(f"on the check set at {at}, at each check\n(band: min to max over seeds)"
                           + ("\npoints: runs without checks, measured once at the end" if len(checked) < len(found)
                              else ""), fontsize=9)
    else:
        score_ax.set_title("measured once, at the end of training\n(bar: min to max over seeds)", fontsize=9)
    if found:
        last = max(max([c.final_step] + [k.steps[-1] for k in c.checks.values()]) for c in found)
        score_ax.set_xlim(0, last * (1.15 + 0.025 * len(tasks)))
    fig.legend(*loss_ax.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * legend_rows, 1, 1))
    return fig


@command
def main(argv: list[str] | None = None, prog: str = "python -m suite.commands.curve") -> int:
    p = parser(prog, __doc__)
    p.add_argument("source", help="a run id (or its hash) under --results, a result file, a results folder "
                                  "(results/<sweep>) or a shipped published/<sweep>.jsonl.gz")
    p.add_argument("--results", default="results", help="the folder a run id is searched in (default: results)")
    p.add_argument("--runs", action="store_true", help="one curve per run, not per cell (a cell: runs identical but "
                                                      "for the seed, drawn as the mean with a min-max band)")
    p.add_argument("--out", default=None,
                   help="the PNG to write (default: reports-local/curve-<run id or source name>.png, git-ignored)")
    p.add_argument("--task", default=None, help="only the runs of these tasks (comma-separated: copy,vt)")
    args = p.parse_args(argv)
    name = Path(args.source).name.removesuffix(".jsonl.gz").removesuffix(".json") or "curve"
    out = check_output(p.prog, "--out", f"reports-local/curve-{name}.png" if args.out is None else args.out, kind="file")
    payloads = load_runs(args.source, args.results)
    if args.task is not None:
        payloads = of_tasks(payloads, args.task, p.prog)
    by = "run" if args.runs or len(payloads) == 1 else "cell"
    found, without = curves(payloads, by=by)
    if without:
        shown = ", ".join(without[:3]) + (f", ... ({len(without)} in all)" if len(without) > 3 else "")
        print(f"{len(without)} of {len(payloads)} runs store no training history (stored before runs kept it): "
              f"{shown}; rerun them to draw their curves", file=sys.stderr)
    if not found:
        raise Refused(f"no run in {args.source} stores a training history; nothing to plot", 1)
    runs = sum(len(c.run_ids) for c in found)
    title = f"{args.source}: {runs} run{'s' if runs != 1 else ''}" + (
        f" in {len(found)} cell{'s' if len(found) != 1 else ''}" if by == "cell" else "")
    files.write_atomic(out, plot(found, title))
    print(table(found, by))
    print("in-distribution score: each task's headline metric at the training length, measured once, at the end "
          "of training (a point at the last step, not a curve)")
    if any(c.checks for c in found):
        from suite.data.metrics import LEARNED_AT

        print(f"runs trained to criterion: the plot draws the check score (each task's headline metric at the "
              f"training length on the check set, drawn apart from the eval set) at each check, with the learned line "
              f"({LEARNED_AT} of the metric's best value), the mean over the seeds that checked at each step (a seed "
              f"that passed and stopped leaves it); steps to learn: the first check step at or above the line, "
              f"mean [min, max] over the seeds that learned")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
