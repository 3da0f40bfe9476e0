"""Publishing never loses a board: ``python -m suite.results.shipped pack`` (``make publish``)
refuses to replace a shipped file with a board that lacks any of its runs or configurations
unless ``--replace`` is given, keeps the old file as a backup until the new one reads back, and
leaves the old file byte for byte as it was on any failure.

The shipped board here is the report tests' four runs (rope-0 and rope-1 in configuration
cfg-rope, alibi-0 in cfg-alibi, learned-0 in cfg-learned).
"""
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from suite.results import shipped, store
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
    out = subprocess.run(["make", "-n", "--no-print-directory", "publish", *args, "STAMP=Makefile"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    return [line for line in out.stdout.splitlines() if line.strip()]


def test_make_publish_passes_replace_only_when_asked():
    """Mutation check: the Makefile passing ``--replace`` always makes this fail."""
    assert _make_publish()[-1].endswith("suite.results.shipped pack default")
    assert _make_publish("REPLACE=0")[-1].endswith("suite.results.shipped pack default")
    assert _make_publish("REPLACE=1", "SWEEP=zoo")[-1].endswith("suite.results.shipped pack zoo --replace")
    assert any("REPLACE=yes: valid: 1" in line and "exit 2" in line for line in _make_publish("REPLACE=yes"))
