"""A leaderboard cell holds runs identical except for the seed; other differences split the label.

Mutation check: in suite/report/labels.py differing_keys, > 1 distinct values -> >= 1 makes
test_a_label_names_the_settings_that_differ_and_only_those fail."""
import json
import sys
from pathlib import Path

import pytest

from tests import forked_cli
from suite.results import store
from suite.report import boards, labels
from suite.config.run_spec import RunSpec
from tests.conftest import make_spec

ROOT = Path(__file__).resolve().parent.parent


def _spec(*overrides) -> dict:
    spec: RunSpec = make_spec(*overrides)
    return spec.to_dict()


def test_a_label_names_the_settings_that_differ_and_only_those():
    a, b = _spec("position=alibi", "train.steps=80"), _spec("position=alibi", "train.steps=200")
    assert labels.differing_keys([a, b]) == ["train.steps"]
    assert labels.split_labels({"copy": ["A", "B"]}, {"A": a, "B": b}) == {"A": "steps=80", "B": "steps=200"}
    c = _spec("position=alibi", "train.steps=80", "train.lr=3e-3")
    assert labels.split_labels({"copy": ["A", "C"]}, {"A": a, "C": c}) == {"A": "lr=0.001", "C": "lr=0.003"}
    theta = labels.split_labels({"copy": ["R", "S"]}, {"R": _spec("position.theta=500"), "S": _spec("position.theta=50000")})
    assert theta == {"R": "theta=500", "S": "theta=50000"}


def test_a_run_copied_from_another_sweep_is_named_by_its_settings_not_its_folder():
    """A copied run's spec carries the sweep it was copied into; a run trained there has none."""
    copied = store.relabelled({"run": {"spec": _spec("position.drop_low=0")}, "rows": []}, "zoo", "flagship")["run"]["spec"]
    trained = _spec("position.drop_low=0.25")
    assert copied["sweep"] == "zoo" and "sweep" not in trained
    # drop_low=0 is rope's default, so the copied run is plain "rope"
    assert labels.split_labels({"copy": ["A", "B"]}, {"A": copied, "B": trained}) == {"A": "", "B": "drop_low=0.25"}


def test_a_configuration_keeps_one_name_on_every_task():
    """One model per task: on copy two step counts, on vt only one; vt's run is still 'steps=80'."""
    copy80, copy200 = _spec("task=copy", "train.steps=80"), _spec("task=copy", "train.steps=200")
    vt80 = _spec("task=vt", "train.steps=80")
    got = labels.split_labels({"copy": ["A", "B"], "vt": ["C"]}, {"A": copy80, "B": copy200, "C": vt80})
    assert got == {"A": "steps=80", "B": "steps=200", "C": "steps=80"}


def test_without_stored_specs_the_hash_tells_configurations_apart():
    assert labels.split_labels({"copy": ["abcdef123", "123456abc"]}, {"abcdef123": None, "123456abc": None}) == \
        {"abcdef123": "[abcdef]", "123456abc": "[123456]"}


@pytest.mark.exhaustive  # trains runs; the label rules run in-process in make test
def test_runs_that_differ_in_steps_are_separate_rows_and_n_counts_seeds(tmp_path):
    """The issue's command: one sweep, alibi, two step counts, three seeds."""
    args = [sys.executable, "-m", "suite.run", "-m", "position=alibi", "task=niah_single", "train.steps=2,3", "seed=0,1,2",
            "eval.n_examples=4", "eval.multiples=[1]", "logger=none", "launcher=basic", f"results_dir={tmp_path}", "sweep_name=mix",
            f"hydra.sweep.dir={tmp_path}/h"]
    out = forked_cli.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    board = boards.leaderboard(store.load(tmp_path / "mix"))
    assert sorted(board.scheme) == ["alibi steps=2", "alibi steps=3"]
    assert board.n.tolist() == [3, 3]
    for scheme, g in board.groupby("scheme"):
        runs = [json.loads(p.read_text()) for p in (tmp_path / "mix").glob("*.json")]
        steps = int(scheme.split("=")[1])
        values = [r["rows"] for r in runs if r["run"]["spec"]["train"]["steps"] == steps]
        assert len(values) == 3
        means = [next(x["value"] for x in rows if x["metric"] == "exact_match" and x["slice"] == "all") for rows in values]
        assert g["mean"].iloc[0] == sum(means) / 3


def _alibi_rows(config, spans, window, steps, value, spec):
    from tests.test_report import _row
    rows = [_row(f"{config}-s{seed}", "alibi", seed, "copy", 32, value, config=config, steps=steps) for seed in (0, 1)]
    return store.described([{**r, "spans": spans, "window": window, "spec": json.dumps(spec, sort_keys=True)} for r in rows])


def test_configurations_of_one_scheme_name_the_steps_even_when_their_spans_differ():
    """The issue's pair: ALiBi full at 100 steps and ALiBi swa w=16 at 1750 steps; both labels
    name the steps, not only the window."""
    import pandas as pd
    full = _spec("position=alibi", "train.steps=100")
    swa = _spec("position=alibi", "span=swa", "span.window=16", "train.steps=1750")
    df = pd.DataFrame(_alibi_rows("A", "full", None, 100, 0.0, full) + _alibi_rows("B", "swa", 16, 1750, 0.91, swa))
    board = boards.leaderboard(df).set_index("scheme")
    assert sorted(board.index) == ["alibi steps=100", "alibi swa w=16 steps=1750"]
    assert board.loc["alibi swa w=16 steps=1750", "mean"] == 0.91 and board.n.tolist() == [2, 2]


def test_configurations_differing_only_in_the_span_keep_their_plain_labels():
    import pandas as pd
    full = _spec("position=alibi")
    swa = _spec("position=alibi", "span=swa", "span.window=16")
    df = pd.DataFrame(_alibi_rows("A", "full", None, 10, 0.5, full) + _alibi_rows("B", "swa", 16, 10, 0.6, swa))
    assert sorted(boards.leaderboard(df).scheme) == ["alibi", "alibi swa w=16"]


def _declared(spec: dict, flat: dict, key: str):
    """The test's own reading of a layer option's default: the one default every piece named in
    ``flat`` that has the option declares in its Config, or for a schedule phase's option
    ('train.schedule[0].theta') the phase's scheme's (None when there is no single one)."""
    import dataclasses
    import re
    from suite.model.mixer import MIXERS
    from suite.model.position import SCHEMES
    from suite.model.span import SPANS

    section, _, option = key.partition(".")
    names = str(flat.get(f"{section}.name")).split("/")
    phase = re.fullmatch(r"train\.schedule\[(\d+)\]\.(\w+)", key)
    if phase:
        section, option = "position", phase.group(2)
        phases = spec["train"].get("schedule") or []
        names = [phases[int(phase.group(1))]["position"]] if int(phase.group(1)) < len(phases) else []
    catalogue = {"position": SCHEMES, "span": SPANS, "mixer": MIXERS}.get(section)
    if catalogue is None:
        return None
    found = {json.dumps(f.default) for name in names if name in catalogue
             for f in dataclasses.fields(catalogue[name].Config) if f.name == option}
    return json.loads(found.pop()) if len(found) == 1 else None


@pytest.mark.exhaustive  # every arch of the catalogue composed
def test_no_label_over_the_arch_catalogue_names_an_option_at_none_or_at_its_default():
    """Every arch of conf/arch as one group, so every option that differs between any two is a
    label key: no label holds '=None' or an option equal to its scheme's declared default, and the
    options that are set away from it still show ('fox decay_time_max=256 decay_time_min=2' beside
    'fox', 'dape base=kerple' beside 'dape').

    Mutation check: describe ignoring omit_defaults (every key shown) makes this fail."""
    archs = sorted(p.stem for p in (ROOT / "conf" / "arch").glob("*.yaml"))
    specs = {a: _spec(f"+arch={a}") for a in archs}
    got = labels.split_labels({"copy": archs}, specs, {a: a for a in archs})
    assert len(got) == len(archs) and not any(v.startswith("[") for v in got.values())
    keys = [k for k in labels.differing_keys(list(specs.values())) if k not in labels.SHOWN]
    short = labels._short(keys)
    checked = 0
    for arch, label in got.items():
        assert "=None" not in label, (arch, label)
        flat = labels.flatten(specs[arch])
        shown = dict(part.split("=", 1) for part in label.split())
        for key in keys:
            default = _declared(specs[arch], flat, key)
            if flat.get(key) in (None, "") or (default is not None and flat[key] == default):
                assert short[key] not in shown, (arch, label, key)
                checked += 1
    assert checked > len(archs)  # the catalogue has options at their defaults to leave out
    assert got["drope"] == "schedule=rope@0.8"  # the phase's rope options all at rope's defaults
    assert got["fox"] == "" and got["fox_decay"] == "decay_time_max=256 decay_time_min=2"
    assert "base=kerple" in got["dape_kerple"].split() and "base=alibi" not in got["dape_alibi"]
