"""Hypothesis strategies generated from the codec's own schemas, shared by the protocol tests.

``body_strategy(message, version)`` draws bodies holding exactly the fields that exist at that version;
``with_defaults`` fills in what decoding adds for the others.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from broker.protocol import messages
from broker.protocol.schema import Array, Field, Message, Struct

ALL_API_SCHEMAS: list[Message] = [*messages.REQUESTS.values(), *messages.RESPONSES.values()]
ALL_SCHEMAS: list[Message] = [*ALL_API_SCHEMAS, *messages.DATA_STRUCTS.values()]


def every_version(schemas: list[Message]) -> list[tuple[Message, int]]:
    return [(m, v) for m in schemas for v in range(m.versions.low, m.versions.high + 1)]


_INTEGER_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_MAX_ELEMENTS = 2


def _primitive(type_name: str) -> st.SearchStrategy:
    if type_name in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[type_name]
        return st.integers(low, high)
    return {
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "string": _TEXT,
        "bytes": st.binary(max_size=12),
        "records": st.binary(max_size=12),
        "uuid": st.binary(min_size=16, max_size=16),
    }[type_name]


def _type_strategy(type_: Any, version: int) -> st.SearchStrategy:
    if isinstance(type_, Struct):
        return struct_strategy(type_, version)
    if isinstance(type_, Array):
        return st.lists(_type_strategy(type_.element, version), max_size=_MAX_ELEMENTS)
    return _primitive(type_)


def field_strategy(field: Field, version: int) -> st.SearchStrategy:
    values = _type_strategy(field.type, version)
    return st.none() | values if version in field.nullable else values


def struct_strategy(struct: Struct, version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {f.name: field_strategy(f, version) for f in struct.fields if version in f.versions}
    )


def body_strategy(message: Message, version: int) -> st.SearchStrategy:
    return struct_strategy(message.struct, version)


def with_defaults(struct: Struct, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """What decoding ``body`` must give: every field, defaults for those absent at ``version``."""
    full = {}
    for f in struct.fields:
        if version not in f.versions:
            full[f.name] = f.default_value()
            continue
        value = body[f.name]
        if isinstance(f.type, Struct) and value is not None:
            value = with_defaults(f.type, version, value)
        elif isinstance(f.type, Array) and isinstance(f.type.element, Struct) and value is not None:
            value = [with_defaults(f.type.element, version, item) for item in value]
        full[f.name] = value
    return full
