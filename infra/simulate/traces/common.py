"""What every trace reader shares: located errors, CSV rows with their line numbers, values.

A reader turns one published format into `Job`s; a row it cannot parse is a `TraceError` at
``file:line:column`` (the column of the offending field, 1-based in characters), a row that
parses but cannot be a job (no GPU, zero duration, never started) is *skipped* and counted under
a reason, so the output can say per file what was used. Rows keep their fields as a list and
work out a field's column only when an error needs it: a million-row trace reads in seconds.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from infra.errors import InputError, Position
from infra.simulate.jobs import Job

__all__ = ["Row", "Rows", "TraceError", "csv_rows", "number", "positions", "unix_time", "whole"]


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
        """The field's text, stripped (``default`` when the column is absent or empty)."""
        at = self.index.get(name)
        if at is None:
            return default
        return self.fields[at].strip() or default

    def column(self, name: str) -> int:
        """1-based column of field ``name`` (counting separators; quotes make it approximate)."""
        at = self.index.get(name, 0)
        return 1 + sum(len(value) + 1 for value in self.fields[:at])

    def error(self, name: str, message: str, hint: str | None = None) -> TraceError:
        """A located error about field ``name`` of this row."""
        return TraceError(
            message, file=self.source, position=Position(self.line, self.column(name)), hint=hint
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
                index = {name.strip(): at for at, name in enumerate(fields)}
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
            f"the CSV cannot be read: {err}", file=source, position=Position(reader.line_num, 1)
        ) from None


def number(row: Row, name: str, *, minimum: float = 0.0, default: str = "") -> float:
    """A finite number at least ``minimum`` from field ``name``."""
    text = row.get(name, default)
    try:
        value = float(text)
    except ValueError:
        raise row.error(
            name, f"{name} {text!r} is not a number", "write seconds as 12 or 12.5"
        ) from None
    if not math.isfinite(value) or value < minimum:
        raise row.error(name, f"{name} {text!r} must be a finite number of at least {minimum:g}")
    return value


def whole(row: Row, name: str, *, minimum: int = 0, maximum: int = 10**9, default: str = "") -> int:
    """A whole number in ``[minimum, maximum]`` from field ``name`` (``2.0`` is accepted)."""
    try:  # the common case, an integer's digits, without the float round trip
        exact = int(row.get(name, default))
    except ValueError:
        pass
    else:
        if minimum <= exact <= maximum:
            return exact
    value = number(row, name, minimum=minimum, default=default)
    if value != int(value) or value > maximum:
        raise row.error(
            name,
            f"{name} {row.get(name)!r} must be a whole number up to {maximum}",
            "counts and trace times are whole numbers, such as 8",
        )
    return int(value)


def unix_time(row: Row, name: str, zone: tzinfo) -> float:
    """Unix seconds of a date field such as ``2020-06-09 18:41:01``.

    Read in ``zone`` unless the date states its own offset, as Acme's ``+08:00`` does.
    """
    text = row.get(name)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise row.error(
            name, f"{name} {text!r} is not a date", "dates read as 2020-06-09 18:41:01"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    try:
        return when.timestamp()
    except (OverflowError, ValueError):
        raise row.error(name, f"{name} {text!r} is out of range") from None
