"""Shipped result rows (``published/<sweep>.jsonl.gz``): packed deterministically, read by the
store as a folder is, unpacked to resume a sweep without overwriting, and rebuilt into a report
whose files equal the published ones byte for byte, with a user's runs beside in cells of their own.

Mutation checks: ``encode`` without ``mtime=0`` (the time stamp in the gzip header) makes
test_packing_the_same_runs_twice_gives_the_same_bytes fail; ``unpack`` writing over an existing
file makes test_unpack_writes_missing_runs_and_keeps_a_users_file fail; the report reading
``results/<sweep>`` only makes test_a_report_rebuilt_from_shipped_rows_equals_the_published_one fail;
``primary`` ignoring the source column pools the beside runs with the published ones (test_runs_beside_the_published_cells_are_cells_of_their_own).
"""
import gzip
import json
import time

import pandas as pd
import pytest

from suite.report.__main__ import main as report_main
from suite.results import shipped, store
from tests.test_report import fixture_store  # noqa: F401  (the report tests' four-run store)


def _load(path):
    with pytest.warns(UserWarning):
        return store.load(path)


def test_packing_the_same_runs_twice_gives_the_same_bytes(fixture_store, tmp_path):  # noqa: F811
    with pytest.warns(UserWarning, match="junk.json"):
        assert shipped.pack(fixture_store / "fx", tmp_path / "a.jsonl.gz") == 4
    time.sleep(1.1)  # a gzip header time stamp would now differ
    with pytest.warns(UserWarning, match="junk.json"):
        shipped.pack(fixture_store / "fx", tmp_path / "b.jsonl.gz")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    lines = gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()).decode().splitlines()
    assert [json.loads(x)["run"]["run_id"] for x in lines] == ["alibi-0", "learned-0", "rope-0", "rope-1"]
    folder = _load(fixture_store / "fx").sort_values(["run_id", "eval_len", "metric"]).reset_index(drop=True)
    packed = store.load(tmp_path / "a.jsonl.gz").sort_values(["run_id", "eval_len", "metric"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(folder, packed)


def test_pack_refuses_an_empty_folder_and_a_file_past_the_limit(fixture_store, tmp_path, monkeypatch):  # noqa: F811
    with pytest.raises(ValueError, match="no results under"):
        shipped.pack(tmp_path / "none", tmp_path / "x.jsonl.gz")
    monkeypatch.setattr(shipped, "MAX_BYTES", 100)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="past the 0 MiB"):
        shipped.pack(fixture_store / "fx", tmp_path / "x.jsonl.gz")
    assert not (tmp_path / "x.jsonl.gz").exists()


def test_a_damaged_line_is_named_and_skipped_and_the_rest_is_read(fixture_store, tmp_path):  # noqa: F811
    with pytest.warns(UserWarning):
        shipped.pack(fixture_store / "fx", tmp_path / "a.jsonl.gz")
    lines = gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()).decode().splitlines()
    lines[1] = lines[1][:40]
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.warns(UserWarning, match=r"b\.jsonl\.gz:2.*line 2 is not JSON"):
        df = store.load(tmp_path / "b.jsonl.gz")
    assert sorted(df.run_id.unique()) == ["alibi-0", "rope-0", "rope-1"]
    (tmp_path / "c.jsonl.gz").write_bytes(b"not gzip")
    with pytest.warns(UserWarning, match="not a gzipped JSON-lines file"):
        assert store.load(tmp_path / "c.jsonl.gz").empty


def test_unpack_writes_missing_runs_and_keeps_a_users_file(fixture_store, tmp_path):  # noqa: F811
    """A stored run file of the user's is kept even when it differs; a file at a run's name that
    does not count as stored is set aside with its bytes, never overwritten.
    Mutation check: ``unpack`` writing over a stored file makes this fail."""
    with pytest.warns(UserWarning):
        shipped.pack(fixture_store / "fx", tmp_path / "fx.jsonl.gz")
    folder = tmp_path / "results" / "fx"
    folder.mkdir(parents=True)
    mine = json.loads((fixture_store / "fx" / "rope-0.json").read_text())
    mine["rows"][0]["value"] = 0.25
    (folder / "rope-0.json").write_text(json.dumps(mine))
    (folder / "rope-1.json").write_text('{"mine": true}')
    with pytest.warns(UserWarning) as caught:
        assert shipped.unpack(tmp_path / "fx.jsonl.gz", tmp_path / "results", "fx") == (3, 1)
    said = [str(w.message) for w in caught]
    assert f"kept {folder / 'rope-0.json'}: it differs from the shipped run rope-0" in said
    assert any(m.startswith(f"{folder / 'rope-1.json'} does not count as stored: ") and
               m.endswith(f"set aside as {folder / '_set_aside' / 'rope-1.json.damaged-1'}, and the shipped run "
                          "written in its place") for m in said), said
    assert json.loads((folder / "rope-0.json").read_text()) == mine
    assert (folder / "_set_aside" / "rope-1.json.damaged-1").read_text() == '{"mine": true}'
    assert json.loads((folder / "rope-1.json").read_text())["run"]["run_id"] == "rope-1"
    assert shipped.unpack(tmp_path / "fx.jsonl.gz", tmp_path / "results", "fx") == (0, 4)  # again: nothing to do


def test_a_report_rebuilt_from_shipped_rows_equals_the_published_one(fixture_store, tmp_path, capsys):  # noqa: F811
    published = tmp_path / "published"
    with pytest.warns(UserWarning):
        shipped.pack(fixture_store / "fx", store.shipped_path("fx", published))
    common = ["fx", "--results", str(tmp_path / "fresh"), "--published", str(published)]
    assert report_main([*common, "--out", str(tmp_path / "one")]) == 0  # no results/fx: the shipped rows
    assert "reading the published rows" in capsys.readouterr().out
    time.sleep(1.1)  # nothing in a report may depend on when it is built
    assert report_main([*common, "--out", str(tmp_path / "two"), "--from", "published"]) == 0
    one = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert [str(p) for p in one] == ["fx/index.html", "fx/index.md", "fx/leaderboard.csv", "fx/mrr.csv",
                                     "fx/plots/copy.png", "fx/plots/copy.styles.json", "fx/plots/summary.png",
                                     "fx/plots/summary.styles.json", "fx/power.csv"]
    for p in one:
        assert (tmp_path / "one" / p).read_bytes() == (tmp_path / "two" / p).read_bytes(), p
    assert report_main([*common, "--out", str(tmp_path / "three"), "--from", "results"]) == 1
    assert "no results under" in capsys.readouterr().err


def test_runs_beside_the_published_cells_are_cells_of_their_own(fixture_store, tmp_path):  # noqa: F811
    published = tmp_path / "published"
    with pytest.warns(UserWarning):
        shipped.pack(fixture_store / "fx", store.shipped_path("fx", published))
    mine = tmp_path / "mine"
    payload = json.loads((fixture_store / "fx" / "rope-0.json").read_text())
    payload["rows"] = [{**r, "value": 0.5} if r["eval_len"] == 64 else r for r in payload["rows"]]
    (mine / "fx").mkdir(parents=True)
    (mine / "fx" / "rope-0.json").write_text(json.dumps(payload))  # the same configuration, my own number
    assert report_main(["fx", "--results", str(tmp_path / "none"), "--published", str(published),
                        "--out", str(tmp_path / "rep"), "--beside", str(mine)]) == 0
    board = pd.read_csv(tmp_path / "rep" / "fx" / "leaderboard.csv").set_index(["scheme", "eval_len"])
    assert board.loc[("rope", 64), "mean"] == pytest.approx(0.3) and board.loc[("rope", 64), "n_seeds"] == 2
    assert board.loc[(f"rope [{mine}]", 64), "mean"] == pytest.approx(0.5)
    assert board.loc[(f"rope [{mine}]", 64), "n_seeds"] == 1
    assert report_main(["fx", "--published", str(published), "--beside", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("envelope", [[], {"rows": []}, {"schema": "posbench.run/0", "rows": []}, {"schema": store.SCHEMA, "rows": {}}],
                         ids=["a list", "no schema", "another schema", "rows not a list"])
def test_a_run_file_and_a_shipped_line_pass_the_same_envelope_check(envelope, tmp_path):
    """A payload that is not a PosBench run is refused whether it is a run file or a line of a
    shipped file, with the same reason: the store writes the envelope check once.
    Mutation check: ``read_shipped`` yielding every parsed line without ``envelope_problem`` makes this fail."""
    (tmp_path / "r.json").write_text(json.dumps(envelope))
    with pytest.raises(ValueError, match=r"r\.json is not a PosBench run \(schema posbench\.run/1\)"):
        store.read_run(tmp_path / "r.json")
    (tmp_path / "s.jsonl.gz").write_bytes(gzip.compress((json.dumps(envelope) + "\n").encode()))
    [(where, found)] = list(store.read_shipped(tmp_path / "s.jsonl.gz"))
    assert str(where).endswith("s.jsonl.gz:1") and isinstance(found, ValueError)
    assert str(found) == "line 1 is not a PosBench run (schema posbench.run/1)"
