"""Job traces, read as published and detected by their columns (`read_trace`).

Each format has its reader module; `read_trace` reads the file (bounded, via `infra.files`),
recognises the format from its header and returns a `Trace` with the jobs in submit order and
the rows skipped per reason. Formats: railplan's CSV (`railplan_csv`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from infra.errors import Position
from infra.files import read_bounded
from infra.simulate.jobs import Job, Trace
from infra.simulate.traces.common import Rows, TraceError
from infra.simulate.traces.railplan_csv import REQUIRED, read_railplan_csv

__all__ = ["MAX_TRACE_BYTES", "TraceError", "read_trace", "trace_from_text"]

MAX_TRACE_BYTES = 2 << 30
"""Largest trace read (2 GiB): above the published traces railplan reads, whole."""

Reader = Callable[[str, str], Rows]


def read_trace(path: str, *, gpu_map: Mapping[str, str] | None = None) -> Trace:
    """The trace in ``path``; ``gpu_map`` renames the trace's GPU models to catalog ids."""
    data = read_bounded(path, MAX_TRACE_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise TraceError(
            "the trace is not UTF-8 text", file=path, position=Position(line, 1)
        ) from None
    return trace_from_text(text, path, gpu_map=gpu_map)


def trace_from_text(text: str, source: str, *, gpu_map: Mapping[str, str] | None = None) -> Trace:
    """The trace in ``text`` (named ``source`` in messages)."""
    name, reader = _detect(text, source)
    rows = reader(text, source)
    jobs = sorted(_mapped(rows.jobs, gpu_map or {}), key=lambda j: (j.submit_s, j.line))
    return Trace(source, name, rows.rows, tuple(jobs), dict(sorted(rows.skipped.items())))


def _detect(text: str, source: str) -> tuple[str, Reader]:
    head = next((ln for ln in text.splitlines() if ln.strip()), "")
    columns = {c.strip() for c in head.split(",")}
    if set(REQUIRED) <= columns:
        return "railplan-csv", read_railplan_csv
    raise TraceError(
        "the trace's format is not recognised from its first line",
        file=source,
        position=Position(1, 1),
        hint="railplan reads its CSV (id,submit_s,duration_s,gpus,...); see docs/simulate.md",
    )


def _mapped(jobs: list[Job], gpu_map: Mapping[str, str]) -> list[Job]:
    if not gpu_map:
        return jobs
    out = []
    for job in jobs:
        model = gpu_map.get(job.gpu_model, job.gpu_model) if job.gpu_model else None
        out.append(job if model == job.gpu_model else _with_model(job, model))
    return out


def _with_model(job: Job, model: str | None) -> Job:
    return replace(job, gpu_model=model)
