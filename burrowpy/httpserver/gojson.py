"""JSON encoded byte for byte as Burrow's Go server encodes it, so scripts that diff responses see no change.

Go's encoding/json writes compact output, escapes ``<``, ``>``, ``&``, U+2028 and U+2029, leaves other
non-ASCII text as UTF-8, and prints ``float32`` values (Burrow's ``complete``) in their shortest form:
``1`` rather than ``1.0``, ``0.33333334`` rather than ``0.3333333333333333``. Mappings keep their order:
callers sort the ones that are Go maps (Go sorts map keys).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})
_ESCAPED_BY_GO = frozenset("<>&\u2028\u2029")

# Dictionary keys as encoded (with their colon): the same few names come back in every answer.
_KEY_TEXT: dict[str, str] = {}
_KEY_TEXT_LIMIT = 4096


class RawJSON(str):
    """Text already encoded as this module would encode it, written as it is (an answer's part written
    by a faster path of its own, such as :mod:`burrowpy.httpserver.status_json`)."""


def dumps(value: Any) -> str:
    """Encode ``value`` (dict, list, tuple, str, int, float, bool, None); ValueError for NaN or infinity."""
    parts: list[str] = []
    _encode_fast(value, parts.append)
    return "".join(parts)


def _encode_fast(value: Any, add: Callable[[str], None]) -> None:
    """:func:`_encode` for the exact built-in types, which make up nearly every answer, with each type
    found by one identity check and keys encoded once; anything else (subclasses such as IntEnum
    members among them) goes through :func:`_encode`, so the output is the same."""
    kind = type(value)
    if kind is str:
        add(encode_string(value))
    elif kind is RawJSON:
        add(value)
    elif kind is dict:
        add("{")
        first = True
        for key, item in value.items():
            if first:
                first = False
            else:
                add(",")
            if type(key) is str:
                text = _KEY_TEXT.get(key)
                if text is None:
                    if len(_KEY_TEXT) >= _KEY_TEXT_LIMIT:
                        _KEY_TEXT.clear()
                    text = _KEY_TEXT[key] = encode_string(key) + ":"
                add(text)
            else:
                add(encode_string(str(key)))
                add(":")
            # The usual leaves written here rather than in a call of their own (most values of an answer).
            item_kind = type(item)
            if item_kind is int:
                add(int.__repr__(item))
            elif item_kind is str:
                add(encode_string(item))
            elif item is None:
                add("null")
            else:
                _encode_fast(item, add)
        add("}")
    elif value is None:
        add("null")
    elif value is True:
        add("true")
    elif value is False:
        add("false")
    elif kind is int:
        add(int.__repr__(value))
    elif kind is float:
        add(format_float32(value))
    elif kind is list or kind is tuple:
        add("[")
        first = True
        for item in value:
            if first:
                first = False
            else:
                add(",")
            _encode_fast(item, add)
        add("]")
    else:
        parts: list[str] = []
        _encode(value, parts)
        add("".join(parts))


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(encode_string(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(format_float32(value))
    elif isinstance(value, dict):
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(",")
            out.append(encode_string(str(key)))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode_string(text: str) -> str:
    quoted = encode_basestring(text)  # what json.dumps(text, ensure_ascii=False) writes
    return quoted if _ESCAPED_BY_GO.isdisjoint(text) else quoted.translate(_GO_ESCAPES)


def _as_float32(value: float) -> float | None:
    """The float32 nearest to ``value``, or None outside float32's range."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return None


_numpy: Any = None

# Texts of floats already written: a group's ``complete`` figures are a few fractions of the window.
_FLOAT_TEXT: dict[float, str] = {}
_FLOAT_TEXT_LIMIT = 4096


def format_float32(value: float) -> str:
    """The shortest decimal that reads back as the same float32, in Go's notation."""
    text = _FLOAT_TEXT.get(value)
    if text is None:
        text = _format_float32(value)
        if len(_FLOAT_TEXT) >= _FLOAT_TEXT_LIMIT:
            _FLOAT_TEXT.clear()
        _FLOAT_TEXT[value] = text
    return text


def _format_float32(value: float) -> str:
    text = _short_decimal(value)
    if text is not None:
        return text
    if 0 < abs(value) < 1e21:  # the usual magnitudes: numpy's shortest float32 digits (Dragon4), in C
        global _numpy
        if _numpy is None:
            import numpy  # on the first float: a command that writes none starts without it

            _numpy = numpy
        single = _numpy.float32(value)
        if 1e-6 <= abs(float(single)) < 1e21:  # Go's positional range, judged on the float32 as below
            return _numpy.format_float_positional(single, unique=True, trim="-")
    return _format_float32_digits(value)


def _short_decimal(value: float) -> str | None:
    """:func:`format_float32` of a float whose own shortest decimal (``repr``) is the float32's too, in Go's
    notation; None when that is not sure (then the general way decides).

    ``repr(value)`` reads back as ``value``, so it lies in the interval of reals that round to ``float32(value)``,
    which is at most ``u`` wide (``u``: twice the float32 spacing at ``value``'s binary exponent). Any other decimal
    with as few significant digits (or fewer) lies at least ``q`` from it, ``q`` the unit of its last digit, when
    it is not below the power of ten under ``value``; when it is, ``value`` would have to be that power of ten
    itself (it is a multiple of ``q`` above it, and closer than ``u`` < ``q``), a single digit, and the decimals
    of one digit below it lie a tenth of it away. So when ``q`` exceeds ``u`` no other decimal that short reads
    back as the float32: ``repr``'s digits are its shortest, which Go and numpy write. That covers the lags in
    seconds (three decimals) below 8,192 s, and most figures of a few digits.
    """
    magnitude = abs(value)
    if not 1e-4 <= magnitude < 1e15:  # repr is positional here, as Go is for float32s from 1e-6 to 1e21
        return None
    text = float.__repr__(value)
    point = text.find(".")
    if point < 0:  # never in this range; the general way for safety
        return None
    if text.endswith(".0"):
        text, unit = text[:point], 1.0  # Go writes 12, not 12.0; the unit 1 is at most the last digit's
    else:
        unit = 10.0 ** (point + 1 - len(text))
    return text if unit > math.ldexp(1.0, math.frexp(magnitude)[1] - 23) else None


def _format_float32_digits(value: float) -> str:
    """:func:`format_float32` by trying one digit more at a time: every magnitude, and the reference the
    numpy path is tested against."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"unsupported float value {value}")
    single = _as_float32(value)
    if single is None:
        raise ValueError(f"unsupported float value {value} (beyond float32)")
    if single == 0:
        return "0"
    for digits in range(1, 10):
        text = f"{single:.{digits}g}"
        if _as_float32(float(text)) == single:
            break
    magnitude = abs(single)
    if magnitude < 1e-6 or magnitude >= 1e21:
        mantissa, exponent = f"{single:.{digits - 1}e}".split("e")
        sign, exponent_digits = exponent[0], exponent[1:].lstrip("0") or "0"
        if sign == "+" and len(exponent_digits) < 2:
            exponent_digits = exponent_digits.rjust(2, "0")
        return f"{mantissa}e{sign}{exponent_digits}"
    return format(Decimal(text), "f")
