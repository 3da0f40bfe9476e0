"""A scheme's ``bias()`` is read, never written: attention builds its mask out of place, so a scheme
may return an ``expand``ed view or a tensor it keeps between calls, and gets the same output as
with a fresh tensor, with no warning.

Mutation check: ``masked_fill_`` (in place) for ``masked_fill`` on the bias in
suite/model/attention.py ``float_mask`` makes both tests fail (the expanded bias warns or raises;
the kept bias comes back with -inf outside the span).
"""
import warnings

import pytest
import torch

from tests.test_attention import SPAN_OVERRIDES, _model, _run


def _with_bias(model, make):
    """``model`` with each scheme's ``bias`` replaced by ``make(its own bias output)``."""
    for scheme in model.schemes:
        own = scheme.bias
        scheme.bias = lambda pos_q, pos_k, own=own: make(own(pos_q, pos_k))
    return model


@pytest.mark.parametrize("span", list(SPAN_OVERRIDES))
@pytest.mark.parametrize("impl", ["sdpa", "reference"])
def test_an_expanded_bias_gives_the_output_of_a_fresh_one(span, impl):
    def model(make):
        return _with_bias(_model("position=alibi", *SPAN_OVERRIDES[span]), make)

    expanded = model(lambda b: b[:1].expand_as(b))  # head 0's bias for every head, no memory of its own
    fresh = model(lambda b: b[:1].expand_as(b).clone())
    tokens = torch.randint(0, expanded.spec.vocab_size, (2, 23))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _run(expanded, tokens, impl)
        assert torch.equal(out, _run(fresh, tokens, impl))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("span", list(SPAN_OVERRIDES))
def test_a_bias_the_scheme_keeps_is_left_as_it_was(span):
    kept = {}

    def keep(b):
        key = tuple(b.shape)
        if key not in kept:
            kept[key] = (b.clone(), b.clone())  # (the one handed out, the untouched copy)
        return kept[key][0]

    model = _with_bias(_model("position=alibi", *SPAN_OVERRIDES[span]), keep)
    tokens = torch.randint(0, model.spec.vocab_size, (2, 23))
    with torch.no_grad():
        first = _run(model, tokens, "sdpa")
        assert torch.equal(_run(model, tokens, "sdpa"), first)  # a second forward sees the same bias
    assert kept and all(torch.equal(handed, copy) for handed, copy in kept.values())
