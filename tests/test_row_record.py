"""Every stored row agrees with its own run record, and a run of another sweep stays off a board,
whichever reader reads it: generated cases, class x variant x reader.

The board is sweep ``fx``: three runs this checkout builds (rope seeds 0 and 1, alibi seed 0;
copy at 32 and 64 tokens), each with a whole stored spec that rebuilds to its own spec hash, so
every derived column is checked. Each case damages one run in one way (``CLASSES``: a row's or
the whole run's config hash, scheme, spans, window, chunk, sweep, spec hash or run id; a headline;
a time) or brings in another sweep's run (``FOREIGN``: a copied file, a symlink, a line appended to
the shipped file), and each reader (``READERS``: ``verified_run``, ``load``, ``shipped check``,
``pack``, ``unpack``) must leave it out, naming the file or line and the reason, and keep the rest.
A run the suite copied from another sweep (``relabelled``, with ``copied_from``) passes them all.

Mutation checks (each undone by hand, the named cases fail, restored):
- ``record_problem`` without ``_rows_problem``: every ``row-*`` class fails in every reader;
- ``_spec_problem`` returning None after the sweep check (no rebuilt columns): every ``run-*``
  class but ``run-sweep-vs-spec`` fails; without its sweep line, ``run-sweep-vs-spec`` fails;
- ``_headline_problem`` returning None: both ``headline-*`` classes fail;
- ``_time_problem`` returning None: the ``record-wall-*``, ``timing-*`` and ``timestamp-*`` classes
  fail; ``row_problem`` checking only that wall_s is a number (``_is_number``): ``row-wall-*`` fail;
- ``checked`` without ``foreign_sweep``: every ``FOREIGN`` case fails (the run is read, or packed);
- ``shipped_place`` taking the majority sweep first makes
  test_a_line_appended_to_a_board_named_for_its_sweep_is_foreign_even_when_it_is_most_of_it fail;
  taking only the file's name makes test_a_board_whose_name_names_no_sweep_reads_as_its_lines_sweep fail;
- ``NOT_FROM_SPEC`` without ``sweep`` (a copy's spec names its sweep, an original's none) makes
  test_every_shipped_run_agrees_with_its_record fail for every board but default (all copies);
- ``payload_problem`` without ``record_problem``: every ``CLASSES`` case fails.
"""
from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import os
import re
import warnings
from pathlib import Path

import pytest

from suite import files
from suite.results import shipped, store
from suite.results.identity import run_columns
from tests.conftest import PRE_CRITERION, fast_or_exhaustive, make_spec

ROOT = Path(__file__).resolve().parent.parent
STAMP = "2026-01-01T00:00:00+00:00"
LENGTHS = (32, 64)
METRICS = (("token_accuracy", 0.9), ("exact_match", 0.5))


# --------------------------------------------------------------------------------------------
# the board


def _payload(spec) -> dict:
    """A run of ``spec`` as ``suite.lifecycle`` stores it: its record (the run columns, its spec,
    times) and rows that repeat the run columns."""
    cols = run_columns(spec)
    rows = [{**cols, "task": "copy", "eval_len": n, "len_ratio": n / 32, "slice": "all", "metric": m, "value": v,
             "n": 10, "status": "ok", "wall_s": 5.0, "timestamp": STAMP, "eval_set": "h", "headline": "token_accuracy",
             **store.declaration(m)} for n in LENGTHS for m, v in METRICS]
    run = {**cols, "spec": spec.to_dict(), "wall_s": 5.0, "timing": {"train_s": 4.0, "eval_s": 1.0}, "timestamp": STAMP}
    return {"schema": store.SCHEMA, "run": run, "rows": [{c: r.get(c) for c in store.COLUMNS} for r in rows]}


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    """{name: payload}: fx's three runs, and 'stranger' and 'stranger-2', runs of sweep 'other' fx does not hold."""
    rope = make_spec("task=copy", "position=rope", "eval.multiples=[1,2]", "sweep_name=fx")
    alibi = make_spec("task=copy", "position=alibi", "eval.multiples=[1,2]", "sweep_name=fx")
    specs = {"rope-0": rope, "rope-1": dataclasses.replace(rope, seed=1), "alibi-0": alibi,
             "stranger": dataclasses.replace(alibi, seed=1, sweep="other"),
             "stranger-2": dataclasses.replace(alibi, seed=2, sweep="other")}
    out = {name: _payload(spec) for name, spec in specs.items()}
    for payload in out.values():  # the fixture itself: every derived column is checked, nothing refused
        assert store.spec_columns(payload["run"]["spec"])["spec_hash"] == payload["run"]["spec_hash"]
        assert store.payload_problem(payload) is None
    return out


def _rid(payload) -> str:
    return payload["run"]["run_id"]


def _board(tmp_path, runs, victim: dict | None = None) -> tuple[Path, Path]:
    """(results folder with fx's runs, the victim in rope-0's place when given; published folder
    with fx's board of the same runs)."""
    results, published = tmp_path / "results", tmp_path / "published"
    published.mkdir(parents=True, exist_ok=True)
    found = [victim if victim is not None and name == "rope-0" else runs[name] for name in ("rope-0", "rope-1", "alibi-0")]
    for payload in found:
        files.write_json_atomic(files.result_path(results, "fx", _rid(payload)), payload)
    store.shipped_path("fx", published).write_bytes(_lines(found))
    return results, published


def _lines(payloads: list[dict]) -> bytes:
    """Shipped bytes with the lines in the order given (a damaged line kept as it is)."""
    return gzip.compress(("\n".join(json.dumps(p, sort_keys=True) for p in payloads) + "\n").encode())


# --------------------------------------------------------------------------------------------
# damage classes: (change one payload in place, the reason a reader gives)


def _rows(which):
    def pick(payload):
        rows = payload["rows"]
        return {"first": rows[:1], "last": rows[-1:], "all": rows}[which]
    return pick


def _set_rows(col, value, which):
    def change(payload):
        for row in _rows(which)(payload):
            row[col] = value
    return change


def _set_run(col, value):
    """The record and every row alike: only the run's spec can tell."""
    def change(payload):
        payload["run"][col] = value
        for row in payload["rows"]:
            row[col] = value
    return change


def _set_record(key, value):
    def change(payload):
        payload["run"][key] = value
    return change


def _spec_sweep(payload):
    payload["run"]["spec"]["sweep"] = "other"  # as a relabelled copy of another sweep's would say


def _timing(key, value):
    def change(payload):
        payload["run"]["timing"][key] = value
    return change


ROW = r"row {i}: {col} {v}, not the {own} its record states"
CLASSES = {
    # a row that disagrees with its record (the record is the run's own, so the row is the odd one)
    **{f"row-{col}-{which}": (_set_rows(col, value, which), ROW.format(i=r"\d+", col=col, v=re.escape(repr(value)), own=r"'?[\w.-]+'?"))
       for col, value in (("config_hash", "0123456789ab"), ("positions", "alibi"), ("spans", "swa"), ("window", 16),
                          ("chunk", 16), ("sweep", "other"))
       for which in ("first", "last")},
    "row-sweep-all": (_set_rows("sweep", "other", "all"), ROW.format(i="0", col="sweep", v="'other'", own="'fx'")),
    "row-spec_hash-first": (_set_rows("spec_hash", "000000000000", "first"), r"row 0: spec hash '000000000000', not the file's"),
    "row-run_id-last": (_set_rows("run_id", "rope-uniform-full-copy-s9-000000000000", "last"), r"row \d+: run 'rope-uniform-full-copy-s9-000000000000', not the file's"),
    # the record and every row alike, against what the stored spec gives
    **{f"run-{col}": (_set_run(col, value), rf"its {col} {re.escape(repr(value))} \(its record\) is not the {want} its stored spec gives")
       for col, value, want in (("config_hash", "0123456789ab", r"'[0-9a-f]{12}'"), ("positions", "alibi", "'rope'"),
                                ("spans", "swa", "'full'"), ("window", 16, "None"), ("chunk", 16, "None"))},
    "run-sweep-vs-spec": (_spec_sweep, r"its sweep 'fx' \(its record\) is not the 'other' its stored spec states"),
    # a headline the run's own rows contradict
    "headline-one-row": (lambda p: p["rows"][1].update(headline="exact_match"),
                         r"row 1: headline 'exact_match' of task 'copy', not the 'token_accuracy' its row 0 names"),
    "headline-unstored": (_set_rows("headline", "loss", "all"), r"row 0: headline 'loss' is not a metric the run stores for task 'copy'"),
    # times that are not times
    "row-wall-negative": (_set_rows("wall_s", -5.0, "first"), r"row 0: wall_s -5\.0 is not a time"),
    "row-wall-inf": (_set_rows("wall_s", float("inf"), "last"), r"row \d+: wall_s inf is not a time"),
    "record-wall-negative": (_set_record("wall_s", -5.0), r"its record's wall_s -5\.0 is not a time"),
    "record-wall-nan": (_set_record("wall_s", float("nan")), r"its record's wall_s nan is not a time"),
    "timing-negative": (_timing("train_s", -1.0), r"its timing train_s -1\.0 is not a time"),
    "timing-inf": (_timing("eval_s", float("inf")), r"its timing eval_s inf is not a time"),
    "timing-word": (_timing("eval_s", "long"), r"its timing eval_s 'long' is not a number"),
    "timestamp-word": (_set_run("timestamp", "yesterday"), r"its timestamp 'yesterday' is not an ISO 8601 time"),
    "timestamp-no-offset": (_set_run("timestamp", "2026-01-01T00:00:00"), r"its timestamp '2026-01-01T00:00:00' is not an ISO 8601 time with its UTC offset"),
}


# --------------------------------------------------------------------------------------------
# readers: each reads the board with rope-0 damaged and returns (what it said, the run ids it kept)


def _said(caught, capsys) -> str:
    out = capsys.readouterr()
    return "\n".join([*(str(w.message) for w in caught), out.err, out.out])


def _read_verified(tmp_path, runs, victim, capsys):
    results, _ = _board(tmp_path, runs, victim)
    path = files.result_path(results, "fx", _rid(victim))
    with pytest.raises(store.NotStored) as err:
        store.verified_run(path)
    assert str(err.value).startswith(f"{path} does not count as stored: ")
    kept = {_rid(store.verified_run(files.result_path(results, "fx", _rid(runs[n])))) for n in ("rope-1", "alibi-0")}
    return str(err.value), kept


def _read_load(tmp_path, runs, victim, capsys):
    results, _ = _board(tmp_path, runs, victim)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.load(results / "fx")
    said = _said(caught, capsys)
    assert f"skipping results file {files.result_path(results, 'fx', _rid(victim))}: " in said, said
    return said, set(df.run_id)


def _cli(action, results, published, *extra):
    return shipped.main([action, "fx", "--results", str(results), "--published", str(published), *extra])


def _read_check(tmp_path, runs, victim, capsys):
    results, published = _board(tmp_path, runs, victim)
    with warnings.catch_warnings(record=True) as caught:
        assert _cli("check", results, published) == 1
    said = _said(caught, capsys)
    assert f"skipping results file {store.shipped_path('fx', published)}:1: " in said, said
    return said, {_rid(p) for p, _ in [(p, 0) for _, p in store.read_board(store.shipped_path("fx", published)).runs]}


def _read_pack(tmp_path, runs, victim, capsys):
    results, published = _board(tmp_path, runs, victim)
    store.shipped_path("fx", published).unlink()  # a first board: nothing to compare with
    with warnings.catch_warnings(record=True) as caught:
        assert _cli("pack", results, published) == 0
    said = _said(caught, capsys)
    assert f"skipping results file {files.result_path(results, 'fx', _rid(victim))}: " in said, said
    return said, {_rid(p) for _, p in store.read_board(store.shipped_path("fx", published)).runs}


def _read_unpack(tmp_path, runs, victim, capsys):
    _, published = _board(tmp_path, runs, victim)
    fresh = tmp_path / "fresh"
    with warnings.catch_warnings(record=True) as caught:
        assert _cli("unpack", fresh, published) == 1
    said = _said(caught, capsys)
    assert f"skipping results file {store.shipped_path('fx', published)}:1: " in said and "1 left out" in said, said
    return said, {p.stem for p in (fresh / "fx").glob("*.json")}


READERS = {"verified_run": _read_verified, "load": _read_load, "check": _read_check, "pack": _read_pack,
           "unpack": _read_unpack}
# make test: every class through load (the report's reader), and every reader on a few classes
FAST_CLASSES = {"row-config_hash-first", "run-positions", "headline-one-row", "record-wall-negative"}
GRID = [(c, r) for c in CLASSES for r in READERS]
FAST = {(c, r) for c, r in GRID if r == "load" or c in FAST_CLASSES}


@pytest.mark.parametrize("case,reader", fast_or_exhaustive(GRID, FAST), ids=[f"{c}-{r}" for c, r in GRID])
def test_a_row_that_disagrees_with_its_record_is_named_and_left_out_by_every_reader(runs, tmp_path, capsys, case, reader):
    """Each damage class of rope-0, read by each reader: named with its reason, rope-0 left out,
    rope-1 and alibi-0 kept. The mutation each class guards is named in the module docstring."""
    victim = copy.deepcopy(runs["rope-0"])
    change, reason = CLASSES[case]
    change(victim)
    said, kept = READERS[reader](tmp_path, runs, victim, capsys)
    assert re.search(reason, said), f"{reason!r} not in:\n{said}"
    assert kept == {_rid(runs["rope-1"]), _rid(runs["alibi-0"])}, kept
    assert "Traceback" not in said


# --------------------------------------------------------------------------------------------
# another sweep's run: a copied file, a symlink, a line appended to the shipped board


FOREIGN_SAYS = r"it is a run of sweep 'other', (and no folder on its path is named so|not of 'fx')"


def _copied(tmp_path, runs):
    """The stranger's file copied into fx: (results, published, its path there)."""
    results, published = _board(tmp_path, runs)
    path = files.result_path(results, "fx", _rid(runs["stranger"]))
    files.write_json_atomic(path, runs["stranger"])
    return results, published, path


def _linked(tmp_path, runs):
    """The stranger stored in its own sweep's folder, and a symlink to it in fx's."""
    results, published = _board(tmp_path, runs)
    real = files.result_path(results, "other", _rid(runs["stranger"]))
    files.write_json_atomic(real, runs["stranger"])
    path = files.result_path(results, "fx", _rid(runs["stranger"]))
    os.symlink(real, path)
    return results, published, path


def _appended(tmp_path, runs):
    """The stranger's payload appended as a line to fx's shipped board."""
    results, published = _board(tmp_path, runs)
    board = store.shipped_path("fx", published)
    text = gzip.decompress(board.read_bytes()).decode() + json.dumps(runs["stranger"], sort_keys=True) + "\n"
    board.write_bytes(gzip.compress(text.encode()))
    return results, published, Path(f"{board}:4")


def _fx(runs) -> set:
    return {_rid(runs[n]) for n in ("rope-0", "rope-1", "alibi-0")}


def _foreign_verified(tmp_path, runs, make, capsys):
    _, _, path = make(tmp_path, runs)
    with pytest.raises(store.NotStored) as err:
        store.verified_run(path)
    assert err.value.foreign == "other"
    return str(err.value)


def _foreign_load(tmp_path, runs, make, capsys):
    results, published, path = make(tmp_path, runs)
    source = results / "fx" if make is not _appended else store.shipped_path("fx", published)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.load(source)
    assert set(df.run_id) == _fx(runs)
    said = _said(caught, capsys)
    assert f"skipping results file {path}: " in said, said
    return said


def _foreign_pack(tmp_path, runs, make, capsys):
    """A folder holding the stranger: refused, exit 2, the board as it was."""
    results, published, path = make(tmp_path, runs)
    board = store.shipped_path("fx", published)
    before = board.read_bytes()
    with warnings.catch_warnings(record=True) as caught:
        assert _cli("pack", results, published) == 2
    said = _said(caught, capsys)
    assert board.read_bytes() == before and not shipped.backup_path(board).exists()
    expected = (f"cannot be read as a board to compare with (1 unreadable, first {path} does not count as stored"
                if make is _appended else f"refusing to pack {results / 'fx'}: {path} is a run of sweep 'other'")
    assert expected in said, said
    return said


def _foreign_shipped(action):
    def read(tmp_path, runs, make, capsys):
        results, published, path = make(tmp_path, runs)
        with warnings.catch_warnings(record=True) as caught:
            assert _cli(action, tmp_path / "fresh", published) == 1
        said = _said(caught, capsys)
        assert f"skipping results file {path}: " in said, said
        if action == "unpack":
            assert {p.stem for p in (tmp_path / "fresh" / "fx").glob("*.json")} == _fx(runs)
        return said
    return read


FOREIGN = {"copied": _copied, "symlink": _linked, "appended": _appended}
FOREIGN_READERS = {"verified_run": _foreign_verified, "load": _foreign_load, "pack": _foreign_pack,
                   "check": _foreign_shipped("check"), "unpack": _foreign_shipped("unpack")}
# a file reaches the folder readers, a line the shipped file's readers (pack's: the board it would replace)
FOREIGN_GRID = [(how, r) for how in FOREIGN for r in FOREIGN_READERS
                if (r in ("check", "unpack")) == (how == "appended") or r in ("load", "pack")]
FOREIGN_FAST = {("copied", "load"), ("symlink", "pack"), ("appended", "check"), ("appended", "unpack")}


@pytest.mark.parametrize("how,reader", fast_or_exhaustive(FOREIGN_GRID, FOREIGN_FAST), ids=[f"{h}-{r}" for h, r in FOREIGN_GRID])
def test_a_run_of_another_sweep_is_named_and_kept_off_the_board(runs, tmp_path, capsys, how, reader):
    """A run of sweep 'other' that reached fx's board by a copied file, a symlink or an appended
    line: every reader names it and its sweep and leaves it out; pack refuses (exit 2).
    Mutation check: ``checked`` without ``foreign_sweep`` makes every case fail."""
    said = FOREIGN_READERS[reader](tmp_path, runs, FOREIGN[how], capsys)
    assert re.search(FOREIGN_SAYS, said), said
    assert "Traceback" not in said


def test_a_run_the_suite_copied_from_another_sweep_passes_every_reader(runs, tmp_path, capsys):
    """``copy_from_sibling`` relabels the stranger for fx (record, spec, rows; ``copied_from``):
    it is fx's own run, read by every reader, packed and unpacked.
    Mutation check: ``relabelled`` leaving the rows' sweep makes this fail (row-sweep); leaving the
    spec's makes it fail (run-sweep-vs-spec)."""
    results, published, _ = _linked(tmp_path, runs)
    os.unlink(files.result_path(results, "fx", _rid(runs["stranger"])))
    copied = store.copy_from_sibling(results, "fx", _rid(runs["stranger"]), runs["stranger"]["run"]["spec_hash"])
    payload = store.verified_run(copied)
    assert payload["run"]["copied_from"] == "other" and payload["run"]["spec"]["sweep"] == "fx"
    everyone = _fx(runs) | {_rid(runs["stranger"])}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert set(store.load(results / "fx").run_id) == everyone
        assert _cli("pack", results, published) == 0
        assert _cli("check", results, published) == 0
        assert _cli("unpack", tmp_path / "fresh", published) == 0
    assert not caught, [str(w.message) for w in caught]
    assert {p.stem for p in (tmp_path / "fresh" / "fx").glob("*.json")} == everyone
    capsys.readouterr()


def test_a_board_whose_name_names_no_sweep_reads_as_its_lines_sweep():
    """tests/data's board of sweep 'default' (pre_criterion_default.jsonl.gz) reads whole: a file
    whose name is no sweep of its lines belongs to the sweep most of its lines name."""
    board = store.read_board(PRE_CRITERION)
    assert board.problems == [] and len(board.runs) == 36


def test_a_line_appended_to_a_board_named_for_its_sweep_is_foreign_even_when_it_is_most_of_it(runs, tmp_path):
    """fx.jsonl.gz holding one fx run and two of 'other': the two are named; the file's name wins
    over the majority. Mutation check: ``shipped_place`` taking the majority first makes this fail."""
    path = tmp_path / "fx.jsonl.gz"
    path.write_bytes(_lines([runs["rope-0"], runs["stranger"], runs["stranger-2"]]))
    board = store.read_board(path)
    assert [_rid(p) for _, p in board.runs] == [_rid(runs["rope-0"])]
    assert [f.foreign for f in board.foreign] == ["other", "other"]


# --------------------------------------------------------------------------------------------
# the shipped boards


BOARDS = sorted(p.name.removesuffix(store.SHIPPED_SUFFIX) for p in (ROOT / store.PUBLISHED).glob("*.jsonl.gz"))


@pytest.mark.parametrize("sweep", fast_or_exhaustive(BOARDS, {"default"}))
def test_every_shipped_run_agrees_with_its_record(sweep, capsys):
    """``shipped check <sweep>`` accepts every run of every published board: their copied runs
    (``copied_from``) and rows stored before newer columns existed included; where this checkout
    rebuilds a run's spec to its hash, every derived column is held to it.
    Mutation check: ``sweep`` left out of ``NOT_FROM_SPEC`` (a copy's spec names its sweep, an
    original's none) makes this fail for every board but default, whose runs are all copies."""
    assert shipped.main(["check", sweep]) == 0
    out = capsys.readouterr()
    assert re.fullmatch(rf"published/{sweep}\.jsonl\.gz: \d+ runs\n", out.out) and out.err == "", out
