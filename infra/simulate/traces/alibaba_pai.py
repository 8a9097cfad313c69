"""Alibaba PAI cluster-trace-gpu-v2020: the task table, joined with the job table when present.

Schema (github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2020/README.md`` and the
``data/*.header`` files; Weng et al., "MLaaS in the Wild", NSDI '22). The published CSVs have
no header row; railplan reads them header-less (recognised by shape: ten fields, numbers in
``inst_num``, the times and ``plan_gpu``) or with the header line prepended::

    pai_task_table: job_name,task_name,inst_num,status,start_time,end_time,
                    plan_cpu,plan_mem,plan_gpu,gpu_type
    pai_job_table:  job_name,inst_id,user,status,start_time,end_time

A job is its tasks' instances ganged: ``gpus`` = the sum over GPU tasks of ``inst_num`` x
``plan_gpu`` / 100 (``plan_gpu`` is percent of one GPU per instance); a job of one instance
under 100 % is a fraction (``milli`` = ``plan_gpu`` x 10); several instances under 100 % each
are rounded up to one whole GPU per instance (a `Job`'s fraction is of one device).
``submit_s`` = the job table's ``start_time`` (the README: job submission) or else the earliest
task start; ``duration_s`` = latest task ``end_time`` less earliest task ``start_time``;
tenant = the job table's ``user`` (``default`` without it); ``gpu_model`` = the first GPU
task's ``gpu_type`` (``MISC`` is the README's older GPUs: map it with ``gpu_map``). Times are
seconds shifted by a constant (no date: ``origin_unix_s`` ``None``). Rows are counted per task;
skipped: ``no GPU`` (tasks that ask for none: CPU jobs' tasks and GPU jobs' parameter servers),
and per GPU task of the job: ``never started`` (a GPU task without ``start_time``), ``running at
trace end`` (one without ``end_time``), ``zero duration``. ``read_trace`` reads ``pai_job_table.csv``
from the task table's directory when it is there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from infra.simulate.jobs import MILLI_WHOLE, Job
from infra.simulate.traces.common import (
    Row,
    Rows,
    csv_rows,
    first_line,
    number,
    seconds,
    whole,
)

__all__ = [
    "JOB_COLUMNS",
    "TASK_COLUMNS",
    "JobInfo",
    "looks_like_pai_tasks",
    "read_pai_jobs",
    "read_pai_tasks",
]

TASK_COLUMNS = [
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
]
JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]

JobInfo = tuple[str, float | None]
"""A job table row: user and submission time."""


@dataclass
class _Gang:
    """The GPU tasks of one job, as they are read."""

    first: Row
    rows: int = 0
    instances: list[tuple[int, float]] = field(default_factory=list)
    start: float = math.inf
    end: float = -math.inf
    model: str | None = None
    reason: str | None = None


def looks_like_pai_tasks(first_line: str) -> bool:
    """Whether a header-less first line has the task table's shape."""
    fields = first_line.split(",")
    if len(fields) != len(TASK_COLUMNS):
        return False
    return all(_numeric_or_empty(fields[at]) for at in (2, 4, 5, 8)) and fields[2].strip() != ""


def _numeric_or_empty(text: str) -> bool:
    try:
        float(text or "0")
    except ValueError:
        return False
    return True


def read_pai_tasks(text: str, source: str, jobs: Mapping[str, JobInfo] | None = None) -> Rows:
    """Jobs of a PAI task table (``jobs``: the job table's users and submission times)."""
    out, header = Rows(), _header(text)
    gangs: dict[str, _Gang] = {}
    out.used = 0  # task rows that went into jobs: several per job
    for row in csv_rows(text, source, header):
        out.rows += 1
        _add(row, gangs, out)
    for name, gang in gangs.items():
        job = _job(name, gang, (jobs or {}).get(name), out)
        if job is not None:
            out.jobs.append(job)
    return out


def _header(text: str) -> list[str] | None:
    first = first_line(text)
    return None if first.startswith("job_name,") else TASK_COLUMNS


def _add(row: Row, gangs: dict[str, _Gang], out: Rows) -> None:
    name = row.get("job_name") or f"row{row.line}"
    plan = number(row, "plan_gpu", default="0")
    if plan > 100 * 1_000_000:
        raise row.error("plan_gpu", "plan_gpu is percent of one GPU per instance: too large")
    instances = whole(row, "inst_num", maximum=1_000_000, default="1")
    gang = gangs.setdefault(name, _Gang(row))
    if plan == 0 or instances == 0:
        out.skipped["no GPU"] += 1
        return
    gang.rows += 1
    gang.instances.append((instances, plan))
    gang.model = gang.model or row.get("gpu_type") or None
    if not row.get("start_time"):
        gang.reason = gang.reason or "never started"
        return
    gang.start = min(gang.start, seconds(row, "start_time"))
    if not row.get("end_time"):
        gang.reason = gang.reason or "running at trace end"
        return
    end = seconds(row, "end_time")
    if end < seconds(row, "start_time"):
        raise row.error("end_time", "end_time is before start_time")
    gang.end = max(gang.end, end)


def _job(name: str, gang: _Gang, info: JobInfo | None, out: Rows) -> Job | None:
    if not gang.instances:
        return None
    reason = gang.reason or ("zero duration" if gang.end <= gang.start else None)
    if reason:
        out.skipped[reason] += gang.rows
        return None
    out.used = (out.used or 0) + gang.rows
    gpus, milli = _size(gang.instances)
    user, submitted = info if info is not None else ("default", None)
    return Job(
        id=name,
        submit_s=min(submitted, gang.start) if submitted is not None else gang.start,
        duration_s=gang.end - gang.start,
        gpus=gpus,
        milli=milli,
        tenant=user,
        gpu_model=gang.model,
        line=gang.first.line,
    )


def _size(instances: list[tuple[int, float]]) -> tuple[int, int]:
    """Whole GPUs and thousandths per GPU of a gang of (instances, percent) tasks."""
    if len(instances) == 1 and instances[0][0] == 1 and instances[0][1] < 100:
        return 1, max(1, round(instances[0][1] * 10))
    return sum(n * max(1, math.ceil(plan / 100 - 1e-9)) for n, plan in instances), MILLI_WHOLE


def read_pai_jobs(text: str, source: str) -> dict[str, JobInfo]:
    """The job table's user and submission time per ``job_name`` (header optional)."""
    first = first_line(text)
    header = None if first.startswith("job_name,") else JOB_COLUMNS
    users: dict[str, JobInfo] = {}
    for row in csv_rows(text, source, header):
        submitted = seconds(row, "start_time") if row.get("start_time") else None
        users[row.get("job_name")] = (row.get("user", "default"), submitted)
    return users
