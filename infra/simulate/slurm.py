"""Slurm's scheduling for Slurm specs: the main scheduler and `sched/backfill`, as Slurm runs them.

What the rendered slurm.conf configures (`infra.topology.slurm_sched`): `priority/basic`
(no `PriorityType` line), so jobs are served first come, first served (submission order);
`sched/backfill` with the rendered `SchedulerParameters`. Modelled after Slurm 22.05
(`src/slurmctld/job_scheduler.c`, `src/plugins/sched/backfill/backfill.c`, and the
Scheduling Configuration Guide):

- The main scheduler runs when a job's epilog completes (the rendered slurm.conf has an
  Epilog, so slurmd reports the end as `MESSAGE_EPILOG_COMPLETE` and slurmctld calls
  `schedule()` at once; a trace's run time counts until then), and for a submission at a
  wake-up of slurmctld's background loop `batch_sched_delay` whole seconds after the loop
  last ran it, or at the loop's full pass every `sched_interval` (`BATCH_SCHED_DELAY_S`,
  `SCHED_INTERVAL_S`): it takes pending jobs in priority order and starts each that fits;
  the first that does not blocks its partition, and no later job of that partition starts
  in that run ("once any job in a partition is left pending, no other jobs in that
  partition will be scheduled"). A job's partition is the first node group (spec order)
  with a GPU it accepts.
- Backfill runs at a wake-up of the backfill agent (`infra.simulate.agent_clock`) when
  `bf_interval` has passed since the second its last cycle ended in and there is more work
  (`_more_work`), in whole seconds of `time(NULL)`: a job was submitted, started or ended in
  or after that second (a cycle with nothing to plan still counts), the last cycle pushed a
  job's plan past another job's reservation (`TRY_LATER` updates the job), or its plans
  held an idle node (PLANNED, set and cleared: node updates). It takes up to
  `bf_max_job_test` pending jobs in priority order; for each it finds the earliest time, up
  to `bf_window` ahead, at which its partition's nodes hold it, counting running jobs as
  ending at their start plus their time limit (whole seconds) and keeping out of the nodes
  reserved for the jobs before it. A job that can start now starts; one that cannot
  reserves the nodes it would use from that start to the end of its time limit, both
  rounded down to `bf_resolution`. Reservations are whole nodes, as backfill's node-space
  map is a node bitmap, and are made afresh every cycle.
- Time limits are whole minutes, as Slurm keeps them: a trace's `time_limit_s`, else the job's
  run time (users who know their jobs' length), rounded up to a minute.

Not modelled: the multifactor priority (fairshare, age, QOS weights) and QOS limits, which the
rendered slurm.conf does not configure; `bf_continue` (a cycle here never yields its locks,
so there is nothing to continue); `default_queue_depth` (the main scheduler stops at its
partition's first blocked job long before 100 jobs); the epilog's own run time (a trace's
run times are taken to include it); `bf_window_linear` (the will-run test's windows double
here, Slurm's default); topology-aware node choice (a job takes the lowest-numbered nodes
with room, as cons_tres did on one leaf switch). Fractions of a GPU, CPU-only jobs and jobs
that state CPUs or memory start only when they fit now (no reservation: the plan counts
GPUs only). Tenants' quotas and preemption are Kueue's and Volcano's: a Slurm spec renders
neither, so they are not applied.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from typing import Protocol

from infra.simulate.agent_clock import AgentClock
from infra.simulate.cluster import Allocation, Cluster, GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.place import find, spread
from infra.simulate.policy import SimPolicy
from infra.simulate.state import BACKFILL, SCHED, Events, Run
from infra.topology.slurm_sched import BackfillParameters

__all__ = ["BATCH_SCHED_DELAY_S", "SCHED_INTERVAL_S", "SlurmHost", "SlurmScheduler", "time_limit_s"]

WILL_RUN_WINDOW_S = 30
"""`select/cons_tres`'s first will-run window (Slurm 22.05 `_will_run_test`: running jobs are
removed in batches, the window doubling each time unless `bf_window_linear` is set). A real
slurmctld planned a job after the last of a batch, not the first end that fits, because of
it (tests/slurm_replay)."""

KILL_WAIT_S = 30
"""Slurm's `KillWait` default (the rendered slurm.conf sets none): the will-run test takes a
running job past its time limit's end to end this long after it (`_guess_job_end`)."""

BATCH_SCHED_DELAY_S = 3
"""Slurm 22.05's `batch_sched_delay` default: a submission only flags the main scheduler
(`queue_job_scheduler`); slurmctld's background loop, waking about once a second, runs it
when at least this many whole seconds of `time(NULL)` have passed since the loop last did
(`src/slurmctld/controller.c`, `_slurmctld_background`)."""

SCHED_INTERVAL_S = 60
"""Slurm 22.05's `sched_interval` default: the background loop runs the main scheduler over
the whole queue every this many whole seconds, counted from slurmctld's start."""


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

    def __init__(self, host: SlurmHost, params: BackfillParameters, epoch0: float = 0.0) -> None:
        self.host = host
        self.params = params
        self.epoch0 = epoch0  # wall-clock seconds of trace time 0 (will-run windows align)
        self.pending: list[tuple[float, int, int]] = []  # (submit, line, job), priority order
        self.tick_at: float | None = None  # the next backfill cycle, while jobs wait
        # `_more_work`, in whole seconds as slurmctld keeps them: a job was submitted,
        # started, ended or planned in or after the wall second the last cycle ended in
        self.updated_wall = -math.inf
        self.cycle_wall = -math.inf
        self.blocked = False  # the last main run left a partition blocked for resources
        self.planned = False  # the last cycle left nodes PLANNED (`_plans_idle_node`)
        self.due = False  # the main scheduler runs at this instant (a job ended, or the loop)
        self.requested = False  # a submission asked for the main scheduler (job_sched_cnt)
        last = host.policy.sched_last_s
        # wall second the background loop last ran the main scheduler
        self.last_loop_run = -math.inf if last is None else self._wall(last)
        self.loop_at: float | None = None  # the loop's booked wake-up
        # the threads' clocks, made at their first use (the host's start_s is known then)
        self.loop_clock: AgentClock | None = None
        self.backfill_clock: AgentClock | None = None
        self.took: dict[float, float] | None = None  # seen cycles' run times, by wake-up
        self.job_wall = 0  # wall second backfill tests the current job in
        self.last_full_run = -1  # wall second of the last periodic full pass
        self.partition: dict[int, str] = {}

    def add(self, index: int) -> None:
        """Job ``index`` waits (submitted, or evicted and requeued).

        The submission requests the main scheduler (`queue_job_scheduler`); the background
        loop runs it (`background`).
        """
        job = self.host.jobs[index]
        bisect.insort(self.pending, (job.submit_s, job.line, index))
        self.requested = True
        self._background_later()
        self.changed()

    def _wall(self, t: float) -> int:
        """`time(NULL)` at trace time ``t``: whole seconds of the wall clock."""
        return math.floor(self.epoch0 + t + 1e-9)

    def _loop_tick(self, after: float) -> float:
        """The background loop's first wake-up at or after trace time ``after``.

        It runs through the wake-ups a log showed (`SimPolicy.sched_wakes_s`), else once a
        second from the first submission.
        """
        if self.loop_clock is None:
            self.loop_clock = AgentClock(self.host.policy.sched_wakes_s, self.host.start_s)
        return self.loop_clock.next_at(after)

    def _started(self) -> int:
        """When slurmctld started, wall seconds (`SimPolicy.sched_start_s`, or the first job)."""
        start = self.host.policy.sched_start_s
        return self._wall(self.host.start_s if start is None else start)

    def _full_due(self, wall: int) -> bool:
        """Whether the loop's wake-up in wall second ``wall`` makes the periodic full pass."""
        started = self._started()
        due = wall > started and (wall - started) % SCHED_INTERVAL_S == 0
        return due and wall != self.last_full_run

    def _background_later(self) -> None:
        """Book the loop's next wake-up that may run the main scheduler.

        That is the periodic full pass while jobs wait and, when a submission asked, the
        first wake-up at least `BATCH_SCHED_DELAY_S` whole seconds after the loop's last run.
        """
        host = self.host
        after = host.now + 1e-6  # a later wake-up than the one running now
        started = self._started()
        full_wall = started + SCHED_INTERVAL_S * (
            max(0, self._wall(host.now) - started) // SCHED_INTERVAL_S + 1
        )
        at = self._loop_tick(max(after, full_wall - self.epoch0))
        if self.requested:
            batch = self.last_loop_run + BATCH_SCHED_DELAY_S - self.epoch0
            at = min(at, self._loop_tick(max(after, batch)))
        if self.loop_at is None or at < self.loop_at:
            self.loop_at = at
            host.events.push(at, SCHED)

    def background(self) -> None:
        """The background loop wakes (a SCHED event).

        It runs the main scheduler when the periodic full pass is due, or when a submission
        asked and `batch_sched_delay` allows.
        """
        host = self.host
        if self.loop_at is None or host.now < self.loop_at - 1e-9:
            return  # superseded by an earlier booking
        self.loop_at = None
        wall = self._wall(host.now)
        full = self._full_due(wall)
        if full:
            self.last_full_run = wall
        if full or (self.requested and wall - self.last_loop_run >= BATCH_SCHED_DELAY_S):
            self.requested = False
            self.last_loop_run = wall
            self.due = True
        if self.requested or self.pending:
            self._background_later()

    def _schedule_tick(self) -> None:
        """Schedule the backfill agent's next wake-up `bf_interval` after the last cycle.

        The agent's clock runs through the wake-ups a log showed
        (`SimPolicy.backfill_wakes_s`), else once a second. The interval is counted in whole seconds of `time(NULL)`, as the agent does (`wait_time =
        difftime(now, last_backfill_time)`): with a clock a fraction of a millisecond faster
        than a second, a continuous count skipped the wake-up two seconds on and planned a
        cycle a second after Slurm's.
        """
        host = self.host
        if self.backfill_clock is None:
            self.backfill_clock = AgentClock(host.policy.backfill_wakes_s, host.start_s)
        due = max(host.now, self.cycle_wall + self.params.interval_s - self.epoch0)
        at = self.backfill_clock.next_at(due)
        self.tick_at = at
        host.events.push(at, BACKFILL)

    def changed(self) -> None:
        """A job was submitted, started or ended: the backfill agent has work (`_more_work`).

        An empty queue too: a cycle then finds no jobs to backfill, and still counts.
        """
        self.updated_wall = self._wall(self.host.now)
        if self.tick_at is None:
            self._schedule_tick()

    def ended(self) -> None:
        """A job ended: its epilog's completion runs the main scheduler at once.

        `_slurm_rpc_epilog_complete` calls `schedule()`; a trace's run time counts until then.
        """
        self.due = True
        self.changed()

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
        """Start pending jobs in priority order until each partition's first that waits.

        Only when due (a job ended, or a submission's pass came): other instants do not
        trigger slurmctld's main scheduler.
        """
        if not self.due:
            return
        self.due = False
        blocked: set[str] = set()
        kept = []
        for entry in self.pending:
            group = self._group(entry[2])
            if group is None or group.name in blocked:
                kept.append(entry)
                continue
            alloc = find(self.host.cluster, self.host.jobs[entry[2]], only=group.name)
            if alloc is None:
                blocked.add(group.name)
                kept.append(entry)
            else:
                self.host.start(entry[2], alloc)
                self.changed()
        self.pending = kept
        self.blocked = bool(blocked)

    # --- backfill -----------------------------------------------------------------------

    def backfill(self) -> None:
        """One backfill cycle (module docstring), if there is more work since the last."""
        self.tick_at = None
        if self.updated_wall < self.cycle_wall:
            return  # no more work
        self.cycle_wall = self._wall(self.host.now)
        if self.planned:  # clearing the last cycle's PLANNED nodes is a node update
            self.planned = False
            self.updated_wall = self.cycle_wall
        if not self.pending:  # "no jobs to backfill": a cycle all the same
            if self.updated_wall >= self.cycle_wall:  # a change in this second: more work
                self._schedule_tick()
            return
        reservations: list[_Reservation] = []
        kept = []
        tested = 0
        took = self._cycle_took()
        count = min(len(self.pending), self.params.max_job_test)
        for entry in self.pending:
            group = self._group(entry[2])
            if tested >= self.params.max_job_test or group is None:
                kept.append(entry)
                continue
            tested += 1
            # backfill reads `time(NULL)` after each job's test: a start or a pushed plan
            # late in a cycle that crosses a second updates the job in the next second
            self.job_wall = self._wall(self.host.now + took * tested / count)
            if not self._backfill_job(entry[2], group, reservations):
                kept.append(entry)
        self.pending = kept
        # the agent takes `last_backfill_time` as the cycle ends: a cycle that began a few
        # milliseconds before a second boundary counts from the next second
        self.cycle_wall = self._wall(self.host.now + took)
        if self._plans_idle_node(reservations):
            self.planned = True
            self.updated_wall = self.cycle_wall
        if self.updated_wall >= self.cycle_wall:
            self._schedule_tick()

    def _cycle_took(self) -> float:
        """How long this cycle takes: as long as the log's cycle at this wake-up, else none."""
        if self.took is None:
            policy = self.host.policy
            self.took = dict(zip(policy.backfill_wakes_s, policy.backfill_took_s, strict=False))
        return self.took.get(self.host.now, 0.0)

    def _plans_idle_node(self, reservations: list[_Reservation]) -> bool:
        """Whether a reservation holds a node that runs nothing.

        Backfill marks such a node PLANNED at the cycle's end and clears it at the next
        one's start (`_handle_planned`), and each is a node update, so the next two cycles
        have work. While a big job's reservation keeps a node idle, cycles so follow each
        other `bf_interval` apart.
        """
        reserved = {n for _, _, nodes in reservations for n in nodes}
        if not reserved:
            return False
        busy = {part.node for run in self.host.running.values() for part in run.alloc}
        return not reserved <= busy

    def _backfill_job(
        self, index: int, group: GroupIndex, reservations: list[_Reservation]
    ) -> bool:
        """Start job ``index`` now if it can (True), else plan it in ``reservations``.

        Starting a job, or planning one past another job's reservation, updates it: more
        work for the next cycle.
        """
        host, job = self.host, self.host.jobs[index]
        if job.fractional or job.gpus == 0 or job.cpu_milli or job.memory_mib:
            # a slice, or CPUs and memory the plan below does not count: now or not at all
            alloc = find(host.cluster, job, only=group.name)
            if alloc is not None:
                host.start(index, alloc)
                self.updated_wall = self.job_wall
            return alloc is not None
        limit = time_limit_s(job)
        start, nodes, pushed = self._earliest(job, group, limit, reservations)
        if start is not None and start <= host.now:
            host.start(index, self._alloc(job, group, nodes))
            self.updated_wall = self.job_wall
            return True
        if start is not None:
            reservations.append(self._reserve(start, start + limit, nodes))
            if pushed:
                self.updated_wall = self.job_wall
        return False

    def _reserve(self, start: float, end: float, nodes: list[int]) -> _Reservation:
        """Nodes held from ``start`` to ``end`` as backfill's map holds them.

        Both ends are rounded down to `bf_resolution` on the wall clock, and the hold is at
        least one `bf_resolution` long (`_attempt_backfill`, `_add_reservation`).
        """
        res, epoch0 = self.params.resolution_s, self.epoch0
        begin = math.floor((epoch0 + start) / res + 1e-9) * res
        until = max(math.floor((epoch0 + end) / res + 1e-9) * res, begin + res)
        return (begin - epoch0, until - epoch0, frozenset(nodes))

    def _earliest(
        self, job: Job, group: GroupIndex, limit: float, reservations: list[_Reservation]
    ) -> tuple[float | None, list[int], bool]:
        """The start backfill plans for ``job``, its nodes, and whether reservations pushed it.

        (None, [], pushed) when it has none within `bf_window`. Now if it fits now; else as
        `select/cons_tres`'s will-run test estimates it: running jobs (ending at start plus
        time limit) are removed in batches, the first up to a barrier `WILL_RUN_WINDOW_S`-
        aligned on the wall clock past the first end plus that window, the window doubling
        for each next batch; the start is the last removed job's end once the job fits.
        Nodes reserved for earlier jobs over the job's time are out; when they are what
        keeps it from a will-run start, backfill tries again from the end of a reservation
        (`TRY_LATER`), and a start found there updates the job (`last_job_update`: more work
        for the next cycle).
        """
        host, now = self.host, self.host.now
        free, ends = self._running_on(group)

        def fits(t: float) -> list[int] | None:
            taken = {n for s, e, nodes in reservations if s < t + limit and e > t for n in nodes}
            return _place(job.gpus, group.per_node, free, taken, host.cluster.placement)

        nodes = fits(now)
        if nodes is not None:
            return now, nodes, False
        horizon = now + self.params.window_s
        pushed = False
        for t in self._batches(ends, free):
            if t > horizon:
                return None, [], pushed
            # a job past its time limit's end (whole seconds) still runs: Slurm guesses it
            # ends KillWait later, never now (`_guess_job_end`)
            at = t if t > now else max(t + KILL_WAIT_S, now + 1)
            nodes = fits(at)
            if nodes is not None:
                return at, nodes, pushed
            pushed = pushed or (
                bool(reservations)
                and _place(job.gpus, group.per_node, free, set(), host.cluster.placement)
                is not None
            )
        for t in sorted(_ends(reservations, now)):  # reserved nodes free up later
            nodes = fits(t) if t <= horizon else None
            if nodes is not None:
                return t, nodes, True
        return None, [], pushed

    def _running_on(
        self, group: GroupIndex
    ) -> tuple[dict[int, int], list[tuple[float, list[tuple[int, int]]]]]:
        """Free GPUs per open node of ``group``, and its running jobs' ends and GPUs there."""
        host = self.host
        free = {
            n.index: n.whole_total for n in host.cluster.nodes if n.group == group.name and n.open
        }
        ends: list[tuple[float, list[tuple[int, int]]]] = []
        for index, run in host.running.items():
            parts = [(part.node, part.whole) for part in run.alloc if part.node in free]
            for node, whole in parts:
                free[node] -= whole
            if parts:  # Slurm keeps a job's start and end in whole seconds (time_t)
                start = self._wall(run.started_s) - self.epoch0
                ends.append((start + time_limit_s(host.jobs[index]), parts))
        ends.sort(key=lambda item: item[0])
        return free, ends

    def _batches(
        self, ends: list[tuple[float, list[tuple[int, int]]]], free: dict[int, int]
    ) -> Iterator[float]:
        """Remove running jobs from ``free`` batch by batch; each batch's last end."""
        window, barrier, i = WILL_RUN_WINDOW_S, None, 0
        while i < len(ends):
            last = ends[i][0]
            while i < len(ends):
                end, parts = ends[i]
                if barrier is None:
                    wall = self.epoch0 + end
                    barrier = end + (window - wall % window)
                for node, whole in parts:
                    free[node] += whole
                last, i = end, i + 1
                if i < len(ends) and ends[i][0] > barrier + window:
                    break
            window *= 2
            while i < len(ends) and barrier is not None and ends[i][0] > barrier + window:
                window *= 2
            yield last

    def _alloc(self, job: Job, group: GroupIndex, nodes: list[int]) -> Allocation:
        per, cluster = group.per_node, self.host.cluster
        if job.gpus <= per:
            return spread(job, [(cluster.nodes[nodes[0]], job.gpus)])
        whole, rest = divmod(job.gpus, per)
        out = [(cluster.nodes[n], per) for n in nodes[:whole]]
        if rest:
            out.append((cluster.nodes[nodes[whole]], rest))
        return spread(job, out)


def _ends(reservations: list[_Reservation], now: float) -> set[float]:
    return {e for _, e, _ in reservations if e > now}


def _place(
    gpus: int, per: int, free: dict[int, int], taken: set[int], placement: str
) -> list[int] | None:
    """Nodes for ``gpus`` whole GPUs given each node's free GPUs, outside ``taken``.

    One node: the lowest-numbered that holds them (first fit, Slurm's), or the tightest
    (best fit). More: wholly free nodes in plan order, and the rest on one more node chosen
    the same way.
    """
    key = (lambda fn: fn[1]) if placement == "first-fit" else (lambda fn: fn)
    usable = [(f, n) for n, f in free.items() if n not in taken]
    if gpus <= per:
        fits = [(f, n) for f, n in usable if f >= gpus]
        return [min(fits, key=key)[1]] if fits else None
    whole, rest = divmod(gpus, per)
    full = sorted(n for f, n in usable if f >= per)
    if len(full) < whole:
        return None
    chosen = full[:whole]
    if not rest:
        return chosen
    others = [(f, n) for f, n in usable if f >= rest and n not in chosen]
    return [*chosen, min(others, key=key)[1]] if others else None
