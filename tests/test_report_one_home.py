"""The report's facts each have one home: span kinds (``suite.model.span_kinds``), the
effective-length threshold, metric directions (``suite.data.metrics``, also for lm-eval). The
report builds its board once, and its command reads as named steps.

Mutation checks: writing "chunk" back into store.COLUMNS, or BREAKDOWN_COLUMNS in
suite/report/sections/breakdowns.py, makes test_span_kinds_are_read_from_their_one_home fail;
importing KINDS from suite.model.span.base in suite/report/boards.py makes
test_the_store_and_the_report_load_no_torch fail; THRESHOLD = 0.8 back in suite/report/render.py, or
0.8 as effective_length's default (suite/report/sections/effective_length.py), makes
test_the_effective_length_threshold_is_written_once fail; mrr_intervals building the leaderboard and
the primary rows again from the raw rows makes test_the_report_builds_its_headline_rows_and_board_once
fail; main in suite/report/__main__.py written as one function again makes
test_the_report_command_reads_as_named_steps fail."""
import ast
import subprocess
import sys
from pathlib import Path

from suite.model.span import base
from suite.model.span_kinds import KINDS
from suite.report import boards, choices, ranking
from suite.report.sections import breakdowns
from suite.results import store

ROOT = Path(__file__).resolve().parent.parent
READERS = ["suite/results/store.py", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "suite/report").rglob("*.py"))]


def _literals(path: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_span_kinds_are_read_from_their_one_home():
    assert base.KINDS is KINDS
    assert [c for c in store.COLUMNS if c in KINDS] == list(KINDS)
    assert [c for c in breakdowns.BREAKDOWN_COLUMNS if c in KINDS] == list(KINDS)
    for path in READERS:
        assert not _literals(path) & set(KINDS), (path, _literals(path) & set(KINDS))


def test_the_store_and_the_report_load_no_torch():
    code = ("import sys, suite.results.store, suite.report.render, suite.report.__main__; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False"]


def _numbers(path: str) -> list[float]:
    return [n.value for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.Constant)
            and type(n.value) is float]


def test_the_effective_length_threshold_is_written_once():
    """Declared with the choices a board command's --help reads (suite/report/choices.py), applied by the
    effective-length section."""
    assert choices.EFFECTIVE_AT == 0.8
    assert [p for p in READERS if 0.8 in _numbers(p)] == ["suite/report/choices.py"]
    assert _numbers("suite/report/choices.py").count(0.8) == 1


def test_the_report_builds_its_headline_rows_and_board_once(tmp_path, monkeypatch):
    import warnings

    from suite.report import render
    from tests.test_report import write_fixture

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = store.load(write_fixture(tmp_path) / "fx")
    calls = {"primary": 0, "board_of": 0}
    for name in calls:
        def counted(*args, _name=name, _real=getattr(boards, name), **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(boards, name, counted)
    r = render.build(df, "fx")
    # the board of every run, and the learned runs' board the MRR ranks (rope's seed 1 has not learned)
    assert calls == {"primary": 1, "board_of": 2} and not r["splits"]
    assert list(r["mrr"].scheme) == list(ranking.mrr(r["board"]).scheme)


def test_the_report_command_reads_as_named_steps():
    """main parses, reads the rows, checks --metric (the check every board command shares,
    ``suite.report.choices``), builds and publishes, each a function of its own."""
    text = (ROOT / "suite/report/__main__.py").read_text()
    tree = ast.parse(text)
    lengths = {n.name: n.end_lineno - n.lineno + 1 for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"build_parser", "read_rows", "publish", "main"} <= set(lengths) and "choices.check_metric(" in text
    assert max(lengths.values()) <= 25, lengths
