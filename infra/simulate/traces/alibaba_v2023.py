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
no tenant: every pod is tenant ``default``. ``cpu_milli`` and ``memory_mib`` are the job's
CPUs (thousandths) and memory; a pod of ``num_gpu`` 0 that asks for CPUs or memory is a
CPU-only job (Weng et al.'s simulator places those too: they take CPUs GPU pods then lack).
Skipped: ``no GPU`` (``num_gpu`` 0 and neither CPUs nor memory) and ``zero duration``.
Replayed with a flag (`infra.simulate.jobs.FLAGS`), as the trace's own simulator (Weng et
al.'s, which submits every pod) counts them: ``running at trace end`` (a ``Running`` pod
deleted at the file's latest ``deletion_time``, the snapshot's end: it runs from
``scheduled_time`` to that end, cut short by the snapshot), and ``never scheduled`` (no
``scheduled_time``: the README's ``Pending`` pods), submitted at ``creation_time`` for the time
they waited (``deletion_time - creation_time``), their run time being unknown.
"""

from __future__ import annotations

from dataclasses import replace

from infra.digits import plain_ascii
from infra.simulate.jobs import MILLI_WHOLE, Job
from infra.simulate.traces.common import MAX_TRACE_S, Row, Rows, csv_rows, excerpt, positions, whole

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

_MAX_TIME = int(MAX_TRACE_S)  # seconds from the trace's start (common.MAX_TRACE_S)
_MAX_ASK = 10**9  # thousandths of a CPU, MiB
_FAST = (
    "num_gpu",
    "deletion_time",
    "scheduled_time",
    "creation_time",
    "gpu_milli",
    "qos",
    "cpu_milli",
    "memory_mib",
)

_Pod = tuple[int, int, int | None, int, int, str, int, int]
"""gpus, deletion, scheduled (None: never), creation, milli, priority, CPU thousandths, MiB."""


def read_alibaba_v2023(text: str, source: str) -> Rows:
    """Jobs of an openb pod list (header detected by the caller)."""
    out = Rows()
    # Whether a pod ran to the snapshot's end is known only at the file's end: keep each
    # pod's job (None: zero duration), deletion time and phase, not the row.
    ran: list[tuple[Job | None, int, bool]] = []
    end, fast = 0, None
    for row in csv_rows(text, source):
        out.rows += 1
        fast = fast or positions(row.index, _FAST)
        try:
            pod = _fast(row.fields, fast)
        except (ValueError, KeyError, TypeError):
            pod = _checked(row)
        if isinstance(pod, str):
            out.skipped[pod] += 1
            continue
        end = max(end, pod[1])
        ran.append((_job(row, pod), pod[1], row.get("pod_phase") == "Running"))
    for job, deleted, running in ran:
        if job is None:
            out.skipped["zero duration"] += 1
        elif running and deleted == end:
            out.jobs.append(replace(job, flag="running at trace end"))
        else:
            out.jobs.append(job)
    return out


def _fast(fields: list[str], at: list[int] | None) -> _Pod | str:
    """A pod read on the happy path: plain integers and a known QoS.

    Anything else raises, and `_checked` reads the row again to say what is wrong and where.
    """
    if at is None:
        raise ValueError
    numbers = (fields[at[k]] for k in (0, 1, 2, 3, 4, 6, 7))
    if not plain_ascii("".join(numbers)):  # int() reads "٣" and "1_000": `_checked` refuses
        raise ValueError
    gpus, deleted = int(fields[at[0]]), int(fields[at[1]])
    cpu, mem = int(fields[at[6]] or 0), int(fields[at[7]] or 0)
    if not (0 <= gpus <= 1_000_000 and 0 <= deleted <= _MAX_TIME):
        raise ValueError
    if not (0 <= cpu <= _MAX_ASK and 0 <= mem <= _MAX_ASK):
        raise ValueError
    if gpus == 0 and not cpu and not mem:
        return "no GPU"
    scheduled = int(fields[at[2]]) if fields[at[2]].strip() else None
    created = int(fields[at[3]])
    milli = int(fields[at[4]] or MILLI_WHOLE)
    if not (0 <= (scheduled or 0) <= _MAX_TIME and 0 <= created <= _MAX_TIME):
        raise ValueError
    if not 0 <= milli <= 1000:
        raise ValueError
    milli = MILLI_WHOLE if gpus != 1 or milli == 0 else milli
    return gpus, deleted, scheduled, created, milli, QOS_PRIORITY[fields[at[5]].strip()], cpu, mem


def _checked(row: Row) -> _Pod | str:
    deleted = whole(row, "deletion_time", maximum=_MAX_TIME)
    gpus = whole(row, "num_gpu", maximum=1_000_000)
    cpu = whole(row, "cpu_milli", maximum=_MAX_ASK, default="0")
    mem = whole(row, "memory_mib", maximum=_MAX_ASK, default="0")
    if gpus == 0 and not cpu and not mem:
        return "no GPU"
    scheduled = None
    if row.get("scheduled_time"):
        scheduled = whole(row, "scheduled_time", maximum=_MAX_TIME)
    created = whole(row, "creation_time", maximum=_MAX_TIME)
    return gpus, deleted, scheduled, created, _milli(row, gpus), _priority(row), cpu, mem


def _job(row: Row, pod: _Pod) -> Job | None:
    """The pod's job; ``None`` when it ran (or, never scheduled, waited) for no time."""
    gpus, deleted, scheduled, created, milli, priority, cpu, mem = pod
    start = created if scheduled is None else scheduled
    if deleted < start:
        field = "creation_time" if scheduled is None else "scheduled_time"
        raise row.error("deletion_time", f"deletion_time is before {field}")
    if deleted == start:
        return None
    models = _models(row)
    return Job(
        id=row.get("name", f"row{row.line}"),
        submit_s=float(created),
        duration_s=float(deleted - start),
        gpus=gpus,
        milli=milli,
        tenant="default",
        priority=priority,
        gpu_model=models[0] if models else None,
        line=row.line,
        gpu_models=models if len(models) > 1 else (),
        flag="never scheduled" if scheduled is None else "",
        cpu_milli=cpu,
        memory_mib=mem,
    )


def _milli(row: Row, gpus: int) -> int:
    milli = whole(row, "gpu_milli", maximum=MILLI_WHOLE, default=str(MILLI_WHOLE))
    if gpus != 1 or milli == 0:
        return MILLI_WHOLE
    return milli


def _priority(row: Row) -> str:
    qos = row.get("qos")
    if qos not in QOS_PRIORITY:
        raise row.error(
            "qos", f"qos {excerpt(qos)} is not one of {', '.join(QOS_PRIORITY)}", _qos_hint(qos)
        )
    return QOS_PRIORITY[qos]


def _qos_hint(qos: str) -> str:
    """The class a mis-cased value meant, else what the pod lists hold and where it is mapped.

    The v2023 README spells the classes exactly so, and the reader matches them exactly.
    """
    spelled = {name.casefold(): name for name in QOS_PRIORITY}
    meant = spelled.get(qos.casefold())
    if meant is not None:
        return f"write {meant} as the trace spells it"
    return (
        "the pod lists give Kubernetes' QoS class (Guaranteed, Burstable) or Alibaba's LS or BE;"
        " docs/simulate.md (Traces) maps each to a priority"
    )


def _models(row: Row) -> tuple[str, ...]:
    spec = row.get("gpu_spec")
    if not spec or spec.lower() == "nan":
        return ()
    if "|" not in spec:
        return (spec,)
    return tuple(m.strip() for m in spec.split("|") if m.strip())
