"""Cron schedules as Kubernetes reads them: which are valid, when they fire, how close they come.

`cron_fields_valid` is the grammar of robfig/cron v3, the parser kube-apiserver checks a
CronJob with (five fields or a macro, no CRON_TZ). `closest_firings` answers "can two of these
CronJobs run at once": the shortest time between a firing of one schedule and a firing of
another, over every calendar day. It reads expressions `cron_fields_valid` accepted, with the
semantics of robfig/cron (the parser Kubernetes CronJobs use): a field with an item ``*`` (or
``*/1``) is "starred", ``*/n`` with n > 1 is not, and day-of-month and day-of-week combine with
AND when either is starred, OR otherwise (robfig's `dayMatches`); ``a/n`` runs from ``a`` to
the field's maximum. Times are wall-clock minutes in the schedule's time zone: a daylight-
saving switch can move two firings up to an hour closer, which callers add as a margin
(`dst_shift_minutes`). Weekdays and dates repeat every 28 years between 2001 and 2099, so 29
years from 2001-01-01 hold every combination, the wrap included.

Fields are split as robfig/cron splits them, with Go's ``strings.Fields`` (`cron_fields`): on
runs of the characters Go's ``unicode.IsSpace`` accepts, not Python's ``str.split()``, which
also splits on U+001C..U+001F (a schedule robfig reads as fewer than five fields).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import zoneinfo
from collections.abc import Sequence
from functools import cache

__all__ = [
    "closest_firings",
    "cron_fields",
    "cron_fields_valid",
    "cron_hint",
    "daily_minute",
    "dst_shift_minutes",
    "minutes_on",
    "never_fires",
]

# Kubernetes CronJobs (robfig/cron) accept these macros besides five fields.
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# minute hour dom month dow; robfig/cron v3 (kube-apiserver's parser) takes day-of-week 0-6
# ("end of range (7) above maximum (6)"), unlike Vixie cron's 7 for Sunday
_CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_CRON_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {
        m: i + 1
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        )
    },
    {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
)
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELD_WORDS = ("", "", "", " or jan-dec", " or sun-sat (Sunday is 0; there is no 7)")
_CRON_ITEM = re.compile(r"^(\*|[0-9a-z]+(-[0-9a-z]+)?)(/[0-9]+)?\Z")
# Go's unicode.IsSpace (src/unicode/graphic.go: in Latin-1 '\t', '\n', '\v', '\f', '\r', ' ',
# U+0085, U+00A0; above, the White_Space table of src/unicode/tables.go: U+1680, U+2000-U+200A,
# U+2028, U+2029, U+202F, U+205F, U+3000), which strings.Fields splits on. Python's isspace()
# has these and U+001C-U+001F besides (bidi class B/S), which Go does not split on.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_GO_FIELDS = re.compile(f"[^{_GO_SPACE}]+")  # U+2000-U+200A: a range of the class
_START = dt.date(2001, 1, 1)
_DAYS = (dt.date(2030, 1, 1) - _START).days
_DAY = 1440  # minutes


def cron_fields(expression: str) -> list[str]:
    r"""The fields of ``expression`` as Go's ``strings.Fields`` gives them to robfig/cron.

    Split on runs of Go's ``unicode.IsSpace`` characters only: ``"0\x1c21 * * *"`` is four
    fields (Python's ``str.split()`` makes five of it).
    """
    return _GO_FIELDS.findall(expression)


def _field(text: str, index: int) -> frozenset[int]:
    low, high = _CRON_RANGES[index]
    values: set[int] = set()
    for item in text.lower().split(","):
        match = _CRON_ITEM.match(item)
        assert match is not None, f"not a valid cron field: {text!r}"
        base, step = match.group(1), match.group(3)
        ends = [_cron_value(p, index) for p in base.split("-")] if base != "*" else [low, high]
        first, last = ends[0], ends[-1]
        assert first is not None and last is not None
        if step is not None and base != "*" and "-" not in base:
            last = high  # `a/n`: from a to the field's end
        values.update(range(first, last + 1, int(step[1:]) if step else 1))
    return frozenset(values)


def _starred(text: str) -> bool:
    """Whether robfig sets the star bit: an item ``*`` or ``*/1`` (a step > 1 clears it)."""
    for item in text.lower().split(","):
        match = _CRON_ITEM.match(item)
        if match is not None and match.group(1) == "*" and match.group(3) in (None, "/1"):
            return True
    return False


@cache
def _schedule(expression: str) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """(sorted minutes of the day it fires at, whether it fires on each day of the window)."""
    fields = cron_fields(_MACROS.get(expression, expression))
    minute, hour, dom, month, dow = (_field(f, i) for i, f in enumerate(fields))
    either = _starred(fields[2]) or _starred(fields[4])
    times = tuple(sorted(h * 60 + m for h in hour for m in minute))
    days = tuple(
        m in month and ((d in dom and w in dow) if either else (d in dom or w in dow))
        for m, d, w in _calendar()
    )
    return times, days


@cache
def _calendar() -> tuple[tuple[int, int, int], ...]:
    """(month, day of month, cron day of week) of each day of the window."""
    dates = (_START + dt.timedelta(days=n) for n in range(_DAYS))
    return tuple((d.month, d.day, (d.weekday() + 1) % 7) for d in dates)


def minutes_on(expression: str, day: dt.date) -> tuple[int, ...]:
    """The minutes of ``day`` (local wall clock) a schedule fires at; empty when it does not.

    Days outside the 2001-2029 window are shifted by whole 28-year cycles into it (weekdays
    and dates repeat every 28 years between 2001 and 2099).
    """
    times, days = _schedule(expression)
    index = (day - _START).days % (28 * 365 + 7)  # 28 Gregorian years hold 7 leap days
    return times if days[index] else ()


def never_fires(expression: str) -> bool:
    """Whether a schedule `cron_fields_valid` accepted matches no day at all.

    robfig/cron (and Kubernetes) take ``0 7 30 2 *`` or ``0 7 31 4 *``: each field is in its
    range, but February has no 30th and April no 31st, so the CronJob is never run.

    >>> never_fires("0 7 30 2 *"), never_fires("0 7 29 2 *"), never_fires("0 7 30 2 1")
    (True, False, False)
    """
    return not any(_schedule(expression)[1])


def daily_minute(expression: str) -> int | None:
    """The minute of the day a schedule fires at when it fires once on every day, else None.

    ``0 20 * * *`` and ``@daily`` fire once a day (at 1200 and 0); ``0 8 * * 1-5`` or
    ``0 8,20 * * *`` do not. Reads an expression `cron_fields_valid` accepted.
    """
    times, days = _schedule(expression)
    return times[0] if len(times) == 1 and all(days) else None


# One day's firings: (closest pair of different changes as (minutes, i, j), or None;
# (first time, its change); (last time, its change)).
_Day = tuple[tuple[int, int, int] | None, tuple[int, int], tuple[int, int]]


@cache
def _one_day(firing: tuple[int, ...], expressions: tuple[str, ...]) -> _Day:
    """The firings of the changes ``firing`` on a day they fire: closest pair, first, last."""
    events = sorted((t, k) for k in firing for t in _schedule(expressions[k])[0])
    pairs = [(b[0] - a[0], a[1], b[1]) for a, b in itertools.pairwise(events) if a[1] != b[1]]
    return min(pairs, default=None), events[0], events[-1]


def closest_firings(expressions: Sequence[str]) -> tuple[int, int, int] | None:
    """(minutes, i, j): the closest any firing of schedule i comes to one of schedule j != i.

    None when fewer than two of them ever fire. The closest pair of two sets of points on a
    line is adjacent in their merged order, so one pass over the days suffices: pairs within
    a day, and the last firing of one day with the first of the next day anything fires.
    """
    exprs = tuple(expressions)
    best: tuple[int, int, int] | None = None
    last: tuple[int, int] | None = None  # (absolute minute, change) of the latest firing
    for n in range(_DAYS):
        firing = tuple(k for k, e in enumerate(exprs) if _schedule(e)[1][n])
        if not firing:
            continue
        pair, (first_t, first_k), (last_t, last_k) = _one_day(firing, exprs)
        candidates = [pair] if pair is not None else []
        if last is not None and last[1] != first_k:
            candidates.append((n * _DAY + first_t - last[0], last[1], first_k))
        best = min([*candidates, *([best] if best else [])], default=None)
        last = (n * _DAY + last_t, last_k)
    return best


def dst_shift_minutes(timezone: str) -> int:
    """How far a daylight-saving switch moves the zone's clock (0 without DST), in minutes."""
    zone = zoneinfo.ZoneInfo(timezone)
    offsets = {dt.datetime(2025, month, 1, 12, tzinfo=zone).utcoffset() for month in range(1, 13)}
    known = [o.total_seconds() for o in offsets if o is not None]
    return int(max(known) - min(known)) // 60


def _cron_value(text: str, field: int) -> int | None:
    if text.isdigit() and len(text) <= 2:
        return int(text)
    return _CRON_NAMES[field].get(text)


def _cron_field_valid(text: str, field: int) -> bool:
    low, high = _CRON_RANGES[field]
    for item in text.lower().split(","):
        match = _CRON_ITEM.match(item)
        if match is None:
            return False
        base, step = match.group(1), match.group(3)
        if step is not None and not 1 <= int(step[1:]) <= high:
            return False
        if base == "*":
            continue
        ends = [_cron_value(part, field) for part in base.split("-")]
        known = [v for v in ends if v is not None and low <= v <= high]
        # robfig refuses a reversed range: "beginning of range ... beyond end of range"
        if len(known) != len(ends) or known[0] > known[-1]:
            return False
    return True


def cron_fields_valid(expression: str) -> bool:
    """Whether ``expression`` is a cron schedule a Kubernetes CronJob accepts (no CRON_TZ).

    A macro stands alone: robfig/cron reads ``@daily `` as an unknown descriptor and
    `` @daily`` as one field of five.
    """
    if expression in _MACROS:
        return True
    fields = cron_fields(expression)
    return len(fields) == 5 and all(_cron_field_valid(f, i) for i, f in enumerate(fields))


def cron_hint(expression: str) -> str:
    """What to write instead of ``expression``, which `cron_fields_valid` refused.

    Names the first thing robfig/cron would refuse: a macro with spaces or capitals, a time
    zone inside the schedule, the number of fields, or the first field out of its range.

    >>> cron_hint("0 7 * * 1-8")
    "day-of-week '1-8' is not a value robfig/cron takes there: 0-6 or sun-sat (Sunday is 0; there is no 7), \
as *, a list a,b, a range a-b or a step */n"
    >>> cron_hint("CRON_TZ=UTC 0 7 * * *")
    'Kubernetes refuses a time zone inside the schedule: drop CRON_TZ=UTC and set mig_schedule.timezone'
    """
    fields = cron_fields(expression)
    if fields and fields[0].lower() in _MACROS:
        return f"a macro stands alone, lower case, without spaces: {fields[0].lower()}"
    if fields and fields[0].startswith("@"):
        return f"robfig/cron knows the macros {', '.join(_MACROS)}"
    if fields and fields[0].upper().startswith(("CRON_TZ=", "TZ=")):
        return (
            "Kubernetes refuses a time zone inside the schedule: drop "
            f"{fields[0]} and set mig_schedule.timezone"
        )
    if len(fields) != len(_FIELD_NAMES):
        found = f"{len(fields)} field{'' if len(fields) == 1 else 's'}"
        return (
            f"{found} where robfig/cron splits on spaces; write five: "
            f'{" ".join(_FIELD_NAMES)}, e.g. "0 20 * * *"'
        )
    for index, text in enumerate(fields):
        if not _cron_field_valid(text, index):
            low, high = _CRON_RANGES[index]
            return (
                f"{_FIELD_NAMES[index]} {text!r} is not a value robfig/cron takes there: {low}-{high}"
                f"{_FIELD_WORDS[index]}, as *, a list a,b, a range a-b or a step */n"
            )
    return 'e.g. "0 20 * * *" or @daily'
