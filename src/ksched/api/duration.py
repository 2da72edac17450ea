"""Durations as Kubernetes writes them (``metav1.Duration``): Go's ``time.ParseDuration`` text
(``15s``, ``1m30s``, ``500ms``, ``1h2m3.5s``) and ``time.Duration.String()`` back.

Mirrors ``time/format.go`` (ParseDuration, Duration.String) in Go's standard library, which
``k8s.io/apimachinery/pkg/apis/meta/v1/duration.go`` uses for JSON and YAML. Values are exact
integers of nanoseconds, as in Go; :func:`parse_duration` returns seconds as a float for
callers that wait on them. No known divergence (an int64 overflow is Go's ``invalid duration``
too).
"""

from __future__ import annotations

__all__ = ["DurationError", "format_duration", "parse_duration", "parse_duration_ns"]

NANOSECOND = 1
MICROSECOND = 1000 * NANOSECOND
MILLISECOND = 1000 * MICROSECOND
SECOND = 1000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_UNITS: dict[str, int] = {
    "ns": NANOSECOND, "us": MICROSECOND, "\u00b5s": MICROSECOND, "\u03bcs": MICROSECOND,
    "ms": MILLISECOND, "s": SECOND, "m": MINUTE, "h": HOUR,
}
_MAX = (1 << 63) - 1
_LIMIT = 1 << 63  # what an unsigned accumulator may reach (the magnitude of int64's minimum)


class DurationError(ValueError):
    """Go's ``time: ...`` errors, word for word."""


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _leading_int(s: str) -> tuple[int, str]:
    i = 0
    x = 0
    while i < len(s) and "0" <= s[i] <= "9":
        if x > _LIMIT // 10:
            raise OverflowError
        x = x * 10 + ord(s[i]) - 48
        if x > _LIMIT:
            raise OverflowError
        i += 1
    return x, s[i:]


def _leading_fraction(s: str) -> tuple[int, float, str]:
    """Digits after the dot: their value and scale, digits past int64 precision ignored."""
    i = 0
    x = 0
    scale = 1.0
    overflow = False
    while i < len(s) and "0" <= s[i] <= "9":
        if not overflow:
            y = x * 10 + ord(s[i]) - 48
            if x > _MAX // 10 or y > _LIMIT:
                overflow = True
            else:
                x = y
                scale *= 10
        i += 1
    return x, scale, s[i:]


def parse_duration_ns(text: str) -> int:
    """Go's ``time.ParseDuration``: a signed sequence of decimal numbers, each with an optional
    fraction and a unit suffix; nanoseconds. Fractions are computed in float64 as Go does
    (``0.3333333333333333333h`` is exactly 20m)."""
    orig = text
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    invalid = DurationError(f"time: invalid duration {_quote(orig)}")
    if not s:
        raise invalid
    d = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise invalid
        before = len(s)
        try:
            v, s = _leading_int(s)
        except OverflowError:
            raise invalid from None
        pre = before != len(s)
        post = False
        f, scale = 0, 1.0
        if s.startswith("."):
            s = s[1:]
            before = len(s)
            f, scale, s = _leading_fraction(s)
            post = before != len(s)
        if not pre and not post:
            raise invalid
        i = 0
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise DurationError(f"time: missing unit in duration {_quote(orig)}")
        u, s = s[:i], s[i:]
        unit = _UNITS.get(u)
        if unit is None:
            raise DurationError(f"time: unknown unit {_quote(u)} in duration {_quote(orig)}")
        if v > _LIMIT // unit:
            raise invalid
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > _LIMIT:
                raise invalid
        d += v
        if d > _LIMIT:
            raise invalid
    if neg:
        return -d
    if d > _MAX:
        raise invalid
    return d


def parse_duration(text: str) -> float:
    """:func:`parse_duration_ns` in seconds."""
    return parse_duration_ns(text) / SECOND


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    """The fractional digits of ``v`` (``prec`` of them, trailing zeros dropped, with the dot)
    and what is left of ``v``: Go's fmtFrac."""
    digits = ""
    printed = False
    for _ in range(prec):
        d = v % 10
        printed = printed or d != 0
        if printed:
            digits = str(d) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def format_duration(value: int | float) -> str:
    """Go's ``time.Duration.String()``: ``15s``, ``1m30s``, ``1h0m0s``, ``500ms``, ``1.5µs``,
    ``0s``. An int is nanoseconds; a float is seconds (rounded to the nanosecond)."""
    ns = value if isinstance(value, int) else round(value * SECOND)
    if ns == 0:
        return "0s"
    neg = ns < 0
    u = -ns if neg else ns
    if u < SECOND:
        if u < MICROSECOND:
            out = f"{u}ns"
        elif u < MILLISECOND:
            frac, whole = _fmt_frac(u, 3)
            out = f"{whole}{frac}\u00b5s"
        else:
            frac, whole = _fmt_frac(u, 6)
            out = f"{whole}{frac}ms"
    else:
        frac, whole = _fmt_frac(u, 9)
        secs = whole % 60
        mins_total = whole // 60
        out = f"{secs}{frac}s"
        if mins_total > 0:
            out = f"{mins_total % 60}m" + out
            hours = mins_total // 60
            if hours > 0:
                out = f"{hours}h" + out
    return "-" + out if neg else out
