"""Cron schedules as the CronJob controller reads them: ``github.com/robfig/cron/v3``'s
``ParseStandard`` (``parser.go``) and ``Schedule.Next`` (``spec.go``, ``constantdelay.go``).

* five fields: minute, hour, day of month, month, day of week; ``*`` and ``?``, ``a-b``,
  ``a-b/n``, ``*/n`` and ``a/n`` (``a`` to the field's maximum), comma lists, month and
  weekday names (``jan``..``dec``, ``sun``..``sat``, any case);
* descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
  ``@hourly`` and ``@every <Go duration>`` (whole seconds, at least one);
* a ``TZ=<zone>`` or ``CRON_TZ=<zone>`` prefix (IANA names, from the system or ``tzdata``);
  without one a schedule is read in UTC (kube-controller-manager's local zone in a container);
* day of month and day of week: either restricts the days when the other is unrestricted
  (its field starts with ``*`` or ``?``, steps included, as robfig's star bit); both
  restricted, a day matching either runs -- Vixie cron's rule;
* the error messages are robfig's.

Why not ``croniter``: it differs from robfig where CronJobs notice -- ``@every``, the star
rule for ``*/n`` in the day fields, ``a/n``, and the messages the API server returns for a bad
schedule -- and the parser is small.

``Next`` is computed as robfig does, field by field in the schedule's zone, with Go's rules for
wall-clock times that a daylight-saving change skips or repeats (``time.Date``); a schedule with
no time in the next five years (``0 0 30 2 *``) has no next time (``None``), as robfig's zero
time.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["ConstantDelaySchedule", "CronError", "Schedule", "SpecSchedule", "load_location",
           "parse_go_duration", "parse_standard"]


class CronError(ValueError):
    """A schedule that robfig/cron refuses; the message is robfig's."""


_STAR = 1 << 63

_MONTH_NAMES = {n: i + 1 for i, n in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DOW_NAMES = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


@dataclass(frozen=True, slots=True)
class _Bounds:
    min: int
    max: int
    names: dict[str, int] | None = None


_SECONDS = _Bounds(0, 59)
_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, _MONTH_NAMES)
_DOW = _Bounds(0, 6, _DOW_NAMES)


def _bits(lo: int, hi: int, step: int) -> int:
    out = 0
    for i in range(lo, hi + 1, step):
        out |= 1 << i
    return out


def _all(b: _Bounds) -> int:
    return _bits(b.min, b.max, 1) | _STAR


def _atoi(expr: str) -> int:
    """Go's strconv.Atoi, with its error text."""
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    return int(expr)


def _parse_int(expr: str) -> int:
    num = _atoi(expr)
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _parse_int(expr)


def _range(expr: str, b: _Bounds) -> int:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = b.min, b.max, _STAR
    else:
        start = _int_or_name(low_and_high[0], b.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], b.names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _parse_int(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = b.max
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < b.min:
        raise CronError(f"beginning of range ({start}) below minimum ({b.min}): {expr}")
    if end > b.max:
        raise CronError(f"end of range ({end}) above maximum ({b.max}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return _bits(start, end, step) | extra


def _field(field: str, b: _Bounds) -> int:
    out = 0
    for expr in (e for e in field.split(",") if e):
        out |= _range(expr, b)
    return out


# ---------------------------------------------------------------- Go time helpers


def load_location(name: str) -> tzinfo:
    """Go's time.LoadLocation: "" and "UTC" are UTC; an unknown name raises CronError with Go's
    message."""
    if name in ("", "UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name}") from None


def _go_date(y: int, mo: int, d: int, h: int, mi: int, s: int, loc: tzinfo) -> datetime:
    """time.Date: a wall-clock time in ``loc``; a time skipped by a daylight-saving change moves
    forward by the change, a repeated one is taken in the later zone, as Go does."""
    naive_as_utc = datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    if loc is UTC:
        return naive_as_utc
    off = naive_as_utc.astimezone(loc).utcoffset() or timedelta(0)
    utc = naive_as_utc - off
    off2 = utc.astimezone(loc).utcoffset() or timedelta(0)
    if off2 != off:
        off = off2
    return (naive_as_utc - off).astimezone(loc)


def _add(t: datetime, seconds: int) -> datetime:
    """time.Add: absolute time."""
    if t.tzinfo is UTC:
        return t + timedelta(seconds=seconds)
    return (t.astimezone(UTC) + timedelta(seconds=seconds)).astimezone(t.tzinfo)


def _add_months(t: datetime, months: int) -> datetime:
    m = t.month - 1 + months
    return _go_date(t.year + m // 12, m % 12 + 1, t.day, t.hour, t.minute, t.second, t.tzinfo or UTC)


def _add_days(t: datetime, days: int) -> datetime:
    d = date(t.year, t.month, t.day) + timedelta(days=days)
    return _go_date(d.year, d.month, d.day, t.hour, t.minute, t.second, t.tzinfo or UTC)


def _steps_to(bits: int, value: int, size: int) -> int:
    """Steps from ``value`` to the next value whose bit is set, or to the wrap at ``size``."""
    for v in range(value + 1, size):
        if (1 << v) & bits:
            return v - value
    return size - value


def _weekday(t: datetime) -> int:
    """Go's Weekday: Sunday is 0."""
    return (t.weekday() + 1) % 7


# ---------------------------------------------------------------- schedules


class Schedule(ABC):
    """A parsed schedule."""

    @abstractmethod
    def next(self, t: float) -> float | None:
        """The first activation strictly after ``t`` (seconds since the epoch), or None."""


@dataclass(frozen=True, slots=True)
class SpecSchedule(Schedule):
    second: int
    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    location: tzinfo = UTC

    def _day_matches(self, t: datetime) -> bool:
        dom_match = (1 << t.day) & self.dom > 0
        dow_match = (1 << _weekday(t)) & self.dow > 0
        if self.dom & _STAR or self.dow & _STAR:
            return dom_match and dow_match
        return dom_match or dow_match

    def next(self, t: float) -> float | None:
        loc = self.location
        cur = datetime.fromtimestamp(int(t), UTC).astimezone(loc) if loc is not UTC else \
            datetime.fromtimestamp(int(t), UTC)
        cur = _add(cur, 1)  # the upcoming whole second
        added = False
        year_limit = cur.year + 5
        while True:  # WRAP
            if cur.year > year_limit:
                return None
            wrapped = False
            while (1 << cur.month) & self.month == 0:
                if not added:
                    added = True
                    cur = _go_date(cur.year, cur.month, 1, 0, 0, 0, loc)
                cur = _add_months(cur, 1)
                if cur.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(cur):
                if not added:
                    added = True
                    cur = _go_date(cur.year, cur.month, cur.day, 0, 0, 0, loc)
                cur = _add_days(cur, 1)
                # Midnight skipped by a daylight-saving change: back to the day's start.
                if cur.hour != 0:
                    cur = _add(cur, (24 - cur.hour) * 3600) if cur.hour > 12 else _add(cur, -cur.hour * 3600)
                if cur.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while (1 << cur.hour) & self.hour == 0:
                if not added:
                    added = True
                    cur = _go_date(cur.year, cur.month, cur.day, cur.hour, 0, 0, loc)
                cur = _add(cur, 3600)
                if cur.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while (1 << cur.minute) & self.minute == 0:
                if not added:
                    added = True
                    cur = cur.replace(second=0)
                # One minute at a time, as robfig; in UTC straight to the next matching minute
                # (or to the wrap), which is the same instant.
                cur = _add(cur, 60 * (_steps_to(self.minute, cur.minute, 60) if loc is UTC else 1))
                if cur.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while (1 << cur.second) & self.second == 0:
                if not added:
                    added = True
                cur = _add(cur, _steps_to(self.second, cur.second, 60) if loc is UTC else 1)
                if cur.second == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            return cur.timestamp()


@dataclass(frozen=True, slots=True)
class ConstantDelaySchedule(Schedule):
    """``@every <duration>``: ``delay`` whole seconds after the whole second before ``t``."""

    delay: int

    def next(self, t: float) -> float | None:
        return float(int(t) + self.delay)


def _descriptor(spec: str, loc: tzinfo) -> Schedule:
    def spec_schedule(**kw: int) -> SpecSchedule:
        fields = {"second": 1 << _SECONDS.min, "minute": 1 << _MINUTES.min, "hour": 1 << _HOURS.min,
                  "dom": _all(_DOM), "month": _all(_MONTHS), "dow": _all(_DOW)}
        fields.update(kw)
        return SpecSchedule(location=loc, **fields)

    if spec in ("@yearly", "@annually"):
        return spec_schedule(dom=1 << _DOM.min, month=1 << _MONTHS.min)
    if spec == "@monthly":
        return spec_schedule(dom=1 << _DOM.min)
    if spec == "@weekly":
        return spec_schedule(dow=1 << _DOW.min)
    if spec in ("@daily", "@midnight"):
        return spec_schedule()
    if spec == "@hourly":
        return spec_schedule(hour=_all(_HOURS))
    every = "@every "
    if spec.startswith(every):
        try:
            seconds = parse_go_duration(spec[len(every):])
        except CronError as e:
            raise CronError(f"failed to parse duration {spec}: {e}") from None
        # robfig's Every: at least a second, whole seconds.
        return ConstantDelaySchedule(max(1, int(seconds)))
    raise CronError(f"unrecognized descriptor: {spec}")


def parse_standard(spec: str) -> Schedule:
    """robfig/cron v3 ``ParseStandard``: raises :class:`CronError` with robfig's message."""
    if not isinstance(spec, str) or len(spec) == 0:
        raise CronError("empty spec string")
    loc: tzinfo = UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        i = spec.find(" ")
        eq = spec.find("=")
        if i < 0:  # Go slices spec[eq+1:-1] and panics; report it instead
            raise CronError(f"provided bad location {spec[eq + 1:]}: missing schedule after the time zone")
        name = spec[eq + 1:i]
        try:
            loc = load_location(name)
        except CronError as e:
            raise CronError(f"provided bad location {name}: {e}") from None
        spec = spec[i:].strip()
    if spec.startswith("@"):
        return _descriptor(spec, loc)
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    return SpecSchedule(second=1 << 0, minute=_field(fields[0], _MINUTES), hour=_field(fields[1], _HOURS),
                        dom=_field(fields[2], _DOM), month=_field(fields[3], _MONTHS), dow=_field(fields[4], _DOW),
                        location=loc)


# ---------------------------------------------------------------- Go durations

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")


def parse_go_duration(s: str) -> float:
    """Go's time.ParseDuration ("1h30m", "90s", "1.5h", "-2m") in seconds, with Go's errors."""
    orig = s
    quoted = '"' + orig + '"'
    if s in ("0", "+0", "-0"):
        return 0.0
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if not s:
        raise CronError(f"time: invalid duration {quoted}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.end() == pos:
            raise CronError(f"time: invalid duration {quoted}")
        num, unit = m.group(1), m.group(2)
        if num in ("", "."):
            raise CronError(f"time: invalid duration {quoted}")
        if not unit:
            raise CronError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise CronError(f'time: unknown unit "{unit}" in duration {quoted}')
        total += float(num) * _UNITS[unit]
        pos = m.end()
    return sign * total
