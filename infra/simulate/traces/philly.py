"""Microsoft Philly ``cluster_job_log``: a JSON list of jobs with their scheduling attempts.

Schema (github.com/msr-fiddle/philly-traces README; Jeon et al., USENIX ATC '19)::

    {"status": "Pass", "vc": "ee9e8c", "jobid": "application_...", "user": "ce2f4c",
     "submitted_time": "2017-10-07 01:11:39",
     "attempts": [{"start_time": "...", "end_time": "...",
                   "detail": [{"ip": "m47", "gpus": ["gpu0", ...]}]}]}

One job per attempt that ran (each held its GPUs; Jeon et al. count the retries' GPU time
too): the last such attempt is ``id`` = ``jobid``, submitted at ``submitted_time`` when it
is the only one; earlier ones are ``<jobid>#<k>`` (k counting attempts from 1), flagged
``earlier attempt``, the first submitted at ``submitted_time`` and each later one at its own
``start_time`` (the scheduler's restart). Times are less the earliest ``submitted_time``
(``origin_unix_s``); ``duration_s`` = the attempt's ``end_time - start_time``; ``gpus`` = the
GPUs listed across its ``detail``; tenant = ``vc`` (the virtual cluster, Philly's quota
unit). ``status`` ``Pass``, ``Killed`` and ``Failed`` all held their GPUs and are replayed
alike. Dates carry no zone: they are read as US Pacific time (America/Los_Angeles), the zone
the same release's utilisation logs state (``PDT``/``PST``). A row is an entry: it is used
when one of its attempts ran, else skipped for its last attempt's reason (the README's own
notes): ``never started`` (no attempt, or its ``start_time`` is missing), ``running at trace
end`` (no ``end_time``), ``no GPU``, ``zero duration``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

from infra.errors import Position
from infra.reading import text_position
from infra.simulate.jobs import Job
from infra.simulate.traces.common import Rows, TraceError, date_s

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
    """Jobs of a Philly ``cluster_job_log``: one per attempt that ran."""
    out = Rows(used=0)
    dated: list[tuple[float, _Entry, list[_Attempt]]] = []
    for entry in _entries(text, source):
        out.rows += 1
        if not isinstance(entry.value, dict):
            raise entry.error("a cluster_job_log entry must be a JSON object")
        submitted = _when(entry, entry.value.get("submitted_time"), "submitted_time")
        if submitted is None:
            raise entry.error("submitted_time is missing")
        reason, ran = _attempts(entry)
        if ran:
            out.used = (out.used or 0) + 1
            dated.append((submitted, entry, ran))
        else:
            out.skipped[reason] += 1
    if dated:
        out.origin_unix_s = min(d[0] for d in dated)
    origin = out.origin_unix_s or 0.0
    out.jobs = [job for at, e, ran in dated for job in _jobs(e, at - origin, ran, origin)]
    return out


def _entries(text: str, source: str) -> Iterator[_Entry]:
    """Each element of the top-level list, decoded one at a time with its line."""
    decoder = json.JSONDecoder(parse_constant=_not_json)
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
        except ValueError as err:  # NaN/Infinity (not JSON), or an integer of 4,300+ digits
            raise _json_error(text, at, source, f"JSON: {str(err).split(';')[0]}") from None
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


def _not_json(word: str) -> Any:
    """Python's decoder takes NaN, Infinity and -Infinity; JSON (RFC 8259) has no such values."""
    raise ValueError(f"{word} is not a JSON value")


def _text(entry: _Entry, name: str, default: str) -> str:
    """A text field of the entry (``jobid``, ``vc``): a JSON string, or absent."""
    value = entry.value.get(name)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise entry.error(f"{name} must be a JSON string, not {type(value).__name__}")
    return value


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _json_error(text: str, at: int, source: str, message: str) -> TraceError:
    return TraceError(
        message,
        file=source,
        position=text_position(text, at),
        hint="give cluster_job_log as the philly-traces repository ships it (one JSON list)",
    )


_Attempt = tuple[int, float, float, int]
"""(1-based attempt number, start, end, GPUs) of an attempt that ran."""


def _attempts(entry: _Entry) -> tuple[str, list[_Attempt]]:
    """The attempts that ran, and the last attempt's reason when none did."""
    attempts = entry.value.get("attempts")
    if attempts is None or attempts == []:
        return "never started", []
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        raise entry.error("attempts must be a list of objects")
    ran: list[_Attempt] = []
    reason = ""
    for number, attempt in enumerate(attempts, start=1):
        reason, gpus, start, end = _attempt(entry, attempt)
        if not reason:
            ran.append((number, start, end, gpus))
    return reason, ran


def _attempt(entry: _Entry, attempt: dict[str, Any]) -> tuple[str, int, float, float]:
    """(reason it did not run or "", GPUs, start, end) of one attempt."""
    start = _when(entry, attempt.get("start_time"), "start_time")
    end = _when(entry, attempt.get("end_time"), "end_time")
    if start is None:
        return "never started", 0, 0.0, 0.0
    if end is None:
        return "running at trace end", 0, 0.0, 0.0
    if end < start:
        raise entry.error("an attempt's end_time is before its start_time")
    gpus = _gpus(entry, attempt.get("detail"))
    if gpus == 0:
        return "no GPU", 0, 0.0, 0.0
    if end == start:
        return "zero duration", 0, 0.0, 0.0
    return "", gpus, start, end


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
        return date_s(value, PHILLY_ZONE)
    except ValueError as err:
        raise entry.error(f"{name} {err} (dates read as 2017-10-07 01:11:39)") from None


def _jobs(entry: _Entry, submit_s: float, ran: list[_Attempt], origin: float) -> list[Job]:
    jobid = _text(entry, "jobid", f"entry{entry.line}")
    tenant = _text(entry, "vc", "default")
    out = []
    for k, (number, start, end, gpus) in enumerate(ran):
        last = k == len(ran) - 1
        out.append(
            Job(
                id=jobid if last else f"{jobid}#{number}",
                submit_s=submit_s if k == 0 else start - origin,
                duration_s=end - start,
                gpus=gpus,
                tenant=tenant,
                line=entry.line,
                flag="" if last else "earlier attempt",
            )
        )
    return out
