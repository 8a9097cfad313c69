"""Alibaba cluster-trace-gpu-v2023: the ``openb_pod_list_*.csv`` pod lists, read as published.

Schema (github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/README.md``; Weng et al.,
"Beware of Fragmentation", USENIX ATC '23)::

    name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
    creation_time,deletion_time,scheduled_time

One pod is one job: ``id`` = ``name``; ``submit_s`` = ``creation_time`` (seconds from the
trace's start, no date: ``origin_unix_s`` is ``None``); ``duration_s`` = ``deletion_time -
scheduled_time``; ``gpus`` = ``num_gpu``; ``milli`` = ``gpu_milli`` when ``num_gpu`` is 1 (the
README: GPU-sharing pods), else 1000. ``gpu_spec`` (empty or ``nan`` = any model;
``V100M16|V100M32`` = either) fills ``gpu_models`` and ``gpu_model`` (the first). ``qos`` maps
to a priority after Kubernetes' QoS classes: ``Guaranteed`` and ``LS`` (latency-sensitive)
``high``, ``Burstable`` ``normal``, ``BE`` (best effort, evicted first) ``low``. The trace names
no tenant: every pod is tenant ``default``. Skipped: ``no GPU`` (``num_gpu`` 0),
``never scheduled`` (no ``scheduled_time``: the README's ``Pending`` pods), ``zero duration``,
and ``running at trace end`` (a ``Running`` pod deleted at the file's latest
``deletion_time``, the snapshot's end: 34 pods in ``openb_pod_list_default.csv``, whose
duration is cut short by the snapshot rather than measured).
"""

from __future__ import annotations

from infra.simulate.jobs import MILLI_WHOLE, Job
from infra.simulate.traces.common import Row, Rows, csv_rows, whole

__all__ = ["COLUMNS", "QOS_PRIORITY", "REQUIRED", "read_alibaba_v2023"]

COLUMNS = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
]
REQUIRED = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time")

QOS_PRIORITY = {"Guaranteed": "high", "LS": "high", "Burstable": "normal", "BE": "low"}
"""Kubernetes QoS class (and Alibaba's LS/BE) to the spec's priority."""

_MAX_TIME = 10**12


def read_alibaba_v2023(text: str, source: str) -> Rows:
    """Jobs of an openb pod list (header detected by the caller)."""
    out = Rows()
    kept: list[tuple[Row, int, int]] = []
    end = 0
    for row in csv_rows(text, source):
        out.rows += 1
        deleted = whole(row, "deletion_time", maximum=_MAX_TIME)
        end = max(end, deleted)
        gpus = whole(row, "num_gpu", maximum=1_000_000)
        if gpus == 0:
            out.skipped["no GPU"] += 1
        elif not row.get("scheduled_time"):
            out.skipped["never scheduled"] += 1
        else:
            kept.append((row, gpus, deleted))
    for row, gpus, deleted in kept:
        if deleted == end and row.get("pod_phase") == "Running":
            out.skipped["running at trace end"] += 1
            continue
        job = _job(row, gpus, deleted)
        if job is None:
            out.skipped["zero duration"] += 1
        else:
            out.jobs.append(job)
    return out


def _job(row: Row, gpus: int, deleted: int) -> Job | None:
    scheduled = whole(row, "scheduled_time", maximum=_MAX_TIME)
    if deleted < scheduled:
        raise row.error("deletion_time", "deletion_time is before scheduled_time")
    if deleted == scheduled:
        return None
    models = _models(row)
    return Job(
        id=row.get("name", f"row{row.line}"),
        submit_s=float(whole(row, "creation_time", maximum=_MAX_TIME)),
        duration_s=float(deleted - scheduled),
        gpus=gpus,
        milli=_milli(row, gpus),
        tenant="default",
        priority=_priority(row),
        gpu_model=models[0] if models else None,
        line=row.line,
        gpu_models=models if len(models) > 1 else (),
    )


def _milli(row: Row, gpus: int) -> int:
    milli = whole(row, "gpu_milli", maximum=MILLI_WHOLE, default=str(MILLI_WHOLE))
    if gpus > 1 or milli == 0:
        return MILLI_WHOLE
    return milli


def _priority(row: Row) -> str:
    qos = row.get("qos")
    if qos not in QOS_PRIORITY:
        raise row.error(
            "qos", f"qos {qos!r} is not one of {', '.join(QOS_PRIORITY)}", "the v2023 README"
        )
    return QOS_PRIORITY[qos]


def _models(row: Row) -> tuple[str, ...]:
    spec = row.get("gpu_spec")
    if spec.lower() in ("", "nan"):
        return ()
    return tuple(m.strip() for m in spec.split("|") if m.strip())
