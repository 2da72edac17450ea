"""metav1.Duration text: Go's time.ParseDuration and Duration.String, with the expected values
of Go's own tests (time/time_test.go: parseDurationTests, parseDurationErrorTests,
durationTests)."""

from __future__ import annotations

import pytest

from ksched.api.duration import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    NANOSECOND,
    SECOND,
    DurationError,
    format_duration,
    parse_duration,
    parse_duration_ns,
)

PARSE = [
    ("0", 0), ("5s", 5 * SECOND), ("30s", 30 * SECOND), ("1478s", 1478 * SECOND),
    ("-5s", -5 * SECOND), ("+5s", 5 * SECOND), ("-0", 0), ("+0", 0),
    ("5.0s", 5 * SECOND), ("5.6s", 5 * SECOND + 600 * MILLISECOND), ("5.s", 5 * SECOND),
    (".5s", 500 * MILLISECOND), ("1.0s", SECOND), ("1.00s", SECOND), ("1.004s", SECOND + 4 * MILLISECOND),
    ("1.0040s", SECOND + 4 * MILLISECOND), ("100.00100s", 100 * SECOND + 1 * MILLISECOND),
    ("10ns", 10 * NANOSECOND), ("11us", 11 * MICROSECOND), ("12\u00b5s", 12 * MICROSECOND),
    ("12\u03bcs", 12 * MICROSECOND), ("13ms", 13 * MILLISECOND), ("14s", 14 * SECOND), ("15m", 15 * MINUTE),
    ("16h", 16 * HOUR), ("3h30m", 3 * HOUR + 30 * MINUTE), ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6 * NANOSECOND),
    ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    ("52763797000ns", 52763797000 * NANOSECOND),
    ("0.3333333333333333333h", 20 * MINUTE),  # float64 arithmetic, as Go
    ("9007199254740993ns", (1 << 53) + 1), ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036854775.807us", (1 << 63) - 1), ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -1 << 63), ("-9223372036854775.808us", -1 << 63),
    ("-9223372036s854ms775us808ns", -1 << 63), ("-2562047h47m16.854775808s", -1 << 63),
    ("0.100000000000000000000h", 6 * MINUTE),
    ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827 * NANOSECOND),
]


@pytest.mark.parametrize(("text", "ns"), PARSE)
def test_parse_duration_as_go(text: str, ns: int) -> None:
    assert parse_duration_ns(text) == ns


ERRORS = [
    ("", 'time: invalid duration ""'), ("3", 'time: missing unit in duration "3"'),
    ("-", 'time: invalid duration "-"'), ("s", 'time: invalid duration "s"'), (".", 'time: invalid duration "."'),
    ("-.", 'time: invalid duration "-."'), (".s", 'time: invalid duration ".s"'),
    ("+.s", 'time: invalid duration "+.s"'), ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775808ns", 'time: invalid duration "9223372036854ms775808ns"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_parse_duration_errors_as_go(text: str, message: str) -> None:
    with pytest.raises(DurationError) as ei:
        parse_duration_ns(text)
    assert str(ei.value) == message


STRINGS = [
    ("0s", 0), ("1ns", 1 * NANOSECOND), ("1.1\u00b5s", 1100 * NANOSECOND), ("2.2ms", 2200 * MICROSECOND),
    ("3.3s", 3300 * MILLISECOND), ("4m5s", 4 * MINUTE + 5 * SECOND), ("4m5.001s", 4 * MINUTE + 5001 * MILLISECOND),
    ("5h6m7.001s", 5 * HOUR + 6 * MINUTE + 7001 * MILLISECOND), ("8m0.000000001s", 8 * MINUTE + 1 * NANOSECOND),
    ("2562047h47m16.854775807s", (1 << 63) - 1), ("-2562047h47m16.854775808s", -1 << 63),
    ("15s", 15 * SECOND), ("1h0m0s", HOUR),
]


@pytest.mark.parametrize(("text", "ns"), STRINGS)
def test_duration_string_as_go(text: str, ns: int) -> None:
    assert format_duration(ns) == text


def test_seconds_round_trip() -> None:
    assert parse_duration("1m30s") == 90.0
    assert format_duration(2.5) == "2.5s" and format_duration(15.0) == "15s"
    assert parse_duration(format_duration(0.25)) == 0.25
