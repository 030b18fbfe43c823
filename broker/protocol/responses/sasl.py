"""TypedDicts of the sasl responses,
generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Buffer, Encoded


class AlterUserScramCredentialsResponseResult(TypedDict, total=False):
    user: str
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    results: Sequence[AlterUserScramCredentialsResponseResult | Encoded]


class DescribeUserScramCredentialsResponseCredentialInfo(TypedDict, total=False):
    mechanism: int
    iterations: int


class DescribeUserScramCredentialsResponseResult(TypedDict, total=False):
    user: str
    error_code: int
    error_message: str | None
    credential_infos: Sequence[DescribeUserScramCredentialsResponseCredentialInfo | Encoded]


class DescribeUserScramCredentialsResponse(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: Sequence[DescribeUserScramCredentialsResponseResult | Encoded]


class SaslAuthenticateResponse(TypedDict, total=False):
    error_code: int
    error_message: str | None
    auth_bytes: Buffer
    session_lifetime_ms: int


class SaslHandshakeResponse(TypedDict, total=False):
    error_code: int
    mechanisms: Sequence[str]
