"""railplan's own trace CSV: the documented format for traces from any other source.

Header row, then one job per row (docs/simulate.md documents it):

    id,submit_s,duration_s,gpus,gpu_milli,tenant,priority,gpu_model

``submit_s``, ``duration_s`` and ``gpus`` are required; ``id`` defaults to ``row<line>``,
``gpu_milli`` (a GPU's share in thousandths, 1-1000, below 1000 only with ``gpus: 1``) to
1000, ``tenant`` to ``default``, ``priority`` (low, normal, high, critical) to ``normal``,
``gpu_model`` (a catalog GPU id) to any. An optional ``time_limit_s`` column gives the time
limit the job was submitted with (Slurm's backfill plans with it; empty: its run time).
Optional ``cpu_milli`` (thousandths of a CPU) and ``memory_mib`` columns give what the job
asks of its nodes' CPUs and memory in all; a row of ``gpus`` 0 that asks for either is a
CPU-only job (its ``gpu_milli`` empty or 0). Rows with no GPU, CPU or memory are skipped as
``no GPU``.
"""

from __future__ import annotations

import sys

from infra.simulate.jobs import MILLI_WHOLE, Job
from infra.simulate.traces.common import Row, Rows, csv_rows, excerpt, seconds, whole
from infra.spec.scheduling import PRIORITIES

__all__ = ["COLUMNS", "read_railplan_csv"]

COLUMNS = ("id", "submit_s", "duration_s", "gpus", "gpu_milli", "tenant", "priority", "gpu_model")
REQUIRED = ("submit_s", "duration_s", "gpus")
_MAX_ASK = 10**9  # thousandths of a CPU, MiB


def read_railplan_csv(text: str, source: str) -> Rows:
    """Jobs of a railplan trace CSV (header detected by the caller)."""
    out = Rows()
    for row in csv_rows(text, source):
        out.rows += 1
        gpus = whole(row, "gpus", maximum=1_000_000)
        cpu = whole(row, "cpu_milli", maximum=_MAX_ASK, default="0")
        mem = whole(row, "memory_mib", maximum=_MAX_ASK, default="0")
        if gpus == 0 and not cpu and not mem:
            out.skipped["no GPU"] += 1
            continue
        out.jobs.append(_job(row, gpus, cpu, mem))
    return out


def _job(row: Row, gpus: int, cpu: int, mem: int) -> Job:
    if gpus == 0:  # a CPU-only job: its gpu_milli, if any, is 0 or says nothing
        milli = MILLI_WHOLE
        whole(row, "gpu_milli", minimum=0, maximum=MILLI_WHOLE, default="0")
    else:
        milli = whole(row, "gpu_milli", minimum=1, maximum=MILLI_WHOLE, default=str(MILLI_WHOLE))
    if milli < MILLI_WHOLE and gpus != 1:
        raise row.error("gpu_milli", "a GPU fraction (gpu_milli below 1000) needs gpus 1")
    priority = row.get("priority", "normal")
    if priority not in PRIORITIES:
        raise row.error(
            "priority", f"priority {excerpt(priority)} is not one of {', '.join(PRIORITIES)}"
        )
    return Job(
        id=row.get("id", f"row{row.line}"),
        submit_s=seconds(row, "submit_s"),
        duration_s=_duration(row),
        gpus=gpus,
        milli=milli,
        tenant=sys.intern(row.get("tenant", "default")),  # one string per tenant, not per row
        priority=sys.intern(priority),
        gpu_model=row.get("gpu_model") or None,
        line=row.line,
        limit_s=_limit(row),
        cpu_milli=cpu,
        memory_mib=mem,
    )


def _limit(row: Row) -> float | None:
    if not row.get("time_limit_s"):
        return None
    value = seconds(row, "time_limit_s")
    if value <= 0:
        raise row.error(
            "time_limit_s",
            "time_limit_s must be more than 0 seconds",
            "leave it empty for no limit, or give the limit in seconds, such as 3600",
        )
    return value


def _duration(row: Row) -> float:
    value = seconds(row, "duration_s")
    if value <= 0:
        raise row.error(
            "duration_s",
            "duration_s must be more than 0 seconds",
            "give the job's run time in seconds, such as 60 (drop the row of a job that never ran)",
        )
    return value
