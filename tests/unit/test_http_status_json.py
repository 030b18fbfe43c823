"""The /status and /lag body written straight from the evaluation equals the general encoder's, byte for byte."""

from __future__ import annotations

from array import array
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.evaluator import group
from burrowpy.httpserver import gojson
from burrowpy.httpserver.status_json import evaluation_json, status_json
from burrowpy.protocol import (
    NO_LAG,
    CommitWindow,
    ConsumerGroupStatus,
    ConsumerOffset,
    ConsumerPartition,
    PartitionStatus,
    Status,
)
from tests.examples import examples
from tests.partition_histories import NOW, broker_history

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


# --- written from the evaluation's columns (status_json.evaluation_json) ------------------------------

odd_texts = st.text(max_size=8) | st.sampled_from(["", "<a&b>", "\u2028\u2029", "ünïcødé", "\"q\"\\", "\x00\x1f"])


@st.composite
def group_partitions(draw, intervals, samples, packed, full):
    """One partition as storage hands it over: a packed window (full or not) or a list of commits (lags None
    among them), broker offsets around the newest commit, owners and client ids that need escapes."""
    offset = draw(st.integers(0, 2**40))
    timestamp = (NOW - 3_000) * 1000 + draw(st.integers(0, 600_000))
    stored = intervals if full or draw(st.booleans()) else draw(st.integers(0, intervals))
    commits = []
    for order in range(stored):
        offset = max(0, offset + draw(st.integers(-300, 600)))
        timestamp += draw(st.integers(0, 120_000))
        lag = draw(st.one_of(st.none(), st.integers(0, 5), st.integers(0, 10_000)))
        commits.append(ConsumerOffset(offset, timestamp, timestamp + 7, lag, order))
    window: Any
    if packed:
        slots = array("q")
        for commit in commits:
            slots.extend((*commit[:3], NO_LAG if commit.lag is None else commit.lag, commit.order))
        window = CommitWindow(slots, intervals)
    else:
        window = [None] * (intervals - stored) + commits
    broker, times, current_lag = broker_history(draw, offset, samples)
    return ConsumerPartition(window, broker, current_lag, draw(odd_texts), draw(odd_texts), times,
                             draw(st.none() | st.integers((NOW - 900) * 1000, NOW * 1000)),
                             draw(st.none() | st.integers((NOW - 900) * 1000, (NOW + 5) * 1000)))


@st.composite
def groups(draw):
    intervals = draw(st.integers(1, 10))
    samples = draw(st.integers(0, 4))
    packed = draw(st.booleans())
    full = draw(st.booleans())  # every window full: what the array path takes
    topics = {}
    for name in draw(st.lists(odd_texts, min_size=1, max_size=3, unique=True)):
        count = draw(st.integers(1, 12))
        topics[name] = draw(st.lists(group_partitions(intervals, samples, packed, full), min_size=count, max_size=count))
    return topics


@settings(max_examples=examples(400, 80), deadline=None)
@given(groups(), st.sampled_from([1, 10**9]), st.lists(st.integers(0, 4_000), min_size=1, max_size=3),
       st.sampled_from([0, 5]), st.sampled_from([0.0, 30.0]), st.booleans())
def test_the_columns_writer_writes_what_the_general_encoder_writes(topics, columns_from, laters, allowed,
                                                                   max_lag_seconds, status_first):
    """Both ways through the rules (all partitions at once, or one by one), several evaluations of one basis (the
    pieces kept with it are written again at each), /status and /lag in either order."""
    saved = group.COLUMNS_FROM
    group.COLUMNS_FROM = columns_from
    try:
        basis = group.group_basis(topics, allowed)
    finally:
        group.COLUMNS_FROM = saved
    for later in laters:
        evaluation = basis.at("cluster <&>", "grøup\u2028", NOW + later + 0.3719, max_lag_seconds)
        for showall in (False, True) if status_first else (True, False):
            assert evaluation_json(evaluation, showall) == gojson.dumps(evaluation.result(showall).to_json())


def test_the_columns_writer_writes_a_group_not_found_and_one_topic_in_ten_partitions():
    evaluation = group.not_found("c", "g")
    assert evaluation_json(evaluation, False) == gojson.dumps(evaluation.result(False).to_json())
    window = array("q")
    for order in range(10):
        window.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 5000 - order * 100, order))
    parts = [ConsumerPartition(CommitWindow(window, 10), [6000], 4100, f"host-{n}", "c", [NOW * 1000])
             for n in range(60)]
    evaluation = group.assess_group("c", "g", {"t": parts}, NOW + 0.5)
    assert evaluation.topics[0].fields.encoded is None
    for showall in (False, True):
        assert evaluation_json(evaluation, showall) == gojson.dumps(evaluation.result(showall).to_json())
    assert evaluation.topics[0].fields.encoded is not None  # kept with the basis for its next evaluations


def test_an_answer_listing_few_of_a_topics_partitions_keeps_no_pieces():
    """/status of a healthy group lists none but maxlag: written from that one object, nothing made for the other
    partitions; /lag lists them all and keeps the pieces for the next evaluations."""
    window = array("q")
    for order in range(10):
        window.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 0, order))
    parts = [ConsumerPartition(CommitWindow(window, 10), [1900 + n], n, f"host-{n}", "c", [NOW * 1000])
             for n in range(60)]
    evaluation = group.assess_group("c", "g", {"t": parts}, NOW + 0.5)
    assert evaluation.status == Status.OK and evaluation.maxlag_at is not None
    assert evaluation_json(evaluation, False) == gojson.dumps(evaluation.result(False).to_json())
    assert evaluation.topics[0].fields.encoded is None
    assert evaluation_json(evaluation, True) == gojson.dumps(evaluation.result(True).to_json())
    assert evaluation.topics[0].fields.encoded is not None
