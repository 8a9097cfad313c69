"""When each node group's scheduled MIG changes fire on the trace's clock, and what one costs.

A change's cron time is wall-clock time in its schedule's zone (`infra.spec.cron.minutes_on`);
trace time 0 is the trace's own date (`Trace.origin_unix_s`) or, for traces with relative
times, midnight of Monday 2024-01-01 in that zone (so weekday schedules apply from day one).
The cost of re-partitioning one batch (an SU) after its drain: the MIG manager destroys and
creates the instances (`RECONFIGURE_S`, an assumption: mig-parted applies a config in tens of
seconds per node), and where a GPU's MIG mode toggles it needs a GPU reset, which the GPU
Operator's MIG manager does by stopping the GPU's clients or rebooting the node
(`MODE_TOGGLE_S`, assumed one DGX reboot). NVIDIA MIG User Guide, "Getting Started": "toggling
MIG mode on A100/A30 requires a GPU reset" (facts/hardware.md 1.1); we assume the same of
Hopper. Either is bounded by `MIG_TIMEOUT_S`, the time the rendered CronJob gives a batch.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass

from infra.spec.cron import minutes_on
from infra.topology.facts_model import MigState
from infra.topology.groups import MIG_TIMEOUT_S
from infra.topology.model import GroupPlan

__all__ = [
    "MODE_TOGGLE_S",
    "RECONFIGURE_S",
    "Firing",
    "firings_on_day",
    "origin_s",
    "reconfigure_s",
]

RECONFIGURE_S = 60.0
"""Seconds mig-parted takes to destroy and create a node's instances (assumption)."""

MODE_TOGGLE_S = 600.0
"""Seconds for a GPU reset by node reboot where MIG mode toggles (assumption: a DGX boots in
several minutes; the spec's Slurm `resume_timeout` default, 15 min, says the same order)."""

_EPOCH = dt.date(2024, 1, 1)  # a Monday


@dataclass(frozen=True, slots=True)
class Firing:
    """One firing of one change of one group, at trace time ``at_s``."""

    at_s: float
    group: str
    change: int  # index into the group's `mig.changes`


def origin_s(trace_origin: float | None, timezone: str) -> float:
    """Unix seconds of trace time 0."""
    if trace_origin is not None:
        return trace_origin
    zone = zoneinfo.ZoneInfo(timezone)
    return dt.datetime(_EPOCH.year, _EPOCH.month, _EPOCH.day, tzinfo=zone).timestamp()


def local_day(unix_s: float, timezone: str) -> dt.date:
    """The local date at ``unix_s``."""
    return dt.datetime.fromtimestamp(unix_s, zoneinfo.ZoneInfo(timezone)).date()


def firings_on_day(group: GroupPlan, day: dt.date, origin: float) -> list[Firing]:
    """Every change of ``group`` that fires on local ``day``, at trace times, in time order."""
    schedule = group.mig.schedule
    if schedule is None:
        return []
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    out = []
    for k, state in enumerate(group.mig.changes):
        assert state.at is not None
        for minute in minutes_on(state.at, day):
            local = dt.datetime(
                day.year, day.month, day.day, minute // 60, minute % 60, tzinfo=zone
            )
            out.append(Firing(local.timestamp() - origin, group.name, k))
    return sorted(out, key=lambda f: (f.at_s, f.change))


def reconfigure_s(before: MigState, after: MigState) -> float:
    """What re-laying out one node from ``before`` to ``after`` costs, bounded by the timeout."""
    toggles = any(
        (a is None) != (b is None) for a, b in zip(before.per_gpu, after.per_gpu, strict=False)
    )
    return float(min(MIG_TIMEOUT_S, RECONFIGURE_S + (MODE_TOGGLE_S if toggles else 0.0)))
