"""Publishing never loses a board: ``python -m suite.results.shipped pack`` (``make publish``)
refuses to replace a shipped file with a board that lacks any of its runs or configurations
unless ``--replace`` is given, keeps the old file as a backup until the new one reads back, and
leaves the old file byte for byte as it was on any failure.

The shipped board here is the report tests' four runs (rope-0 and rope-1 in configuration
cfg-rope, alibi-0 in cfg-alibi, learned-0 in cfg-learned).
"""
import errno
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from suite.results import shipped, store
from tests.conftest import install_done, fast_or_exhaustive
from tests.test_report import write_fixture

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def board(tmp_path):
    """(results folder holding sweep 'fx', the published folder with fx's board packed from it)."""
    results = write_fixture(tmp_path / "results")
    (results / "fx" / "junk.json").unlink()
    published = tmp_path / "published"
    assert shipped.pack(results / "fx", store.shipped_path("fx", published)) == 4
    return results, published


def _pack(results, published, *extra, capsys):
    code = shipped.main(["pack", "fx", "--results", str(results), "--published", str(published), *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _runs(path):
    return sorted(p["run"]["run_id"] for _, p in store.payloads(path))


def _relabel(path: Path, run_id: str | None = None, config: str | None = None) -> None:
    """Rewrite the run file ``path`` as run ``run_id`` (a new file name too) or with every row in configuration ``config``."""
    payload = json.loads(path.read_text())
    if config:
        payload["rows"] = [{**r, "config_hash": config} for r in payload["rows"]]
    if run_id:
        payload["run"]["run_id"] = run_id
        payload["rows"] = [{**r, "run_id": run_id, "spec_hash": run_id} for r in payload["rows"]]
        path.unlink()
        path = path.with_name(f"{run_id}.json")
    path.write_text(json.dumps(payload))


def _subset(results):
    (results / "fx" / "rope-1.json").unlink()


def _other_id(results):
    _relabel(results / "fx" / "alibi-0.json", run_id="alibi-9")  # four runs still, one of them not the board's


def _fewer_configs(results):
    _relabel(results / "fx" / "learned-0.json", config="cfg-rope")  # the same four run ids, cfg-learned gone


REFUSALS = {
    "subset": (_subset, r"4 runs in 3 configurations, the new board 3 runs in 3; replacing it would lose 1 of its 4 runs \(rope-1\)$"),
    "same-count-other-id": (_other_id, r"replacing it would lose 1 of its 4 runs \(alibi-0\)$"),
    "fewer-configurations": (_fewer_configs, r"the new board 4 runs in 2; replacing it would lose 1 of its 3 configurations \(cfg-learned\)$"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_smaller_or_other_board_is_refused_naming_what_would_be_lost(board, case, capsys):
    """Fewer runs, the same count with another run id, or the same runs in fewer configurations:
    exit 2, the loss named, the shipped file byte for byte as it was, no backup left.
    Mutation checks: ``board_loss`` comparing run counts instead of run ids makes same-count-other-id
    fail; leaving out the configuration comparison makes fewer-configurations fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    damage, loss = REFUSALS[case]
    damage(results)
    code, text = _pack(results, published, capsys=capsys)
    assert code == 2, text
    first = text.strip().splitlines()[0]
    assert first.startswith(f"error: refusing to replace {target} with the runs of {results / 'fx'}: it holds "), first
    assert first.endswith("Nothing was written; pass --replace (make publish REPLACE=1) to replace it anyway"), first
    assert __import__("re").search(loss, first.split(". Nothing")[0]), first
    assert target.read_bytes() == before and not shipped.backup_path(target).exists()


def test_a_long_loss_is_abbreviated(tmp_path):
    """Mutation check: ``_shown`` listing every name makes this fail."""
    old = [{"run": {"run_id": f"r{i:02d}"}, "rows": [{"config_hash": f"c{i:02d}"}]} for i in range(40)]
    loss = shipped.board_loss(old, old[:1])
    assert loss == ("it holds 40 runs in 40 configurations, the new board 1 runs in 1; replacing it would lose "
                    "39 of its 40 runs (r01, r02, r03, r04, r05 and 34 more) and 39 of its 40 configurations "
                    "(c01, c02, c03, c04, c05 and 34 more)")
    assert shipped.board_loss(old[:3], old) is None  # a superset loses nothing


def test_an_empty_folder_is_refused_and_the_board_kept(board, capsys):
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    shutil.rmtree(results / "fx")
    (results / "fx").mkdir()
    code, text = _pack(results, published, "--replace", capsys=capsys)
    assert code == 1
    assert text.strip() == f"error: no results under {results / 'fx'} to pack; {target} (4 runs) is left as it was"
    assert target.read_bytes() == before and not shipped.backup_path(target).exists()


def test_a_superset_replaces_the_board_and_leaves_no_backup(board, capsys):
    """The same runs and a new one: packed without --replace."""
    results, published = board
    target = store.shipped_path("fx", published)
    shutil.copy(results / "fx" / "alibi-0.json", results / "fx" / "alibi-1.json")
    _relabel(results / "fx" / "alibi-1.json", run_id="alibi-1")
    code, text = _pack(results, published, capsys=capsys)
    assert code == 0 and text.startswith(f"packed 5 runs of {results / 'fx'} into {target}"), text
    assert _runs(target) == ["alibi-0", "alibi-1", "learned-0", "rope-0", "rope-1"]
    assert not shipped.backup_path(target).exists()


def test_replace_writes_the_smaller_board(board, capsys):
    """Mutation check: ``main`` not passing ``--replace`` on to ``pack`` makes this fail."""
    results, published = board
    _subset(results)
    code, text = _pack(results, published, "--replace", capsys=capsys)
    target = store.shipped_path("fx", published)
    assert code == 0 and text.startswith("packed 3 runs"), text
    assert _runs(target) == ["alibi-0", "learned-0", "rope-0"] and not shipped.backup_path(target).exists()


def _failing_write(monkeypatch, target, how):
    """Make the write of ``target`` (not of its backup) raise, or write bytes that do not read back."""
    real = shipped.files.write_atomic

    def write(path, data):
        if Path(path) != target:
            return real(path, data)
        if how == "raise":
            raise OSError(28, "No space left on device", str(path))
        real(path, data[: len(data) // 2])  # a half file, renamed into place

    monkeypatch.setattr(shipped.files, "write_atomic", write)


@pytest.mark.parametrize("how", ["raise", "half"])
def test_a_failure_while_writing_leaves_the_old_board_byte_identical(board, monkeypatch, how):
    """The write raising (a full disk), or a new file that does not read back through the store:
    the old file is at its path byte for byte, and no backup is left.
    Mutation checks: removing the read-back (``_verify``) makes 'half' fail; not restoring the
    backup on failure makes both fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    shutil.copy(results / "fx" / "alibi-0.json", results / "fx" / "alibi-1.json")
    _relabel(results / "fx" / "alibi-1.json", run_id="alibi-1")  # a superset: packing is allowed
    _failing_write(monkeypatch, target, how)
    with pytest.raises(OSError if how == "raise" else ValueError, match="No space left" if how == "raise" else "did not read back"):
        shipped.pack(results / "fx", target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in published.iterdir()) == ["fx.jsonl.gz"]


def test_a_backup_left_by_an_unfinished_pack_is_never_overwritten(board, capsys):
    """Mutation check: writing the backup without looking for one makes this fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    backup = shipped.backup_path(target)
    backup.write_bytes(b"an older board")
    before = target.read_bytes()
    code, text = _pack(results, published, capsys=capsys)
    assert code == 1 and f"{backup} is there from a pack that did not finish" in text, text
    assert backup.read_bytes() == b"an older board" and target.read_bytes() == before


@pytest.mark.parametrize("damage", ["not gzip", "one line cut short"])
def test_an_unreadable_board_is_replaced_only_with_replace(board, capsys, damage):
    """A board that cannot be read, or holds a line that cannot, cannot be compared: refused.
    Mutation check: comparing only the readable runs makes 'one line cut short' fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    if damage == "not gzip":
        target.write_bytes(b"not gzip")
    else:
        lines = gzip.decompress(target.read_bytes()).decode().splitlines()
        target.write_bytes(gzip.compress(("\n".join([*lines[:-1], lines[-1][:50]]) + "\n").encode()))
    before = target.read_bytes()
    code, text = _pack(results, published, capsys=capsys)
    assert code == 2 and f"refusing to replace {target}: it cannot be read as a board to compare with (1 unreadable, first " in text, text
    assert target.read_bytes() == before
    code, text = _pack(results, published, "--replace", capsys=capsys)
    assert code == 0 and _runs(target) == ["alibi-0", "learned-0", "rope-0", "rope-1"]


def _make_publish(*args):
    if shutil.which("make") is None:
        pytest.skip("no make")
    out = subprocess.run(["make", "-n", "--no-print-directory", "publish", *args, install_done()], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.exhaustive  # three make runs; the pack's own refusals and --replace are checked in make test above
def test_make_publish_passes_replace_only_when_asked():
    """Publishing packs the rows, then rebuilds the published report from them (the one route,
    with ``make report`` from the shipped rows, that writes reports/<sweep>/).

    Mutation check: the Makefile passing ``--replace`` always makes this fail."""
    assert [line.split("python ")[-1] for line in _make_publish()[-2:]] == [
        "-m suite.results.shipped pack default", "-m suite.report default --from published"]
    assert _make_publish("REPLACE=0")[-2].endswith("suite.results.shipped pack default")
    assert [line.split("python ")[-1] for line in _make_publish("REPLACE=1", "SWEEP=zoo")[-2:]] == [
        "-m suite.results.shipped pack zoo --replace", "-m suite.report zoo --from published --force"]
    assert any("REPLACE=yes: valid: 1" in line and "exit 2" in line for line in _make_publish("REPLACE=yes"))


# --------------------------------------------------------------------------------------------
# publishing shows what changes: the same runs with other numbers


def _values(results, change):
    """Rewrite each run file of fx with ``change(run_id, row)`` applied to every row (None drops it)."""
    for path in sorted((results / "fx").glob("*.json")):
        payload = json.loads(path.read_text())
        rows = [change(payload["run"]["run_id"], dict(r)) for r in payload["rows"]]
        path.write_text(json.dumps({**payload, "rows": [r for r in rows if r is not None]}))


def _bump(rid, row, runs=("rope-0",), eval_len=64):
    if rid in runs and row["eval_len"] == eval_len and row["metric"] == "token_accuracy":
        row["value"] = round(row["value"] + 0.05, 4)
    return row


CHANGES = {  # (change, the lines the refusal lists after its first line)
    "one-cell": (_bump, ["  rope-0 copy @64 token_accuracy: 0.2 -> 0.25"]),
    "two-runs": (lambda rid, row: _bump(rid, row, runs=("rope-0", "alibi-0")),
                 ["  alibi-0 copy @64 token_accuracy: 0.7 -> 0.75", "  rope-0 copy @64 token_accuracy: 0.2 -> 0.25"]),
    "cell-gone": (lambda rid, row: None if rid == "rope-1" and row["metric"] == "exact_match" else row,
                  ["  rope-1 copy @32 exact_match: 0.5 -> absent"]),
    "status": (lambda rid, row: {**row, "value": 0.3, "status": "ok"} if rid == "learned-0" and row["eval_len"] == 64 else row,
               ["  learned-0 copy @64 token_accuracy: nan (unsupported) -> 0.3"]),
    "more-than-shown": (lambda rid, row: {**row, "value": 0.125}, None),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_changed_numbers_are_listed_and_refused_unless_replace(board, capsys, case):
    """The same run ids with other numbers: exit 2, the changed cells listed (run, task, @eval
    length, metric: old -> new; the first 10 and a count), the board byte for byte as it was; with
    --replace the same list is printed, the board replaced, and no backup left.
    Mutation check: ``pack`` without the ``changed_cells`` refusal makes every case fail (exit 0);
    ``changes_text`` listing every cell makes more-than-shown fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    change, listed = CHANGES[case]
    _values(results, change)
    code, text = _pack(results, published, capsys=capsys)
    assert code == 2, text
    lines = text.strip().splitlines()
    n = 12 if case == "more-than-shown" else len(listed)
    assert re.fullmatch(rf"error: refusing to replace {re.escape(str(target))}: {n} cells? of \d runs? it holds change "
                        r"\(run, task, @eval length, metric: old -> new\):", lines[0]), lines[0]
    shown = lines[1:-1]
    if listed is not None:
        assert shown == listed, shown
    else:
        assert len(shown) == 11 and shown[-1] == "  and 2 more", shown
    assert lines[-1] == "Nothing was written; pass --replace (make publish REPLACE=1) to replace them"
    assert target.read_bytes() == before and not shipped.backup_path(target).exists()
    code, text = _pack(results, published, "--replace", capsys=capsys)
    listing = lines[0].split(f"{target}: ", 1)[1]
    assert code == 0 and text.startswith(f"replacing {target}: {listing}") and "packed 4 runs" in text, text
    assert target.read_bytes() != before and not shipped.backup_path(target).exists()


def test_the_same_numbers_under_another_record_are_packed_without_a_word(board, capsys):
    """A run's record changed (its commit), its numbers not: no cell changes, nothing to refuse."""
    results, published = board
    path = results / "fx" / "rope-0.json"
    payload = json.loads(path.read_text())
    path.write_text(json.dumps({**payload, "run": {**payload["run"], "git_sha": "another"}}))
    code, text = _pack(results, published, capsys=capsys)
    assert code == 0 and text.startswith("packed 4 runs"), text


# --------------------------------------------------------------------------------------------
# every I/O error under pack and unpack is one line naming the path; nothing is lost


def _failing(monkeypatch, where, err, name: str):
    """Make ``suite.files.<name>`` raise ``err`` (errno) for a path that ends with ``where``."""
    real = getattr(shipped.files, name)

    def failing(path, *args, **kwargs):
        if str(path).endswith(where):
            raise OSError(err, os.strerror(err), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shipped.files, name, failing)


IO_PACK = {  # where pack fails: (which path, which writer)
    "new-board": ("fx.jsonl.gz", "write_atomic"),
    "backup": ("fx.jsonl.gz.bak", "write_atomic"),
}
ERRNOS = {"ENOSPC": errno.ENOSPC, "EACCES": errno.EACCES, "EROFS": errno.EROFS}


@pytest.mark.parametrize("where,err", fast_or_exhaustive(
    [(w, e) for w in IO_PACK for e in ERRNOS], {("new-board", "ENOSPC"), ("backup", "EACCES")}))
def test_an_io_error_under_pack_is_one_line_and_the_board_is_as_it_was(board, monkeypatch, capsys, where, err):
    """A full disk, no permission, a read-only filesystem, writing the new board or the backup of
    the old one: exit 1, one line naming the path and why, the board byte for byte as it was, no
    backup or temporary file left.
    Mutation check: ``main`` without its ``except OSError`` makes every case a traceback (an
    uncaught OSError); ``_write_board`` not putting the backup back makes new-board cases fail."""
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    shutil.copy(results / "fx" / "alibi-0.json", results / "fx" / "alibi-1.json")
    _relabel(results / "fx" / "alibi-1.json", run_id="alibi-1")  # a superset: packing is allowed
    path, writer = IO_PACK[where]
    _failing(monkeypatch, path, ERRNOS[err], writer)
    code, text = _pack(results, published, capsys=capsys)
    failed = published / path
    assert code == 1 and text.strip() == (f"error: could not pack {target}: {failed}: {os.strerror(ERRNOS[err])}; "
                                          f"nothing was written: {target} is as it was"), text
    assert target.read_bytes() == before
    assert sorted(p.name for p in published.iterdir()) == ["fx.jsonl.gz"]


def test_a_board_that_cannot_be_put_back_says_where_it_is_kept(board, monkeypatch, capsys):
    """The new board does not read back and the old one cannot be renamed back: exit 1, the one
    line names the backup that holds it, which is kept."""
    results, published = board
    target = store.shipped_path("fx", published)
    before = target.read_bytes()
    _values(results, lambda rid, row: row)
    real = shipped.files.write_atomic
    monkeypatch.setattr(shipped.files, "write_atomic",
                        lambda path, data: real(path, data if str(path).endswith(".bak") else data[: len(data) // 2]))
    replace = os.replace
    monkeypatch.setattr(shipped.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(errno.EACCES, "Permission denied"))
                        if str(a).endswith(".bak") else replace(a, b))
    code, text = _pack(results, published, capsys=capsys)
    backup = shipped.backup_path(target)
    assert code == 1 and len(text.strip().splitlines()) == 1, text
    assert text.strip().endswith(f"and the old board could not be put back at {target} (Permission denied): it is kept at {backup}")
    assert backup.read_bytes() == before


IO_UNPACK = {"ENOSPC": errno.ENOSPC, "EACCES": errno.EACCES}


@pytest.mark.parametrize("err", sorted(IO_UNPACK))
def test_an_io_error_under_unpack_is_one_line_and_what_was_written_stays(board, monkeypatch, capsys, err):
    """The third run file cannot be written: exit 1, one line naming it and why; the runs written
    before it are stored, and unpacking again writes the rest."""
    results, published = board
    fresh = results.parent / "fresh"
    real, calls = shipped.files.write_json_atomic, []

    def third_fails(path, payload):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(IO_UNPACK[err], os.strerror(IO_UNPACK[err]), str(path))
        return real(path, payload)

    monkeypatch.setattr(shipped.files, "write_json_atomic", third_fails)
    code = shipped.main(["unpack", "fx", "--results", str(fresh), "--published", str(published)])
    text = capsys.readouterr().err
    assert code == 1 and text.strip() == (
        f"error: could not unpack {store.shipped_path('fx', published)}: {calls[2]}: {os.strerror(IO_UNPACK[err])}; the runs "
        "written before it are stored; unpacking again writes the rest (no stored file is overwritten)"), text
    assert len(list((fresh / "fx").glob("*.json"))) == 2
    monkeypatch.setattr(shipped.files, "write_json_atomic", real)
    assert shipped.main(["unpack", "fx", "--results", str(fresh), "--published", str(published)]) == 0
    assert "2 runs written, 2 already there" in capsys.readouterr().out


def test_a_folder_in_the_way_of_a_run_file_is_set_aside_or_named(board, monkeypatch, capsys):
    """A folder where unpack writes a run: set aside, the run written (exit 0); when it cannot be
    set aside (no permission), one line naming it (exit 1)."""
    results, published = board
    fresh = results.parent / "fresh"
    (fresh / "fx" / "rope-0.json").mkdir(parents=True)
    assert shipped.main(["unpack", "fx", "--results", str(fresh), "--published", str(published)]) == 0
    assert (fresh / "fx" / "_set_aside" / "rope-0.json.damaged-1").is_dir()
    (fresh / "fx" / "rope-1.json").unlink()
    (fresh / "fx" / "rope-1.json").mkdir()
    monkeypatch.setattr(shipped.files, "set_aside", lambda p: (_ for _ in ()).throw(
        OSError(errno.EACCES, "Permission denied", str(fresh / "fx" / "_set_aside"))))
    code = shipped.main(["unpack", "fx", "--results", str(fresh), "--published", str(published)])
    err = capsys.readouterr().err
    assert code == 1 and f"error: could not unpack {store.shipped_path('fx', published)}: {fresh / 'fx' / '_set_aside'}: Permission denied" in err, err
    assert "Traceback" not in err


def _whole_lines(data: bytes) -> int:
    """The whole lines a gzip stream cut short holds, decoded here by zlib itself."""
    text = __import__("zlib").decompressobj(31).decompress(data)
    return text.count(b"\n")


CUT = r"the file is cut short: its gzip stream ends before its end, after \d+ whole lines"
DAMAGED = {  # shipped file -> (bytes, whole runs in it, what the line says)
    "cut-in-the-trailer": (lambda data: data[:-4], 4, CUT),
    "cut-in-the-middle": (lambda data: data[: len(data) * 3 // 4], None, CUT),
    "not-gzip": (lambda data: b"not gzip at all", 0, r"not a gzipped JSON-lines file"),
    "empty": (lambda data: b"", 0, r"not a gzipped JSON-lines file"),
    "a-line-cut": (None, 3, r"line 4 is not JSON"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_unpack_of_a_damaged_board_exits_1_as_check_does(board, capsys, damage):
    """A shipped file cut short, not gzip, empty, or with a line cut: unpack writes the whole lines
    that count as stored, names the rest, and exits 1, as check does on the same file.
    Mutation check: ``_act`` returning 0 for unpack makes every case fail; ``_shipped_text`` giving
    no text for a stream cut short makes the cut-* cases write no run."""
    results, published = board
    target = store.shipped_path("fx", published)
    cut, whole, says = DAMAGED[damage]
    if cut is None:
        lines = gzip.decompress(target.read_bytes()).decode().splitlines()
        target.write_bytes(gzip.compress(("\n".join([*lines[:3], lines[3][:60]]) + "\n").encode()))
    else:
        target.write_bytes(cut(target.read_bytes()))
        whole = _whole_lines(target.read_bytes()) if whole is None else whole
    for action in ("check", "unpack"):
        code = shipped.main([action, "fx", "--results", str(results.parent / "fresh"), "--published", str(published)])
        err = capsys.readouterr().err
        assert code == 1 and re.search(says, err), (action, err)
    assert len(list((results.parent / "fresh" / "fx").glob("*.json"))) == whole
