"""``posbench compare``: sweeps side by side, cells matched by configuration (config_hash).

Mutation check: in suite/report/compare.py compare_table, merging on task and eval length only
(without ``config``) crosses rope's cells with alibi's and makes
test_two_sweeps_are_matched_by_configuration fail; plot colouring by f"C{i % 10}" again makes
test_the_comparison_plot_gives_each_of_thirteen_schemes_its_own_look fail."""
import matplotlib.colors
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.report.compare import compare_table, main, plot
from suite.results import shipped, store
from tests.conftest import spec_for
from tests.test_report import _row


def _sweep(root, sweep, cells, digest=""):
    """cells: {(scheme, seed): (value at 32, value at 64)}; config_hash cfg-<scheme><digest>: another
    ``digest`` stands for the same configuration run by other code."""
    for (scheme, seed), (v32, v64) in cells.items():
        rid = f"{scheme}-{seed}"
        rows = [{**_row(rid, scheme, seed, "copy", n, v, config=f"cfg-{scheme}{digest}"), "sweep": sweep}
                for n, v in ((32, v32), (64, v64))]
        spec = spec_for(rows, model={"layers": [{"position": scheme, "span": "full"}]})
        store.write_run(root, sweep, rid, {"run_id": rid, "sweep": sweep, "spec": spec}, rows)
    return root / sweep


def test_two_sweeps_are_matched_by_configuration(tmp_path, capsys):
    a = _sweep(tmp_path, "a", {("rope", 0): (1.0, 0.2), ("rope", 1): (0.8, 0.4), ("alibi", 0): (0.9, 0.7)})
    b = _sweep(tmp_path, "b", {("rope", 0): (0.6, 0.1), ("alibi", 0): (0.5, 0.3), ("t5", 0): (0.1, 0.1)}, digest="-v2")
    table = compare_table({"A": store.load(a), "B": store.load(b)}).set_index(["scheme", "eval_len"])
    assert sorted(set(table.index.get_level_values(0))) == ["alibi", "rope"]  # t5 is in one sweep only
    assert table.loc[("rope", 32), "mean [A]"] == pytest.approx(0.9) and table.loc[("rope", 32), "mean [B]"] == 0.6
    assert table.loc[("alibi", 64), "mean [A]"] == 0.7 and table.loc[("alibi", 64), "mean [B]"] == 0.3
    assert table.loc[("rope", 32), "n_seeds [A]"] == 2 and table.loc[("rope", 32), "n_seeds [B]"] == 1
    # a published file is a source as a folder is; the command writes one table and one plot
    packed = tmp_path / "b.jsonl.gz"
    shipped.pack(b, packed)
    assert main([str(a), str(packed), "--out", str(tmp_path / "cmp")]) == 0
    csv = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert len(csv) == 4 and f"mean [{packed}]" in csv
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_one_source_or_no_shared_configuration_is_an_error(tmp_path, capsys):
    a = _sweep(tmp_path, "a", {("rope", 0): (1.0, 0.2)})
    b = _sweep(tmp_path, "b", {("t5", 0): (0.1, 0.1)})
    with pytest.raises(SystemExit):
        main([str(a)])
    assert "give two or more sources" in capsys.readouterr().err
    assert main([str(a), str(b), "--out", str(tmp_path / "cmp")]) == 1
    assert "no configuration is in all of" in capsys.readouterr().err


def test_the_comparison_plot_gives_each_of_thirteen_schemes_its_own_look(monkeypatch):
    schemes = [f"scheme{i:02d}" for i in range(13)]
    table = pd.DataFrame({"task": "copy", "scheme": schemes, "eval_len": 64, "mean [A]": 0.5, "mean [B]": 0.4})
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    plot(table, ["A", "B"])
    assert len(figures) == 1
    lines = figures[0].axes[0].get_lines()
    looks = {line.get_label(): (matplotlib.colors.to_hex(line.get_color()), line.get_marker()) for line in lines}
    for source in ("A", "B"):  # one look per scheme, the same for both sources (told apart by line style)
        of = [looks[f"{s} [{source}]"] for s in schemes]
        assert len(set(of)) == 13 and len({c for c, _ in of}) == 13
    assert all(looks[f"{s} [A]"] == looks[f"{s} [B]"] for s in schemes)
    monkeypatch.undo()
    plt.close(figures[0])
