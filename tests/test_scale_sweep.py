"""The scale board (conf/sweep/scale.yaml) varies the training length and the width and nothing else.

Mutation checks: listing ``+setting`` before ``+family`` in conf/sweep/scale.yaml (a text family's
own 64 then wins) fails test_every_scale_job_trains_in_its_setting; ``batch_size: 16`` in
conf/setting/tiny_L128.yaml fails it too; ``n_heads: 2`` in conf/model/mini.yaml fails
test_the_scale_boards_two_widths_and_head_sizes; ``seq_len: 256`` in conf/sweep/gpu_copy.yaml fails
test_the_gpu_board_trains_the_classic_six_on_copy_at_512_with_small; ``setting: tiny_L64`` in the
sweep's skip entry fails test_the_scale_board_leaves_out_only_vt_at_128."""
import re

import pytest

from tests.test_sweeps import _built_jobs, _run_jobs

CLASSIC = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5"}
SETTINGS = {("tiny", 32), ("tiny", 64), ("tiny", 128), ("mini", 32)}


def _option(job, key):
    return next(o.split("=", 1)[1] for o in job if o.startswith(key + "="))


@pytest.mark.exhaustive
def test_every_scale_job_trains_in_its_setting():
    """Each job trains the model and at the length its ``+setting`` names, text families included,
    with the batch that keeps a step's tokens at 32 x 32 = 1024, to criterion, evaluated to 8 x L."""
    jobs = _built_jobs("scale")
    assert len(jobs) == 6 * 5 * len(SETTINGS) * 3
    for job, spec in jobs:
        model, length = re.fullmatch(r"(\w+)_L(\d+)", _option(job, "+setting")).groups()
        assert (spec.model.name, spec.train.seq_len) == (model, int(length)), (job, spec.train.seq_len)
        assert spec.train.batch_size * spec.train.seq_len == 1024, job
        assert max(spec.eval.multiples) >= 8 and spec.train.until_learned
    assert {(s.model.name, s.train.seq_len) for _, s in jobs} == SETTINGS


@pytest.mark.exhaustive
def test_the_scale_board_leaves_out_only_vt_at_128():
    """The grid less the one combination its skip list names: vt at L = 128, which the RoPE, ALiBi and
    NoPE pilots did not learn within the cap; 342 of the 360 jobs run."""
    kept = {id(spec) for _, spec in _run_jobs("scale")}
    left_out = [spec for _, spec in _built_jobs("scale") if id(spec) not in kept]
    assert len(left_out) == 6 * 3
    assert {(s.taskset, s.model.name, s.train.seq_len) for s in left_out} == {("vt", "tiny", 128)}


@pytest.mark.exhaustive
def test_the_scale_boards_two_widths_and_head_sizes():
    """tiny (d_model 64, head size 16) and mini (d_model 96, head size 32, the issue's >= 32), equal
    in depth; every layer of every model full attention under one of the classic six."""
    shapes = {(s.model.name, s.model.d_model, s.model.d_model // s.model.n_heads, s.model.n_layers)
              for _, s in _built_jobs("scale")}
    assert shapes == {("tiny", 64, 16, 4), ("mini", 96, 32, 4)}
    layers = [layer for _, s in _built_jobs("scale") for layer in s.model.layers]
    assert {layer.position for layer in layers} == CLASSIC and {layer.span for layer in layers} == {"full"}


@pytest.mark.exhaustive
def test_the_scale_boards_tiny_runs_at_32_on_synthetic_tasks_are_the_flagships_own():
    """Those 54 runs have the flagship's run ids (same spec), so they are copied from it, not trained
    again, and both boards read one set of numbers; the text runs train at the scale board's lengths."""
    flagship = {spec.run_id for _, spec in _built_jobs("flagship")}
    shared = [s for _, s in _built_jobs("scale") if s.run_id in flagship]
    assert len(shared) == 6 * 3 * 3
    assert {(s.taskset, s.model.name, s.train.seq_len) for s in shared} == {
        (t, "tiny", 32) for t in ("copy", "niah_multivalue", "vt")}


def test_the_gpu_board_trains_the_classic_six_on_copy_at_512_with_small():
    """conf/sweep/gpu_copy.yaml, what scripts/gpu_copy.sh trains: the classic six on copy at L = 512,
    the small model (head size 32) under the GPU recipe, to criterion with a cap of 2 x, to 8 x L."""
    jobs = _built_jobs("gpu_copy")
    assert len(jobs) == 6 * 2
    specs = [s for _, s in jobs]
    assert {layer.position for s in specs for layer in s.model.layers} == CLASSIC
    for s in specs:
        assert (s.taskset, s.model.name, s.model.d_model // s.model.n_heads, s.train.seq_len) == ("copy", "small", 32, 512)
        assert (s.train.device, s.train.precision, s.train.compile, s.train.fused_optimizer) == ("cuda", "bf16", True, True)
        assert s.train.until_learned and s.train.cap == 2.0 and max(s.eval.multiples) == 8
