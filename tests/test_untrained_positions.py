"""Every position parameter read at evaluation was trained, or the report says which were not.

A scheme declares the learned position-indexed entries attention reads at a length
(``PositionScheme.position_entries``: T5's buckets, a learned table's rows, CoPE's columns);
evaluation stores per (task, length) the share of them that the training length never read
(``untrained_positions``); the report's section ``untrained_positions`` shows it per scheme and
length. T5's ``max_distance`` follows the training length by default (Raffel et al. 2020 clamp far
offsets into a trained last bucket); ``conf/arch/t5_md128.yaml`` keeps the fixed 128 as an arm.

Each test's docstring names the mutation it caught (break the line, watch the test fail, restore).
"""
from __future__ import annotations

import dataclasses
import re
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from suite.config.run_spec import TrainSpec
from suite.model.position import SCHEMES, Dims
from suite.model.position.base import untrained_share
from suite.model.position.t5 import t5_bucket
from suite.report import render, to_markdown
from suite.report.sections.untrained_positions import UntrainedPositions
from suite.results import store
from tests.conftest import make_spec

ROOT = Path(__file__).parent.parent
METRIC = "untrained_positions"
MULTIPLES = (1, 1.25, 1.5, 2, 3, 4, 5, 6, 7, 8)  # every multiple of the sweeps up to 8 x, and the integers between
QUICK = ["train.steps=4", "train.batch_size=4", "train.seq_len=32", "eval.n_examples=2", "eval.batch_size=2",
         "eval.multiples=[1,2,4]", "model.n_layers=1", "model.d_model=16", "model.n_heads=2", "model.d_ff=32",
         "task=copy", "logger=none", "train.until_learned=false", "sweep_name=u"]
RUNS = {  # stored by the module's fixture: label -> overrides
    "t5": ["+arch=t5"], "t5_md128": ["+arch=t5_md128"], "learned": ["position=learned"],
    "cope_wide": ["position=cope", "position.npos_max=129"], "rope": ["position=rope"],
}


def sweep_lengths() -> list[int]:
    """Every training length a sweep, setting, recipe or text family of conf/ sets (``seq_len``), and
    the default (``TrainSpec.seq_len``): 32, 64, 128, 512 and 1024 today."""
    found = {f.default for f in dataclasses.fields(TrainSpec) if f.name == "seq_len"}
    for folder in ("sweep", "setting", "train", "family"):
        for path in (ROOT / "conf" / folder).glob("*.yaml"):
            found |= {int(n) for n in re.findall(r"^\s*seq_len:\s*(\d+)", path.read_text(), re.MULTILINE)}
    return sorted(found)


def t5(train_len: int, **options):
    """A T5 scheme as a run at ``train_len`` builds it: the config through the scheme's ``check``."""
    cls = SCHEMES["t5"]
    cfg = cls.check(cls.Config(**options), train_len, (train_len,), None)
    return cls(cfg, Dims(16, 2, 8, train_len))


def share(scheme, length: int, train_len: int) -> float:
    return untrained_share([scheme], length, train_len)[0]


# ---------------------------------------------------------------- T5's buckets

def test_the_sweeps_train_at_the_lengths_the_issue_names():
    """The grep below finds the lengths the sweeps use; a conf/ rewrite that hides them (another key
    name) fails here instead of leaving the next test with nothing to check."""
    assert {32, 64, 128, 512} <= set(sweep_lengths())


@pytest.mark.parametrize("train_len", sweep_lengths())
def test_t5_default_reads_only_buckets_training_reached_at_every_multiple(train_len):
    """T5's default (``max_distance: null``) resolves to the training length, so at every multiple up
    to 8 x every bucket read was read at L: the untrained share is 0, for the config a run's ``check``
    resolves and for one built without it (a wrapper's base: DAPE over T5). Mutations caught:
    ``check`` leaving ``max_distance`` at null, ``__init__`` falling back to 128 instead of
    ``Dims.train_len`` (share 5/27 at 2 x L = 32), and ``default_max_distance`` returning 2 x L."""
    checked = t5(train_len)
    unchecked = SCHEMES["t5"](SCHEMES["t5"].Config(), Dims(16, 2, 8, train_len))
    assert checked.cfg.max_distance == train_len == checked.max_distance == unchecked.max_distance
    for scheme in (checked, unchecked):
        for m in MULTIPLES:
            n = int(round(m * train_len))
            assert share(scheme, n, train_len) == 0, f"L={train_len}, n={n}"
            assert scheme.position_entries(n) <= scheme.position_entries(train_len, training=True)


def test_a_run_spec_names_the_resolved_max_distance_and_the_md128_arch_keeps_128():
    """The run's spec holds the distance its buckets use: L by default, 128 with the t5_md128 arch,
    so a board shows both side by side as two configurations. Mutations caught: ``T5Bias.check``
    returning ``cfg`` unchanged (null stored), and conf/arch/t5_md128.yaml without its
    ``max_distance: 128``."""
    assert make_spec("+arch=t5", "train.seq_len=64").model.layers[0].position_cfg.max_distance == 64
    assert make_spec("+arch=t5_md128", "train.seq_len=32").model.layers[0].position_cfg.max_distance == 128


def hf_buckets(n: int, num_buckets: int, max_distance: int) -> set[int]:
    """The causal buckets of offsets 0 .. n - 1 by Hugging Face's ``T5Attention`` (the ``hf`` extra)."""
    t5_module = pytest.importorskip("transformers.models.t5.modeling_t5", reason="the hf extra holds the reference")
    rel = -torch.arange(n)
    return set(t5_module.T5Attention._relative_position_bucket(rel, bidirectional=False, num_buckets=num_buckets,
                                                               max_distance=max_distance).tolist())


def test_t5_at_max_distance_128_and_L_32_reads_untrained_buckets_past_L():
    """At L = 32 with ``max_distance: 128`` training reaches buckets 0-21 and the offsets of 64 tokens
    buckets 0-26 (hand count, the issue's): 5 of 27 untrained at 2 x, 10 of 32 from 4 x on. Mutations
    caught: ``position_entries`` bucketing with 128 whatever the config, or with the training length's
    offsets at every length (share 0); ``untrained_share`` dividing by the trained entries instead of
    the read ones (5/22)."""
    scheme = t5(32, max_distance=128)
    assert scheme.position_entries(32, training=True) == frozenset(range(22))
    assert scheme.position_entries(64) == frozenset(range(27))
    assert untrained_share([scheme], 64, 32) == (pytest.approx(5 / 27), 27)
    assert share(scheme, 128, 32) == pytest.approx(10 / 32) == share(scheme, 256, 32)
    assert t5_bucket(-torch.arange(64), 32, 128).max() == 26


@pytest.mark.exhaustive  # importing transformers takes ~10 s; the hand count above runs in make test
def test_the_share_counts_the_buckets_hugging_face_gives():
    """The read and trained buckets against Hugging Face's ``_relative_position_bucket`` (an
    independent implementation), at L = 32 and 64 and lengths past them: the share is their count.
    Mutation caught: ``position_entries`` reading offsets 1 .. n (dropping bucket 0, and reading
    one offset too far)."""
    for train_len, length in [(32, 64), (32, 256), (64, 512)]:
        scheme = t5(train_len, max_distance=128)
        read, trained = hf_buckets(length, 32, 128), hf_buckets(train_len, 32, 128)
        assert scheme.position_entries(length) == read
        assert scheme.position_entries(train_len, training=True) == trained
        assert share(scheme, length, train_len) == pytest.approx(len(read - trained) / len(read))


# ---------------------------------------------------------------- every scheme's declaration

def test_learned_table_beyond_L_is_untrained_by_construction_and_reported():
    """Rows 0 .. n - 1 capped by the table: with a table of 4 L, 1/2 untrained at 2 L, 3/4 at 4 L.
    Mutation caught: ``Learned.position_entries`` returning the whole table (1/2 at 1 x L too), or
    uncapped rows (entries past the table)."""
    cls = SCHEMES["learned"]
    scheme = cls(cls.Config(max_positions=128), Dims(16, 2, 8, 32))
    assert share(scheme, 32, 32) == 0
    assert share(scheme, 64, 32) == Fraction(1, 2) and share(scheme, 128, 32) == Fraction(3, 4)
    assert scheme.position_entries(1000) == frozenset(range(128))


def test_cope_default_columns_are_all_trained_and_a_wider_table_is_not():
    """CoPE reads columns 0 .. min(n, npos - 1): with the default (L + 1 columns) every column read
    past L was read at L, share 0; with npos_max = 4 L + 1, at 2 L the columns L + 1 .. 2 L are
    untrained, L of 2 L + 1. Mutation caught: ``CoPE.position_entries`` leaving out the cap
    (``npos - 1``), which gives the default a share above 0."""
    cls = SCHEMES["cope"]
    default = cls(cls.Config(), Dims(16, 2, 8, 32))
    assert all(share(default, 32 * m, 32) == 0 for m in (1, 2, 4, 8))
    wide = cls(cls.Config(npos_max=129), Dims(16, 2, 8, 32))
    assert share(wide, 32, 32) == 0 and share(wide, 64, 32) == pytest.approx(32 / 65)


def test_wrappers_delegate_to_their_base():
    """DAPE over T5 reads T5's buckets; randomized over T5 or a learned table trains every entry of
    ``max_len`` tokens (its drawn positions reach there), so no supported length reads an untrained
    one, while a plain T5 at 128 does. Mutations caught: ``Randomized.position_entries`` passing
    ``length`` in training (share above 0 for the learned base), and ``Dape.position_entries``
    removed (None: DAPE over T5 unreported)."""
    dims = Dims(16, 2, 8, 32)
    dape = SCHEMES["dape"](SCHEMES["dape"].Config(base="t5"), dims)
    assert dape.position_entries(64) == dape.base.position_entries(64) == t5(32).position_entries(64)
    for base in ("t5", "learned"):
        wrapped = SCHEMES["randomized"](SCHEMES["randomized"].Config(base=base), dims)
        assert wrapped.max_len == 256
        assert all(share(wrapped, n, 32) == 0 for n in (32, 64, 128, 256)), base
    sampled = SCHEMES["randomized"](SCHEMES["randomized"].Config(base="t5", eval_positions="random"), dims)
    assert sampled.base.max_distance == 256 and share(sampled, 64, 32) == 0


def test_schemes_without_position_indexed_parameters_declare_none():
    """Every other scheme of the catalogue (no learned parameter, or one read alike at every length:
    KERPLE's r1 and r2, FIRE's MLP, PoPE's phases, FoPE's coefficients, FoX's and PaTH's projections)
    returns None, and the pooled share over them is None (no row). Mutation caught: the base hook
    returning an empty set instead of None (a share of 0/0 stored for RoPE)."""
    dims = Dims(32, 4, 8, 32)
    for name, cls in sorted(SCHEMES.items()):  # randomized and DAPE at their defaults: over RoPE and ALiBi
        scheme = cls(cls.check(cls.Config(), 32, (32, 64), dims), dims)
        entries = scheme.position_entries(64)
        assert (entries is None) == (name not in ("t5", "learned", "cope")), name
        if entries is None:
            assert untrained_share([scheme], 64, 32) is None, name


def test_the_share_pools_over_the_models_distinct_schemes():
    """Entries pool over the schemes: a learned table (1/2 of 64 rows untrained at 2 L) beside T5 at
    128 (5 of 27) gives 37/91, and a scheme with no entries adds nothing. Mutation caught:
    ``untrained_share`` averaging the schemes' shares (0.343) instead of pooling their entries."""
    learned = SCHEMES["learned"](SCHEMES["learned"].Config(max_positions=64), Dims(16, 2, 8, 32))
    rope = SCHEMES["rope"](SCHEMES["rope"].Config(), Dims(16, 2, 8, 32))
    assert untrained_share([learned, t5(32, max_distance=128), rope], 64, 32) == (pytest.approx(37 / 91), 91)


# ---------------------------------------------------------------- stored rows and the report

@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """One short stored run per entry of ``RUNS`` (L = 32, evaluated at 32, 64, 128): the store's rows."""
    from suite.run import execute

    results = tmp_path_factory.mktemp("untrained") / "results"
    for overrides in RUNS.values():
        execute(make_spec(*QUICK, *overrides), results_dir=results, progress=False)
    return store.load(results / "u")


def shares_of(df, positions: str, max_distance=None) -> dict[int, float]:
    """{eval length: stored untrained share} of the runs of ``positions`` (with this T5 distance)."""
    d = df[(df.metric == METRIC) & (df.positions == positions)]
    if max_distance is not None:
        d = d[d.spec.str.contains(f'"max_distance": {max_distance}')]
    assert (d.slice == "all").all() and (d.status == "ok").all() and (d.n >= 1).all()
    return dict(zip(d.eval_len, d.value))


def test_schemes_without_entries_store_no_row():
    """RoPE, ALiBi and NoPE get no ``untrained_positions`` row: ``evaluate`` on an untrained model
    whose three layers use one each (the share pools over the model's schemes, and none has
    entries). Mutation caught: ``untrained_rows`` storing a row of 0 when ``untrained_share`` is
    None."""
    from suite.evaluation.evaluate import evaluate
    from suite.model.lm import PosBenchLM

    spec = make_spec(*QUICK, "model.n_layers=3", "eval.multiples=[1,2]",
                     "pattern.layers=[{position: rope}, {position: alibi}, {position: nope}]")
    assert [layer.position for layer in spec.model.layers] == ["rope", "alibi", "nope"]
    rows = evaluate(PosBenchLM(spec.model), spec, [(t, t.build()) for t in spec.tasks])
    assert rows and not any(r["metric"] == METRIC for r in rows)


def test_every_run_stores_its_share_and_the_report_shows_it_beside_the_scores(stored):
    """Stored rows (one per run with entries, task and eval length; each a measurement in [0, 1]
    that passed the store's checks): T5 at the default 0 at every length, at 128 5/27 at 2 x and
    10/32 at 4 x; the learned table 1/2 and 3/4; CoPE with 129 columns 32/65 and 96/129; RoPE none.
    The report's section is scheme x length with those shares (T5 at both settings as two rows,
    labelled by the setting that differs) and says what an untrained entry is; without the rows it is
    absent, and every other section's Markdown and CSV is the same with and without them (rows that
    read as scores, stored under the task's headline metric, change the MRR, task boards, power and
    effective-length sections: checked by hand on such a frame).

    Mutations caught: ``evaluate`` without ``untrained_rows`` (no rows); the metric declared with a
    direction (``higher_is_better`` stored); ``untrained_rows`` passing ``eval_len`` as the training
    length (all 0); ``UntrainedPositions.build`` returning the table when it is empty (a section
    without rows)."""
    assert shares_of(stored, "t5", 32) == {32: 0, 64: 0, 128: 0}
    assert shares_of(stored, "t5", 128) == pytest.approx({32: 0, 64: 5 / 27, 128: 10 / 32})
    assert shares_of(stored, "learned") == {32: 0, 64: 0.5, 128: 0.75}
    assert shares_of(stored, "cope") == pytest.approx({32: 0, 64: 32 / 65, 128: 96 / 129})
    assert not (stored[stored.positions == "rope"].metric == METRIC).any()
    rows = stored[stored.metric == METRIC]
    assert rows.higher_is_better.isna().all() and (rows.low == 0).all() and (rows.high == 1).all()
    assert len(rows) == 4 * 3
    assert_the_report_shows_them(stored)


def markdown_of(report, skip: str | None = None) -> dict[str, str]:
    """Each present section's Markdown, by name (less ``skip``)."""
    return {s.name: to_markdown.render(s.blocks(b, report.context)) for s, b in report.present() if s.name != skip}


def assert_the_report_shows_them(stored) -> None:
    """The section of ``stored``'s report, and every other section unchanged without its rows."""
    report = render.build(stored, "u")
    md = markdown_of(report)["untrained_positions"]
    assert "| t5 max_distance=128" in md and "| t5 max_distance=32 " in md and "never received a gradient" in md
    line = next(x for x in md.splitlines() if x.startswith("| t5 max_distance=128"))
    assert [c.strip() for c in line.strip("|").split("|")] == ["t5 max_distance=128", "32", "0.00", "0.19", "0.31"]
    assert "64 (2x)" in md and report.csvs()["untrained_positions.csv"].startswith("scheme,train_len,eval_len")
    without = render.build(stored[stored.metric != METRIC], "u")
    assert "untrained_positions" not in without and UntrainedPositions().build(without.context) is None
    assert markdown_of(report, skip="untrained_positions") == markdown_of(without)
    csvs = {k: v for k, v in report.csvs().items() if k != "untrained_positions.csv"}
    assert csvs == without.csvs()
