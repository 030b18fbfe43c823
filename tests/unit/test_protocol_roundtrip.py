"""Every schema at every version: encode -> decode gives the same values, re-encoding gives the same bytes.

Bodies are drawn from strategies generated from the schemas themselves (protocol_strategies.py), and go
through the public entry points, so headers and framing are covered too.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from protocol_strategies import (
    ALL_API_SCHEMAS,
    body_strategy,
    every_version,
    with_defaults,
)

from broker.protocol import messages
from broker.protocol.api import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    decode_struct,
    encode_request,
    encode_response,
    encode_struct,
)

ROUND_TRIP_SETTINGS = settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
_UNSUPPORTED_VERSION = 35

API_CASES = every_version(ALL_API_SCHEMAS)
DATA_CASES = every_version(list(messages.DATA_STRUCTS.values()))


def _case_id(case) -> str:
    message, version = case
    return f"{message.name}-v{version}"


def _without_size(frame: bytes) -> bytes:
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    return frame[4:]


@pytest.mark.parametrize("case", API_CASES, ids=[_case_id(c) for c in API_CASES])
@ROUND_TRIP_SETTINGS
@given(data=st.data())
def test_api_message_round_trip(case, data):
    message, version = case
    body = data.draw(body_strategy(message, version), label="body")
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1), label="correlation_id")
    expected = with_defaults(message.struct, version, body)
    if message.kind == "request":
        client_id = data.draw(st.none() | st.text(max_size=5), label="client_id")
        frame = encode_request(message.api_key, version, correlation_id, client_id, body)
        header, decoded = decode_request(_without_size(frame))
        assert header == RequestHeader(message.api_key, version, correlation_id, client_id)
        assert decoded == expected
        assert encode_request(message.api_key, version, correlation_id, client_id, decoded) == frame
    else:
        # An error-35 ApiVersions response is always read as v0 (tested in test_protocol_golden.py).
        assume(
            not (
                message.api_key == ApiKey.API_VERSIONS
                and version > 0
                and body["error_code"] == _UNSUPPORTED_VERSION
            )
        )
        frame = encode_response(message.api_key, version, correlation_id, body)
        got_correlation_id, decoded = decode_response(message.api_key, version, _without_size(frame))
        assert got_correlation_id == correlation_id
        assert decoded == expected
        assert encode_response(message.api_key, version, correlation_id, decoded) == frame


@pytest.mark.parametrize("case", DATA_CASES, ids=[_case_id(c) for c in DATA_CASES])
@ROUND_TRIP_SETTINGS
@given(data=st.data())
def test_data_struct_round_trip(case, data):
    message, version = case
    body = data.draw(body_strategy(message, version), label="body")
    encoded = encode_struct(message.name, version, body)
    assert int.from_bytes(encoded[:2], "big") == version
    decoded_version, decoded = decode_struct(message.name, encoded)
    assert decoded_version == version
    assert decoded == with_defaults(message.struct, version, body)
    assert encode_struct(message.name, version, decoded) == encoded
