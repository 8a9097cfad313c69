"""Job traces, read as published and detected by their columns (`read_trace`).

Each format has its reader module; `read_trace` reads the file (bounded, via `infra.files`),
recognises the format from its first line (or takes ``trace_format``) and returns a `Trace`
with the jobs in submit order and the rows skipped per reason. Formats (docs/simulate.md,
"Traces"): railplan's CSV (`railplan_csv`), Alibaba cluster-trace-gpu-v2023 pod lists
(`alibaba_v2023`), Alibaba PAI v2020 task tables (`alibaba_pai`), Microsoft Philly
``cluster_job_log`` (`philly`), SenseTime Helios and Shanghai AI Lab Acme job logs (`helios`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path

from infra.digits import ASCII_SPACE
from infra.errors import Position
from infra.gc_pause import paused_gc
from infra.reading import byte_position, read_bounded
from infra.simulate.jobs import Job, Trace
from infra.simulate.traces import alibaba_pai, alibaba_v2023, helios, railplan_csv
from infra.simulate.traces.common import Rows, TraceError, check_times, excerpt, first_line
from infra.simulate.traces.philly import read_philly

__all__ = ["FORMATS", "MAX_TRACE_BYTES", "TraceError", "read_trace", "trace_from_text"]

MAX_TRACE_BYTES = 2 << 30
"""Largest trace read (2 GiB): above the published traces railplan reads, whole."""
_USUAL_SIZE = "the largest published trace railplan reads is a few hundred MB"

Reader = Callable[[str, str], Rows]

READERS: dict[str, Reader] = {
    "railplan-csv": railplan_csv.read_railplan_csv,
    "alibaba-v2023": alibaba_v2023.read_alibaba_v2023,
    "pai-task": alibaba_pai.read_pai_tasks,
    "philly": read_philly,
    "helios": helios.read_helios,
    "acme": helios.read_acme,
}
FORMATS = tuple(READERS)
"""Format names ``trace_format`` accepts (detection picks one of them)."""

PAI_JOB_TABLE = "pai_job_table.csv"


def read_trace(
    path: str,
    *,
    gpu_map: Mapping[str, str] | None = None,
    trace_format: str | None = None,
    within: str | None = None,
) -> Trace:
    """The trace in ``path``; ``gpu_map`` renames the trace's GPU models to catalog ids.

    ``within``: a directory every file read must stay inside once symlinks are resolved (a
    budget's trace and the PAI job table beside it stay in the spec's directory); the caller
    has checked ``path`` itself, this checks what the reader adds to it.
    """
    text = _text(path)
    name, reader = _format(text, path, trace_format)
    if name == "pai-task":
        sibling = Path(path).parent / PAI_JOB_TABLE
        if sibling.is_file() and sibling.resolve() != Path(path).resolve():
            _inside(sibling, within)
            jobs = alibaba_pai.read_pai_jobs(_text(str(sibling)), str(sibling))
            reader = partial(alibaba_pai.read_pai_tasks, jobs=jobs)
    with paused_gc():
        return _trace(name, reader(text, path), path, gpu_map or {})


def _inside(path: Path, within: str | None) -> None:
    """TraceError if ``path`` leads out of ``within`` (None: anywhere is fine)."""
    if within is None:
        return
    inside = os.path.realpath(within)
    if os.path.commonpath([inside, os.path.realpath(path)]) != inside:
        raise TraceError(
            f"{path.name} beside the trace leads out of {within!r} (a symlink), and is not read",
            file=str(path),
            hint="copy the job table into that directory instead of linking to it",
        )


def trace_from_text(
    text: str,
    source: str,
    *,
    gpu_map: Mapping[str, str] | None = None,
    trace_format: str | None = None,
) -> Trace:
    """The trace in ``text`` (named ``source`` in messages)."""
    name, reader = _format(text, source, trace_format)
    with paused_gc():
        return _trace(name, reader(text, source), source, gpu_map or {})


def _text(path: str) -> str:
    data = read_bounded(path, MAX_TRACE_BYTES, noun="trace", usual=_USUAL_SIZE)
    nul = data.find(b"\x00")
    if nul >= 0:  # a NUL reached a tenant or job id, and the CSV written from it
        raise TraceError(
            "binary data (a NUL byte)",
            file=path,
            position=byte_position(data, nul),
            hint="give the trace as a CSV text file (UTF-8)",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TraceError(
            "the trace is not UTF-8 text",
            file=path,
            position=byte_position(data, err.start),
            hint="save the trace as UTF-8",
        ) from None


def _trace(name: str, rows: Rows, source: str, gpu_map: Mapping[str, str]) -> Trace:
    jobs = _unique(_mapped(rows.jobs, gpu_map), source, strict=name == "railplan-csv")
    check_times(jobs, source)  # in file order: the first row out of range is named
    jobs.sort(key=lambda j: (j.submit_s, j.line))
    used = len(jobs) if rows.used is None else rows.used
    if used + sum(rows.skipped.values()) != rows.rows:  # every reader counts in rows
        raise AssertionError(f"{name} reader: {rows.rows} rows read as {used} + {rows.skipped}")
    if rows.rows == 0:  # a header alone, as a truncated file leaves it: no replay of nothing
        raise TraceError(
            "the trace has no rows, only its header",
            file=source,
            hint="give the trace's rows (a truncated copy?)",
        )
    return Trace(
        source,
        name,
        rows.rows,
        tuple(jobs),
        dict(sorted(rows.skipped.items())),
        rows.origin_unix_s,
        rows.used,
    )


def _unique(jobs: list[Job], source: str, *, strict: bool) -> list[Job]:
    """``jobs`` with unique ids: a repeat is an error in railplan's CSV, else renamed.

    Published traces hold repeats (a job id reused across a cluster's restarts); those keep
    their place and become ``<id>@<line>``, so messages and per-job figures tell them apart.
    """
    seen: dict[str, int] = {}
    out = []
    for job in sorted(jobs, key=lambda j: j.line):
        first = seen.setdefault(job.id, job.line)
        if first != job.line:
            if strict:
                raise TraceError(
                    f"job id {excerpt(job.id)} repeats the id of line {first}",
                    file=source,
                    position=Position(job.line, 1),
                    hint="give every row its own id",
                )
            job = replace(job, id=f"{job.id}@{job.line}")
        out.append(job)
    return out


def _format(text: str, source: str, trace_format: str | None) -> tuple[str, Reader]:
    if trace_format is None:
        trace_format = _detect(text, source)
    if trace_format not in READERS:
        raise TraceError(
            f"trace format {trace_format!r} is not one of {', '.join(FORMATS)}",
            file=source,
            hint="leave the format out to detect it from the file's first line",
        )
    return trace_format, READERS[trace_format]


def _detect(text: str, source: str) -> str:
    """The format a trace's first non-blank line shows."""
    head = first_line(text)
    if head.lstrip().startswith("["):
        return "philly"
    columns = {c.strip(ASCII_SPACE) for c in _header_fields(head)}
    if set(railplan_csv.REQUIRED) <= columns:
        return "railplan-csv"
    if set(alibaba_v2023.REQUIRED) <= columns:
        return "alibaba-v2023"
    if set(helios.REQUIRED) <= columns:
        return "helios" if "vc" in columns else "acme"
    if head.startswith("job_name,task_name,") or alibaba_pai.looks_like_pai_tasks(head):
        return "pai-task"
    hint = "railplan reads its CSV (id,submit_s,duration_s,gpus,...); see docs/simulate.md"
    if head.startswith("job_name,inst_id,") or len(head.split(",")) == 6:
        hint = "this looks like PAI's pai_job_table: pass pai_task_table.csv (the job table beside it is read too)"
    raise TraceError(
        "the trace's format is not recognised from its first line",
        file=source,
        position=Position(1, 1),
        hint=hint,
    )


def _header_fields(head: str) -> list[str]:
    """A first line's fields, read as CSV as the readers read it; at commas if it is no CSV.

    A writer that quotes every field (pandas, Excel) quotes the header too; a field over the
    CSV module's limit makes the line no CSV, and no header of any format.
    """
    try:
        return next(csv.reader([head]), [])
    except csv.Error:
        return head.split(",")


def _mapped(jobs: list[Job], gpu_map: Mapping[str, str]) -> list[Job]:
    if not gpu_map:
        return jobs
    return [_renamed(job, gpu_map) if job.gpu_model else job for job in jobs]


def _renamed(job: Job, gpu_map: Mapping[str, str]) -> Job:
    model = gpu_map.get(job.gpu_model or "", job.gpu_model)
    models = tuple(gpu_map.get(m, m) for m in job.gpu_models)
    if model == job.gpu_model and models == job.gpu_models:
        return job
    return replace(job, gpu_model=model, gpu_models=models)
