"""The lm-eval task and group YAMLs, generated from the task registry and the task sets, so a new
task (one file in ``tasks/`` and one ``conf/task`` YAML) is an lm-eval task with nothing else
to write.

Each task's YAML names the template that scores it (``suite/lmeval/yaml/_*_template``), chosen by
what the task is:

* a natural-text task (``byte_level``: code, prose): ``_text_template``, lm-eval's
  ``loglikelihood`` of each example's target bytes given its context, giving bits per byte;
* a task that ranks candidates (a metric of its ``metrics`` reads them, ``reciprocal_rank``): ``_choice_template``, lm-eval's
  ``multiple_choice``;
* a task whose answers sit between queries (answer spans apart from each other, so
  ``suite.lmeval.tasks.example_docs`` makes several documents of one example):
  ``_per_query_template``, one document per query. The probe is the task's shortest example; a
  task whose shortest example has one answer but longer ones several apart (``flipflop``'s
  reads) declares ``answers_between_queries = True``;
* a task whose headline metric is RULER's string match over several answers: ``_multi_template``;
* a task whose headline metric is token accuracy: ``_token_template`` (exact match and the
  suite's teacher-forced token accuracy);
* any other: ``_generate_template``.

Each task set ``conf/taskset/<name>.yaml`` becomes the group ``posbench_<name>``.

    python -m suite.lmeval.yamls <folder>   # writes the templates and YAMLs for plain ``lm-eval``
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from omegaconf import OmegaConf

from suite.data.batch import shortest_length
from suite.config import schema
from suite.config.compose import CONF_DIR
from suite.lmeval.tasks import example_docs
from suite.config.build import task_spec
from suite.data.metrics import CANDIDATES, metric
from tasks import TASKS

TEMPLATES = Path(__file__).resolve().parent / "yaml"
VERSION = 2.0
PROBE_LIMIT = 4096  # the longest length probed for a task's shortest example


def template(name: str) -> str:
    """The template that scores task ``name`` (see the module docstring)."""
    task = task_spec(name).build()
    if task.byte_level:
        return "_text_template"
    if any(metric(m).reads == CANDIDATES for m in task.metrics):
        return "_choice_template"
    length = shortest_length(task, PROBE_LIMIT)
    example = task.generate(np.random.default_rng(0), length)
    if task.answers_between_queries or len(example_docs(example, length, 0)) > 1:
        return "_per_query_template"
    if task.primary_metric in ("string_match_all", "string_match_part"):
        return "_multi_template"
    if task.primary_metric == "token_accuracy":
        return "_token_template"
    return "_generate_template"


def task_yaml(name: str) -> dict:
    return {"include": template(name), "task": f"posbench_{name}", "dataset_kwargs": {"posbench_task": name}}


def group_yaml(taskset: dict) -> dict:
    """A task set as an lm-eval group averaging exact match over its tasks, per length."""
    return {"group": f"posbench_{taskset['name']}", "task": [f"posbench_{t}" for t in taskset["tasks"]],
            "aggregate_metric_list": [{"metric": "exact_match", "weight_by_size": False}],
            "metadata": {"version": VERSION}}


def tasksets() -> list[dict]:
    """Every ``conf/taskset`` YAML, resolved (``all`` lists the registered tasks by a resolver)."""
    schema.register()
    return [OmegaConf.to_container(OmegaConf.load(path), resolve=True) for path in sorted((CONF_DIR / "taskset").glob("*.yaml"))]


def write(folder: Path) -> Path:
    """The templates plus one YAML per registered task and per task set, into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in TEMPLATES.glob("_*_template"):
        shutil.copy(path, folder / path.name)
    for name in sorted(TASKS):
        (folder / f"posbench_{name}.yaml").write_text(yaml.safe_dump(task_yaml(name), sort_keys=False))
    for taskset in tasksets():
        (folder / f"posbench_{taskset['name']}.yaml").write_text(yaml.safe_dump(group_yaml(taskset), sort_keys=False))
    return folder


_FOLDERS: list[tempfile.TemporaryDirectory] = []  # the folder ``include_dir`` wrote, until removed


@lru_cache(maxsize=1)
def include_dir() -> Path:
    """A folder of this checkout's task and group YAMLs, written once per process and removed by
    ``remove_include_dir`` (``python -m suite.lmeval`` calls it when it ends), or else when the
    process exits (``TemporaryDirectory``'s finalizer), so no call leaves it behind."""
    folder = tempfile.TemporaryDirectory(prefix="posbench-lmeval-")
    _FOLDERS.append(folder)
    return write(Path(folder.name))


def remove_include_dir() -> None:
    """Remove the folder ``include_dir`` wrote (if any); a later ``include_dir`` writes a new one."""
    while _FOLDERS:
        _FOLDERS.pop().cleanup()
    include_dir.cache_clear()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m suite.lmeval.yamls <folder>", file=sys.stderr)
        return 2
    print(write(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
