"""A run id names the run's span: 'alibi-uniform-swa16-copy-s0-<hash>' and
'alibi-uniform-full-copy-s0-<hash>' differ before their hashes, and rows stored under the older
form of the id (no span field) keep reading, their ids as stored.

Mutation checks: ``run_id`` without ``span_label`` makes test_the_span_is_a_field_of_every_run_id fail;
``span_label`` naming a span without its size ('swa') makes it fail too; ``span_label`` naming the
span of a gated linear layer ('full') instead of its mixer makes test_a_hybrids_id_names_each_layer_kind fail.
"""
import warnings

from suite.results import store
from suite.results.identity import run_id, span_label
from tests.conftest import PRE_CRITERION, make_spec


def _fields(rid: str) -> list[str]:
    """The readable fields of a run id, the hash left off."""
    return rid.rsplit("-", 1)[0].split("-")


def test_the_span_is_a_field_of_every_run_id():
    full = run_id(make_spec("position=alibi"))
    swa = run_id(make_spec("position=alibi", "span=swa", "span.window=16"))
    chunked = run_id(make_spec("position=alibi", "span=chunked", "span.chunk=8"))
    assert _fields(full) == ["alibi", "uniform", "full", "copy", "s0"]
    assert _fields(swa) == ["alibi", "uniform", "swa16", "copy", "s0"]
    assert _fields(chunked) == ["alibi", "uniform", "chunked8", "copy", "s0"]
    # the window's size is part of the name: two windows, two names before the hash
    assert _fields(run_id(make_spec("position=alibi", "span=swa", "span.window=32")))[2] == "swa32"


def test_a_hybrids_id_names_each_layer_kind():
    assert span_label(make_spec("pattern=command_a")) == "swa16+full"
    assert span_label(make_spec("pattern=llama4")) == "chunked16+full"
    assert span_label(make_spec("pattern=qwen3_next")) == "gated_delta+full"
    assert _fields(run_id(make_spec("pattern=command_a", "seed=3"))) == ["rope+nope", "command_a", "swa16+full", "copy", "s3"]


def test_shipped_rows_keep_their_stored_ids():
    """Published rows were stored before the span was a field of the id: they load with no
    warning and with their ids as stored (nothing recomputes an id from a spec on reading)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = store.load(PRE_CRITERION)
    assert "alibi-uniform-copy-s0-5e6242bbbc93" in set(df.run_id) and df.run_id.nunique() == 36
