"""The replay's mutable state: jobs waiting per queue, jobs running, and the event heap.

`Queues` holds waiting jobs in buckets of one tenant, priority and shape (GPUs, slice size,
GPU model), each ordered by submit time then trace line: jobs of one bucket are alike, so when
its head does not fit none does (BestEffortFIFO tries the next bucket instead). `Events` is a
heap of ``(time, kind, sequence)``: at one time finishes come first, then MIG steps, power
steps and submits, then Slurm's backfill cycles, each in the order they were scheduled, so
ties never depend on hash order. The trace's submits, known before the replay starts, wait in
a sorted array beside the heap (`Events.arrive`, `Events.seal`) and are merged with it as if
they had been pushed first: the heap holds what runs and its timers, not every job of the
trace (a heap of a million submits cost a cache miss per level of every pop, and 130 MB).
"""

from __future__ import annotations

import heapq
from array import array
from typing import NamedTuple

from infra.simulate.cluster import Allocation
from infra.simulate.jobs import Job

__all__ = [
    "BACKFILL",
    "DAY",
    "FINISH",
    "MIG",
    "POWER",
    "SCHED",
    "SUBMIT",
    "BucketKey",
    "Events",
    "Queues",
    "Run",
]

FINISH, MIG, POWER, SUBMIT, DAY, BACKFILL, SCHED = 0, 1, 2, 3, 4, 5, 6

BucketKey = tuple[str, int, int, int, int, str, int, int]
"""(tenant, -tenant rank, -job rank, GPUs, thousandths of a fraction or 0 for whole GPUs,
GPU model or "", thousandths of a CPU, MiB): jobs of one bucket ask for the same."""


class Run(NamedTuple):
    """A running job: where it runs and since when its work advances.

    A named tuple, not a dataclass: one is made per start, and the engine makes it with
    ``tuple.__new__`` (no keyword call).
    """

    alloc: Allocation
    share: float  # GPUs held (slices as their share)
    started_s: float  # resources taken
    work_from_s: float  # work advances from here (after powered-off nodes resume)
    token: int  # matches its finish event


class Events:
    """The event heap, and the trace's submits in time order beside it."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, tuple[int, ...]]] = []
        self.seq = 0
        self.arrivals_at = array("d")  # submit times, sorted once sealed
        self.arrivals = array("q")  # the jobs submitted then
        self.next_arrival = 0  # the first arrival not yet popped

    def push(self, at: float, kind: int, *payload: int) -> None:
        """Schedule an event of ``kind`` at ``at`` with integer ``payload``."""
        self.seq += 1
        heapq.heappush(self.heap, (at, kind, self.seq, payload))

    def arrive(self, at: float, index: int) -> None:
        """Job ``index`` is submitted at ``at`` (before `seal`, and before any `push`).

        It pops as ``(at, SUBMIT, (index,))`` would had it been pushed now: submits are
        pushed before anything else, so their sequence numbers are the lowest.
        """
        self.arrivals_at.append(at)
        self.arrivals.append(index)

    def arrive_all(self, times: list[float]) -> None:
        """`arrive` of the next ``len(times)`` jobs (numbered on from those arrived) at ``times``."""
        self.arrivals.extend(range(len(self.arrivals), len(self.arrivals) + len(times)))
        self.arrivals_at.extend(times)

    def seal(self) -> None:
        """Every submit has arrived: order them by time (a stable sort keeps trace order)."""
        times = self.arrivals_at
        order = sorted(range(len(times)), key=times.__getitem__)
        self.arrivals_at = array("d", (times[i] for i in order))
        self.arrivals = array("q", (self.arrivals[i] for i in order))

    def __bool__(self) -> bool:
        return bool(self.heap) or self.next_arrival < len(self.arrivals)

    def next_at(self) -> float:
        """The time of the next event (infinity when there is none)."""
        heap, at = self.heap, self.next_arrival
        if at < len(self.arrivals_at):
            arrival = self.arrivals_at[at]
            return min(arrival, heap[0][0]) if heap else arrival
        return heap[0][0] if heap else float("inf")

    def pop_at(self, at: float) -> tuple[int, tuple[int, ...]] | None:
        """The next event if it is at ``at``, as (kind, payload); else None, nothing popped."""
        heap, i = self.heap, self.next_arrival
        if (
            i < len(self.arrivals_at)
            and self.arrivals_at[i] == at
            and (not heap or (at, SUBMIT) <= heap[0][:2])
        ):
            self.next_arrival = i + 1
            return SUBMIT, (self.arrivals[i],)
        if heap and heap[0][0] == at:
            _, kind, _, payload = heapq.heappop(heap)
            return kind, payload
        return None

    def pop(self) -> tuple[float, int, tuple[int, ...]]:
        """The next event: (time, kind, payload)."""
        heap, at = self.heap, self.next_arrival
        if at < len(self.arrivals_at):
            arrival = self.arrivals_at[at]
            if not heap or (arrival, SUBMIT) <= heap[0][:2]:
                self.next_arrival = at + 1
                return arrival, SUBMIT, (self.arrivals[at],)
        when, kind, _, payload = heapq.heappop(heap)
        return when, kind, payload


class Queues:
    """Waiting jobs by bucket."""

    def __init__(self) -> None:
        self.buckets: dict[BucketKey, list[tuple[float, int, int]]] = {}
        # waiting buckets per (tenant, -tenant rank, -job rank): who may start, or preempt
        self.classes: dict[tuple[str, int, int], int] = {}

    @staticmethod
    def key(job: Job, tenant_rank: int, job_rank: int) -> BucketKey:
        """The bucket of ``job``."""
        size = job.milli if job.fractional else 0
        return (
            job.tenant,
            -tenant_rank,
            -job_rank,
            job.gpus,
            size,
            job.gpu_model or "",
            job.cpu_milli,
            job.memory_mib,
        )

    def push(self, key: BucketKey, job: Job, index: int) -> None:
        """``job`` (trace index ``index``) waits in bucket ``key``."""
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = []
            rank = key[:3]
            self.classes[rank] = self.classes.get(rank, 0) + 1
        heapq.heappush(bucket, (job.submit_s, job.line, index))

    def head(self, key: BucketKey) -> int:
        """Index of the first job of a non-empty bucket."""
        return self.buckets[key][0][2]

    def pop(self, key: BucketKey) -> None:
        """Remove the head of ``key`` (dropping the bucket when empty)."""
        bucket = self.buckets[key]
        heapq.heappop(bucket)
        if not bucket:
            del self.buckets[key]
            rank = key[:3]
            self.classes[rank] -= 1
            if not self.classes[rank]:
                del self.classes[rank]

    def order(self, key: BucketKey) -> tuple[int, int, float, int, int]:
        """Service order of a bucket: its priority ranks, then its head's submit time and line."""
        submit, line, index = self.buckets[key][0]
        return (key[1], key[2], submit, line, index)
