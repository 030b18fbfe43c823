"""The cluster module's hand-written ListOffsets (burrowpy/coordinators/list_offsets.py) against the broker's
schema codec: the same request bytes at versions 1 to 5, and the same answers read from any frame the codec
encodes; a frame cut short or with bytes after it is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.api import decode_request, encode_request, encode_response
from burrowpy.coordinators.list_offsets import (
    LatestOffsetsRequest,
    TopicOffsets,
    decode_latest_offsets,
    encode_latest_offsets,
    latest_offsets_version,
)

LIST_OFFSETS = 2
VERSIONS = st.integers(1, 5)
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
TOPICS = st.lists(st.tuples(NAMES, st.lists(st.integers(0, 2**31 - 1), max_size=20, unique=True)),
                  max_size=6, unique_by=lambda topic: topic[0])


def codec_request(version: int, correlation_id: int, client_id: str | None,
                  topics: list[tuple[str, list[int]]]) -> bytes:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": name, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                       "timestamp": -1, "max_num_offsets": 1} for p in partitions]}
                       for name, partitions in topics]}
    return encode_request(LIST_OFFSETS, version, correlation_id, client_id, body)[4:]


@settings(max_examples=200, deadline=None)
@given(version=VERSIONS, correlation_id=st.integers(-2**31, 2**31 - 1),
       client_id=st.none() | st.text(max_size=10), topics=TOPICS)
def test_requests_are_the_codecs_bytes(version, correlation_id, client_id, topics):
    ours = encode_latest_offsets(version, correlation_id, client_id, topics)
    assert ours == codec_request(version, correlation_id, client_id, topics)
    header, body = decode_request(ours)
    assert (header.api_version, header.correlation_id, header.client_id) == (version, correlation_id, client_id)
    # the kept body behind a new header: the same frame as one encoded anew
    request = LatestOffsetsRequest(topics)
    request.frame(version, 1, client_id)
    assert request.frame(version, correlation_id, client_id) == ours


ANSWERS = st.lists(st.tuples(NAMES, st.lists(st.tuples(
    st.integers(0, 2**31 - 1), st.sampled_from([0, 0, 0, 3, 6]), st.integers(-1, 2**63 - 1),
    st.integers(-2**31, 2**31 - 1)), max_size=20, unique_by=lambda p: p[0])),
    max_size=6, unique_by=lambda topic: topic[0])


def codec_answer(version: int, topics: list) -> bytes:
    body = {"throttle_time_ms": 5, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "error_code": error, "timestamp": -1, "offset": offset,
                                       "leader_epoch": epoch, "old_style_offsets": []}
                                      for p, error, offset, epoch in partitions]}
        for name, partitions in topics]}
    return encode_response(LIST_OFFSETS, version, 99, body)[4:]


@settings(max_examples=200, deadline=None)
@given(version=VERSIONS, topics=ANSWERS)
def test_answers_read_as_the_codec_wrote_them(version, topics):
    frame = codec_answer(version, topics)
    expected = [TopicOffsets(name, [p for p, error, _, _ in partitions if not error],
                             [offset for _, error, offset, _ in partitions if not error],
                             [(p, error) for p, error, _, _ in partitions if error])
                for name, partitions in topics]
    assert list(decode_latest_offsets(version, frame)) == expected


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_frame_cut_short_or_too_long_is_refused(version):
    frame = codec_answer(version, [("orders", [(0, 0, 10, 1), (1, 0, 20, 1)])])
    assert [t.offsets for t in decode_latest_offsets(version, frame)] == [[10, 20]]
    for cut in range(4, len(frame)):
        with pytest.raises(ValueError):
            list(decode_latest_offsets(version, frame[:cut]))
    with pytest.raises(ValueError, match="after"):
        list(decode_latest_offsets(version, frame + b"\0"))


def test_the_version_is_the_highest_both_sides_know():
    assert latest_offsets_version({LIST_OFFSETS: (0, 7)}) == 5
    assert latest_offsets_version({LIST_OFFSETS: (1, 3)}) == 3
    assert latest_offsets_version({LIST_OFFSETS: (0, 0)}) is None  # Kafka before 0.10.1: aiokafka's request
    assert latest_offsets_version({}) is None


@settings(max_examples=200, deadline=None)
@given(version=VERSIONS, answers=st.lists(ANSWERS, min_size=1, max_size=4), data=st.data())
def test_answers_read_against_the_last_ones_read_as_anew(version, answers, data):
    """A request's memo (what the last answer holding each topic said of it): a topic whose bytes are the ones
    read last is the TopicOffsets read then, marked same_as_last; every answer reads as it reads without a memo.
    Later answers repeat some topics of earlier ones, as refreshes of a fleet at rest do."""
    memo: dict = {}
    last: dict = {}
    for index, topics in enumerate(answers):
        if index:  # some topics as the previous answer had them, byte for byte
            kept = data.draw(st.lists(st.sampled_from(answers[index - 1]), unique_by=lambda t: t[0]) if answers[index - 1]
                             else st.just([]))
            # and some with one partition's offset moved (the same topic, other bytes)
            kept = [(name, [(p, error, offset + 1 if offset < 2**63 - 1 else 0, epoch) if at == 0 else (p, error, offset, epoch)
                            for at, (p, error, offset, epoch) in enumerate(partitions)])
                    if data.draw(st.booleans()) else (name, partitions) for name, partitions in kept]
            names = {name for name, _ in kept}
            topics = kept + [topic for topic in topics if topic[0] not in names]
        frame = codec_answer(version, topics)
        read = list(decode_latest_offsets(version, frame, memo))
        anew = list(decode_latest_offsets(version, frame))
        assert [(t.topic, t.partitions, t.offsets, t.errors) for t in read] == \
            [(t.topic, t.partitions, t.offsets, t.errors) for t in anew]
        # what the frame holds of a topic (the leader epoch from version 4 on)
        held = {name: [(p, error, offset, epoch if version >= 4 else None) for p, error, offset, epoch in partitions]
                for name, partitions in topics}
        for (name, _), found in zip(topics, read, strict=True):
            assert found.same_as_last == (last.get(name) == held[name])
        last.update(held)
