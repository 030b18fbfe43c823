"""The cluster module's own aiokafka requests (codec_request's and ListOffsets') are freed by reference counting
once answered: no reference cycle for the collector to find (each held its body, or its topics, and the answer's
frame until a pass of the older generations came, or with the daemon's young collector until the next refreeze)."""

from __future__ import annotations

import gc
import io
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from broker.protocol.api import ApiKey, encode_response
from burrowpy.coordinators.codec_request import CodecRequest
from burrowpy.coordinators.list_offsets import LatestOffsetsRequest


@pytest.fixture(autouse=True)
def no_collector() -> Iterator[None]:
    """Only reference counting frees anything while a test runs."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def answered(prepared: Any, frame: bytes) -> Any:
    """As aiokafka's connection uses a prepared request: encoded, the answer's header parsed, decoded through
    ``RESPONSE_TYPE``."""
    prepared.build_request_header(7, "burrowpy")
    prepared.encode()
    response = io.BytesIO(frame)
    header = prepared.parse_response_header(response)
    assert header.correlation_id == 7
    return prepared.RESPONSE_TYPE.decode(response)


@pytest.mark.parametrize("decode_later", [False, True])
def test_a_codec_request_answered_is_freed_by_reference_counting(decode_later: bool) -> None:
    body = {"resources": [{"resource_type": 2, "resource_name": f"topic-{index}",
                           "configuration_keys": ["min.insync.replicas"]} for index in range(3)]}
    prepared = CodecRequest(ApiKey.DESCRIBE_CONFIGS, body, decode_later=decode_later).prepare(
        {ApiKey.DESCRIBE_CONFIGS: (0, 4)})
    frame = encode_response(ApiKey.DESCRIBE_CONFIGS, prepared.api_version, 7,
                            {"throttle_time_ms": 0, "results": []})[4:]
    answered(prepared, frame)
    gone = weakref.ref(prepared)

    del prepared

    assert gone() is None


def test_a_list_offsets_request_answered_is_freed_by_reference_counting() -> None:
    prepared = LatestOffsetsRequest([("topic", [0, 1, 2])]).prepare({2: (0, 5)})
    frame = encode_response(2, prepared.api_version, 7, {"throttle_time_ms": 0, "topics": []})[4:]
    answered(prepared, frame)
    gone = weakref.ref(prepared)

    del prepared

    assert gone() is None
