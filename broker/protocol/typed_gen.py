"""Writes ``broker/protocol/responses.py``: a TypedDict for every response body and each struct in it, from
the schemas in ``broker.protocol.messages``, so a type checker reads a handler's answer against its message.

    python -m broker.protocol.typed_gen > broker/protocol/responses.py

A unit test compares the checked-in module with this output, so the two never drift apart. Every field is
optional (``total=False``) because the codec takes a missing key as the field's default, and every field of
every version is there because one body serves all versions; the codec refuses any other key at run time.
"""

from __future__ import annotations

from broker.protocol import messages
from broker.protocol.schema import Array, Field, Message, Struct, Versions

_PRIMITIVES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "Buffer",
    "records": "Buffer | FileRegion",
    "uuid": "bytes",
}

_HEADER = '''"""TypedDicts of every response body, generated from ``broker.protocol.messages`` by
``python -m broker.protocol.typed_gen``: do not edit, regenerate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from broker.protocol.types import Buffer, Encoded, FileRegion
'''


class _Writer:
    def __init__(self) -> None:
        self.classes: list[str] = []
        # class name -> the struct it was written for: a struct reached twice (the same Kafka struct in two
        # places of one message) is written once
        self.written: dict[str, Struct] = {}

    def class_for(self, message: Message, struct_: Struct, top: bool) -> str:
        name = struct_.name
        if not top and not name.startswith(message.name):
            # TopicProduceResponse of ProduceResponse: ProduceResponseTopicProduceResponse; but
            # AddPartitionsToTxnTopicResult of AddPartitionsToTxnResponse: AddPartitionsToTxnResponseTopicResult
            base = message.name.removesuffix("Response")
            rest = name[len(base):]
            name = message.name + (rest if name.startswith(base) and rest[:1].isupper() else name)
        base, suffix = name, 2
        while name in self.written and self.written[name] != struct_:
            name, suffix = f"{base}{suffix}", suffix + 1
        if name in self.written:
            return name
        self.written[name] = struct_
        lines = [f"class {name}(TypedDict, total=False):"]
        lines += [f"    {f.name}: {self.annotation(message, f)}" for f in struct_.fields] or ["    pass"]
        self.classes.append("\n".join(lines))
        return name

    def annotation(self, message: Message, f: Field) -> str:
        type_ = f.type
        if isinstance(type_, Struct):
            text = self.class_for(message, type_, top=False)
        elif isinstance(type_, Array):
            element = type_.element
            if isinstance(element, Struct):
                # an element may come already encoded (Metadata's topics)
                text = f"Sequence[{self.class_for(message, element, top=False)} | Encoded]"
            else:
                text = f"Sequence[{_PRIMITIVES[element]}]"
        else:
            text = _PRIMITIVES[type_]
        assert isinstance(f.nullable, Versions)  # Field.__post_init__ parsed it
        return text if f.nullable.is_empty() else f"{text} | None"


def source() -> str:
    """The text of ``broker/protocol/responses.py``."""
    writer = _Writer()
    for message in sorted(messages.RESPONSES.values(), key=lambda m: m.name):
        writer.class_for(message, message.struct, top=True)
    return _HEADER + "".join(f"\n\n{text}\n" for text in writer.classes)


if __name__ == "__main__":
    print(source(), end="")
