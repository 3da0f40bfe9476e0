"""Slice strings: the formatter writes today's bytes, the parser reads them back, bad fields are refused.

Mutation check: in suite/evaluation/slices.py parse_slice, part.partition("=") -> part.rpartition("=") makes
test_a_value_may_contain_an_equals_sign fail; in format_slice, ",".join -> ";".join makes
test_fields_are_written_in_order_as_f_strings_write_them fail."""
import pytest

from suite.evaluation.slices import ALL, format_slice, parse_slice


def test_fields_are_written_in_order_as_f_strings_write_them():
    assert format_slice(at="init", layer=2, site="resid_out", lag=8) == "at=init,layer=2,site=resid_out,lag=8"
    assert format_slice(at="step4", layer=0, head="mean", far=16) == "at=step4,layer=0,head=mean,far=16"
    assert format_slice(depth="0.4") == "depth=0.4"
    assert format_slice(ratio=0.5, n=3) == "ratio=0.5,n=3"


def test_no_fields_is_all_and_all_has_no_fields():
    assert format_slice() == ALL == "all"
    assert parse_slice("all") == {}


def test_parse_reads_every_field_as_a_string_in_order():
    fields = parse_slice("at=init,layer=2,site=resid_out,lag=8")
    assert fields == {"at": "init", "layer": "2", "site": "resid_out", "lag": "8"}
    assert list(fields) == ["at", "layer", "site", "lag"]


def test_a_value_may_contain_an_equals_sign():
    # MQAR buckets its key count as '<=16': the first '=' of a field ends the key
    assert format_slice(n_keys="<=16") == "n_keys=<=16"
    assert parse_slice("n_keys=<=16,distance=<32") == {"n_keys": "<=16", "distance": "<32"}


@pytest.mark.parametrize("fields, named", [
    ({"a,b": "1"}, "'a,b'"), ({"a=b": "1"}, "'a=b'"), ({"": "1"}, "''"), ({"depth": "0.2,0.4"}, "'0.2,0.4'")])
def test_a_field_that_would_not_read_back_is_refused_by_name(fields, named):
    with pytest.raises(ValueError, match=named):
        format_slice(**fields)


@pytest.mark.parametrize("text, named", [("at=init,layer", "'layer'"), ("=3", "'=3'"), ("a=1,a=2", "'a'"),
                                         ("", "''")])
def test_a_malformed_slice_is_refused_naming_the_field(text, named):
    with pytest.raises(ValueError, match=named):
        parse_slice(text)
