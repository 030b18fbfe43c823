"""JSON as Burrow's Go server writes it: compact, HTML-safe escapes, float32 in shortest form."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.httpserver.gojson import dumps, format_float32


def as_float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (2 / 3, "0.6666667"),
        (1 / 3, "0.33333334"),
        (0.0001, "0.0001"),
        (1e-5, "0.00001"),
        (1e-7, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (1e21, "1e+21"),
        (123456789.0, "123456790"),
        (-2.5, "-2.5"),
    ],
)
def test_float32_like_go(value, text):
    assert format_float32(value) == text


@settings(deadline=None, max_examples=300)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_is_the_shortest_text_that_reads_back(value):
    text = format_float32(value)
    assert as_float32(float(text)) == as_float32(value)
    mantissa = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
    digits = max(len(mantissa), 1)
    if digits > 1:
        shorter = f"{value:.{digits - 1}g}"
        assert as_float32(float(shorter)) != as_float32(value)


def test_nan_and_infinity_are_refused():
    for value in (math.nan, math.inf, 1e39):
        with pytest.raises(ValueError):
            dumps({"complete": value})


def test_compact_ordered_and_html_safe():
    text = dumps({"b": [1, None, True, False], "a": {"x": '<tag> & \u2028é\n"\\'}, "c": ()})
    assert text == '{"b":[1,null,true,false],"a":{"x":"\\u003ctag\\u003e \\u0026 \\u2028é\\n\\"\\\\"},"c":[]}'
    assert json.loads(text)["a"]["x"] == '<tag> & \u2028é\n"\\'


def test_unencodable_values_raise_type_error():
    with pytest.raises(TypeError):
        dumps({"x": object()})


@settings(deadline=None, max_examples=100)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
        max_leaves=12,
    )
)
def test_round_trips_through_a_standard_parser(value):
    assert json.loads(dumps(value)) == value
