"""Writes the package ``broker/protocol/responses``: a TypedDict for every response body and each struct in
it, from the schemas in ``broker.protocol.messages``, so a type checker reads a handler's answer against its
message. One module per API family (as ``broker.protocol.messages`` has them, so no file grows past a size
one can read), and the package's ``__init__`` re-exports every class.

    python -m broker.protocol.typed_gen

A unit test compares the checked-in package with this output, so the two never drift apart. Every field of
every version is there, and every field is optional (``total=False``), because one body serves all versions:
which fields it must hold depends on the version it is encoded at, so the codec checks that at run time
(it refuses a key of no version, and a missing field of the encoded version that has no spec default).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

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

PACKAGE = Path(__file__).parent / "responses"

_GENERATED = "generated from ``broker.protocol.messages`` by ``python -m broker.protocol.typed_gen``: do not edit, regenerate."

_PACKAGE_DOC = f'''"""TypedDicts of every response body, one module per API family, all re-exported here;
{_GENERATED}"""
'''

# the names a family module may need, and where they come from
_IMPORTS = (("collections.abc", "Sequence"), ("typing", "TypedDict"), ("broker.protocol.types", "Buffer"),
            ("broker.protocol.types", "Encoded"), ("broker.protocol.types", "FileRegion"))


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


def _families() -> dict[str, list[Message]]:
    """The responses by the module of ``broker.protocol.messages`` that defines them (their API family)."""
    responses = {id(m) for m in messages.RESPONSES.values()}
    families: dict[str, list[Message]] = {}
    for name, module in sorted(vars(messages).items()):
        if isinstance(module, ModuleType) and hasattr(module, "MESSAGES"):
            found = [m for m in module.MESSAGES if id(m) in responses]
            if found:
                families[name] = sorted(found, key=lambda m: m.name)
    return families


def _family_source(family: str, body: str) -> str:
    used = [(module, name) for module, name in _IMPORTS if re.search(rf"\b{name}\b", body)]
    lines = [f'"""TypedDicts of the {family} responses,\n{_GENERATED}"""', "", "from __future__ import annotations", ""]
    previous_group = None
    for module, name in used:
        group = module.startswith("broker")
        if previous_group is not None and group != previous_group:
            lines.append("")
        previous_group = group
        if lines[-1].startswith(f"from {module} import "):
            lines[-1] += f", {name}"
        else:
            lines.append(f"from {module} import {name}")
    return "\n".join(lines) + "\n" + body


def sources() -> dict[str, str]:
    """The text of every module of the package ``broker/protocol/responses``, by file name."""
    files: dict[str, str] = {}
    exported: dict[str, str] = {}  # class name -> its family
    for family, family_messages in _families().items():
        writer = _Writer()
        for message in family_messages:
            writer.class_for(message, message.struct, top=True)
        for name in writer.written:
            if name in exported:
                raise ValueError(f"{name} is a class of both the {exported[name]} and {family} responses")
            exported[name] = family
        files[f"{family}.py"] = _family_source(family, "".join(f"\n\n{text}\n" for text in writer.classes))
    imports = []
    for family in sorted({f for f in exported.values()}):
        names = sorted(n for n, f in exported.items() if f == family)
        imports.append(f"from broker.protocol.responses.{family} import (\n"
                       + "".join(f"    {n},\n" for n in names) + ")\n")
    files["__init__.py"] = (_PACKAGE_DOC + "\n" + "".join(imports) + "\n__all__ = [\n"
                            + "".join(f'    "{n}",\n' for n in sorted(exported)) + "]\n")
    return files


def write(package: Path = PACKAGE) -> None:
    """Regenerate the package: every module rewritten, any module of a family that is gone removed."""
    package.mkdir(exist_ok=True)
    files = sources()
    for stale in package.glob("*.py"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (package / name).write_text(text)


if __name__ == "__main__":
    write()
