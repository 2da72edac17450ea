"""ksched.api.cron against robfig/cron v3 (ParseStandard and Next): descriptors, ranges, steps,
names, the day-of-month/day-of-week rule (either restricts when the other starts with ``*``,
else a day matching either runs), ``@every``, time zones with daylight-saving changes, and
robfig's error messages. A hypothesis test compares Next with a minute-by-minute search."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.cron import ConstantDelaySchedule, CronError, parse_go_duration, parse_standard


def ts(s: str) -> float:
    return datetime.fromisoformat(s).replace(tzinfo=datetime.fromisoformat(s).tzinfo or UTC).timestamp()


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def nexts(spec: str, start: str, n: int = 3) -> list[str | None]:
    s = parse_standard(spec)
    t: float | None = ts(start)
    out: list[str | None] = []
    for _ in range(n):
        assert t is not None
        t = s.next(t)
        out.append(iso(t))
        if t is None:
            break
    return out


# Expected times worked out by hand from robfig's rules (2025-01-01 is a Wednesday).
@pytest.mark.parametrize(("spec", "start", "expected"), [
    ("*/5 * * * *", "2025-01-01T00:00:00", ["2025-01-01T00:05:00Z", "2025-01-01T00:10:00Z", "2025-01-01T00:15:00Z"]),
    ("* * * * *", "2025-01-01T00:00:30", ["2025-01-01T00:01:00Z", "2025-01-01T00:02:00Z", "2025-01-01T00:03:00Z"]),
    ("0 * * * *", "2025-01-01T10:00:00", ["2025-01-01T11:00:00Z", "2025-01-01T12:00:00Z", "2025-01-01T13:00:00Z"]),
    ("30 2 * * *", "2025-01-01T03:00:00", ["2025-01-02T02:30:00Z", "2025-01-03T02:30:00Z", "2025-01-04T02:30:00Z"]),
    ("0 0 * * 1", "2025-01-01T00:00:00", ["2025-01-06T00:00:00Z", "2025-01-13T00:00:00Z", "2025-01-20T00:00:00Z"]),
    ("0 0 * * MON", "2025-01-01T00:00:00", ["2025-01-06T00:00:00Z", "2025-01-13T00:00:00Z", "2025-01-20T00:00:00Z"]),
    ("0 9 * * mon-fri", "2025-01-03T10:00:00", ["2025-01-06T09:00:00Z", "2025-01-07T09:00:00Z", "2025-01-08T09:00:00Z"]),
    # Both day fields restricted: either matches (Friday the 3rd and 10th, and the 13th).
    ("0 0 13 * 5", "2025-01-01T00:00:00", ["2025-01-03T00:00:00Z", "2025-01-10T00:00:00Z", "2025-01-13T00:00:00Z"]),
    # A day-of-month step starts with '*': robfig's star bit makes the two day fields AND.
    ("0 0 */2 * 5", "2025-01-01T00:00:00", ["2025-01-03T00:00:00Z", "2025-01-17T00:00:00Z", "2025-01-31T00:00:00Z"]),
    ("0 0 ? * 0", "2025-01-01T00:00:00", ["2025-01-05T00:00:00Z", "2025-01-12T00:00:00Z", "2025-01-19T00:00:00Z"]),
    # "N/step" means N to the maximum.
    ("50/5 * * * *", "2025-01-01T00:00:00", ["2025-01-01T00:50:00Z", "2025-01-01T00:55:00Z", "2025-01-01T01:50:00Z"]),
    ("0 0 1 jan,jul *", "2025-01-01T00:00:00", ["2025-07-01T00:00:00Z", "2026-01-01T00:00:00Z", "2026-07-01T00:00:00Z"]),
    ("0 0 31 * *", "2025-01-31T00:00:00", ["2025-03-31T00:00:00Z", "2025-05-31T00:00:00Z", "2025-07-31T00:00:00Z"]),
    ("0 0 29 2 *", "2025-01-01T00:00:00", ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"]),
    ("@yearly", "2025-01-01T00:00:00", ["2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("@annually", "2025-06-01T00:00:00", ["2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("@monthly", "2025-01-31T00:00:00", ["2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z"]),
    ("@weekly", "2025-01-01T00:00:00", ["2025-01-05T00:00:00Z", "2025-01-12T00:00:00Z", "2025-01-19T00:00:00Z"]),
    ("@daily", "2025-01-01T00:00:00", ["2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z", "2025-01-04T00:00:00Z"]),
    ("@midnight", "2025-01-01T12:00:00", ["2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z", "2025-01-04T00:00:00Z"]),
    ("@hourly", "2025-01-01T00:59:59", ["2025-01-01T01:00:00Z", "2025-01-01T02:00:00Z", "2025-01-01T03:00:00Z"]),
    ("@every 90s", "2025-01-01T00:00:00", ["2025-01-01T00:01:30Z", "2025-01-01T00:03:00Z", "2025-01-01T00:04:30Z"]),
    ("@every 1h30m", "2025-01-01T00:00:00", ["2025-01-01T01:30:00Z", "2025-01-01T03:00:00Z", "2025-01-01T04:30:00Z"]),
    # A wall time is read in the zone: 09:00 in New York is 14:00 UTC in winter.
    ("CRON_TZ=America/New_York 0 9 * * *", "2025-01-01T00:00:00",
     ["2025-01-01T14:00:00Z", "2025-01-02T14:00:00Z", "2025-01-03T14:00:00Z"]),
    # 02:30 does not exist in Berlin on 2025-03-30 (clocks go 02:00 -> 03:00): robfig skips the day.
    ("TZ=Europe/Berlin 30 2 * * *", "2025-03-29T12:00:00",
     ["2025-03-31T00:30:00Z", "2025-04-01T00:30:00Z", "2025-04-02T00:30:00Z"]),
    # Summer time: 09:00 in Berlin is 07:00 UTC.
    ("TZ=Europe/Berlin 0 9 * * *", "2025-07-01T00:00:00",
     ["2025-07-01T07:00:00Z", "2025-07-02T07:00:00Z", "2025-07-03T07:00:00Z"]),
])
def test_next_times(spec: str, start: str, expected: list[str | None]) -> None:
    assert nexts(spec, start, len(expected)) == expected


def test_a_schedule_that_never_fires_has_no_next_time() -> None:
    # February 30th does not exist: robfig gives up after five years (its zero time).
    assert parse_standard("0 0 30 2 *").next(ts("2025-01-01T00:00:00")) is None


def test_every_rounds_to_whole_seconds_of_at_least_one() -> None:
    assert parse_standard("@every 1500ms") == ConstantDelaySchedule(1)
    assert parse_standard("@every 100ms") == ConstantDelaySchedule(1)
    # From the whole second before t.
    assert parse_standard("@every 10s").next(ts("2025-01-01T00:00:00.7")) == ts("2025-01-01T00:00:10")


@pytest.mark.parametrize(("spec", "message"), [
    ("", "empty spec string"),
    ("foo", "expected exactly 5 fields, found 1: [foo]"),
    ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("* 24 * * *", "end of range (24) above maximum (23): 24"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("* * * 13 *", "end of range (13) above maximum (12): 13"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("1/2/3 * * * *", "too many slashes: 1/2/3"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("* * * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax'),
    ("@often", "unrecognized descriptor: @often"),
    ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
    ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
    ("TZ=Mars/Olympus 0 0 * * *", "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"),
])
def test_errors_are_robfigs(spec: str, message: str) -> None:
    with pytest.raises(CronError) as ei:
        parse_standard(spec)
    assert str(ei.value) == message


@pytest.mark.parametrize(("text", "seconds"), [
    ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("300ms", 0.3), ("-2m", -120), ("0", 0), ("2h45m30s", 9930),
    ("1us", 1e-6), ("1µs", 1e-6),
])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "h", "1", "1x", ".s", "1h-2m"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(CronError):
        parse_go_duration(text)


# ---------------------------------------------------------------- against a brute-force model


def _expand(expr: str, lo: int, hi: int) -> tuple[set[int], bool]:
    """A field's values and whether it starts with '*' (robfig's star bit)."""
    out: set[int] = set()
    star = False
    for part in expr.split(","):
        rng, _, step = part.partition("/")
        if rng == "*":
            a, b, star = lo, hi, True
        elif "-" in rng:
            a, b = (int(x) for x in rng.split("-"))
        else:
            a = b = int(rng)
            if step:
                b = hi
        out.update(range(a, b + 1, int(step) if step else 1))
    return out, star


def brute_next(spec: str, t: float) -> float:
    minute, hour, dom, month, dow = spec.split()
    m, _ = _expand(minute, 0, 59)
    h, _ = _expand(hour, 0, 23)
    d, dstar = _expand(dom, 1, 31)
    mo, _ = _expand(month, 1, 12)
    w, wstar = _expand(dow, 0, 6)
    cur = datetime.fromtimestamp(int(t) // 60 * 60, UTC) + timedelta(minutes=1)
    for _ in range(60 * 24 * 366 * 5):
        day_ok_dom = cur.day in d
        day_ok_dow = (cur.weekday() + 1) % 7 in w
        day_ok = (day_ok_dom and day_ok_dow) if (dstar or wstar) else (day_ok_dom or day_ok_dow)
        if cur.minute in m and cur.hour in h and cur.month in mo and day_ok:
            return cur.timestamp()
        cur += timedelta(minutes=1)
    raise AssertionError("no time found")


def _field(lo: int, hi: int) -> st.SearchStrategy[str]:
    single = st.integers(lo, hi).map(str)
    rng = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(lambda ab: f"{min(ab)}-{max(ab)}")
    step = st.tuples(st.sampled_from(["*", str(lo)]), st.integers(1, max(1, (hi - lo) // 2))).map(
        lambda x: f"{x[0]}/{x[1]}")
    item = st.one_of(single, rng, step)
    return st.one_of(st.just("*"), st.lists(item, min_size=1, max_size=3).map(",".join))


@settings(max_examples=60, deadline=None)
@given(minute=_field(0, 59), hour=_field(0, 23), dom=_field(1, 28), month=st.just("*"), dow=_field(0, 6),
       start=st.integers(0, 365 * 24 * 60).map(lambda m: ts("2025-01-01T00:00:00") + m * 60 + 17))
def test_next_agrees_with_a_minute_by_minute_search(minute: str, hour: str, dom: str, month: str, dow: str,
                                                    start: float) -> None:
    spec = f"{minute} {hour} {dom} {month} {dow}"
    assert iso(parse_standard(spec).next(start)) == iso(brute_next(spec, start))
