"""JSON encoded byte for byte as Burrow's Go server encodes it, so scripts that diff responses see no change.

Go's encoding/json writes compact output, escapes ``<``, ``>``, ``&``, U+2028 and U+2029, leaves other
non-ASCII text as UTF-8, and prints ``float32`` values (Burrow's ``complete``) in their shortest form:
``1`` rather than ``1.0``, ``0.33333334`` rather than ``0.3333333333333333``. Mappings keep their order:
callers sort the ones that are Go maps (Go sorts map keys).
"""

from __future__ import annotations

import json
import math
import struct
from decimal import Decimal
from typing import Any

_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


def dumps(value: Any) -> str:
    """Encode ``value`` (dict, list, tuple, str, int, float, bool, None); ValueError for NaN or infinity."""
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts)


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
    return json.dumps(text, ensure_ascii=False).translate(_GO_ESCAPES)


def _as_float32(value: float) -> float | None:
    """The float32 nearest to ``value``, or None outside float32's range."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return None


def format_float32(value: float) -> str:
    """The shortest decimal that reads back as the same float32, in Go's notation."""
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
