"""The /status and /lag body written straight from the evaluation equals the general encoder's, byte for byte."""

from __future__ import annotations

from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.httpserver import gojson
from burrowpy.httpserver.status_json import status_json
from burrowpy.protocol import ConsumerGroupStatus, ConsumerOffset, PartitionStatus, Status

texts = st.text(max_size=12)  # Go's escapes (<, >, &, U+2028) and control characters among them
floats = st.none() | st.floats(min_value=-1e30, max_value=1e30, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0, 0.1])
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
offsets = st.none() | st.builds(ConsumerOffset, ints, ints, ints, st.none() | ints)
statuses = st.sampled_from(list(Status))
partitions = st.builds(
    PartitionStatus, texts, ints, statuses, ints, floats, offsets, offsets, texts, texts, floats,
    st.none() | texts, st.none() | texts, floats, floats)


@settings(max_examples=300, deadline=None)
@given(st.builds(ConsumerGroupStatus, texts, texts, statuses, floats, st.lists(partitions, max_size=4), ints,
                 st.none() | partitions, ints, floats, st.none() | texts, floats, floats))
def test_the_direct_writer_writes_what_the_general_encoder_writes(status):
    try:
        expected = gojson.dumps(status.to_json())
    except ValueError:  # a float beyond float32's range: refused by both
        with pytest.raises(ValueError):
            status_json(status)
        return
    assert status_json(status) == expected


class Weight(IntEnum):
    HEAVY = 7


def test_a_field_of_an_unexpected_type_is_written_by_the_general_encoder():
    # An int subclass is written as its number, as gojson writes it, never by its repr.
    partition = PartitionStatus("t", Weight.HEAVY, Status.ERR, Weight.HEAVY, 0.5)
    status = ConsumerGroupStatus("c", "g", Status.ERR, 0.5, [partition], 1, partition, 7)
    assert status_json(status) == gojson.dumps(status.to_json())
    assert '"partition":7' in status_json(status)


def test_the_body_is_embedded_as_it_is():
    assert gojson.dumps({"a": gojson.RawJSON('{"b":[1,2]}'), "c": "<"}) == '{"a":{"b":[1,2]},"c":"\\u003c"}'


def test_float_texts_are_remembered_within_a_bound(monkeypatch):
    monkeypatch.setattr(gojson, "_FLOAT_TEXT", {})
    monkeypatch.setattr(gojson, "_FLOAT_TEXT_LIMIT", 3)
    assert [gojson.format_float32(value) for value in (0.5, 0.25, 0.5, 1 / 3, 0.1)] == [
        "0.5", "0.25", "0.5", "0.33333334", "0.1"]
    assert len(gojson._FLOAT_TEXT) <= 3
    with pytest.raises(ValueError):
        gojson.format_float32(float("nan"))
