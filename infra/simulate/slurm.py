"""Slurm's scheduling for Slurm specs: the main scheduler and `sched/backfill`, as Slurm runs them.

What the rendered slurm.conf configures (`infra.topology.slurm_sched`): `priority/basic`
(no `PriorityType` line), so jobs are served first come, first served (submission order);
`sched/backfill` with the rendered `SchedulerParameters`. Modelled after Slurm 22.05
(`src/slurmctld/job_scheduler.c`, `src/plugins/sched/backfill/backfill.c`, and the
Scheduling Configuration Guide):

- The main scheduler runs at every event that can start a job (a submission, a job's end):
  it takes pending jobs in priority order and starts each that fits; the first that does not
  blocks its partition, and no later job of that partition starts in that run ("once any
  job in a partition is left pending, no other jobs in that partition will be scheduled").
  A job's partition is the first node group (spec order) with a GPU it accepts.
- Backfill runs every `bf_interval`: it takes up to `bf_max_job_test` pending jobs in
  priority order; for each it finds the earliest time, up to `bf_window` ahead, at which its
  partition's nodes hold it, counting running jobs as ending at their start plus their
  time limit and keeping out of the nodes reserved for the jobs before it. A job that can
  start now starts; one that cannot reserves the nodes it would use from that start to the
  end of its time limit, rounded out to `bf_resolution`. Reservations are whole nodes, as
  backfill's node-space map is a node bitmap, and are made afresh every cycle.
- Time limits are whole minutes, as Slurm keeps them: a trace's `time_limit_s`, else the job's
  run time (users who know their jobs' length), rounded up to a minute.

Not modelled: the multifactor priority (fairshare, age, QOS weights) and QOS limits, which the
rendered slurm.conf does not configure; `bf_continue` (a cycle here never yields its locks,
so there is nothing to continue); `default_queue_depth` and `sched_interval` (the main
scheduler stops at its partition's first blocked job long before 100 jobs); the doubling
precision of `select/cons_tres`'s will-run test (`bf_window_linear`); topology-aware node
choice (a job takes the tightest node that holds it, and larger jobs free nodes in plan
order). Fractions of a GPU start only when they fit now (no reservation). Tenants' quotas and
preemption are Kueue's and Volcano's: a Slurm spec renders neither, so they are not applied.
"""

from __future__ import annotations

import bisect
import math
from typing import Protocol

from infra.simulate.cluster import Allocation, Cluster, GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.policy import SimPolicy
from infra.simulate.state import BACKFILL, Events, Run
from infra.topology.slurm_sched import BackfillParameters

__all__ = ["SlurmHost", "SlurmScheduler", "time_limit_s"]


def time_limit_s(job: Job) -> float:
    """A job's time limit as Slurm keeps it: whole minutes, at least one."""
    limit = job.duration_s if job.limit_s is None else job.limit_s
    return max(1, math.ceil(limit / 60 - 1e-9)) * 60.0


class SlurmHost(Protocol):
    """What Slurm's scheduling reads and changes of the replay (`engine.Replay`)."""

    jobs: list[Job]
    cluster: Cluster
    events: Events
    running: dict[int, Run]
    policy: SimPolicy
    now: float
    start_s: float

    def start(self, index: int, alloc: Allocation) -> None:
        """Start job ``index`` on ``alloc`` now."""


_Reservation = tuple[float, float, frozenset[int]]


class SlurmScheduler:
    """The pending queue in priority order, the main scheduler and the backfill cycle."""

    def __init__(self, host: SlurmHost, params: BackfillParameters) -> None:
        self.host = host
        self.params = params
        self.pending: list[tuple[float, int, int]] = []  # (submit, line, job), priority order
        self.tick_at: float | None = None  # the next backfill cycle, while jobs wait
        self.last_tick = -math.inf
        self.blocked = False  # the last main run left a partition blocked for resources
        self.partition: dict[int, str] = {}

    def add(self, index: int) -> None:
        """Job ``index`` waits (submitted, or evicted and requeued)."""
        job = self.host.jobs[index]
        bisect.insort(self.pending, (job.submit_s, job.line, index))
        if self.tick_at is None:
            self._schedule_tick()

    def _schedule_tick(self) -> None:
        """The next cycle on the daemon's clock: ``first + k x bf_interval``, after the last."""
        host, every = self.host, self.params.interval_s
        first = host.start_s + (host.policy.backfill_phase_s or every)
        steps = max(0, math.ceil((host.now - first) / every - 1e-9))
        at = first + steps * every
        if at <= self.last_tick:
            at += every * (math.floor((self.last_tick - at) / every) + 1)
        self.tick_at = at
        host.events.push(at, BACKFILL)

    def _group(self, index: int) -> GroupIndex | None:
        """The job's partition: the first group (spec order) whose GPU it accepts."""
        name = self.partition.get(index)
        if name is None:
            job = self.host.jobs[index]
            groups = self.host.cluster.groups.values()
            name = next((g.name for g in groups if job.accepts(g.gpu_model)), "")
            self.partition[index] = name
        return self.host.cluster.groups.get(name)

    # --- the main scheduler -------------------------------------------------------------

    def main(self) -> None:
        """Start pending jobs in priority order until each partition's first that waits."""
        blocked: set[str] = set()
        kept = []
        for entry in self.pending:
            group = self._group(entry[2])
            if group is None or group.name in blocked:
                kept.append(entry)
                continue
            alloc = self.host.cluster.find(self.host.jobs[entry[2]], only=group.name)
            if alloc is None:
                blocked.add(group.name)
                kept.append(entry)
            else:
                self.host.start(entry[2], alloc)
        self.pending = kept
        self.blocked = bool(blocked)

    # --- backfill -----------------------------------------------------------------------

    def backfill(self) -> None:
        """One backfill cycle (module docstring), then the next one while jobs wait."""
        self.tick_at, self.last_tick = None, self.host.now
        host, now = self.host, self.host.now
        reservations: list[_Reservation] = []
        kept = []
        tested = 0
        for entry in self.pending:
            index = entry[2]
            group = self._group(index)
            if tested >= self.params.max_job_test or group is None:
                kept.append(entry)
                continue
            tested += 1
            job = host.jobs[index]
            if job.fractional:  # a slice: now or not at all
                alloc = host.cluster.find(job, only=group.name)
                if alloc is None:
                    kept.append(entry)
                else:
                    host.start(index, alloc)
                continue
            limit = time_limit_s(job)
            start, nodes = self._earliest(job, group, limit, reservations)
            if start is None:
                kept.append(entry)
            elif start <= now:
                host.start(index, self._alloc(job, group, nodes))
            else:
                reservations.append(self._reserve(start, start + limit, nodes))
                kept.append(entry)
        self.pending = kept
        if self.pending:
            self._schedule_tick()

    def _reserve(self, start: float, end: float, nodes: list[int]) -> _Reservation:
        res = self.params.resolution_s
        return (math.floor(start / res) * res, math.ceil(end / res) * res, frozenset(nodes))

    def _earliest(
        self, job: Job, group: GroupIndex, limit: float, reservations: list[_Reservation]
    ) -> tuple[float | None, list[int]]:
        """The earliest start within the window and the nodes then, or (None, [])."""
        host, now = self.host, self.host.now
        members = [n for n in host.cluster.nodes if n.group == group.name and n.open]
        ends: list[tuple[float, int, int]] = []  # (expected end, node, whole GPUs)
        free = {n.index: n.whole_total for n in members}
        for index, run in host.running.items():
            end = run.started_s + time_limit_s(host.jobs[index])
            for node, whole, _ in run.alloc:
                if node in free:
                    free[node] -= whole
                    ends.append((end, node, whole))
        ends.sort()
        times = sorted({now, *(e for e, _, _ in ends if e > now)} | _ends(reservations, now))
        horizon = now + self.params.window_s
        done = 0
        for t in times:
            if t > horizon:
                break
            while done < len(ends) and ends[done][0] <= t:
                free[ends[done][1]] += ends[done][2]
                done += 1
            taken = {n for s, e, nodes in reservations if s < t + limit and e > t for n in nodes}
            nodes = _place(job.gpus, group.per_node, free, taken)
            if nodes is not None:
                return t, nodes
        return None, []

    def _alloc(self, job: Job, group: GroupIndex, nodes: list[int]) -> Allocation:
        per = group.per_node
        if job.gpus <= per:
            return ((nodes[0], job.gpus, 0),)
        whole, rest = divmod(job.gpus, per)
        out = [(n, per, 0) for n in nodes[:whole]]
        if rest:
            out.append((nodes[whole], rest, 0))
        return tuple(out)


def _ends(reservations: list[_Reservation], now: float) -> set[float]:
    return {e for _, e, _ in reservations if e > now}


def _place(gpus: int, per: int, free: dict[int, int], taken: set[int]) -> list[int] | None:
    """Nodes for ``gpus`` whole GPUs given each node's free GPUs, outside ``taken``.

    One node: the tightest that holds them (the lowest on a tie). More: wholly free nodes in
    plan order, and the rest on the tightest other node with room.
    """
    usable = [(f, n) for n, f in free.items() if n not in taken]
    if gpus <= per:
        fits = [(f, n) for f, n in usable if f >= gpus]
        return [min(fits)[1]] if fits else None
    whole, rest = divmod(gpus, per)
    full = sorted(n for f, n in usable if f >= per)
    if len(full) < whole:
        return None
    chosen = full[:whole]
    if not rest:
        return chosen
    others = [(f, n) for f, n in usable if f >= rest and n not in chosen]
    return [*chosen, min(others)[1]] if others else None
