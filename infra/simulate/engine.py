"""The discrete-event replay: `simulate(spec, plan, catalog, trace)` returns a `SimResult`.

A heap-based loop (`infra.simulate.state.Events`), not SimPy: every event is a plain tuple
and a time step runs one scheduling pass, which keeps 100,000 jobs on 10,000 GPUs within the
speed target (`bench/run.py --case simulate:100000`; SimPy's generator processes cost a
Python frame and a callback per job step). At each time: finishes, MIG steps, power steps
and submits are applied, then one pass admits what fits. The pass serves queue buckets in
priority order (tenant's priority, then the job's, then submit time); a bucket whose head does
not fit is passed over (Kueue's BestEffortFIFO) and, where the spec's preemption allows, its
head may evict lower-priority jobs of its tenant or reclaim GPUs other tenants borrow. Where
nothing can be evicted in a pass (no head has a possible victim among the jobs running or
waiting) the pass serves buckets by shape (`infra.simulate.shapes`), so its cost follows the
shapes waiting, not the jobs. An
evicted job loses the work since its last completed checkpoint (`SimPolicy`) and waits again
with its original submit time. Fragmentation integrates the free GPUs while some queue head
waited for capacity (not for quota). Slurm specs replace the pass with Slurm's main
scheduler and backfill cycles (`infra.simulate.slurm`). A job is admitted on, and charged,
what it holds where it lands (`infra.simulate.cluster.held`); `infra.simulate.livelock`
bounds the events, so a livelock is a located error, never a hang. Everything is ordered by
time, kind, insertion and trace line, so one trace, spec and seed give one result.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

from infra.catalog import Catalog
from infra.progress import Progress, quiet
from infra.simulate.build import build_cluster
from infra.simulate.cluster import Allocation, held, held_by, least_held
from infra.simulate.feasible import never_reasons
from infra.simulate.flavors import kueue_flavors
from infra.simulate.fragment import FgdMeter, typical_shapes
from infra.simulate.inflate import inflate
from infra.simulate.jobs import MILLI_WHOLE, Job, Trace
from infra.simulate.livelock import EventBudget
from infra.simulate.metrics import Meter, Steps, Window, meter
from infra.simulate.migrun import MigRunner
from infra.simulate.place import find
from infra.simulate.policy import SimPolicy
from infra.simulate.power import PowerSaver
from infra.simulate.preempt import Preemptor
from infra.simulate.result import NeverRan, SimResult
from infra.simulate.shapes import ShapeIndex, shape_of
from infra.simulate.slurm import SlurmScheduler
from infra.simulate.state import (
    BACKFILL,
    DAY,
    FINISH,
    MIG,
    POWER,
    SCHED,
    SUBMIT,
    BucketKey,
    Events,
    Queues,
    Run,
)
from infra.simulate.summary import summarise
from infra.simulate.tenants import PRIORITY_RANK, Book
from infra.spec import Spec
from infra.topology.model import Plan
from infra.topology.slurm_sched import backfill_of

__all__ = ["STUCK_S", "Replay", "simulate"]


_new_run = tuple.__new__  # `Run(...)` without the named tuple's keyword-taking __new__

STUCK_S = 8 * 86_400.0
"""Idle time after which waiting jobs are taken to wait for good (see `Replay._stuck`). A
replay without a horizon also stops at the last submit plus every job's duration plus this:
every job run one after another fits in that, so a job still running then is livelocked
(evicted again and again before its first checkpoint, say by frequent MIG changes)."""


def simulate(
    spec: Spec,
    plan: Plan,
    catalog: Catalog,
    trace: Trace,
    *,
    policy: SimPolicy | None = None,
    progress: Progress | None = None,
) -> SimResult:
    """Replay ``trace`` on the planned cluster with the scheduler the spec renders.

    With ``policy.inflate`` the trace is inflated first (`infra.simulate.inflate`) and the
    replay stops at its last arrival.
    """
    policy = policy or SimPolicy()
    workload = trace.jobs  # FGD's typical tasks: the trace as published
    if policy.inflate is not None:
        gpus = sum(g.gpus * g.servers for g in plan.groups.values())
        trace = inflate(trace, gpus, policy.inflate, policy.seed)
        last = max((job.submit_s for job in trace.jobs), default=0.0)
        policy = replace(policy, horizon_s=last)
    replay = Replay(spec, plan, catalog, trace, policy, workload=workload)
    replay.run(progress or quiet)
    return summarise(replay)


class Replay:
    """One replay's state and the handlers of its events."""

    FEW_BUCKETS = 64
    """Waiting buckets from which passes may serve shapes (`_shape_pass`)."""

    def __init__(
        self,
        spec: Spec,
        plan: Plan,
        catalog: Catalog,
        trace: Trace,
        policy: SimPolicy,
        *,
        workload: Sequence[Job] | None = None,
    ) -> None:
        """``workload``: the jobs FGD's typical shapes come from (default: ``trace``'s)."""
        self.spec, self.plan, self.catalog, self.trace, self.policy = (
            spec,
            plan,
            catalog,
            trace,
            policy,
        )
        self.cluster = build_cluster(spec, plan, catalog)
        own = "first-fit" if spec.scheduler.kind == "slurm" else "best-fit"
        self.cluster.placement = policy.placement or own
        self.cluster.seed(policy.seed)
        in_effect = spec.scheduler.preemption_in_effect(by_hypernode=bool(plan.sus))
        self.book = Book(list(spec.scheduler.tenants), in_effect)
        self.flavors = kueue_flavors(spec, plan)  # tenant -> its Kueue flavors' groups
        self.events, self.queues = Events(), Queues()
        self.jobs: list[Job] = []
        self.never: list[NeverRan] = []
        self.never_jobs: list[tuple[Job, str]] = []
        self.remaining: list[float] = []
        self.first_start: list[float | None] = []
        self.end_at: list[float | None] = []  # when each job finished
        self.evictions: list[int] = []  # times each job was evicted
        self.running: dict[int, Run] = {}
        self.tokens: list[int] = []
        self.rank: list[tuple[int, int]] = []
        self.classes: dict[tuple[int, int, str], dict[int, None]] = {}  # running, by priority
        self.blocked: dict[BucketKey, bool] = {}  # bucket -> blocked for capacity (not quota)
        self.tried_preempt: dict[BucketKey, float] = {}  # bucket -> time of its last try
        self.changes = 0  # counts requeues, unblockings and hand-overs (`_pass`)
        # after a pass: (``changes`` then, the earliest last try of a bucket that may preempt)
        self.calm: tuple[int, float] = (-1, 0.0)
        self.starts = 0
        self.active = 0
        self.now = 0.0
        self.alloc = 0.0
        self.steps = Steps()
        self.by_group, self.by_tenant = Meter(), Meter()
        self.frag_area = 0.0
        self.starved = False
        self.preemptions = self.reclaims = 0
        self.start_s = self.end_s = self.last_change = 0.0
        self.window: Window | None = None
        self.lost_gpu_s = 0.0  # held GPU-seconds of work evictions threw away
        self.work_gpu_s = 0.0  # held GPU-seconds of work kept (finished, or checkpointed)
        self.resume_gpu_s = 0.0  # held GPU-seconds waiting for powered-off nodes to boot
        self.asked_gpu_s = 0.0  # what the jobs asked for (a fraction its part) while held
        self.fgd_area = 0.0  # FGD fragmentation (GPUs) integrated over time
        self.mig = MigRunner(self)
        self.power = PowerSaver(self)
        self._load()
        models = {name: g.gpu_model for name, g in self.cluster.groups.items()}
        shapes = typical_shapes(self.jobs if workload is None else workload, self.cluster.max_gpus)
        self.fgd = FgdMeter(self.cluster.nodes, models, shapes)
        self.cluster.dirty = self.fgd.dirty
        self.cluster.fgd = self.fgd
        self.budget = EventBudget(self, policy.preemptions_per_job)
        self.preemptor = Preemptor(self)
        self.slurm = (
            SlurmScheduler(self, backfill_of(spec), trace.origin_unix_s or 0.0)
            if spec.scheduler.kind == "slurm"
            else None
        )
        self.shapes = (
            ShapeIndex(
                self,
                shape_of(self.jobs, self.rank, self.cluster, self.book.quota),
                self.preemptor.may_preempt,
                policy.preempt_retry_s,
            )
            if self.slurm is None
            else None
        )

    # --- set-up ------------------------------------------------------------------------

    def _load(self) -> None:
        reasons = never_reasons(self.spec, self.plan, self.catalog, self.trace.jobs)
        shared: dict[tuple[int, int], tuple[int, int]] = {}  # one tuple per rank, not per job
        ranks: dict[tuple[str, str], tuple[int, int]] = {}  # by tenant and priority
        jobs, rank_of = self.jobs, self.rank
        for at, job in enumerate(self.trace.jobs):
            reason = reasons.get(at, "")
            if reason:
                self.never.append(NeverRan(job.id, job.line, reason))
                self.never_jobs.append((job, reason))
                continue
            jobs.append(job)
            rank = ranks.get((job.tenant, job.priority))
            if rank is None:
                rank = self._ranks(job)
                rank = ranks[(job.tenant, job.priority)] = shared.setdefault(rank, rank)
            rank_of.append(rank)
        count = len(jobs)  # the per-job lists in bulk, not five appends a job
        self.remaining.extend([job.duration_s for job in jobs])
        self.first_start.extend([None] * count)
        self.end_at.extend([None] * count)
        self.evictions.extend([0] * count)
        self.tokens.extend([0] * count)
        self.events.arrive_all([job.submit_s for job in jobs])
        self.events.seal()
        self.active = self.unsubmitted = len(self.jobs)
        self.start_s = min((j.submit_s for j in self.jobs), default=0.0)
        self.window_end = max((j.submit_s for j in self.jobs), default=0.0)
        self.mig.start(self.start_s)
        self.power.start(self.start_s)

    # --- the loop ----------------------------------------------------------------------

    def run(self, progress: Progress) -> None:
        """Process events until every job has finished (or the horizon)."""
        events, done, every = self.events, 0, self.policy.progress_every
        total = 3 * len(self.jobs) + 1
        horizon = self.policy.horizon_s
        if horizon is None:  # serial execution bounds any sane schedule; past it, a livelock
            last = max((j.submit_s for j in self.jobs), default=0.0)
            horizon = last + sum(j.duration_s for j in self.jobs) + STUCK_S
        mig_changes = self.mig.changes  # `MigRunner.busy`: a change is under way
        while events and (self.active or mig_changes):
            if not self.running and self._stuck():
                break
            at = events.next_at()
            if horizon is not None and at > horizon:
                self._advance(horizon)
                break
            if self.window is None and at > self.window_end:
                self._advance(self.window_end)
                self.window = self._snapshot()
            self._advance(at)
            while (event := events.pop_at(at)) is not None:
                self._handle(*event)
                done += 1
            self.schedule()
            if done // every != (done - 1) // every:
                progress("replaying events", min(done, total - 1), total)
        progress("replayed", total, total)
        self.end_s = max(self.now, self.start_s)
        if self.window is None:  # the replay stopped before the last submission
            self.window = self._snapshot()

    def _snapshot(self) -> Window:
        """The measures so far: the trace window's, taken when the last job was submitted."""
        return Window(
            self.now,
            self.by_group.areas(self.now),
            self.by_tenant.areas(self.now),
            self.frag_area,
            self.fgd_area,
        )

    def unfinished(self) -> int:
        """Jobs that had not finished when the replay stopped."""
        return self.active

    def _stuck(self) -> bool:
        """Nothing runs or will arrive, and nothing started for `STUCK_S`: waiting is for good.

        Only scheduled MIG changes still happen then; a week and a day of them has shown every
        layout a daily or weekly schedule makes, so the jobs still waiting never fit.
        """
        return not self.running and not self.unsubmitted and self.now - self.last_change > STUCK_S

    def _advance(self, at: float) -> None:
        if self.starved:
            self.frag_area += (self.cluster.gpus - self.alloc) * (at - self.now)
        if at > self.now:
            self.fgd_area += self.fgd.flush() * (at - self.now)
        self.now = at  # power saving integrates nothing per step (`PowerSaver.close`)

    def _handle(self, kind: int, payload: tuple[int, ...]) -> None:
        if kind == FINISH:
            index, token = payload
            if self.tokens[index] == token and index in self.running:
                run = self._release(index)
                self.work_gpu_s += (self.now - run.work_from_s) * run.share
                self.end_at[index] = self.now
                if self.slurm is not None:
                    self.slurm.ended()
                self.active -= 1
                self.last_change = self.now
        elif kind == SUBMIT:
            self.unsubmitted -= 1
            self.last_change = self.now
            self._enqueue(payload[0])
        elif kind in (MIG, DAY):
            self.mig.handle(kind, payload)
        elif kind == POWER:
            self.power.handle(payload)
        elif kind == BACKFILL and self.slurm is not None:
            self.slurm.backfill()
        elif kind == SCHED and self.slurm is not None:
            self.slurm.background()

    # --- queues ------------------------------------------------------------------------

    def _ranks(self, job: Job) -> tuple[int, int]:
        """(cross-tenant rank, within-tenant rank) of ``job``."""
        return self.book.tenant_rank(job.tenant, job.priority), PRIORITY_RANK.get(job.priority, 1)

    def _enqueue(self, index: int) -> None:
        if self.slurm is not None:
            self.slurm.add(index)
            return
        job = self.jobs[index]
        key = Queues.key(job, *self.rank[index])
        self.changes += 1
        head = key not in self.queues.buckets or self.queues.order(key) > (
            key[1],
            key[2],
            job.submit_s,
            job.line,
            index,
        )
        if head:
            self.blocked.pop(key, None)  # a new head: try it
            self.tried_preempt.pop(key, None)
        self.queues.push(key, job, index)
        if head and self.shapes is not None:
            self.shapes.pushed(key)

    def unblock_all(self) -> None:
        """Capacity came back (a job ended, a MIG change ended): every bucket may fit again."""
        self.blocked.clear()
        self.changes += 1
        if self.shapes is not None:
            self.shapes.unblock_all()

    def schedule(self) -> None:
        """Admit what fits, in priority order, until a pass starts nothing.

        Again after a start: it gives preemption new victims, an eviction requeues a job.
        Slurm specs run Slurm's main scheduler instead (`infra.simulate.slurm`).
        """
        if self.slurm is not None:
            self.slurm.main()
            self.starved = self.slurm.blocked
            return
        if self.shapes is not None:
            while self._shape_pass(self.shapes):
                pass
            if self.shapes.synced:
                self.starved = self.shapes.starved
                return
        else:
            while self._pass():
                pass
        self.starved = self._blocked_for_capacity()

    def _blocked_for_capacity(self) -> bool:
        """Whether some waiting bucket is blocked for GPUs (not quota)."""
        buckets = self.queues.buckets
        return any(capacity and key in buckets for key, capacity in self.blocked.items())

    def _shape_pass(self, shapes: ShapeIndex) -> bool:
        """A pass by shape where nothing can be evicted in it, else the pass over buckets.

        Over a few buckets the engine's pass is as cheap, without the check: the shapes take
        over from `FEW_BUCKETS` waiting and hand back below half as many.
        """
        few = self.FEW_BUCKETS // 2 if shapes.synced else self.FEW_BUCKETS
        if len(self.queues.buckets) >= few and self.preemptor.quiet(self.queues):
            if not shapes.synced:
                shapes.resync(self.blocked, self.tried_preempt)
            self.changes += 1  # the shapes keep the buckets' state now
            return shapes.run(self.now)
        if shapes.synced:
            self.blocked, self.tried_preempt = shapes.export()
            self.changes += 1
        return self._pass()

    def _pass(self) -> bool:
        """Try each bucket not blocked, or whose head may try preemption now, in order.

        A pass ends with every bucket blocked (tried and not started). Until a job is
        requeued or the buckets unblocked (`changes`), a later pass would try only the
        buckets whose preemption retry is due, none before ``preempt_retry_s`` after the
        earliest last try (``calm``): such a pass is not made (it would start nothing).
        """
        mark, floor = self.calm
        if mark == self.changes and self.now - floor < self.policy.preempt_retry_s:
            return False
        heap, floor = self._ready()
        q, tried, preempting = self.queues, self.tried_preempt, self.preemptor.preempting
        started, changes = False, self.changes
        while heap:
            _, key = heapq.heappop(heap)
            index = q.head(key)
            alloc = self._fit(key, index)
            if alloc is None:
                if key[0] in preempting:  # its last try is final: it is not tried again
                    floor = min(floor, tried.get(key, floor))
                continue
            q.pop(key)
            self._start(index, alloc)
            started = True
            if key in q.buckets:
                heapq.heappush(heap, (q.order(key), key))
        self.calm = (changes if self.changes == changes else -1, floor)
        return started

    def _ready(self) -> tuple[list[tuple[tuple[int, int, float, int, int], BucketKey]], float]:
        """The buckets a pass tries, as a heap in service order; the earliest last try of the rest.

        `Queues.order` of each bucket not blocked, or whose head may try preemption now
        (`infra.simulate.retry.retry_due`, inline: most waiting buckets are blocked, every pass
        reads them).
        """
        blocked, tried = self.blocked, self.tried_preempt
        now, retry_s = self.now, self.policy.preempt_retry_s
        preempting = self.preemptor.preempting
        heap = []
        floor = float("inf")
        for k, bucket in self.queues.buckets.items():
            if k in blocked:
                if k[0] not in preempting:
                    continue
                last = tried.get(k)
                if last is not None and (now - last < retry_s or (last == now and retry_s > 0)):
                    floor = min(floor, last)
                    continue
            heap.append(((k[1], k[2], *bucket[0]), k))
        heapq.heapify(heap)
        return heap, floor

    def _fit(self, key: BucketKey, index: int) -> Allocation | None:
        alloc = None
        if key not in self.blocked:
            alloc, for_capacity = self.admit(index)
            if alloc is None:
                self.blocked[key] = for_capacity
        # the head may try preemption: its tenant may evict and `retry_due` says so (inline)
        if alloc is None and key[0] in self.preemptor.preempting:
            last, now, retry_s = self.tried_preempt.get(key), self.now, self.policy.preempt_retry_s
            if last is not None and not (
                now - last >= retry_s and not (last == now and retry_s > 0)
            ):
                return None
            self.tried_preempt[key] = now
            alloc = self.preemptor.preempt(index)
        return alloc

    def admit(self, index: int) -> tuple[Allocation | None, bool]:
        """Where waiting job ``index`` starts now, if quota admits it there.

        Else None, and True when it waits for GPUs, False when for quota.
        """
        job = self.jobs[index]
        least = self.book.admits(job.tenant, least_held(job, self.cluster.replicas))
        order = self.flavors.get(job.tenant)
        alloc = find(self.cluster, job, order=order) if least else None  # least: not admitted
        if alloc is None:
            return None, least
        # a job of whole GPUs holds what it asked for (`held_by`), just admitted as ``least``
        if job.fractional and not self.book.admits(job.tenant, held_by(job, alloc)):
            return None, False
        return alloc, True

    # --- starting, finishing, evicting -------------------------------------------------

    def start(self, index: int, alloc: Allocation) -> None:
        """Start waiting job ``index`` on ``alloc`` now (Slurm's schedulers call this)."""
        self._start(index, alloc)

    def _start(self, index: int, alloc: Allocation) -> None:
        job, now = self.jobs[index], self.now
        self.budget.started(index, now)
        share = held(alloc)
        self.cluster.take(alloc)
        self.book.add(job.tenant, share)
        # power saving off: nothing is ever off, so waking is a no-op
        delay = self.power.wake({part.node for part in alloc}) if self.power.enabled else 0.0
        self.tokens[index] += 1
        self.running[index] = _new_run(Run, (alloc, share, now, now + delay, self.tokens[index]))
        if self.first_start[index] is None:
            self.first_start[index] = now + delay
        self.classes.setdefault((*self.rank[index], job.tenant), {})[index] = None
        meter(self, job.tenant, alloc, +1)
        self.events.push(now + delay + self.remaining[index], FINISH, index, self.tokens[index])
        self.starts += 1
        self.last_change = now

    def _release(self, index: int, *, freed: bool = False) -> Run:
        run = self.running.pop(index)
        job = self.jobs[index]
        self.resume_gpu_s += (min(self.now, run.work_from_s) - run.started_s) * run.share
        self.asked_gpu_s += job.gpus * job.milli / MILLI_WHOLE * (self.now - run.started_s)
        if not freed:
            self.cluster.give(run.alloc)
            self.book.add(job.tenant, -run.share)
        meter(self, job.tenant, run.alloc, -1)
        self.classes[(*self.rank[index], job.tenant)].pop(index)
        self.unblock_all()
        if self.power.enabled or self.mig.changes:  # else an emptied node changes nothing
            for node in {part.node for part in run.alloc}:
                if self.cluster.nodes[node].empty:
                    self.power.idle(node)
                    self.mig.node_emptied(node)
        return run

    def evict(self, index: int, *, freed: bool = False) -> float:
        """Stop a running job; it keeps the work of its last checkpoint and waits again.

        Returns the GPU-seconds of work lost. ``freed``: its GPUs were already given back.
        """
        run = self._release(index, freed=freed)
        self.evictions[index] += 1
        ran = max(0.0, self.now - run.work_from_s)
        saved = self.policy.saved_s(ran)
        self.remaining[index] -= saved
        self.tokens[index] += 1
        lost = (ran - saved) * run.share
        self.lost_gpu_s += lost
        self.work_gpu_s += saved * run.share
        self._enqueue(index)
        return lost
