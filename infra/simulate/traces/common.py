"""What every trace reader shares: located errors, CSV rows with their line numbers, values.

A reader turns one published format into `Job`s; a row it cannot parse is a `TraceError` at
``file:line:column`` (the column of the offending field, 1-based in characters), a row that
parses but cannot be a job (no GPU, zero duration, never started) is *skipped* and counted under
a reason, so the output can say per file what was used.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from infra.errors import InputError, Position
from infra.simulate.jobs import Job

__all__ = ["Row", "Rows", "TraceError", "csv_rows", "number", "whole"]


class TraceError(InputError):
    """A row of a job trace that cannot be read."""


@dataclass(frozen=True, slots=True)
class Row:
    """One CSV record: values by column name, its line and each field's column."""

    values: dict[str, str]
    line: int
    columns: dict[str, int]
    source: str

    def get(self, name: str, default: str = "") -> str:
        """The field's text, stripped (``default`` when the column is absent or empty)."""
        value = self.values.get(name, "").strip()
        return value or default

    def error(self, name: str, message: str, hint: str | None = None) -> TraceError:
        """A located error about field ``name`` of this row."""
        column = self.columns.get(name, 1)
        return TraceError(
            message, file=self.source, position=Position(self.line, column), hint=hint
        )


@dataclass
class Rows:
    """The jobs a reader built and the rows it skipped, by reason."""

    jobs: list[Job] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    rows: int = 0


def csv_rows(text: str, source: str, header: Sequence[str] | None = None) -> Iterator[Row]:
    """Records of a CSV text with their 1-based line (``header`` when the file has none)."""
    lines = io.StringIO(text, newline="")
    reader = csv.reader(lines)
    names = list(header) if header is not None else None
    for fields in reader:
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if names is None:
            names = [f.strip() for f in fields]
            continue
        line = reader.line_num
        if len(fields) != len(names):
            raise TraceError(
                f"row has {len(fields)} fields where the header has {len(names)}",
                file=source,
                position=Position(line, 1),
                hint="quote fields that contain commas",
            )
        yield Row(dict(zip(names, fields, strict=True)), line, _columns(names, fields), source)


def _columns(names: Sequence[str], fields: Sequence[str]) -> dict[str, int]:
    """1-based column of each field, counting separators (quotes make it approximate)."""
    columns, at = {}, 1
    for name, value in zip(names, fields, strict=True):
        columns[name] = at
        at += len(value) + 1
    return columns


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
    value = number(row, name, minimum=minimum, default=default)
    if value != int(value) or value > maximum:
        raise row.error(name, f"{name} {row.get(name)!r} must be a whole number up to {maximum}")
    return int(value)
