"""Kafka message schemas as data, and their compiler into per-version encode/decode functions.

A schema says, once, what Kafka's JSON message specs say: each field's name, type, the versions it exists
in, the versions in which it may be null, its default, and its tag when it is a tagged field; the message
says which versions exist and from which version on the encoding is flexible (KIP-482). Schemas are built
from :class:`Message`, :class:`Struct`, :class:`Array` and :class:`Field`; version ranges are written as
in Kafka's specs: ``"3+"``, ``"0-5"``, ``"2"`` or ``"none"``.

Each (message, version) is compiled once, on first use, into two plain Python functions generated from
the schema: no per-field interpretation happens when a frame is encoded or decoded. Runs of adjacent
fixed-width fields become one ``struct`` call; nested structs get their own functions.

Values are dicts keyed by snake_case field names (see ``broker.protocol.api`` for the naming rule).
Decoding yields every field of the schema: fields that do not exist at the decoded version get their
default, recursively, so code reading a body need not know which version it came from. Encoding ignores
keys of fields that exist in other versions of the message but not the encoded one (so one body can serve
every version). A key that is a field of no version of that struct is a bug in the code building the body,
and encoding raises :class:`UnknownFieldError` for it. In a response or a data struct (what the broker
answers and writes), a missing key takes the default only where Kafka's spec gives one (``default=``) or
the field is tagged (a tagged field at its default is not sent at all); any other missing field of the
encoded version raises :class:`MissingFieldError`. A request takes the default for any missing key.
"""

from __future__ import annotations

import linecache
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.protocol import types

PRIMITIVE_TYPES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "bool",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)
_NULLABLE_PRIMITIVES = frozenset({"string", "bytes", "records"})
_BLOB_TYPES = frozenset({"bytes", "records"})
_INTEGER_RANGES = {
    "int8": (-(1 << 7), 1 << 7),
    "int16": (-(1 << 15), 1 << 15),
    "int32": (-(1 << 31), 1 << 31),
    "int64": (-(1 << 63), 1 << 63),
    "uint16": (0, 1 << 16),
    "uint32": (0, 1 << 32),
}


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``high`` None means "and every later version"."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def is_empty(self) -> bool:
        return self.high is not None and self.high < self.low

    def covers(self, other: Versions) -> bool:
        """Whether every version in ``other`` is in this range."""
        if other.is_empty():
            return True
        if self.is_empty() or other.low < self.low:
            return False
        if self.high is None:
            return True
        return other.high is not None and other.high <= self.high

    def __str__(self) -> str:
        if self.is_empty():
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(0, -1)


def _versions(value: Versions | str) -> Versions:
    return value if isinstance(value, Versions) else Versions.parse(value)


_UNSET: Any = object()


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def default_value(self) -> dict[str, Any]:
        return {f.name: f.default_value() for f in self.fields}


@dataclass(frozen=True)
class Array:
    element: str | Struct


FieldType = str | Array | Struct


@dataclass(frozen=True)
class Field:
    """One field of a struct.

    ``nullable``: the versions in which the value may be None (Kafka's nullableVersions).
    ``default``: the JSON spec's default; without one the default is None when the field is nullable in
    all its versions, else 0 / 0.0 / False / "" / b"" / zero UUID / [] / a struct of defaults.
    ``tag``: set for tagged fields (they exist only in flexible versions).
    ``compact``: for string/bytes fields, the versions using compact lengths when they differ from the
    message's flexible versions (the request header's client_id is never compact).
    """

    name: str
    type: FieldType
    versions: Versions
    nullable: Versions = NO_VERSIONS
    default: Any = _UNSET
    tag: int | None = None
    compact: Versions | None = None

    if TYPE_CHECKING:
        # Schemas are written with Kafka's version text ("3+"); __post_init__ parses it, so the instance
        # only ever holds Versions.
        def __init__(self, name: str, type: FieldType, versions: Versions | str,
                     nullable: Versions | str = NO_VERSIONS, default: Any = _UNSET, tag: int | None = None,
                     compact: Versions | str | None = None) -> None: ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", _versions(self.versions))
        object.__setattr__(self, "nullable", _versions(self.nullable))
        if self.compact is not None:
            object.__setattr__(self, "compact", _versions(self.compact))

    def default_value(self) -> Any:
        if self.default is not _UNSET:
            return self.default
        if self.nullable.covers(self.versions):
            return None
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return self.type.default_value()
        return _primitive_zero(self.type)


def _primitive_zero(type_name: str) -> Any:
    if type_name in _INTEGER_RANGES:
        return 0
    return {
        "float64": 0.0,
        "bool": False,
        "string": "",
        "bytes": b"",
        "records": b"",
        "uuid": types.ZERO_UUID,
    }[type_name]


@dataclass(frozen=True)
class Message:
    """A top-level schema: an API request or response body, a header, or a versioned data struct.

    ``kind`` is "request", "response", "header" or "data"; requests and responses carry their api_key.
    """

    name: str
    kind: str
    versions: Versions
    flexible: Versions
    fields: tuple[Field, ...]
    api_key: int | None = None
    _compiled: dict[int, CompiledVersion] = field(default_factory=dict, init=False, repr=False, compare=False)

    if TYPE_CHECKING:
        # As Field's: version text in, parsed Versions held.
        def __init__(self, name: str, kind: str, versions: Versions | str, flexible: Versions | str,
                     fields: tuple[Field, ...] | list[Field], api_key: int | None = None) -> None: ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", _versions(self.versions))
        object.__setattr__(self, "flexible", _versions(self.flexible))
        object.__setattr__(self, "fields", tuple(self.fields))
        _validate(self)

    @property
    def struct(self) -> Struct:
        return Struct(self.name, self.fields)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def version_range(self) -> tuple[int, int]:
        assert self.versions.high is not None
        return self.versions.low, self.versions.high

    def compiled(self, version: int) -> CompiledVersion:
        """The encode/decode functions of one version, compiled on first use."""
        compiled = self._compiled.get(version)
        if compiled is None:
            if version not in self.versions:
                raise ValueError(f"{self.name} has no version {version} (versions {self.versions})")
            compiled = self._compiled[version] = _compile(self, version)
        return compiled


# ----- validation -------------------------------------------------------------------------------


class SchemaError(ValueError):
    """A schema that the codec cannot compile; raised when the schema is built, at import time."""


_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def _validate(message: Message) -> None:
    if message.kind not in ("request", "response", "header", "data"):
        raise SchemaError(f"{message.name}: unknown kind {message.kind!r}")
    if (message.api_key is None) == (message.kind in ("request", "response")):
        raise SchemaError(f"{message.name}: requests and responses, and only they, have an api_key")
    if message.versions.is_empty() or message.versions.high is None:
        raise SchemaError(f"{message.name}: versions must be a closed range, not {message.versions}")
    _validate_struct(message, message.struct, message.name)


def _validate_struct(message: Message, struct_: Struct, path: str) -> None:
    names: set[str] = set()
    tags: set[int] = set()
    for f in struct_.fields:
        where = f"{path}.{f.name}"
        if not _FIELD_NAME.match(f.name) or f.name in names:
            raise SchemaError(f"{where}: field names must be unique snake_case identifiers")
        names.add(f.name)
        if f.tag is not None:
            if f.tag in tags or f.tag < 0:
                raise SchemaError(f"{where}: duplicate or negative tag {f.tag}")
            tags.add(f.tag)
            low, high = message.version_range()
            for version in range(low, high + 1):
                if version in f.versions and not message.is_flexible(version):
                    raise SchemaError(f"{where}: tagged field exists in non-flexible version {version}")
        if f.compact is not None and f.type not in ("string", "bytes"):
            raise SchemaError(f"{where}: only string and bytes fields can override compactness")
        if isinstance(f.type, Struct):
            _validate_struct(message, f.type, where)
        elif isinstance(f.type, Array):
            element = f.type.element
            if isinstance(element, Struct):
                _validate_struct(message, element, where)
            elif element not in PRIMITIVE_TYPES or element == "records":
                raise SchemaError(f"{where}: arrays of {element!r} are not a Kafka type")
        elif f.type not in PRIMITIVE_TYPES:
            raise SchemaError(f"{where}: unknown type {f.type!r}")
        elif not f.nullable.is_empty() and f.type not in _NULLABLE_PRIMITIVES:
            raise SchemaError(f"{where}: {f.type} cannot be nullable")
        if f.default is not _UNSET:
            _validate_default(f, where)


def _validate_default(f: Field, where: str) -> None:
    value = f.default
    if value is None:
        if f.nullable.is_empty():
            raise SchemaError(f"{where}: default null on a field that is never nullable")
        return
    if not isinstance(f.type, str):
        raise SchemaError(f"{where}: only primitive fields take an explicit default")
    if f.type in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[f.type]
        ok = type(value) is int and low <= value < high
    elif f.type == "bool":
        ok = type(value) is bool
    elif f.type == "float64":
        ok = type(value) is float
    elif f.type == "string":
        ok = type(value) is str
    else:
        ok = False
    if not ok:
        raise SchemaError(f"{where}: default {value!r} does not fit type {f.type}")


# ----- compiler ---------------------------------------------------------------------------------


class FieldError(types.EncodeError):
    """A body whose keys do not match its struct's fields: a bug in the code building it, which must not go
    out with a default in place of the value meant."""

    def __init__(self, text: str, message: str, version: int, path: str, names: list[str]) -> None:
        super().__init__(text)
        self.message = message
        self.version = version
        self.path = path
        self.names = names


class UnknownFieldError(FieldError):
    """A body with a key that is a field of no version of its struct: a misspelled or misplaced field,
    which encoding would otherwise leave out and send the field's default in its place."""

    def __init__(self, message: str, version: int, path: str, unknown: list[str], known: frozenset[str]) -> None:
        super().__init__(
            f"{message} v{version}: unknown field{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} in {path} (its fields: {', '.join(sorted(known)) or 'none'})",
            message, version, path, unknown)
        self.unknown = unknown


class MissingFieldError(FieldError):
    """A body without a field that the encoded version has and that Kafka's spec gives no default: zero, the
    empty string or an empty list in its place would be a guess (an error_code of 0 says "no error")."""

    def __init__(self, message: str, version: int, path: str, missing: list[str]) -> None:
        super().__init__(
            f"{message} v{version}: missing field{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(repr, missing))} in {path} (required at this version: the spec gives no default)",
            message, version, path, missing)
        self.missing = missing


def _unknown_fields(value: Mapping[str, Any], known: frozenset[str], message: str, version: int,
                    path: str) -> UnknownFieldError:
    """The error for a struct value with keys outside ``known`` (called by generated encoders only once
    their fast subset check has failed)."""
    unknown = sorted(str(key) for key in value if key not in known)
    return UnknownFieldError(message, version, path, unknown, known)


def _missing_fields(value: Mapping[str, Any], required: tuple[str, ...], message: str, version: int,
                    path: str) -> MissingFieldError:
    """The error for a struct value without some of ``required`` (called by generated encoders once a
    subscript has failed)."""
    return MissingFieldError(message, version, path, [name for name in required if name not in value])


Encoder = Callable[[list[types.Chunk], Mapping[str, Any]], None]
Decoder = Callable[[types.Buffer, int], tuple[dict[str, Any], int]]


@dataclass(frozen=True, slots=True)
class CompiledVersion:
    """``encode(out, body)`` appends the body's bytes to ``out``; ``decode(buf, pos)`` returns
    ``(body, position after it)``. ``source`` is the generated Python, for debugging."""

    encode: Encoder
    decode: Decoder
    source: str
    # the encoder of each nested struct by its path ("MetadataResponse.topics"), for Encoded elements
    element_encoders: dict[str, Encoder] = field(default_factory=dict)


# Helpers the generated code calls, by the names it uses for them.
_RUNTIME: dict[str, Any] = {
    "DecodeError": types.DecodeError,
    "unpack_from": struct.unpack_from,
    "pack": struct.pack,
    "uvarint_bytes": types.uvarint_bytes,
    "read_uvarint": types.read_uvarint,
    "read_tag_header": types.read_tag_header,
    "skip_tagged_fields": types.skip_tagged_fields,
    "read_array_length": types.read_array_length,
    "read_compact_array_length": types.read_compact_array_length,
    "array_length_bytes": types.array_length_bytes,
    "NULL_INT16_LENGTH": types.NULL_INT16_LENGTH,
    "NULL_INT32_LENGTH": types.NULL_INT32_LENGTH,
    "NULL_COMPACT_LENGTH": types.NULL_COMPACT_LENGTH,
    "EMPTY_TAGGED_FIELDS": types.EMPTY_TAGGED_FIELDS,
    "SMALL_UVARINTS": types.SMALL_UVARINTS,
    "read_uuid": types.read_uuid,
    "write_uuid": types.write_uuid,
    "Encoded": types.Encoded,
    "unknown_fields": _unknown_fields,
    "missing_fields": _missing_fields,
}
for _compact in ("", "compact_"):
    for _nullable in ("", "nullable_"):
        for _name in (*(f"{direction}_{_compact}{_nullable}{kind}" for direction in ("read", "write")
                        for kind in ("string", "bytes")), f"read_{_compact}{_nullable}records_view"):
            _RUNTIME[_name] = getattr(types, _name)


def _compile(message: Message, version: int) -> CompiledVersion:
    generator = _Generator(message, version)
    encode_name, decode_name = generator.struct_functions(message.struct, message.name)
    source = "\n".join(generator.sources) + "\n"
    filename = f"<kafka schema {message.name} v{version}>"
    # Registering the source makes tracebacks through generated code show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(_RUNTIME)
    namespace.update(generator.constants)
    # The source comes from our own schemas only, never from input.
    exec(compile(source, filename, "exec"), namespace)
    for tag_default_name, encoder_name, default in generator.tag_defaults:
        chunks: list[bytes] = []
        namespace[encoder_name](chunks, default)
        namespace[tag_default_name] = b"".join(chunks)
    return CompiledVersion(namespace[encode_name], namespace[decode_name], source,
                           {path: namespace[name] for path, name in generator.encoders.items()})


# Field name -> (encoder name, decoder name) of the struct functions generated for that field's struct.
_Nested = dict[str, tuple[str, str]]


class _Generator:
    """Writes the Python source of one message version's encode/decode functions."""

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.flexible = message.is_flexible(version)
        self.sources: list[str] = []
        self.constants: dict[str, Any] = {}
        # (name of the encoded default, name of the value encoder, default value) per tagged field:
        # a tagged field equal to its default is left out of the tagged section, as Kafka does.
        self.tag_defaults: list[tuple[str, str, Any]] = []
        self.encoders: dict[str, str] = {}  # struct path -> its encoder's name
        self._counter = 0

    def _unique(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def _constant(self, prefix: str, value: Any) -> str:
        name = self._unique(prefix)
        self.constants[name] = value
        return name

    # -- per-field properties at this version --

    def _nullable(self, f: Field) -> bool:
        return self.version in f.nullable

    def _compact(self, f: Field) -> bool:
        if f.compact is not None:
            return self.version in f.compact
        return self.flexible

    # -- structs --

    def struct_functions(self, struct_: Struct, path: str) -> tuple[str, str]:
        present = [f for f in struct_.fields if self.version in f.versions]
        regular = [f for f in present if f.tag is None]
        tagged = sorted((f for f in present if f.tag is not None), key=_tag)
        nested: _Nested = {}
        for f in present:
            inner = f.type.element if isinstance(f.type, Array) else f.type
            if isinstance(inner, Struct):
                nested[f.name] = self.struct_functions(inner, f"{path}.{f.name}")
        ident = re.sub(r"\W", "_", path)
        encode_name = self._unique(f"encode_{ident}")
        decode_name = self._unique(f"decode_{ident}")
        self.encoders[path] = encode_name
        self.sources.append(self._encoder_source(encode_name, struct_, path, regular, tagged, nested))
        self.sources.append(self._decoder_source(decode_name, struct_, path, regular, tagged, nested))
        return encode_name, decode_name

    @staticmethod
    def _fixed_runs(fields: list[Field]) -> list[list[Field]]:
        """Fields split into runs: adjacent fixed-width fields together, every other field alone."""
        runs: list[list[Field]] = []
        for f in fields:
            fixed = isinstance(f.type, str) and f.type in types.FIXED_FORMATS
            if fixed and runs and _is_fixed_run(runs[-1]):
                runs[-1].append(f)
            else:
                runs.append([f])
        return runs

    # -- encoding --

    def _encoder_source(
        self, name: str, struct_: Struct, path: str, regular: list[Field], tagged: list[Field], nested: _Nested
    ) -> str:
        lines = [f"def {name}(out, value):", "    append = out.append"]
        local = {f.name: f"v{index}" for index, f in enumerate(regular)}
        lines += self._read_body_lines(struct_, path, regular, local)
        for run in self._fixed_runs(regular):
            if _is_fixed_run(run):
                packer = self._constant("pack", struct.Struct(">" + _run_format(run)).pack)
                lines.append(f"    append({packer}({', '.join(local[f.name] for f in run)}))")
            else:
                f = run[0]
                lines.extend(self._write_lines(f, local[f.name], "out", nested, indent=1))
        if self.flexible:
            if tagged:
                lines.extend(self._tagged_encoder_lines(tagged, nested))
            else:
                lines.append("    append(EMPTY_TAGGED_FIELDS)")
        return "\n".join(lines) + "\n"

    def _read_body_lines(self, struct_: Struct, path: str, regular: list[Field], local: dict[str, str]) -> list[str]:
        """Source that reads the regular fields' values out of ``value`` into their locals, and refuses a key
        that is a field of no version of the struct, or the absence of a field that has no spec default.

        Fast path: a body with exactly this version's regular fields (the usual answer) is read by
        subscripts, and its key count proves it holds nothing else. Any other body (a missing field, another
        version's fields, tagged fields, a typo) gets a subset test against every version's field names,
        then subscripts for the fields without a spec default (but in a request) and the default for any
        other missing key.
        Every field name of any version is allowed, not only this version's: handlers build one body for
        all versions.
        """
        known = self._constant("known", frozenset(f.name for f in struct_.fields))
        check = [
            f"if not {known}.issuperset(value):",
            f"    raise unknown_fields(value, {known}, {self.message.name!r}, {self.version}, {path!r})",
        ]
        if not regular:
            return ["    " + line for line in check]
        lines = ["    exact = False", f"    if len(value) == {len(regular)}:", "        try:"]
        lines += [f"            {local[f.name]} = value[{f.name!r}]" for f in regular]
        lines += ["            exact = True", "        except KeyError:", "            pass", "    if not exact:"]
        lines += ["        " + line for line in check]
        # Answers and the records we write are checked; a request is built by a client, and the many clients
        # of the tests (and Kafka's own generated code) leave fields they do not use at zero.
        required = [f for f in regular if f.default is _UNSET] if self.message.kind != "request" else []
        if required:
            names = self._constant("required", tuple(f.name for f in required))
            lines.append("        try:")
            lines += [f"            {local[f.name]} = value[{f.name!r}]" for f in required]
            lines += ["        except KeyError:",
                      f"            raise missing_fields(value, {names}, {self.message.name!r}, {self.version}, "
                      f"{path!r}) from None"]
        optional = [f for f in regular if f not in required]
        if optional:
            lines.append("        get = value.get")
            lines += [f"        {local[f.name]} = get({f.name!r}, {self._default_constant(f)})" for f in optional]
        return lines

    def _default_constant(self, f: Field) -> str:
        """Name of a shared, never-mutated default for a missing key (encoding only reads it)."""
        default = f.default_value()
        if isinstance(default, list):
            default = ()
        elif isinstance(default, dict):
            default = {}
        return self._constant("default", default)

    def _write_lines(self, f: Field, var: str, out: str, nested: _Nested, indent: int) -> list[str]:
        pad = "    " * indent
        type_ = f.type
        if isinstance(type_, Struct):
            if self._nullable(f):
                # Kafka's nullable struct: an int8 -1 for null, 1 before a present struct
                return [f"{pad}if {var} is None:", f"{pad}    {out}.append(b'\\xff')", f"{pad}else:",
                        f"{pad}    {out}.append(b'\\x01')", f"{pad}    {nested[f.name][0]}({out}, {var})"]
            return [f"{pad}{nested[f.name][0]}({out}, {var})"]
        if isinstance(type_, Array):
            return self._write_array_lines(f, var, out, nested, indent)
        if type_ in types.FIXED_FORMATS:
            packer = self._constant("pack", struct.Struct(">" + types.FIXED_FORMATS[type_]).pack)
            return [f"{pad}{out}.append({packer}({var}))"]
        if type_ == "uuid":
            return [f"{pad}write_uuid({out}, {var})"]
        return [f"{pad}{self._blob_function('write', f)}({out}, {var})"]

    def _blob_function(self, direction: str, f: Field) -> str:
        kind = "bytes" if f.type in _BLOB_TYPES else "string"
        compact = "compact_" if self._compact(f) else ""
        nullable = "nullable_" if self._nullable(f) else ""
        return f"{direction}_{compact}{nullable}{kind}"

    def _write_array_lines(self, f: Field, var: str, out: str, nested: _Nested, indent: int) -> list[str]:
        pad = "    " * indent
        assert isinstance(f.type, Array)  # the caller dispatched on the field's type
        element = f.type.element
        lines = []
        if self._nullable(f):
            null = "NULL_COMPACT_LENGTH" if self.flexible else "NULL_INT32_LENGTH"
            lines += [f"{pad}if {var} is None:", f"{pad}    {out}.append({null})", f"{pad}else:"]
            pad += "    "
            indent += 1
        if self.flexible:
            # Inline one-byte fast path: nearly every compact length is below 127.
            lines += [
                f"{pad}n = len({var}) + 1",
                f"{pad}{out}.append(SMALL_UVARINTS[n] if n < 128 else uvarint_bytes(n))",
            ]
        else:
            lines.append(f"{pad}{out}.append(array_length_bytes(len({var})))")
        if isinstance(element, Struct):
            # an element may come already encoded (types.Encoded): its bytes go out as they are
            lines += [f"{pad}for item in {var}:", f"{pad}    if item.__class__ is Encoded:",
                      f"{pad}        {out}.append(item)", f"{pad}    else:",
                      f"{pad}        {nested[f.name][0]}({out}, item)"]
        elif element in types.FIXED_FORMATS:
            lines.append(f"{pad}{out}.append(pack('>%d{types.FIXED_FORMATS[element]}' % len({var}), *{var}))")
        else:
            element_field = Field("item", element, "0+")
            lines.append(f"{pad}for item in {var}:")
            lines += self._write_lines(element_field, "item", out, nested, indent + 1)
        return lines

    def _tagged_encoder_lines(self, tagged: list[Field], nested: _Nested) -> list[str]:
        lines = ["    get = value.get", "    tagged = []"]
        for f in tagged:
            default = self._default_constant(f)
            value_encoder = self._tag_value_encoder(f, nested)
            encoded_default = self._unique("tag_default")
            self.tag_defaults.append((encoded_default, value_encoder, f.default_value()))
            lines += [
                f"    v = get({f.name!r}, {default})",
                f"    if v is not {default}:",
                "        chunk = []",
                f"        {value_encoder}(chunk, v)",
                "        data = b''.join(chunk)",
                f"        if data != {encoded_default}:",
                f"            tagged += ({types.uvarint_bytes(_tag(f))!r}, uvarint_bytes(len(data)), data)",
            ]
        lines += ["    append(uvarint_bytes(len(tagged) // 3))", "    out += tagged"]
        return lines

    def _tag_value_encoder(self, f: Field, nested: _Nested) -> str:
        name = self._unique(f"encode_tag_{f.name}")
        body = self._write_lines(f, "v", "out", nested, indent=1)
        self.sources.append("\n".join([f"def {name}(out, v):", *body]) + "\n")
        return name

    # -- decoding --

    def _decoder_source(
        self, name: str, struct_: Struct, path: str, regular: list[Field], tagged: list[Field], nested: _Nested
    ) -> str:
        lines = [f"def {name}(buf, pos):"]
        local: dict[str, str] = {}
        for run in self._fixed_runs(regular):
            for f in run:
                local[f.name] = self._unique("f")
            if _is_fixed_run(run):
                fmt = _run_format(run)
                unpacker = self._constant("unpack", struct.Struct(">" + fmt).unpack_from)
                targets = "".join(f"{local[f.name]}, " for f in run)
                lines += [f"    {targets}= {unpacker}(buf, pos)", f"    pos += {struct.calcsize('>' + fmt)}"]
            else:
                f = run[0]
                lines += self._read_lines(f, local[f.name], path, nested, indent=1)
        if self.flexible:
            if tagged:
                lines += self._tagged_decoder_lines(tagged, local, path, nested)
            else:
                # Nearly always an empty section (one zero byte).
                lines += ["    if buf[pos]:", "        pos = skip_tagged_fields(buf, pos)", "    else:", "        pos += 1"]
        items = ", ".join(
            f"{f.name!r}: {local[f.name] if f.name in local else _fresh_default_source(f)}" for f in struct_.fields
        )
        lines.append(f"    return {{{items}}}, pos")
        return "\n".join(lines) + "\n"

    def _read_lines(self, f: Field, target: str, path: str, nested: _Nested, indent: int) -> list[str]:
        pad = "    " * indent
        type_ = f.type
        if isinstance(type_, Struct):
            if self._nullable(f):
                return [f"{pad}if buf[pos] == 0xff:", f"{pad}    {target} = None", f"{pad}    pos += 1",
                        f"{pad}else:", f"{pad}    {target}, pos = {nested[f.name][1]}(buf, pos + 1)"]
            return [f"{pad}{target}, pos = {nested[f.name][1]}(buf, pos)"]
        if isinstance(type_, Array):
            return self._read_array_lines(f, target, path, nested, indent)
        if type_ in types.FIXED_FORMATS:
            fmt = ">" + types.FIXED_FORMATS[type_]
            unpacker = self._constant("unpack", struct.Struct(fmt).unpack_from)
            return [f"{pad}({target},) = {unpacker}(buf, pos)", f"{pad}pos += {struct.calcsize(fmt)}"]
        if type_ == "uuid":
            return [f"{pad}{target}, pos = read_uuid(buf, pos)"]
        reader = self._blob_function("read", f)
        if type_ == "records" and self.message.kind == "request":
            # a request's records stay in its frame (Produce: the log writes them from there)
            reader = reader.replace("_bytes", "_records_view")
        return [f"{pad}{target}, pos = {reader}(buf, pos)"]

    def _read_array_lines(self, f: Field, target: str, path: str, nested: _Nested, indent: int) -> list[str]:
        pad = "    " * indent
        assert isinstance(f.type, Array)  # the caller dispatched on the field's type
        element = f.type.element
        if self.flexible:
            # Inline one-byte fast path; a longer varint goes through the checked reader.
            lines = [
                f"{pad}count = buf[pos] - 1",
                f"{pad}if count < 127:",
                f"{pad}    pos += 1",
                f"{pad}else:",
                f"{pad}    count, pos = read_compact_array_length(buf, pos)",
            ]
        else:
            lines = [f"{pad}count, pos = read_array_length(buf, pos)"]
        lines.append(f"{pad}if count < 0:")
        if self._nullable(f):
            lines.append(f"{pad}    {target} = None")
        else:
            lines.append(f"{pad}    raise DecodeError({f'null array in non-nullable field {path}.{f.name}'!r})")
        lines.append(f"{pad}else:")
        if isinstance(element, str) and element in types.FIXED_FORMATS:
            char = types.FIXED_FORMATS[element]
            size = struct.calcsize(">" + char)
            lines += [
                f"{pad}    {target} = list(unpack_from('>%d{char}' % count, buf, pos))",
                f"{pad}    pos += count * {size}",
            ]
            return lines
        lines += [f"{pad}    {target} = []", f"{pad}    for _ in range(count):"]
        if isinstance(element, Struct):
            lines.append(f"{pad}        item, pos = {nested[f.name][1]}(buf, pos)")
        else:
            lines += self._read_lines(Field("item", element, "0+"), "item", path, nested, indent + 2)
        lines.append(f"{pad}        {target}.append(item)")
        return lines

    def _tagged_decoder_lines(
        self, tagged: list[Field], local: dict[str, str], path: str, nested: _Nested
    ) -> list[str]:
        lines = []
        for f in tagged:
            local[f.name] = self._unique("f")
            lines.append(f"    {local[f.name]} = {_fresh_default_source(f)}")
        lines += [
            "    count, pos = read_uvarint(buf, pos)",
            "    for _ in range(count):",
            "        tag, pos, end = read_tag_header(buf, pos)",
        ]
        keyword = "if"
        for f in tagged:
            lines.append(f"        {keyword} tag == {f.tag}:")
            lines += self._read_lines(f, local[f.name], path, nested, indent=3)
            lines += [
                "            if pos > end:",
                f"                raise DecodeError({f'tagged field {path}.{f.name} overruns its size'!r})",
            ]
            keyword = "elif"
        lines.append("        pos = end")
        return lines


def _is_fixed_run(run: list[Field]) -> bool:
    first = run[0]
    return isinstance(first.type, str) and first.type in types.FIXED_FORMATS


def _run_format(run: list[Field]) -> str:
    formats = []
    for f in run:
        assert isinstance(f.type, str)  # _is_fixed_run: a fixed run holds primitive fields only
        formats.append(types.FIXED_FORMATS[f.type])
    return "".join(formats)


def _tag(f: Field) -> int:
    assert f.tag is not None  # called for the tagged fields only
    return f.tag


def _fresh_default_source(f: Field) -> str:
    """Python source that builds the field's default anew, so decoded bodies never share lists or dicts."""
    return _literal_source(f.default_value())


def _literal_source(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_literal_source(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal_source(item) for item in value) + "]"
    return repr(value)
