"""Kubernetes resource quantities, parsed to exact integers.

A quantity is held as an integer number of nano-units: upstream keeps precision only down to
1n and rounds anything finer away from zero, so ``value * 10**9`` is always an integer.  The
scheduler reads quantities as CPU milli-units (:func:`milli_value`) or base units
(:func:`value`), both rounded up as upstream's ``MilliValue`` and ``Value`` do (away from zero:
a ceiling for the non-negative amounts resources are, ``-1.5`` -> ``-2`` as upstream's int64
path does).

Formatting follows upstream's canonical form: the format of the suffix the quantity was
written with (DecimalSI, BinarySI or DecimalExponent), no fractional digits, the largest
exponent that loses no precision.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "Quantity",
    "QuantityError",
    "format_quantity",
    "milli_value",
    "parse_quantity",
    "value",
]

DECIMAL_SI: Final = "DecimalSI"
BINARY_SI: Final = "BinarySI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

NANO: Final = 10**9
_MAX_INT64: Final = 2**63 - 1

_DECIMAL_SUFFIXES: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP: Final = {v: k for k, v in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""

    def __init__(self, text: str, why: str = "") -> None:
        self.text = text
        msg = f'invalid quantity "{text}"'
        if why:
            msg += f": {why}"
        super().__init__(msg)


class Quantity:
    """An exact quantity: ``nanos`` nano-units and the format it prints in."""

    __slots__ = ("_text", "format", "nanos")

    def __init__(self, nanos: int, format: str = DECIMAL_SI, text: str | None = None) -> None:
        self.nanos = nanos
        self.format = format
        self._text = text

    @classmethod
    def from_milli(cls, milli: int, format: str = DECIMAL_SI) -> Quantity:
        return cls(milli * 10**6, format)

    @classmethod
    def from_int(cls, v: int, format: str = DECIMAL_SI) -> Quantity:
        return cls(v * NANO, format)

    def milli_value(self) -> int:
        """``q * 1000`` rounded up (away from zero), as upstream's MilliValue."""
        return _scale_up(self.nanos, 10**6)

    def value(self) -> int:
        """``q`` rounded up (away from zero), as upstream's Value."""
        return _scale_up(self.nanos, NANO)

    def is_zero(self) -> bool:
        return self.nanos == 0

    def __str__(self) -> str:
        if self._text is None:
            self._text = _canonical(self.nanos, self.format)
        return self._text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.nanos == other.nanos
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __add__(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos - other.nanos, fmt)


def _scale_up(nanos: int, unit: int) -> int:
    """``nanos / unit`` with the magnitude rounded up (upstream's negativeScaleInt64)."""
    if nanos >= 0:
        return -((-nanos) // unit)
    return -((nanos * -1 + unit - 1) // unit)


def _split(text: str) -> tuple[bool, str, str, str]:
    """Split into (positive, integer digits, fraction digits, suffix) as upstream's scanner does."""
    positive = True
    pos = 0
    end = len(text)
    if text[0] == "-":
        positive = False
        pos = 1
    elif text[0] == "+":
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(text, "quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return positive, num, denom, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """Return (base, exponent, format) for a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exp = suffix[1:]
        body = exp[1:] if exp[0] in "+-" else exp
        if body and all(c in _DIGITS for c in body):
            return 10, int(exp), DECIMAL_EXPONENT
    raise QuantityError(text, "unable to parse quantity's suffix")


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> tuple[int, str, str | None]:
    if not text:
        raise QuantityError(text, "empty quantity")
    if text == "0":
        return 0, DECIMAL_SI, "0"
    positive, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret_suffix(text, suffix)

    # The string upstream keeps verbatim when it is already canonical (its int64 fast path).
    keep: str | None = None
    digits = num + denom
    if fmt == BINARY_SI:
        if exponent >= 0 and not denom:
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
            if precision >= 0:
                v = int(num)
                if exponent % 10 == 0 and (v & 0x07) != 0 and v << exponent <= _MAX_INT64:
                    keep = text
    else:
        precision = 18 - (len(num) + len(denom))
        scale = exponent - len(denom)
        if precision >= 0 and scale >= -9 and scale % 3 == 0 and not digits.endswith("000") \
                and digits[0] != "0":
            keep = text

    unscaled = int(digits)
    if base == 10:
        # value = unscaled * 10**(exponent - len(denom)); nanos = value * 10**9, rounded away from zero.
        shift = exponent - len(denom) + 9
        if shift >= 0:
            nanos = unscaled * 10**shift
        else:
            q, r = divmod(unscaled, 10**-shift)
            nanos = q + (1 if r else 0)
    else:
        scaled = unscaled << exponent  # value * 10**len(denom)
        q, r = divmod(scaled * NANO, 10 ** len(denom))
        nanos = q + (1 if r else 0)
        if nanos > _MAX_INT64 * NANO:
            nanos = _MAX_INT64 * NANO
            keep = None
        if 0 < nanos < NANO:
            fmt = DECIMAL_SI
            keep = None
    if not positive:
        nanos = -nanos
    if nanos == 0:
        keep = None
    return nanos, fmt, keep


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a quantity as the API server does; numbers (from YAML/JSON) are accepted too."""
    if isinstance(text, bool):
        raise QuantityError(str(text), "not a quantity")
    if isinstance(text, int):
        text = str(text)
    elif isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise QuantityError(str(text), "not a finite number")
        text = repr(text)
        if "e" in text:
            # repr may give "1e-05" or "1.5e+20": normalize to the quantity exponent form.
            mant, exp = text.split("e")
            text = f"{mant}e{int(exp)}"
    elif not isinstance(text, str):
        raise QuantityError(str(text), "not a quantity")
    else:
        text = text.strip()
    nanos, fmt, keep = _parse_cached(text)
    return Quantity(nanos, fmt, keep)


def _nanos(text: str | int | float) -> int:
    if isinstance(text, str):
        return _parse_cached(text.strip())[0]
    return parse_quantity(text).nanos


def milli_value(text: str | int | float) -> int:
    """Milli-units of a quantity, rounded up (CPU)."""
    return _scale_up(_nanos(text), 10**6)


def value(text: str | int | float) -> int:
    """Base units of a quantity, rounded up (memory, storage, counts)."""
    return _scale_up(_nanos(text), NANO)


def _canonical(nanos: int, fmt: str) -> str:
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mag = -nanos if nanos < 0 else nanos
    if fmt == BINARY_SI:
        if mag < 1024 * NANO or mag % NANO:
            fmt = DECIMAL_SI
        else:
            v = mag // NANO
            exp = 0
            while v % 1024 == 0 and exp < 60:
                v //= 1024
                exp += 10
            return f"{sign}{v}{_BINARY_BY_EXP.get(exp, '')}"
    mantissa = mag
    exp = -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exp += 1
    while exp % 3 != 0:
        mantissa *= 10
        exp -= 1
    if fmt == DECIMAL_SI and exp in _DECIMAL_BY_EXP:
        return f"{sign}{mantissa}{_DECIMAL_BY_EXP[exp]}"
    return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")


def format_quantity(nanos: int, fmt: str = DECIMAL_SI) -> str:
    """Canonical string of ``nanos`` nano-units in the given format."""
    return _canonical(nanos, fmt)


def format_milli(milli: int) -> str:
    """Canonical DecimalSI string for a CPU amount in milli-units (``1500`` -> ``1500m``)."""
    return _canonical(milli * 10**6, DECIMAL_SI)


def format_bytes(v: int) -> str:
    """Canonical BinarySI string for an amount of bytes (``1073741824`` -> ``1Gi``)."""
    return _canonical(v * NANO, BINARY_SI)


def format_value(v: int) -> str:
    """Canonical DecimalSI string for an integer amount (``2000`` -> ``2k``)."""
    return _canonical(v * NANO, DECIMAL_SI)
