"""Microsoft Philly ``cluster_job_log``: a JSON list of jobs with their scheduling attempts.

Schema (github.com/msr-fiddle/philly-traces README; Jeon et al., USENIX ATC '19)::

    {"status": "Pass", "vc": "ee9e8c", "jobid": "application_...", "user": "ce2f4c",
     "submitted_time": "2017-10-07 01:11:39",
     "attempts": [{"start_time": "...", "end_time": "...",
                   "detail": [{"ip": "m47", "gpus": ["gpu0", ...]}]}]}

One job per entry: ``id`` = ``jobid``; ``submit_s`` = ``submitted_time`` less the earliest
(``origin_unix_s``); ``duration_s`` = the last attempt's ``end_time - start_time`` (earlier
attempts were retries the scheduler restarted; the job's gang is the last one's);
``gpus`` = the GPUs listed across the last attempt's ``detail``; tenant = ``vc`` (the
virtual cluster, Philly's quota unit). ``status`` ``Pass``, ``Killed`` and ``Failed`` all held
their GPUs and are replayed alike. Dates carry no zone: they are read as US Pacific time
(America/Los_Angeles), the zone the same release's utilisation logs state (``PDT``/``PST``).
Skipped (the README's own notes): ``never started`` (no attempt, or its ``start_time`` is
missing), ``running at trace end`` (the last attempt has no ``end_time``), ``no GPU``,
``zero duration``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from infra.errors import Position
from infra.simulate.jobs import Job
from infra.simulate.traces.common import Rows, TraceError

__all__ = ["PHILLY_ZONE", "read_philly"]

PHILLY_ZONE = ZoneInfo("America/Los_Angeles")


class _Entry:
    """One job object of the list, where it starts in the file (for messages)."""

    def __init__(self, value: Any, line: int, source: str) -> None:
        self.value, self.line, self.source = value, line, source

    def error(self, message: str) -> TraceError:
        return TraceError(
            message,
            file=self.source,
            position=Position(self.line, 1),
            hint="cluster_job_log entries are as the philly-traces README shows",
        )


def read_philly(text: str, source: str) -> Rows:
    """Jobs of a Philly ``cluster_job_log``."""
    out = Rows()
    dated: list[tuple[float, _Entry, int, float]] = []
    for entry in _entries(text, source):
        out.rows += 1
        if not isinstance(entry.value, dict):
            raise entry.error("a cluster_job_log entry must be a JSON object")
        submitted = _when(entry, entry.value.get("submitted_time"), "submitted_time")
        if submitted is None:
            raise entry.error("submitted_time is missing")
        reason, gpus, duration = _last_attempt(entry)
        if reason:
            out.skipped[reason] += 1
        else:
            dated.append((submitted, entry, gpus, duration))
    if dated:
        out.origin_unix_s = min(d[0] for d in dated)
    origin = out.origin_unix_s or 0.0
    out.jobs = [_job(e, at - origin, gpus, dur) for at, e, gpus, dur in dated]
    return out


def _entries(text: str, source: str) -> Iterator[_Entry]:
    """Each element of the top-level list, decoded one at a time with its line."""
    decoder = json.JSONDecoder()
    at, line, counted = _skip_space(text, 0), 1, 0
    if not text.startswith("[", at):
        raise _json_error(text, at, source, "a cluster_job_log is a JSON list")
    at = _skip_space(text, at + 1)
    while not text.startswith("]", at):
        line += text.count("\n", counted, at)
        counted = at
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as err:
            raise _json_error(text, err.pos, source, f"JSON: {err.msg}") from None
        except RecursionError:
            raise _json_error(text, at, source, "JSON nested too deeply") from None
        yield _Entry(value, line, source)
        at = _skip_space(text, at)
        if text.startswith(",", at):
            at = _skip_space(text, at + 1)
        elif not text.startswith("]", at):
            raise _json_error(text, at, source, "expected ',' or ']' between jobs")
    if text[_skip_space(text, at + 1) :].strip():
        raise _json_error(text, at + 1, source, "text after the job list")


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _json_error(text: str, at: int, source: str, message: str) -> TraceError:
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return TraceError(message, file=source, position=Position(line, column))


def _last_attempt(entry: _Entry) -> tuple[str | None, int, float]:
    attempts = entry.value.get("attempts")
    if attempts is None or attempts == []:
        return "never started", 0, 0.0
    if not isinstance(attempts, list) or not isinstance(attempts[-1], dict):
        raise entry.error("attempts must be a list of objects")
    last = attempts[-1]
    start = _when(entry, last.get("start_time"), "start_time")
    end = _when(entry, last.get("end_time"), "end_time")
    if start is None:
        return "never started", 0, 0.0
    if end is None:
        return "running at trace end", 0, 0.0
    if end < start:
        raise entry.error("the last attempt's end_time is before its start_time")
    gpus = _gpus(entry, last.get("detail"))
    if gpus == 0:
        return "no GPU", 0, 0.0
    if end == start:
        return "zero duration", 0, 0.0
    return None, gpus, end - start


def _gpus(entry: _Entry, detail: Any) -> int:
    if detail is None:
        return 0
    if not isinstance(detail, list):
        raise entry.error("an attempt's detail must be a list")
    count = 0
    for server in detail:
        gpus = server.get("gpus") if isinstance(server, dict) else None
        if not isinstance(gpus, list):
            raise entry.error("each detail entry needs a list of gpus")
        count += len(gpus)
    return count


def _when(entry: _Entry, value: Any, name: str) -> float | None:
    if value is None or value == "None" or value == "":
        return None
    if not isinstance(value, str):
        raise entry.error(f"{name} must be a date string")
    try:
        return datetime.fromisoformat(value).replace(tzinfo=PHILLY_ZONE).timestamp()
    except (ValueError, OverflowError):
        raise entry.error(f"{name} {value!r} is not a date like 2017-10-07 01:11:39") from None


def _job(entry: _Entry, submit_s: float, gpus: int, duration: float) -> Job:
    value = entry.value
    return Job(
        id=str(value.get("jobid") or f"entry{entry.line}"),
        submit_s=submit_s,
        duration_s=duration,
        gpus=gpus,
        tenant=str(value.get("vc") or "default"),
        line=entry.line,
    )
