"""The layer-pattern section (suite/report/sections/patterns.py): each pattern against its uniform
RoPE parent family by family, in the metric's own direction; the best arm beyond L with the
families it leads; the mechanism's correlation. Built from hand-made rows whose verdicts are
known: command_a beats its parent (RoPE in a window of 16) on copy and loses on code (bits per
byte: lower is better); smollm3 ties RoPE on copy and beats it on code."""
import json
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from suite.report import boards, render
from suite.report.sections import patterns
from tests.conftest import make_spec
from tests.test_report import _row, frame

OOD = {  # (arm, task) -> the three seeds' scores beyond L
    ("rope", "copy"): (0.20, 0.25, 0.30), ("rope_swa", "copy"): (0.50, 0.55, 0.60),
    ("command_a", "copy"): (0.80, 0.85, 0.90), ("smollm3", "copy"): (0.21, 0.26, 0.29),
    ("rope", "code"): (3.0, 3.1, 3.2), ("rope_swa", "code"): (2.0, 2.1, 2.2),
    ("command_a", "code"): (2.5, 2.6, 2.7), ("smollm3", "code"): (2.0, 2.1, 2.2),
}
ARMS = {  # arm -> (pattern, positions, spans, window)
    "rope": ("uniform", "rope", "full", None), "rope_swa": ("uniform", "rope", "swa", 16),
    "command_a": ("command_a", "rope+nope", "swa+full", 16), "smollm3": ("smollm3", "rope+nope", "full", None),
}


@lru_cache(maxsize=None)
def spec(arm: str, task: str) -> str:
    """The stored spec of the arm's run (labels tell configurations apart by their specs)."""
    return json.dumps(make_spec(f"+arch={arm}", f"+family={task}").to_dict())


def rows() -> pd.DataFrame:
    out = []
    for (arm, task), values in OOD.items():
        pattern, positions, spans, window = ARMS[arm]
        metric = "token_accuracy" if task == "copy" else "bits_per_byte"
        for seed, v in enumerate(values):
            run = f"{arm}-{task}-{seed}"
            for length, value in ((32, v + (0.5 if task == "copy" else -0.5)), (64, v), (128, v)):
                r = _row(run, positions, seed, task, length, value, pattern=pattern, metric=metric, config=f"{arm}-{task}")
                out.append({**r, "spans": spans, "window": window, "chunk": None})
    d = frame(out)
    return d.assign(spec=[spec(run.split("-")[0], task) for run, task in zip(d.run_id, d.task)])


def test_each_pattern_meets_its_uniform_rope_parent_in_the_metrics_direction():
    assert patterns.parent_label({"spans": "swa+full", "window": 16, "chunk": None}) == "rope swa w=16"
    assert patterns.parent_label({"spans": "chunked+full", "window": None, "chunk": 16}) == "rope chunked c=16"
    assert patterns.parent_label({"spans": "full", "window": None, "chunk": None}) == "rope"
    t = patterns.against_parents(boards.primary(rows())).set_index(["pattern", "task"])
    assert t.loc[("command_a w=16", "copy")].parent == "rope swa w=16"
    assert t.loc[("command_a w=16", "copy"), "diff"] == pytest.approx(0.30)
    assert t.loc[("command_a w=16", "copy")].verdict == "better"
    assert t.loc[("command_a w=16", "code"), "diff"] == pytest.approx(0.5)
    assert t.loc[("command_a w=16", "code")].verdict == "worse"  # more bits per byte
    assert t.loc[("smollm3", "copy")].parent == "rope" and t.loc[("smollm3", "copy")].verdict == "not separated"
    assert t.loc[("smollm3", "code")].verdict == "better" and len(t) == 4


def test_the_report_opens_the_section_with_the_best_arm_and_each_patterns_count():
    report = render.build(rows(), "hx")
    text = render.markdown(report)
    assert "## Layer patterns against their uniform parents" in text
    v = patterns.verdicts(report["patterns"]["table"]).set_index("pattern")
    assert v.loc["command_a w=16"].to_dict() == {"parent": "rope swa w=16", "better on": "copy", "worse on": "code",
                                                 "not separated on": "none", "families": 2}
    assert v.loc["smollm3"].to_dict() == {"parent": "rope", "better on": "code", "worse on": "none",
                                          "not separated on": "copy", "families": 2}
    assert "| command_a w=16 | rope swa w=16 | copy        | code       | none               |          2 |" in text
    # OOD MRR: rope swa w=16 ranks 2nd on copy and 1st on code (0.75); command_a 1st and 3rd, smollm3 3rd and 1st
    best = report["patterns"]["best"]
    assert best["scheme"] == "rope swa w=16" and best["tasks"] == ["code", "copy"]
    assert best["families"] == ["code"]  # on copy command_a leads it, separated
    assert "Best beyond L: rope swa w=16 (1 of 4 arms), OOD MRR 0.75" in text and "on 1 of 2 families: code." in text
    # the first arm is a uniform stack: the best layer pattern follows, second of the four arms
    pattern = report["patterns"]["best_pattern"]
    assert pattern["scheme"] in ("command_a w=16", "smollm3") and pattern["place"] == 2 and pattern["mrr"] == pytest.approx(2 / 3)
    assert f"Best layer pattern beyond L: {pattern['scheme']} (2 of 4 arms), OOD MRR 0.67" in text
    assert text.index("Layer patterns against") < text.index("plots/summary.png")  # the board opens with the verdict


def test_a_board_of_uniform_stacks_has_no_pattern_section():
    uniform = rows()
    uniform = uniform[uniform.pattern == "uniform"]
    assert "Layer patterns against" not in render.markdown(render.build(uniform, "hx"))


GAPS = {"rope": 0.1, "rope_swa": 0.9, "command_a": 0.5, "smollm3": 0.3}  # each arm's trained last-layer gaps


def with_diagnostics() -> pd.DataFrame:
    """``rows()`` and, per run, recency and logit gaps at init and trained on layers 0 to 3; only
    the trained last layer's carry the arm's value."""
    d = rows()
    runs = d.drop_duplicates("run_id")
    extra = []
    for _, r in runs.iterrows():
        arm = r.run_id.split("-")[0]
        for at in ("init", "trained"):
            for layer in range(4):
                value = GAPS[arm] if (at, layer) == ("trained", 3) else -5.0
                extra.append({**r.to_dict(), "metric": "recency_gap", "value": value, "eval_len": 32, "len_ratio": 1.0,
                              "slice": f"at={at},layer={layer},site=resid_out,far=16"})
                extra.append({**r.to_dict(), "metric": "logit_gap", "value": 2 * value, "eval_len": 32, "len_ratio": 1.0,
                              "slice": f"at={at},layer={layer},head=mean,far=16"})
                extra.append({**r.to_dict(), "metric": "logit_gap", "value": 99.0, "eval_len": 32, "len_ratio": 1.0,
                              "slice": f"at={at},layer={layer},head=0,far=16"})
                for lag in (0, 1, 4):  # the logit against distance: only the trained last layer's mean head counts
                    for head, v in (("mean", GAPS[arm] * lag if (at, layer) == ("trained", 3) else -5.0), ("0", 99.0)):
                        extra.append({**r.to_dict(), "metric": "logit_profile", "value": v, "eval_len": 32,
                                      "len_ratio": 1.0, "slice": f"at={at},layer={layer},head={head},lag={lag}"})
    return pd.concat([d, pd.DataFrame(extra)], ignore_index=True)


def test_the_mechanism_reads_the_trained_last_layer_and_correlates_it_with_the_mrr():
    report = render.build(with_diagnostics(), "hx")
    m = report["patterns"]["mechanism"].set_index("scheme")
    names = {"rope": "rope", "rope_swa": "rope swa w=16", "command_a": "command_a w=16", "smollm3": "smollm3"}
    assert m["recency gap"].to_dict() == pytest.approx({names[a]: v for a, v in GAPS.items()})
    assert m["logit gap"].to_dict() == pytest.approx({names[a]: 2 * v for a, v in GAPS.items()})
    rho = report["patterns"]["rho"]
    assert rho["recency gap"]["rho"] == pytest.approx(m.mrr_ood.corr(m["recency gap"], method="spearman"))
    assert rho["recency gap"]["arms"] == 4
    assert "Spearman's rho of the OOD MRR with the recency gap" in render.markdown(report)
    curves = report["patterns"]["logits"].set_index(["scheme", "lag"]).value
    assert curves.to_dict() == pytest.approx({(names[a], lag): v * lag for a, v in GAPS.items() for lag in (0, 1, 4)})
    assert "plots/pattern_logits.png" in render.markdown(report)


def test_rhos_interval_draws_the_arms_and_answers_the_question_it_asks():
    rising = pd.Series(np.arange(11.0))
    # a perfectly monotone relation: every replicate with two distinct arms has rho 1
    assert patterns.rho_interval(rising, rising ** 2) == {"rho": 1.0, "low": 1.0, "high": 1.0, "arms": 11, "reads": "yes"}
    assert patterns.rho_interval(rising, -rising)["reads"] == "the opposite"
    gap = pd.Series([0.3, 0.1, np.nan, 0.3, 0.9, 0.2, 0.5, 0.4, 0.1, 0.7, 0.6])  # ties, and one arm without a gap
    got = patterns.rho_interval(rising, gap, reps=200, seed=3)
    x, y = rising[gap.notna()].to_numpy(), gap.dropna().to_numpy()
    draws = []  # the same draws of arms, each rho from pandas' own Spearman (average ranks of ties)
    for i in np.random.default_rng(3).integers(0, 10, (200, 10)):
        a, b = pd.Series(x[i]), pd.Series(y[i])
        draws.append(a.corr(b, method="spearman") if a.nunique() > 1 and b.nunique() > 1 else np.nan)
    assert got["arms"] == 10 and got["rho"] == pytest.approx(pd.Series(x).corr(pd.Series(y), method="spearman"))
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.nanpercentile(draws, [2.5, 97.5])))
    assert got["low"] < 0 < got["high"] and got["reads"] == "not decided at 95 %"
