"""Scheduled MIG changes during a replay, batch by batch as the rendered CronJob runs them.

At each firing of a group's change (`infra.simulate.migplan`), the group's SUs are taken in
plan order, one rolling batch (``rolling_batch_sus`` SUs, default one) at a time: its nodes
stop taking new jobs, running jobs get the schedule's `drain_timeout` to finish and are evicted after it (losing the work since
their last checkpoint), then the MIG manager re-partitions the nodes (`reconfigure_s`) and
they take jobs again with the new layout; then the next batch. A change that leaves the layout as
it is costs nothing and is not recorded. A firing while the group is still changing waits for
the change before it (lint RP019 keeps real schedules apart). Each batch becomes a
`Repartition` record.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from infra.simulate.build import node_layout
from infra.simulate.cluster import Cluster
from infra.simulate.jobs import Trace
from infra.simulate.migplan import firings_on_day, local_day, origin_s, reconfigure_s
from infra.simulate.power import PowerSaver
from infra.simulate.result import Repartition
from infra.simulate.state import DAY, MIG, Events, Run
from infra.spec import Spec
from infra.topology.facts_model import MigState
from infra.topology.model import GroupPlan, Plan

__all__ = ["MigHost", "MigRunner"]


class MigHost(Protocol):
    """What MIG changes read and change of the replay (`infra.simulate.engine.Replay`)."""

    spec: Spec
    plan: Plan
    trace: Trace
    cluster: Cluster
    events: Events
    power: PowerSaver
    now: float
    running: dict[int, Run]

    def unblock_all(self) -> None:
        """Capacity came back: every waiting bucket may fit again."""

    def evict(self, index: int, *, freed: bool = False) -> float:
        """Stop a running job; the GPU-seconds of work it lost."""


_FIRE, _DEADLINE, _DONE = 0, 1, 2
_DAY_S = 86_400.0


@dataclass(slots=True)
class _Change:
    group: GroupPlan
    target: MigState
    batches: list[tuple[str, list[int]]]
    batch: int = 0
    t0: float = 0.0
    drained_s: float = 0.0
    reconfigure: float = 0.0
    evicted: int = 0
    lost_s: float = 0.0
    draining: bool = False
    version: int = 0
    nodes: set[int] = field(default_factory=set)


class MigRunner:
    """Fires each scheduled group's changes and walks them over its SUs."""

    def __init__(self, replay: MigHost) -> None:
        self.replay = replay
        self.groups = [g for g in replay.plan.groups.values() if g.mig.schedule is not None]
        zone = self.groups[0].mig.schedule.timezone if self.groups else "UTC"  # type: ignore[union-attr]
        self.zone = zone
        self.origin = origin_s(replay.trace.origin_unix_s, zone)
        self.current = {g.name: g.mig.now for g in self.groups}
        self.changes: dict[str, _Change] = {}
        self.waiting: dict[str, deque[int]] = {g.name: deque() for g in self.groups}
        self.records: list[Repartition] = []

    @property
    def busy(self) -> bool:
        """Whether a change is under way."""
        return bool(self.changes)

    def start(self, t0: float) -> None:
        """Schedule the first day's firings (each day schedules the next)."""
        if self.groups:
            self.replay.events.push(t0 - t0 % _DAY_S, DAY, int(t0 // _DAY_S))

    def handle(self, kind: int, payload: tuple[int, ...]) -> None:
        """A DAY or MIG event."""
        if kind == DAY:
            self._day(payload[0])
            return
        step, index, value = payload
        group = self.groups[index]
        if step == _FIRE:
            self.waiting[group.name].append(value)
            if group.name not in self.changes:
                self._next(group)
            return
        change = self.changes.get(group.name)
        if change is None or change.version != value:
            return
        if step == _DEADLINE:
            self._drained(change)
        else:
            self._done(change)

    def _day(self, day: int) -> None:
        lo, hi = day * _DAY_S, (day + 1) * _DAY_S
        center = local_day(self.origin + lo + _DAY_S / 2, self.zone)
        for index, group in enumerate(self.groups):
            for date in {center.fromordinal(center.toordinal() + d) for d in (-1, 0, 1)}:
                for firing in firings_on_day(group, date, self.origin):
                    if max(lo, self.replay.now) <= firing.at_s < hi:
                        self.replay.events.push(firing.at_s, MIG, _FIRE, index, firing.change)
        self.replay.events.push(hi, DAY, day + 1)

    def _next(self, group: GroupPlan) -> None:
        queue = self.waiting[group.name]
        while queue:
            target = group.mig.changes[queue.popleft()]
            if target.per_gpu != self.current[group.name].per_gpu:
                self.changes[group.name] = _Change(group, target, self._batches(group))
                self._batch_start(self.changes[group.name])
                return
        self.changes.pop(group.name, None)

    def _batches(self, group: GroupPlan) -> list[tuple[str, list[int]]]:
        nodes = self.replay.cluster.nodes
        sus = self.replay.plan.sus
        out: dict[int, list[int]] = {}
        for node in nodes:
            if node.group == group.name:
                out.setdefault(node.su, []).append(node.index)
        singles = [
            (sus[su].name if su < len(sus) else group.name, members) for su, members in out.items()
        ]
        # as the rendered CronJob does: `rolling_batch_sus` SUs at a time, in plan order
        size = group.mig.schedule.rolling_batch_sus if group.mig.schedule else 1
        return [
            (",".join(n for n, _ in chunk), [m for _, ms in chunk for m in ms])
            for chunk in (singles[i : i + size] for i in range(0, len(singles), size))
        ]

    def _batch_start(self, change: _Change) -> None:
        replay = self.replay
        _, members = change.batches[change.batch]
        change.t0, change.evicted, change.lost_s = replay.now, 0, 0.0
        change.nodes, change.draining, change.version = set(members), True, change.version + 1
        replay.cluster.close(members)
        replay.power.wake(change.nodes, free=True)
        if all(replay.cluster.nodes[n].empty for n in members):
            self._drained(change)
            return
        drain = change.group.mig.schedule.drain_s  # type: ignore[union-attr]
        replay.events.push(replay.now + drain, MIG, _DEADLINE, self._index(change), change.version)

    def node_emptied(self, node: int) -> None:
        """A node lost its last job: a draining batch may be done early."""
        group = self.replay.cluster.nodes[node].group
        change = self.changes.get(group)
        nodes = self.replay.cluster.nodes
        if (
            change is not None
            and change.draining
            and node in change.nodes
            and all(nodes[n].empty for n in change.nodes)
        ):
            self._drained(change)

    def _drained(self, change: _Change) -> None:
        replay = self.replay
        change.draining = False
        change.drained_s = replay.now - change.t0
        nodes = change.nodes  # the running jobs with a part on the batch's nodes
        victims = sorted(
            j for j, run in replay.running.items() if any(p.node in nodes for p in run.alloc)
        )
        for victim in victims:
            change.lost_s += replay.evict(victim)
        change.evicted = len(victims)
        change.reconfigure = reconfigure_s(self.current[change.group.name], change.target)
        change.version += 1
        replay.events.push(
            replay.now + change.reconfigure, MIG, _DONE, self._index(change), change.version
        )

    def _done(self, change: _Change) -> None:
        replay = self.replay
        su, members = change.batches[change.batch]
        whole, slices = node_layout(change.target, replay.spec)
        replay.cluster.relayout(members, whole, slices)
        replay.unblock_all()
        for node in members:
            replay.power.idle(node)
        self.records.append(
            Repartition(
                round(change.t0, 3),
                change.group.name,
                su,
                change.target.config,
                len(members),
                round(change.drained_s, 3),
                change.reconfigure,
                change.evicted,
                round(change.lost_s / 3600, 6),
            )
        )
        change.batch += 1
        if change.batch < len(change.batches):
            self._batch_start(change)
            return
        self.current[change.group.name] = change.target
        del self.changes[change.group.name]
        self._next(change.group)

    def _index(self, change: _Change) -> int:
        return self.groups.index(change.group)
