"""What every trace reader shares: located errors, CSV rows with their line numbers, values.

A reader turns one published format into `Job`s; a row it cannot parse is a `TraceError` at
``file:line:column`` (the column of the offending field, 1-based in characters), a row that
parses but cannot be a job (no GPU, zero duration, never started) is *skipped* and counted under
a reason, so the output can say per file what was used. Rows keep their fields as a list and
work out a field's column only when an error needs it: a million-row trace reads in seconds.

Times have one bound, owned here (`MAX_TRACE_S`, `EARLIEST`/`LATEST`): every reader reads its
times with `seconds` and its dates with `unix_time`/`date_s`, and `check_times` holds every job
read, whatever reader made it, to the same bound before a replay starts.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from infra.digits import ASCII_HINT, ASCII_SPACE, ascii_float, ascii_int, plain_ascii
from infra.errors import InputError, Position, shorten
from infra.simulate.jobs import Job

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TRACE_S",
    "Row",
    "Rows",
    "TraceError",
    "check_times",
    "csv_rows",
    "date_s",
    "first_line",
    "number",
    "positions",
    "seconds",
    "unix_time",
    "whole",
]

_YEAR_S = 365.25 * 86_400
MAX_TRACE_YEARS = 10
MAX_TRACE_S = MAX_TRACE_YEARS * _YEAR_S
"""The largest time a trace may hold, in seconds from its start: a submission, a run time or a
time limit (so a trace spans at most about 20 years from its first submission to its last end).

Why ten years: the published traces railplan reads span weeks to months (Philly 3 months,
Helios and Acme 6, Alibaba PAI 2); a time in milliseconds or microseconds read as seconds, or a
corrupt row, lands thousands of years out (``1e12`` s is 31,700 years). The replay walks every
day of the span it replays (scheduled MIG changes fire daily) and turns trace times into
calendar dates, so such a job kept ``lint``'s utilization budgets and ``simulate`` busy for
hours, or overflowed the calendar. Refused when the trace is read, at the row.
"""


def first_line(text: str) -> str:
    r"""The first non-blank line of ``text``, split at newlines only, as the CSV readers see it.

    Not str.splitlines(), which also splits at \v, \f, \x1c-\x1e, \x85, U+2028 and U+2029:
    one of those inside the first row's field cut the row short, and a headerless PAI table
    was "not recognised from its first line" though its reader reads it.
    """
    start = 0
    while start < len(text):  # line by line: never the whole trace split into a list
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end].rstrip("\r")
        start = end + 1
    return ""


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
"""Dates a dated trace may hold: Unix time, as every published trace's (2017-2023), up to a
year that leaves the replay's calendar room (plus `MAX_TRACE_S`, the day either side a MIG
schedule looks at). Year 1 or 9999 is a typo, and the calendar cannot step past either."""
_EXCERPT = 24  # characters of a field echoed in a message: enough to find it, no more


class TraceError(InputError):
    """A row of a job trace that cannot be read."""


class Row:
    """One CSV record: its fields, its 1-based line and the header's index of each name.

    A plain slotted class rather than a frozen dataclass: one is built per row, and a frozen
    dataclass's ``__init__`` costs several times more.
    """

    __slots__ = ("fields", "index", "line", "source")

    def __init__(self, fields: list[str], line: int, index: Mapping[str, int], source: str):
        self.fields, self.line, self.index, self.source = fields, line, index, source

    def get(self, name: str, default: str = "") -> str:
        """The field's text, stripped of ASCII spaces (``default`` when absent or empty)."""
        at = self.index.get(name)
        if at is None:
            return default
        return self.fields[at].strip(ASCII_SPACE) or default

    def column(self, name: str) -> int:
        """1-based column of field ``name`` (counting separators; quotes make it approximate)."""
        at = self.index.get(name, 0)
        return 1 + sum(len(value) + 1 for value in self.fields[:at])

    def error(self, name: str, message: str, hint: str | None = None) -> TraceError:
        """A located error about field ``name`` of this row; what to write, if not given."""
        return TraceError(
            message,
            file=self.source,
            position=Position(self.line, self.column(name)),
            hint=hint or f"fix {name} on this line; docs/simulate.md (Traces) says what it takes",
        )


@dataclass
class Rows:
    """The jobs a reader built, the rows it skipped by reason, and the trace's clock.

    ``origin_unix_s`` is the Unix time of ``submit_s == 0`` for formats with dates; ``used``
    the rows that went into jobs, for formats where a row is not a job (PAI's task rows,
    Philly's attempts), else ``None`` (one job per used row).
    """

    jobs: list[Job] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    origin_unix_s: float | None = None
    used: int | None = None


def positions(index: Mapping[str, int], names: Sequence[str]) -> list[int] | None:
    """Each name's field index, or ``None`` when one is missing (readers' fast paths)."""
    found = [index.get(name) for name in names]
    return None if None in found else [at for at in found if at is not None]


def csv_rows(text: str, source: str, header: Sequence[str] | None = None) -> Iterator[Row]:
    """Records of a CSV text with their 1-based line (``header`` when the file has none)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    index = {name: at for at, name in enumerate(header)} if header is not None else None
    width = len(header) if header is not None else 0
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if index is None:
                index = _header_index(fields, source, reader.line_num)
                width = len(fields)
                continue
            if len(fields) != width:
                raise TraceError(
                    f"row has {len(fields)} fields where the header has {width}",
                    file=source,
                    position=Position(reader.line_num, 1),
                    hint="quote fields that contain commas",
                )
            yield Row(fields, reader.line_num, index, source)
    except csv.Error as err:
        raise TraceError(
            f"the CSV cannot be read: {err}",
            file=source,
            position=Position(reader.line_num, 1),
            hint="check the quotes on this line; a field holds at most 128 KiB",
        ) from None


def _header_index(fields: Sequence[str], source: str, line: int) -> dict[str, int]:
    """Each column name's index; a name given twice is an error (which one is meant?)."""
    index: dict[str, int] = {}
    for at, text in enumerate(fields):
        name = text.strip(ASCII_SPACE)
        if name and name in index:
            raise TraceError(
                f"column {excerpt(name)} appears twice in the header",
                file=source,
                position=Position(line, 1),
                hint="give each column once",
            )
        index[name] = at
    return index


def excerpt(text: str) -> str:
    """A field of the file, as a message may echo it: quoted, short (`shorten`)."""
    return repr(shorten(text, _EXCERPT))


def number(row: Row, name: str, *, minimum: float = 0.0, default: str = "") -> float:
    """A finite number at least ``minimum`` from field ``name``, written in ASCII.

    float() alone would read ``٣٠`` (Arabic-Indic), ``１２`` (fullwidth) or ``1_000``, which
    verify's dump parsers refuse: no published trace writes them (`infra.digits`).
    """
    text = row.get(name, default)
    try:
        value = ascii_float(text)
    except ValueError:
        hint = "write seconds as 12 or 12.5" if plain_ascii(text) else ASCII_HINT
        raise row.error(name, f"{name} {excerpt(text)} is not a number", hint) from None
    if not math.isfinite(value) or value < minimum:
        raise row.error(
            name,
            f"{name} {excerpt(text)} must be a finite number of at least {minimum:g}",
            f"write a plain number of at least {minimum:g}, such as {max(minimum, 1) * 12:g}",
        )
    return value


def seconds(row: Row, name: str, *, default: str = "") -> float:
    """A time of the trace (seconds from its start, or a run time): 0 to `MAX_TRACE_S`."""
    value = number(row, name, default=default)
    if value > MAX_TRACE_S:
        raise row.error(name, *_too_far(name, excerpt(row.get(name, default))))
    return value


def _too_far(name: str, shown: str) -> tuple[str, str]:
    return (
        f"{name} {shown} is more than {MAX_TRACE_YEARS} years, the longest a trace may span",
        "trace times are seconds: is it in milliseconds or microseconds?",
    )


def whole(row: Row, name: str, *, minimum: int = 0, maximum: int = 10**9, default: str = "") -> int:
    """A whole number in ``[minimum, maximum]`` from field ``name`` (``2.0`` is accepted)."""
    try:  # the common case, an integer's digits, without the float round trip
        exact = ascii_int(row.get(name, default))
    except ValueError:
        pass
    else:
        if minimum <= exact <= maximum:
            return exact
    value = number(row, name, minimum=minimum, default=default)
    if value != int(value) or value > maximum:
        raise row.error(
            name,
            f"{name} {excerpt(row.get(name))} must be a whole number up to {maximum}",
            "counts and trace times are whole numbers, such as 8",
        )
    return int(value)


def date_s(text: str, zone: tzinfo) -> float:
    """Unix seconds of a date such as ``2020-06-09 18:41:01``, from `EARLIEST` to `LATEST`.

    Read in ``zone`` unless the date states its own offset, as Acme's ``+08:00`` does.

    Raises:
        ValueError: the text is no date, or a date out of that range; its message says which.
    """
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{excerpt(text)} is not a date") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    try:
        inside = EARLIEST <= when < LATEST
    except (OverflowError, ValueError):  # an offset that takes the date past year 1 or 9999
        inside = False
    if not inside:
        raise ValueError(
            f"{excerpt(text)} is not between {EARLIEST.year} and {LATEST.year - 1}, "
            "the years a trace may hold"
        )
    return when.timestamp()


def unix_time(row: Row, name: str, zone: tzinfo) -> float:
    """Unix seconds of a date field (`date_s`), refused at its row and column."""
    try:
        return date_s(row.get(name), zone)
    except ValueError as err:
        raise row.error(name, f"{name} {err}", "dates read as 2020-06-09 18:41:01") from None


def check_times(jobs: list[Job], source: str) -> None:
    """Refuse the first job (in file order) whose submission, run time or limit is out of range.

    Every reader's jobs pass here (`infra.simulate.traces.read_trace`): times a reader works
    out (a date less the trace's first, an end less a start) are held to `MAX_TRACE_S` too.
    NaN fails every comparison, so it is refused as well.
    """
    for job in jobs:
        for what, value in (
            ("submission", job.submit_s),
            ("run time", job.duration_s),
            ("time limit", job.limit_s),
        ):
            if value is not None and not -MAX_TRACE_S <= value <= MAX_TRACE_S:
                shown = f"{value:.6g} s" if math.isfinite(value) else str(value)
                message, hint = _too_far(f"job {excerpt(job.id)}'s {what}", shown)
                raise TraceError(message, file=source, position=Position(job.line, 1), hint=hint)
