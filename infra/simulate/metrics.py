"""Figures of a replay: time-weighted allocation, queueing-delay percentiles, series, 24 h profile.

`Meter` integrates piecewise-constant values (allocated GPUs per group or tenant) lazily:
each change adds ``value x time since the last change``. `Steps` keeps the cluster total's
change points for the time-weighted percentiles, the plotted series and the 24 h profile.
Percentiles of delays use the nearest-rank method (the smallest value with at least ``p`` %
of the values at or below it; no interpolation), so every reported delay is one a job saw.
Job-size buckets: ``<=1`` GPU (fractions included), ``2-8``, ``9-64``, ``65-512``, ``>512``.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from infra.simulate.cluster import Allocation, Cluster
from infra.simulate.result import Delays

__all__ = [
    "SERIES_POINTS",
    "SIZE_BUCKETS",
    "Meter",
    "Metered",
    "Steps",
    "Window",
    "delays",
    "meter",
    "nearest_rank",
    "size_bucket",
]

SERIES_POINTS = 400
"""Most points of the plotted allocation series."""

SIZE_BUCKETS = ("<=1", "2-8", "9-64", "65-512", ">512")


def size_bucket(gpus: int) -> str:
    """The job-size bucket of a job asking for ``gpus`` GPUs (or a fraction of one)."""
    for bound, name in ((1, "<=1"), (8, "2-8"), (64, "9-64"), (512, "65-512")):
        if gpus <= bound:
            return name
    return ">512"


def nearest_rank(ordered: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values by nearest rank (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def delays(values: list[float]) -> Delays:
    """Count, mean and nearest-rank p50/p95/p99 of queueing delays (seconds)."""
    ordered = sorted(values)
    mean = sum(ordered) / len(ordered) if ordered else 0.0
    return Delays(
        len(ordered),
        round(mean, 3),
        round(nearest_rank(ordered, 50), 3),
        round(nearest_rank(ordered, 95), 3),
        round(nearest_rank(ordered, 99), 3),
    )


class Meter:
    """Time integrals of values that change at events (GPU-seconds per key)."""

    def __init__(self) -> None:
        self.value: dict[str, float] = {}
        self.since: dict[str, float] = {}
        self.area: dict[str, float] = {}

    def add(self, key: str, delta: float, now: float) -> None:
        """The value of ``key`` changes by ``delta`` at ``now``."""
        self._close(key, now)
        self.value[key] = self.value.get(key, 0.0) + delta

    def opened(self, key: str, now: float) -> float:
        """The value of ``key``, its integral closed at ``now`` (the caller sets the next)."""
        self._close(key, now)
        return self.value.get(key, 0.0)

    def _close(self, key: str, now: float) -> None:
        value = self.value.get(key, 0.0)
        self.area[key] = self.area.get(key, 0.0) + value * (now - self.since.get(key, now))
        self.since[key] = now

    def areas(self, now: float) -> dict[str, float]:
        """Every key's integral up to ``now``."""
        for key in list(self.value):
            self._close(key, now)
        return dict(sorted(self.area.items()))


class Steps:
    """The cluster's allocated GPUs over time, as change points ``(t, value)``."""

    def __init__(self) -> None:
        self.t = array("d", [0.0])
        self.v = array("d", [0.0])

    def set(self, now: float, value: float) -> None:
        """Allocated GPUs are ``value`` from ``now`` on."""
        if now == self.t[-1]:
            self.v[-1] = value
        else:
            self.t.append(now)
            self.v.append(value)

    def segments(self, start: float, end: float) -> list[tuple[float, float]]:
        """``(value, duration)`` of each constant piece within [start, end]."""
        out = []
        ends = itertools.chain(itertools.islice(self.t, 1, None), (end,))
        for t, nxt, value in zip(self.t, ends, self.v, strict=True):
            lo, hi = max(t, start), min(nxt, end)
            if hi > lo:
                out.append((value, hi - lo))
        return out

    def weighted_pct(self, start: float, end: float, pct: float) -> float:
        """Time-weighted ``pct`` percentile of the value over [start, end]."""
        return self.weighted_pcts(start, end, (pct,))[0]

    def weighted_pcts(self, start: float, end: float, pcts: Sequence[float]) -> list[float]:
        """`weighted_pct` of each of ``pcts``, the pieces sorted once."""
        pieces = sorted(self.segments(start, end))
        total = sum(d for _, d in pieces)
        return [_weighted(pieces, total, pct) for pct in pcts]

    def at(self, times: Sequence[float]) -> list[float]:
        """The value at each of the sorted ``times``."""
        out, i = [], 0
        for t in times:
            while i + 1 < len(self.t) and self.t[i + 1] <= t:
                i += 1
            out.append(self.v[i])
        return out

    def profile(self, start: float, end: float, offset_s: float) -> list[float]:
        """Mean value per hour of the day (``offset_s``: seconds past local midnight at t=0)."""
        area, span = [0.0] * 24, [0.0] * 24
        ends = itertools.chain(itertools.islice(self.t, 1, None), (end,))
        for t, nxt, value in zip(self.t, ends, self.v, strict=True):
            lo, hi = max(t, start), min(nxt, end)
            while hi > lo:
                hour = int(((lo + offset_s) % 86_400) // 3600)
                cut = min(hi, lo + 3600 - (lo + offset_s) % 3600)
                area[hour] += value * (cut - lo)
                span[hour] += cut - lo
                lo = cut
        return [a / s if s else 0.0 for a, s in zip(area, span, strict=True)]


def _weighted(pieces: list[tuple[float, float]], total: float, pct: float) -> float:
    """The ``pct`` percentile of sorted ``(value, duration)`` pieces lasting ``total``."""
    if total <= 0:
        return 0.0
    acc, bar = 0.0, pct / 100 * total - 1e-9
    for value, duration in pieces:
        acc += duration
        if acc >= bar:
            return value
    return pieces[-1][0]


@dataclass(frozen=True, slots=True)
class Window:
    """GPU-second integrals at the end of the trace window (its last submission)."""

    end_s: float
    by_group: dict[str, float]
    by_tenant: dict[str, float]
    frag_area: float
    fgd_area: float = 0.0


class Metered(Protocol):
    """What `meter` reads and changes of the replay (`infra.simulate.engine.Replay`)."""

    now: float
    alloc: float  # GPUs held in the cluster now
    steps: Steps
    by_group: Meter
    by_tenant: Meter
    cluster: Cluster


def meter(replay: Metered, tenant: str, alloc: Allocation, sign: int) -> None:
    """A job of ``tenant`` takes (``sign`` +1) or gives back (-1) ``alloc`` now.

    `Meter.add` per part, in the same order of additions per key: a key's integral is
    closed once per instant (closing again at the same instant adds nothing).
    """
    now, nodes, groups = replay.now, replay.cluster.nodes, replay.by_group
    if not alloc:
        replay.steps.set(now, replay.alloc)
        return
    held = replay.by_tenant.opened(tenant, now)
    total, group, value = replay.alloc, "", 0.0
    for part in alloc:
        delta = sign * part.held
        name = nodes[part.node].group
        if name != group:
            if group:
                groups.value[group] = value
            group, value = name, groups.opened(name, now)
        value += delta
        held += delta
        total += delta
    if group:
        groups.value[group] = value
    replay.by_tenant.value[tenant] = held
    replay.alloc = total
    replay.steps.set(now, total)
