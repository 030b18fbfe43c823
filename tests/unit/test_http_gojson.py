"""JSON as Burrow's Go server writes it: compact, HTML-safe escapes, float32 in shortest form."""

from __future__ import annotations

import json
import math
import struct
from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.httpserver import gojson
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


# --- the fast paths against the reference ---------------------------------------------------------------
# dumps walks the exact built-in types itself and formats usual floats with numpy; _encode and
# _format_float32_digits are the plain ways, which the fast ones must match byte for byte.

def reference_dumps(value) -> str:
    parts: list[str] = []
    gojson._encode(value, parts)
    return "".join(parts)


@settings(deadline=None, max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.floats(min_value=9.9e-7, max_value=1.01e-6) | st.floats(min_value=9.99e20, max_value=1.001e21)
       | st.floats(min_value=-1e6, max_value=1e6) | st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_the_numpy_float32_path_writes_what_the_digit_search_writes(value):
    try:
        expected = gojson._format_float32_digits(value)
    except ValueError:  # beyond float32: both refuse
        with pytest.raises(ValueError):
            format_float32(value)
        return
    assert format_float32(value) == expected


# Decimals of every magnitude from 1e-4 to 1e15 with 0 to 8 decimals: many are shorter than float32 can tell apart.
short_decimals = st.builds(lambda whole, fraction, power, digits: round((whole + fraction / 10**7) * 10.0**power, digits),
                           st.integers(-(2**24), 2**24), st.integers(0, 10**7), st.integers(-10, 8), st.integers(0, 8))
near_powers_of_ten = st.builds(lambda power, steps: math.nextafter(10.0 ** power, math.inf) if steps == 0 else
                               10.0 ** power * (1 + steps * 2.0 ** -24), st.integers(-4, 14), st.integers(-3, 3))


@settings(deadline=None, max_examples=1000)
@given(short_decimals | near_powers_of_ten | st.floats(min_value=1e-5, max_value=1e16)
       | st.builds(lambda ms: round(ms / 1000.0, 3), st.integers(0, 10**10)))
def test_a_float_whose_repr_is_short_is_written_from_it_as_the_digit_search_writes_it(value):
    text = gojson._short_decimal(value)
    if text is not None:
        assert text == gojson._format_float32_digits(value)


def test_lags_in_seconds_below_8192_s_are_written_from_their_repr():
    """The fast way is the one taken for the figures it is for (else the test above proves little)."""
    for ms in (1, 999, 120_593, 999_999, 1_000_000, 4_095_999, 8_191_999):
        assert gojson._short_decimal(round(ms / 1000.0, 3)) == gojson._format_float32_digits(ms / 1000.0)
    assert gojson._short_decimal(0.1) == "0.1" and gojson._short_decimal(-12.0) == "-12"
    assert gojson._short_decimal(1 / 3) is None and gojson._short_decimal(16_777_217.0) is None


class Level(IntEnum):
    LOW = 1


class Name(str):
    pass


SCALARS = (st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(), max_size=8)
           | st.sampled_from(["<a>&b", "\u2028", "é\n\"\\", Name("sub<class>"), Level.LOW])
           | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20))


@settings(deadline=None, max_examples=300)
@given(st.recursive(
    SCALARS,
    lambda children: (st.lists(children, max_size=4) | st.tuples(children, children)
                      | st.dictionaries(st.text(max_size=6) | st.sampled_from(["topic", "<k>"]), children, max_size=4)
                      | st.dictionaries(st.integers(-3, 3), children, max_size=2)),
    max_leaves=16))
def test_the_fast_walk_writes_what_the_reference_writes(value):
    assert dumps(value) == reference_dumps(value)


def test_dictionary_keys_are_cached_within_a_bound():
    for number in range(gojson._KEY_TEXT_LIMIT + 10):
        assert dumps({f"key-{number}": number}) == f'{{"key-{number}":{number}}}'
    assert len(gojson._KEY_TEXT) <= gojson._KEY_TEXT_LIMIT
    # Keys that are not strings are written as str(key), as the reference does, and never cached.
    assert [dumps({1: "a"}), dumps({True: "b"}), dumps({"1": "c"})] == ['{"1":"a"}', '{"True":"b"}', '{"1":"c"}']
