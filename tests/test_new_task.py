"""Adding a task is one Python file plus one conf/task YAML: a throwaway task, added to a copy of
the checkout, trains and stores through suite.run, appears in the report, and is an lm-eval task.

Mutation check: in suite/lmeval/yamls.py write, writing YAMLs only for tasks in some task set
(not every registered task) makes test_a_throwaway_task_is_one_file_and_one_yaml fail; scoring it
with lm-eval end to end is test_a_throwaway_task_is_scored_by_lm_eval (make test-exhaustive).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TASK = '''"""Throwaway: repeat the first word of the context after the query marker."""
from dataclasses import dataclass

import numpy as np

from tasks.base import ANSWER_ID, BOS_ID, QUERY_ID, WORD_IDS, Builder, Example, Task, too_short


@dataclass(frozen=True)
class FirstWord(Task):
    name = "first_word"
    primary_metric = "exact_match"
    spread: int = 1  # words the first one is drawn from, as a multiple of 1

    def generate(self, rng: np.random.Generator, length: int) -> Example:
        if length < 5:
            raise too_short(self.name, length, 5)
        words = rng.choice(WORD_IDS, size=length - 4).tolist()
        b = Builder([BOS_ID])
        b.add(words)
        b.add([QUERY_ID, ANSWER_ID])
        b.answer([words[0]])
        return b.example()
'''


def _run(repo: Path, *args) -> str:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=repo, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + out.stderr


# several ``python -m`` commands (or ``-c`` snippets), one after another in one interpreter of the
# copied checkout (each must exit 0); their outputs are separated by a marker line
SEQUENCE = """
import json, runpy, sys
for argv in json.loads(sys.argv[1]):
    try:
        if argv[0] == "-c":
            exec(argv[1], {"__name__": "__main__"})
        else:
            sys.argv = list(argv)
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        if exit_.code:
            raise
    print("=== next", flush=True)
"""


def _run_sequence(repo: Path, *commands: list[str]) -> list[str]:
    return _run(repo, "-c", SEQUENCE, json.dumps([list(map(str, c)) for c in commands])).split("=== next\n")


@pytest.fixture(scope="module")
def throwaway(tmp_path_factory):
    """A copy of the checkout with the throwaway task added, one stored run of it, its report, the
    all set's config and lm-eval's task files: four commands in one interpreter of the copy."""
    tmp = tmp_path_factory.mktemp("new-task")
    repo = tmp / "repo"
    for part in ("suite", "tasks", "conf"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    if (ROOT / ".cache" / "corpora").is_dir():  # the corpora make install fetched, which the text tasks check as they are built
        (repo / ".cache").mkdir()
        (repo / ".cache" / "corpora").symlink_to(ROOT / ".cache" / "corpora")
    (repo / "tasks" / "first_word.py").write_text(TASK)
    (repo / "conf" / "task" / "first_word.yaml").write_text("name: first_word\nspread: 1\n")
    results = tmp / "results"
    _, _, config, listed, _ = _run_sequence(
        repo, ["suite.run", "task=first_word", "train.steps=3", "eval.n_examples=4", "eval.multiples=[1,2]", "logger=none",
               f"results_dir={results}", "sweep_name=t", f"hydra.run.dir={tmp / 'h'}"],
        ["suite.report", "t", "--results", results, "--out", tmp / "reports"],
        ["suite.run", "taskset=all", "--cfg", "job", "--resolve"],
        ["-c", "from suite.lmeval.yamls import include_dir; print(sorted(p.name for p in include_dir().iterdir()))"])
    return repo, results, next((results / "t").glob("*.json")), (tmp / "reports" / "t" / "index.md").read_text(), config, listed


def test_a_throwaway_task_is_one_file_and_one_yaml(throwaway):
    _, _, stored, report, config, listed = throwaway
    rows = json.loads(stored.read_text())["rows"]
    assert {r["task"] for r in rows} == {"first_word"} and {r["eval_len"] for r in rows} == {32, 64}
    assert "## first_word" in report
    assert "- first_word" in config  # the all set lists it
    assert "'posbench_first_word.yaml'" in listed  # an lm-eval task, scored below


@pytest.mark.exhaustive
def test_a_throwaway_task_is_scored_by_lm_eval(throwaway, tmp_path):
    repo, _, stored, *_ = throwaway
    out = tmp_path / "lm"
    _run(repo, "-m", "suite.lmeval", "--run", str(stored), "--tasks", "posbench_first_word", "--limit", "2", "--output_path", str(out))
    scored = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["posbench_first_word"]
    assert {"exact_match,len=32", "exact_match,len=64"} <= set(scored)
