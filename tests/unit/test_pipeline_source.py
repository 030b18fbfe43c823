"""Pure parts of the broker-offsets source and the offsets-topic decoder: options, and
`__consumer_offsets` records turned into history rows."""

from __future__ import annotations

import pytest

from broker.protocol.api import encode_struct
from burrowpy.coordinators.offsets_topic import GroupFilter
from burrowpy.pipeline.offsets_decoder import broker_offset_row, commit_rows, decode_arrow_batches
from burrowpy.pipeline.source import KafkaSourceError, client_config, parse_topics

# --- options ------------------------------------------------------------------------------------------


def test_client_config_takes_every_kafka_option():
    options = {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.client.id": "x", "subscribe": "t"}
    assert client_config(options) == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "x"}
    with pytest.raises(KafkaSourceError, match="bootstrap.servers"):
        client_config({"subscribe": "t"})


def test_parse_topics():
    assert parse_topics({"subscribe": " a, b ,,c"}) == ["a", "b", "c"]
    assert parse_topics({}) == []


# --- the offsets topic --------------------------------------------------------------------------------


def offset_record(
    group: str, topic: str, partition: int, offset: int, commit_ms: int, value_version: int = 3
) -> tuple[bytes, bytes]:
    key = encode_struct("OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": partition})
    value = encode_struct(
        "OffsetCommitValue",
        value_version,
        {
            "offset": offset,
            "leader_epoch": 0,
            "metadata": "",
            "commit_timestamp": commit_ms,
            "expire_timestamp": -1,
        },
    )
    return key, value


def group_record(group: str) -> tuple[bytes, bytes]:
    key = encode_struct("GroupMetadataKey", 2, {"group": group})
    value = encode_struct(
        "GroupMetadataValue",
        3,
        {
            "protocol_type": "consumer",
            "generation": 1,
            "protocol": "range",
            "leader": "m",
            "current_state_timestamp": 0,
            "members": [],
        },
    )
    return key, value


def test_commit_rows_from_offsets_topic_records():
    k1, v1 = offset_record("g", "t", 2, 40, 1_700_000_000_000)
    k2, v2 = offset_record("g", "t", 2, 41, 1_700_000_001_000, value_version=1)
    gk, gv = group_record("g")
    records = [
        (k1, v1, 10),
        (gk, gv, 11),
        (k1, None, 12),
        (b"\x00\x09junk", b"x", 13),
        (None, b"x", 14),
        (k2, v2, 15),
    ]
    assert list(commit_rows("c", records)) == [
        ("commit", "c", "g", "t", 2, 40, 1_700_000_000_000, 10),
        ("commit", "c", "g", "t", 2, 41, 1_700_000_001_000, 15),
    ]


def test_commit_rows_apply_the_monitor_group_filter():
    import re

    records = [(*offset_record("keep-me", "t", 0, 1, 1), 1), (*offset_record("drop-me", "t", 0, 1, 1), 2)]
    rows = list(commit_rows("c", records, GroupFilter(deny=re.compile("^drop"))))
    assert [row[2] for row in rows] == ["keep-me"]


def test_decode_arrow_batches_gives_history_batches():
    import pyarrow as pa

    from burrowpy.pipeline.history import history_arrow_schema

    key, value = offset_record("g", "t", 1, 7, 5_000)
    batch = pa.RecordBatch.from_pydict({"key": [key, b"\x00\x05??"], "value": [value, b""], "offset": [3, 4]})
    empty = pa.RecordBatch.from_pydict({"key": [b"\x00\x05??"], "value": [b""], "offset": [5]})
    [decoded] = list(decode_arrow_batches("c", [batch, empty]))
    assert decoded.schema.equals(history_arrow_schema())
    assert decoded.to_pylist() == [
        {
            "kind": "commit",
            "cluster": "c",
            "group": "g",
            "topic": "t",
            "partition": 1,
            "offset": 7,
            "timestamp": 5_000,
            "order": 3,
        }
    ]


def test_broker_offset_row():
    assert broker_offset_row("c", "t", 3, 99, 1234) == ("broker", "c", None, "t", 3, 99, 1234, None)
