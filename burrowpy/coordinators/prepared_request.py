"""What aiokafka asks of a request it sends (its ``prepare`` interface), for requests that encode their own
header with their body and take the answer frame as it is: :mod:`~burrowpy.coordinators.codec_request`'s and
:mod:`~burrowpy.coordinators.list_offsets`'.

aiokafka builds a header (``build_request_header``), writes it before ``encode()``'s bytes and the size prefix
before both, then hands the answer to ``parse_response_header`` and to ``RESPONSE_TYPE.decode``.
"""

from __future__ import annotations

import io
import struct

CORRELATION_ID = struct.Struct(">i")  # the first field of every response header version


class EmptyHeader:
    """What aiokafka writes before the body: nothing, the header is encoded with the body."""

    @staticmethod
    def encode() -> bytes:
        return b""


class ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id


class PreparedRequest:
    """One request at one version; subclasses encode the body and decode the answer."""

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.api_version = version
        self._correlation_id = 0
        self._client_id: str | None = None
        self._frame = b""

    @property
    def RESPONSE_TYPE(self) -> PreparedRequest:  # noqa: N802 - aiokafka's name
        """This object: aiokafka decodes the answer through ``request.RESPONSE_TYPE.decode``. A property, not an
        attribute set to ``self``, which made every request a reference cycle that only the collector frees (with
        its body and the answer's frame): under ingest they waited for a pass of the older generations, or with
        the young collector's freezing for the next refreeze."""
        return self

    def build_request_header(self, correlation_id: int, client_id: str | None) -> EmptyHeader:
        self._correlation_id, self._client_id = correlation_id, client_id
        return EmptyHeader()

    def parse_response_header(self, response: io.BytesIO) -> ResponseHeader:
        """Keep the answer's frame, for ``decode`` to read (off the loop, or a topic at a time); its correlation
        id is the first field of every header version."""
        self._frame = response.getvalue()
        return ResponseHeader(CORRELATION_ID.unpack_from(self._frame)[0])
