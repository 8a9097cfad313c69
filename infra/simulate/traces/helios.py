"""SenseTime Helios and Shanghai AI Lab Acme job logs: Slurm-style rows with dates.

Files: Helios ``cluster_log.csv``; Acme ``trace_seren.csv`` and ``trace_kalos.csv``.

Schemas: Helios (github.com/S-Lab-System-Group/HeliosData README; Hu et al., SC '21)::

    job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue

Acme (github.com/InternLM/AcmeTrace README; Hu et al., NSDI '24): the same without ``vc``, with
``type`` and ``gpu_time`` (Kalos adds ``mem_per_pod_GB``, ``shared_mem_per_pod``,
``fail_time``, ``stop_time``). One row is one job: ``id`` = ``job_id``; ``submit_s`` =
``submit_time`` less the earliest one (``origin_unix_s``); ``duration_s`` = ``duration``
(the READMEs: ``end_time - start_time`` in seconds); ``gpus`` = ``gpu_num`` (whole GPUs);
tenant = ``vc`` in Helios (its quota unit), ``user`` in Acme (which has no VC). Every final
``state`` (``COMPLETED``, ``CANCELLED``, ``FAILED``, ``TIMEOUT``, ``NODE_FAIL``) held its GPUs
for ``duration`` and is replayed as such. Helios dates carry no zone: they are read as
China Standard Time (Asia/Shanghai, where SenseTime's clusters run); Acme's state their offset
(``+08:00``, ``+00:00``). Skipped: ``no GPU`` (``gpu_num`` 0, CPU jobs), ``zero duration``,
``never started`` (no ``duration``, or state ``PENDING``), ``running at trace end``
(state ``RUNNING``).
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from infra.simulate.jobs import Job
from infra.simulate.traces.common import Row, Rows, csv_rows, seconds, unix_time, whole

__all__ = ["REQUIRED", "read_acme", "read_helios"]

REQUIRED = ("job_id", "user", "gpu_num", "state", "submit_time", "duration")

HELIOS_ZONE = ZoneInfo("Asia/Shanghai")

_NOT_RUN = {"PENDING": "never started", "RUNNING": "running at trace end"}


def read_helios(text: str, source: str) -> Rows:
    """Jobs of a Helios ``cluster_log.csv`` (tenant = ``vc``)."""
    return _read(text, source, "vc")


def read_acme(text: str, source: str) -> Rows:
    """Jobs of an Acme ``trace_seren.csv`` or ``trace_kalos.csv`` (tenant = ``user``)."""
    return _read(text, source, "user")


_Ran = tuple[float, str, int, float, str, int]
"""Submission (Unix s), id, GPUs, duration, tenant and line of a job that ran."""


def _read(text: str, source: str, tenant: str) -> Rows:
    out = Rows()
    ran: list[_Ran] = []  # plain tuples, not rows: a million of them stay small
    for row in csv_rows(text, source):
        out.rows += 1
        reason = _skip(row)
        if reason:
            out.skipped[reason] += 1
            continue
        gpus = whole(row, "gpu_num", maximum=1_000_000)
        duration = seconds(row, "duration")
        if gpus == 0:
            out.skipped["no GPU"] += 1
        elif duration == 0:
            out.skipped["zero duration"] += 1
        else:
            submitted = unix_time(row, "submit_time", HELIOS_ZONE)
            job_id = row.get("job_id", f"row{row.line}")
            ran.append((submitted, job_id, gpus, duration, row.get(tenant, "default"), row.line))
    if ran:
        out.origin_unix_s = min(r[0] for r in ran)
    origin = out.origin_unix_s or 0.0
    out.jobs = [
        Job(id=i, submit_s=at - origin, duration_s=d, gpus=g, tenant=t, line=n)
        for at, i, g, d, t, n in ran
    ]
    return out


def _skip(row: Row) -> str | None:
    state = row.get("state").upper()
    if state in _NOT_RUN:
        return _NOT_RUN[state]
    if not row.get("duration"):
        return "never started"
    return None
