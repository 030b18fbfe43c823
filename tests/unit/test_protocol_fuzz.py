"""decode_request on hostile input raises only ProtocolError subclasses, for every API."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import body_strategy

from broker.protocol import messages
from broker.protocol.api import SCHEMA_VERSIONS, DecodeError, ProtocolError, decode_request, encode_request

FUZZ_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
API_KEYS = sorted(SCHEMA_VERSIONS)


@st.composite
def valid_frames(draw, api_key: int) -> bytes:
    low, high = SCHEMA_VERSIONS[api_key]
    version = draw(st.integers(low, high), label="version")
    body = draw(body_strategy(messages.REQUESTS[api_key], version), label="body")
    return encode_request(api_key, version, 1, "fuzz", body)[4:]


def _decode_or_protocol_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError:
        pass


@FUZZ_SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes(frame):
    _decode_or_protocol_error(frame)


@FUZZ_SETTINGS
@given(api_key=st.sampled_from(API_KEYS), version=st.integers(-2, 20), tail=st.binary(max_size=120))
def test_random_bodies_behind_a_plausible_header(api_key, version, tail):
    header = (
        api_key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + b"\x00\x00\x00\x01\x00\x01c"
    )
    _decode_or_protocol_error(header + tail)


@pytest.mark.parametrize("api_key", API_KEYS)
@FUZZ_SETTINGS
@given(data=st.data())
def test_truncated_valid_frames_are_decode_errors(api_key, data):
    frame = data.draw(valid_frames(api_key))
    cut = data.draw(st.integers(0, len(frame) - 1), label="cut")
    with pytest.raises(DecodeError):
        decode_request(frame[:cut])


@pytest.mark.parametrize("api_key", API_KEYS)
@FUZZ_SETTINGS
@given(data=st.data())
def test_single_byte_mutations_of_valid_frames(api_key, data):
    frame = bytearray(data.draw(valid_frames(api_key)))
    index = data.draw(st.integers(0, len(frame) - 1), label="index")
    frame[index] = data.draw(st.integers(0, 255).filter(lambda b: b != frame[index]), label="byte")
    _decode_or_protocol_error(bytes(frame))
