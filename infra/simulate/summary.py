"""A finished replay turned into its `SimResult`: shares, delays, series, profile, energy.

Shares divide GPU-seconds by GPUs x the trace window, from the first submission to the last
(the period the trace describes; what runs on after the last submission is a finite trace
draining, not the cluster's steady state). A trace whose jobs all arrive at once is measured
over the whole horizon, first submission to the last event processed. Energy counts the whole
horizon. Queueing delay is first start (work start, after a powered-off node
resumes) minus submit, per tenant and per job-size bucket; jobs that never started within the
horizon are counted in a note, not in the delays.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from typing import Protocol

from infra.catalog import Catalog
from infra.simulate.cluster import Cluster
from infra.simulate.inflate import Inflation
from infra.simulate.jobs import MILLI_WHOLE, Job, Trace
from infra.simulate.metrics import (
    SERIES_POINTS,
    SIZE_BUCKETS,
    Meter,
    Steps,
    Window,
    delays,
    size_bucket,
)
from infra.simulate.migrun import MigRunner
from infra.simulate.outcomes import JobTable
from infra.simulate.policy import SimPolicy
from infra.simulate.power import PowerSaver
from infra.simulate.result import Delays, NeverRan, SimResult, TraceSummary
from infra.simulate.state import Run
from infra.simulate.tenants import Book
from infra.topology.model import Plan

__all__ = ["Finished", "gpu_hours", "summarise"]


class Finished(Protocol):
    """What the summary reads of a finished replay (`infra.simulate.engine.Replay`)."""

    plan: Plan
    catalog: Catalog
    trace: Trace
    policy: SimPolicy
    cluster: Cluster
    book: Book
    jobs: list[Job]
    never: list[NeverRan]
    first_start: list[float | None]
    start_s: float
    end_s: float
    window: Window | None
    steps: Steps
    by_group: Meter
    by_tenant: Meter
    frag_area: float
    preemptions: int
    reclaims: int
    lost_gpu_s: float
    work_gpu_s: float
    resume_gpu_s: float
    asked_gpu_s: float
    fgd_area: float
    running: dict[int, Run]
    end_at: list[float | None]
    evictions: list[int]
    never_jobs: list[tuple[Job, str]]
    mig: MigRunner
    power: PowerSaver

    def unfinished(self) -> int:
        """Jobs that had not finished when the replay stopped."""


def _measured(replay: Finished) -> Window:
    """The integrals the shares divide: over the trace window, or the horizon without one."""
    window = replay.window
    if window is not None and window.end_s > replay.start_s:
        return window
    end = replay.end_s
    return Window(
        end,
        replay.by_group.areas(end),
        replay.by_tenant.areas(end),
        replay.frag_area,
        replay.fgd_area,
    )


def summarise(replay: Finished) -> SimResult:
    """The figures of a replay that has run."""
    start, measured = replay.start_s, _measured(replay)
    end = measured.end_s
    span = max(end - start, 1e-9)
    gpus = replay.cluster.gpus
    steps = replay.steps
    group_gpus = {g.name: g.gpus * g.servers for g in replay.plan.groups.values()}
    areas = measured.by_group
    by_group = {g: round(areas.get(g, 0.0) / (n * span), 6) for g, n in group_gpus.items() if n}
    by_tenant = {t: round(a / (gpus * span), 6) for t, a in measured.by_tenant.items()}
    total = sum(areas.values())
    horizon = max(replay.end_s - start, 1e-9)
    energy, saved = _energy(replay, horizon)
    trace, table = replay.trace, _table(replay)
    p50, p95 = steps.weighted_pcts(start, end, (50, 95))
    return SimResult(
        trace=TraceSummary(
            trace.source,
            trace.format,
            trace.rows,
            trace.used,
            dict(trace.skipped),
            len(trace.jobs),
            trace.flagged(),
        ),
        gpus=gpus,
        horizon_s=round(horizon, 3),
        window_s=round(span, 3),
        allocation_mean=round(total / (gpus * span), 6) if gpus else 0.0,
        allocation_p50=round(p50 / gpus, 6) if gpus else 0.0,
        allocation_p95=round(p95 / gpus, 6) if gpus else 0.0,
        allocation_by_group=by_group,
        allocation_by_tenant=by_tenant,
        queueing=_delays_by(replay, lambda j: replay.jobs[j].tenant),
        queueing_by_size=_by_size(replay),
        fragmentation=round(measured.frag_area / (gpus * span), 6) if gpus else 0.0,
        preemptions=replay.preemptions,
        reclaims=replay.reclaims,
        lost_gpu_hours=round(replay.lost_gpu_s / 3600, 6),
        repartitions=tuple(replay.mig.records),
        never_ran=tuple(replay.never),
        series=_series(replay, start, replay.end_s),
        profile_24h=tuple(
            round(v / gpus, 6) if gpus else 0.0 for v in steps.profile(start, end, _offset(replay))
        ),
        energy_kwh=energy,
        energy_saved_kwh=saved,
        notes=_notes(replay),
        gpu_hours=gpu_hours(replay),
        outcomes=table.counts(),
        jct=delays(table.completion_times()),
        makespan_s=round(table.makespan_s(), 3),
        share_waste=_share_waste(replay),
        fragmentation_fgd=_fgd(measured, gpus * span, gpus * span - total),
        job_table=table,
        inflation=_inflation(replay),
    )


def _inflation(replay: Finished) -> Inflation | None:
    """How full an inflated replay got: what the placed jobs ask for and hold, at its end."""
    factor = replay.policy.inflate
    if factor is None:
        return None
    asked = [replay.jobs[i].gpus * replay.jobs[i].milli / MILLI_WHOLE for i in replay.running]
    gpus = replay.cluster.gpus
    return Inflation(
        factor=factor,
        jobs=len(replay.trace.jobs),
        placed=len(replay.running),
        requested_gpus=sum(j.gpus * j.milli for j in replay.trace.jobs) / MILLI_WHOLE,
        allocated_gpus=sum(asked),
        held_gpus=sum(run.share for run in replay.running.values()),
        allocation=sum(asked) / gpus if gpus else 0.0,
    )


def _table(replay: Finished) -> JobTable:
    return JobTable(
        tuple(replay.jobs),
        tuple(replay.first_start),
        tuple(replay.end_at),
        tuple(replay.evictions),
        tuple(replay.never_jobs),
    )


def _share_waste(replay: Finished) -> dict[str, float]:
    """GPU-hours held beyond what the jobs asked for (a fraction on a larger slice or GPU)."""
    end = replay.end_s
    held = sum(replay.by_group.areas(end).values())
    asked = replay.asked_gpu_s + sum(
        replay.jobs[i].gpus * replay.jobs[i].milli / MILLI_WHOLE * (end - run.started_s)
        for i, run in replay.running.items()
    )
    waste = max(0.0, held - asked)
    return {"gpu_hours": round(waste / 3600, 6), "share": round(waste / held, 6) if held else 0.0}


def _fgd(measured: Window, capacity: float, free: float) -> dict[str, float]:
    """FGD fragmentation over the window: of the cluster's GPU-seconds and of the free ones."""
    area = measured.fgd_area
    return {
        "share": round(area / capacity, 6) if capacity > 0 else 0.0,
        "share_of_free": round(area / free, 6) if free > 1e-9 else 0.0,
    }


def gpu_hours(replay: Finished) -> dict[str, float]:
    """Held GPU-hours over the whole replay and what they went to (they add up)."""
    end = replay.end_s
    unfinished = sum(run.share * (end - run.started_s) for run in replay.running.values())
    parts = {
        "held": sum(replay.by_group.areas(end).values()),
        "work": replay.work_gpu_s,
        "lost": replay.lost_gpu_s,
        "resume_wait": replay.resume_gpu_s,
        "unfinished": unfinished,
    }
    return {name: round(value / 3600, 6) for name, value in parts.items()}


def _delays_by(replay: Finished, key: Callable[[int], str]) -> dict[str, Delays]:
    groups: dict[str, list[float]] = {}
    for index, started in enumerate(replay.first_start):
        if started is not None:
            name = key(index)
            groups.setdefault(name, []).append(started - replay.jobs[index].submit_s)
    return {name: delays(values) for name, values in sorted(groups.items())}


def _by_size(replay: Finished) -> dict[str, Delays]:
    found = _delays_by(replay, lambda j: size_bucket(replay.jobs[j].gpus))
    return {b: found[b] for b in SIZE_BUCKETS if b in found}


def _series(replay: Finished, start: float, end: float) -> tuple[tuple[float, int], ...]:
    n = SERIES_POINTS
    times = [start + (end - start) * i / (n - 1) for i in range(n)] if end > start else [start]
    return tuple(
        (round(t, 3), round(v)) for t, v in zip(times, replay.steps.at(times), strict=True)
    )


def _offset(replay: Finished) -> float:
    """Seconds past local midnight (schedule zone, or UTC) at trace time 0."""
    zone = zoneinfo.ZoneInfo(replay.mig.zone)
    local = dt.datetime.fromtimestamp(replay.mig.origin, zone)
    return local.hour * 3600 + local.minute * 60 + local.second


def _energy(replay: Finished, span: float) -> tuple[float, float]:
    off = replay.power.close(replay.end_s)
    busy = replay.by_group.areas(replay.end_s)
    share = replay.policy.idle_power_share
    energy = saved = 0.0
    for group in replay.plan.groups.values():
        peak = replay.catalog.nodes[group.node].max_power_kw
        idle = peak * share
        on_s = group.servers * span - off.get(group.name, 0.0)
        energy += idle * on_s / 3600 + (peak - idle) / group.gpus * busy.get(group.name, 0.0) / 3600
        saved += idle * off.get(group.name, 0.0) / 3600
    return round(energy, 3), round(saved, 3)


def _notes(replay: Finished) -> tuple[str, ...]:
    notes = []
    book = replay.book
    unknown = sorted({j.tenant for j in replay.jobs if book.managed and j.tenant not in book.quota})
    if unknown:
        notes.append(
            f"tenants not in the spec ran without a quota at normal priority: {', '.join(unknown)}"
        )
    waiting = sum(1 for s in replay.first_start if s is None)
    if waiting:
        notes.append(f"{waiting} jobs had not started when the replay stopped")
    cut = replay.unfinished() - waiting
    if cut > 0:
        notes.append(f"{cut} jobs started but had not finished when the replay stopped")
    return tuple(notes)
