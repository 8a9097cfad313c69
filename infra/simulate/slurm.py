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
  or after that second (a cycle with nothing to plan still counts), the last cycle planned
  a job later than its will-run estimate because of reservations (`last_job_update`), or
  its plans held an idle node (PLANNED, set and cleared: node updates). It takes up to
  `bf_max_job_test` pending jobs in priority order and plans each as
  `infra.simulate.slurm_willrun` ports it: cons_tres's will-run test over running jobs
  ending at their start plus their time limit, on the nodes free of the reservations made
  for the jobs before it in this cycle, tried again later (`TRY_LATER`) where the
  reservations' map says. A job that can start now starts; one that cannot reserves the
  nodes it would use from that start to the end of its time limit, both rounded down to
  `bf_resolution`, if that start is within `bf_window`. Reservations are whole nodes, as
  backfill's node-space map is a node bitmap, and are made afresh every cycle. A job in its
  epilog (`Job.epilog_s`) has freed its GPUs but keeps new jobs off its nodes.
- Time limits are whole minutes, as Slurm keeps them: a trace's `time_limit_s`, else the job's
  run time (users who know their jobs' length), rounded up to a minute.

Not modelled: the multifactor priority (fairshare, age, QOS weights) and QOS limits, which the
rendered slurm.conf does not configure; `bf_continue` (a cycle here never yields its locks,
so there is nothing to continue); `default_queue_depth` (the main scheduler stops at its
partition's first blocked job long before 100 jobs); `bf_window_linear` (the will-run
test's windows double here, Slurm's default); topology-aware node choice (a job takes the
lowest-numbered nodes with room, as cons_tres did on one leaf switch). Fractions of a GPU,
CPU-only jobs and jobs that state CPUs or memory start only when they fit now (no
reservation: the plan counts GPUs only). Tenants' quotas and preemption are Kueue's and
Volcano's: a Slurm spec renders neither, so they are not applied.
"""

from __future__ import annotations

import bisect
import math
from typing import Literal, Protocol

from infra.simulate.agent_clock import AgentClock
from infra.simulate.cluster import Allocation, Cluster, GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.place import find, spread
from infra.simulate.policy import SimPolicy
from infra.simulate.slurm_running import RunningIndex, RunningView
from infra.simulate.slurm_willrun import (
    NodeSpace,
    Wanted,
    floor_to,
    mask_of,
    nodes_of,
    will_run,
)
from infra.simulate.state import BACKFILL, SCHED, Events, Run
from infra.topology.slurm_sched import BackfillParameters

__all__ = ["BATCH_SCHED_DELAY_S", "SCHED_INTERVAL_S", "SlurmHost", "SlurmScheduler", "time_limit_s"]

BATCH_SCHED_DELAY_S = 3
"""Slurm 22.05's `batch_sched_delay` default: a submission only flags the main scheduler
(`queue_job_scheduler`); slurmctld's background loop, waking about once a second, runs it
when at least this many whole seconds of `time(NULL)` have passed since the loop last did
(`src/slurmctld/controller.c`, `_slurmctld_background`)."""

SCHED_INTERVAL_S = 60
"""Slurm 22.05's `sched_interval` default: the background loop runs the main scheduler over
the whole queue every this many whole seconds, counted from slurmctld's start."""


MAX_TRIES = 1000
"""`TRY_LATER`s per job before backfill gives it up; Slurm's bound is `bf_max_time` of wall
time. Each try starts later than the last: one that would not (a reservation rounded down
to `bf_resolution` overlaps the nodes the will-run test chose at the end of that same
reservation) gives the job up at once, where Slurm 22.05's code would try it again and again
until `bf_max_time` ends the cycle; a real slurmctld was not seen doing so (the replay runs
`bf_resolution=1`, which cannot come to it)."""


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
    starts: int  # jobs started so far

    def start(self, index: int, alloc: Allocation) -> None:
        """Start job ``index`` on ``alloc`` now."""


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
        # when a list, each future plan as (cycle's wall second, job id, start, nodes): what
        # slurmctld's `_dump_job_sched` lines show, for tests/slurm_replay to compare
        self.plan_log: list[tuple[int, str, int, tuple[int, ...]]] | None = None
        # a cycle's view of running jobs per partition, kept until a job starts
        self.running_view: dict[str, RunningView] = {}
        self.index: RunningIndex | None = None  # running jobs' ends, kept as they start and end

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
        (`SimPolicy.backfill_wakes_s`), else once a second. The interval is counted in
        whole seconds of `time(NULL)`, as the agent does (`wait_time =
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
        """One backfill cycle (module docstring), if there is more work since the last.

        A cycle with no jobs to backfill counts all the same.
        """
        self.tick_at = None
        if self.updated_wall < self.cycle_wall:
            return  # no more work
        self.cycle_wall = self._wall(self.host.now)
        if self.planned:  # clearing the last cycle's PLANNED nodes is a node update
            self.planned = False
            self.updated_wall = self.cycle_wall
        begin = self.cycle_wall
        self.running_view = {}
        space = NodeSpace(begin, begin + self.params.window_s, self.params.resolution_s)
        took = self._cycle_took()
        self._test_jobs(space, took)
        # the agent takes `last_backfill_time` as the cycle ends: a cycle that began a few
        # milliseconds before a second boundary counts from the next second
        self.cycle_wall = self._wall(self.host.now + took)
        if self._plans_idle_node(space):
            self.planned = True
            self.updated_wall = self.cycle_wall
        if self.updated_wall >= self.cycle_wall:
            self._schedule_tick()

    def _test_jobs(self, space: NodeSpace, took: float) -> None:
        """Start or plan up to `bf_max_job_test` pending jobs in priority order."""
        kept = []
        tested = 0
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
            if not self._backfill_job(entry[2], group, space):
                kept.append(entry)
        self.pending = kept

    def _cycle_took(self) -> float:
        """How long this cycle takes: as long as the log's cycle at this wake-up, else none."""
        if self.took is None:
            policy = self.host.policy
            self.took = dict(zip(policy.backfill_wakes_s, policy.backfill_took_s, strict=False))
        return self.took.get(self.host.now, 0.0)

    def _plans_idle_node(self, space: NodeSpace) -> bool:
        """Whether a reservation holds a node that runs nothing.

        Backfill marks such a node PLANNED at the cycle's end and clears it at the next
        one's start (`_handle_planned`), and each is a node update, so the next two cycles
        have work. A node running any job is ALLOCATED in slurmctld (MIXED is only how
        `sinfo` shows a partly used one) and is left alone. While a big job's reservation
        keeps a node idle, cycles so follow each other `bf_interval` apart.
        """
        nodes = self.host.cluster.nodes
        return any(nodes[n].empty for n in nodes_of(space.reserved))

    def _backfill_job(self, index: int, group: GroupIndex, space: NodeSpace) -> bool:
        """Start job ``index`` now if it can (True), else plan it in ``space``.

        Starting a job, or planning one later than its will-run estimate because of
        reservations, updates it: more work for the next cycle.
        """
        host, job = self.host, self.host.jobs[index]
        if job.fractional or job.gpus == 0 or job.cpu_milli or job.memory_mib:
            # a slice, or CPUs and memory the plan below does not count: now or not at all
            alloc = find(host.cluster, job, only=group.name)
            if alloc is not None:
                host.start(index, alloc)
                self.updated_wall = self.job_wall
                self.running_view = {}
            return alloc is not None
        limit = round(time_limit_s(job))
        start, nodes, pushed = self._plan(job, group, limit, space)
        if pushed:
            self.updated_wall = self.job_wall
        if start is not None and start <= self.job_wall:
            host.start(index, self._alloc(job, group, nodes))
            self.updated_wall = self.job_wall
            self.running_view = {}
            return True
        if start is not None:
            space.reserve(*self._held(start, limit), nodes)
            if self.plan_log is not None:
                self.plan_log.append((space.begin, job.id, start, tuple(sorted(nodes))))
        return False

    def _plan(
        self, job: Job, group: GroupIndex, limit: int, space: NodeSpace
    ) -> tuple[int | None, list[int], bool]:
        """The start backfill plans for ``job`` (wall seconds), its nodes, and a push.

        The push: the plan is later than the job's will-run estimate (`last_job_update`).

        (None, [], pushed) when it has none within `bf_window`. Backfill's `TRY_LATER` loop
        (`infra.simulate.slurm_willrun`): the will-run test on the nodes free of reservations
        from `start_res` over the job's time, tried again from `later_start` when the
        estimate passes it or cannot be had, and from the estimate when its nodes meet a
        reservation the test did not see.
        """
        now = self.job_wall
        view = self.running_view.get(group.name)
        if view is None:
            view = self.running_view[group.name] = self._running_on(group)
        free, ends, completing = view
        part = mask_of(free)
        want = Wanted(job.gpus, group.per_node, self.host.cluster.placement)
        start_res, pushed = now, False
        for _ in range(MAX_TRIES):
            usable, later = space.usable(part, start_res, max(start_res, now) + limit)
            found = will_run(want, free, ends, usable, now)
            if found is None:
                if not later:
                    break
                start_res = later
                continue
            start, nodes = found
            if start_res > start:
                start, pushed = start_res, True
            if start <= now and completing.isdisjoint(nodes):
                return start, nodes, pushed
            if start <= now:  # wait for the epilog (cg_node_bitmap)
                start, later = now + 1, 0
            step = self._after_estimate(start, mask_of(nodes), start_res, later, space, limit)
            if step == "keep":
                return start, nodes, pushed
            if step == "drop":
                break
            start_res = step
        return None, [], pushed

    def _after_estimate(
        self, start: int, nodes: int, start_res: int, later: int, space: NodeSpace, limit: int
    ) -> int | Literal["keep", "drop"]:
        """A future estimate: keep it as the plan, drop it (no plan), or try again from when.

        Again from `later_start` when the estimate passes it, and from the estimate when
        its nodes (a mask) meet a reservation the will-run test did not see.
        """
        if later and start > later:
            return later
        if start > space.end:  # the map ends `bf_window` after the cycle's start
            return "drop"  # too far ahead
        if not space.overlaps(nodes, *self._held(start, limit)):
            return "keep"
        if start == start_res:
            return "drop"  # no progress: Slurm would try the same again until bf_max_time
        return start

    def _held(self, start: int, limit: int) -> tuple[int, int]:
        """A plan's hold in the map: its start and end rounded down to `bf_resolution`."""
        res = self.params.resolution_s
        return floor_to(start, res), floor_to(start + limit, res)

    def _running_on(self, group: GroupIndex) -> RunningView:
        """Free GPUs per open node of ``group``, running jobs' ends, and completing nodes.

        Completing: running a job in its epilog (`Job.epilog_s`). A job's end is its start
        plus its time limit in whole seconds (time_t); jobs on other partitions are listed
        too, with no GPUs here: the will-run test skips them but they still end its
        batches. A completing job's GPUs are free and it is not listed: slurmctld released
        them as it ended. Kept up to date as jobs start and end (`RunningIndex`).
        """
        if self.index is None:
            host = self.host
            self.index = RunningIndex(
                host.cluster, host.jobs, host.running, self._end, lambda: host.starts
            )
        return self.index.view(group, self.host.now)

    def _end(self, job: Job, run: Run) -> int:
        """A running job's end as backfill sees it: start plus time limit, wall seconds."""
        return self._wall(run.started_s) + round(time_limit_s(job))

    def _alloc(self, job: Job, group: GroupIndex, nodes: list[int]) -> Allocation:
        per, cluster = group.per_node, self.host.cluster
        if job.gpus <= per:
            return spread(job, [(cluster.nodes[nodes[0]], job.gpus)])
        whole, rest = divmod(job.gpus, per)
        out = [(cluster.nodes[n], per) for n in nodes[:whole]]
        if rest:
            out.append((cluster.nodes[nodes[whole]], rest))
        return spread(job, out)
