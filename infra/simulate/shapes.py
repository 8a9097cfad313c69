"""Scheduling passes that cost the shapes waiting, not the jobs, where nothing can be evicted.

The engine's pass (`infra.simulate.engine.Replay`) tries every queue bucket that is not
blocked, in service order, and marks each one that does not fit blocked until capacity comes
back. A trace of fractions of 999 sizes makes 999 buckets, and every job that ends unblocks
them all, so each release cost 999 placement searches (30,000 such jobs ran for minutes).
When no head can evict anything in a pass (`infra.simulate.preempt.Preemptor.quiet`: always
where no tenant may preempt), a bucket's fate rests on the head job's shape alone (GPUs,
fraction, GPU model, CPUs, memory, and its tenant where that tenant has a quota) and on the
cluster and quota, which change only when a job starts: so between two starts every bucket of
one `shape` gets the answer its first one got. `ShapeIndex` keeps the ready buckets (not
blocked) of each shape sorted in service order; a pass serves shapes from a heap, searches
once per shape and per start, and marks the rest of the shape's buckets blocked in bulk (with
the reason, capacity or quota, that the search gave), up to the next start. The preemption
tries such a pass makes all find nothing; `infra.simulate.retry` records them per cohort of
buckets. A pass in which something might be evicted is the engine's own, over buckets
(`ShapeIndex.export` hands them over, `ShapeIndex.resync` takes them back). The buckets, their
order and every recorded reason are those of the engine's own pass
(`tests/test_simulate_shapes.py` replays both).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Container, Hashable, Mapping, Sequence
from typing import Protocol

from infra.simulate.cluster import Allocation, Cluster, slices_needed
from infra.simulate.jobs import Job
from infra.simulate.place import INDEXED
from infra.simulate.retry import RetryClock
from infra.simulate.state import BucketKey, Queues

__all__ = ["FitHost", "ShapeIndex", "shape_of"]

Order = tuple[int, int, float, int, int]
Entry = tuple[Order, BucketKey]


def shape_of(
    jobs: Sequence[Job],
    ranks: Sequence[tuple[int, int]],
    cluster: Cluster,
    quota: Container[str],
) -> Callable[[BucketKey], Hashable]:
    """What a bucket's head asks of placement and quota: buckets of one shape fit alike.

    The bucket key less its priorities, with the jobs' accepted GPU models and fraction
    (``ranks``: each job's, as the engine keys it): a key whose jobs differ in either, and
    every key under random placement (a search that finds room draws from the generator),
    is a shape of its own. A fraction placed from the group indexes on a cluster that
    shares no GPU is searched, and counted against quota, by the MIG slices it needs, so
    fractions needing as many are alike. Tenants without a quota (not in ``quota``) are
    never held back by one, so their buckets of one shape are alike whatever the tenant:
    a trace of a thousand users costs the spec's tenants, not the users.
    """
    seen: dict[BucketKey, set[tuple[tuple[str, ...], int]]] = {}
    for job, rank in zip(jobs, ranks, strict=True):
        seen.setdefault(Queues.key(job, *rank), set()).add((job.gpu_models, job.milli))
    by_slices = cluster.placement in INDEXED and not cluster.replicas

    def shape(key: BucketKey) -> Hashable:
        alike = seen.get(key, set())
        if len(alike) != 1 or cluster.placement == "random":
            return ("bucket", key)
        ((models, milli),) = alike
        named, _, _, gpus, size, model, cpu, mem = key
        tenant = named if named in quota else None
        if size and by_slices and not cpu and not mem:
            return ("slices", tenant, gpus, slices_needed(milli), model, models)
        return ("milli", tenant, gpus, milli, model, cpu, mem, models)

    return shape


class FitHost(Protocol):
    """What a pass reads and changes of the replay (`infra.simulate.engine.Replay`)."""

    queues: Queues

    def admit(self, index: int) -> tuple[Allocation | None, bool]:
        """Where waiting job ``index`` would start now; else None and whether GPUs lack."""

    def start(self, index: int, alloc: Allocation) -> None:
        """Start waiting job ``index`` on ``alloc``."""


class _Shape:
    """One shape's waiting buckets: all and the ready ones sorted in service order."""

    __slots__ = ("every", "for_capacity", "ready")

    def __init__(self) -> None:
        self.every: list[Entry] = []
        self.ready: list[Entry] = []  # not blocked: the next pass tries them
        self.for_capacity: list[Entry] = []  # blocked for GPUs (the rest: for quota), unsorted


class ShapeIndex:
    """The buckets of each shape, ready or blocked, and the pass that serves them.

    A bucket is blocked by leaving the ready list; those blocked for capacity are listed
    (not a dictionary entry each), so blocking the rest of a shape, or unblocking everything,
    copies a list.
    """

    def __init__(
        self,
        host: FitHost,
        shape: Callable[[BucketKey], Hashable],
        may_preempt: Callable[[BucketKey], bool],
        retry_s: float,
    ) -> None:
        self.host = host
        self.shape = shape  # a bucket's shape: buckets of one shape fit alike
        self.may_preempt = may_preempt  # whether a bucket's head may try preemption
        self.clock = RetryClock(retry_s)  # their last tries, while the index is in step
        self.synced = True  # False: the engine's pass serves buckets (`export`)
        self.of: dict[BucketKey, _Shape] = {}
        self.shapes: dict[Hashable, _Shape] = {}
        self.order: dict[BucketKey, Order] = {}
        self.for_capacity = 0  # waiting buckets blocked for capacity (not quota)

    @property
    def starved(self) -> bool:
        """Whether some waiting bucket is blocked for capacity."""
        return self.for_capacity > 0

    def pushed(self, key: BucketKey) -> None:
        """Bucket ``key`` has a new head: it is ready, blocked or not before."""
        if not self.synced:
            return
        if self.may_preempt(key):
            self.clock.reset(key)
        shape = self.of.get(key)
        if shape is None:
            shape = self.of[key] = self.shapes.setdefault(self.shape(key), _Shape())
        old = self.order.get(key)
        if old is not None:  # it waited already
            entry = (old, key)
            _remove(shape.every, entry)
            if not _remove(shape.ready, entry) and entry in shape.for_capacity:
                shape.for_capacity.remove(entry)  # rare: an evicted job heads its bucket again
                self.for_capacity -= 1
        self._place(shape, key)

    def unblock_all(self) -> None:
        """Capacity came back: every waiting bucket may fit again."""
        if not self.synced:
            return
        self.for_capacity = 0
        for shape in self.shapes.values():
            if len(shape.ready) < len(shape.every):
                shape.ready = shape.every.copy()
                shape.for_capacity = []

    def run(self, now: float) -> bool:
        """One pass at ``now``: start what fits, in service order; whether anything started.

        Only where nothing can be evicted in it (`infra.simulate.preempt.Preemptor.quiet`):
        every preemption try due then finds no victim, and the clock records it.
        """
        heap = [(s.ready[0][0], n, s) for n, s in enumerate(self.shapes.values()) if s.ready]
        heapq.heapify(heap)  # orders are unique: the shape's number is never compared
        failed: dict[int, tuple[_Shape, bool]] = {}  # did not fit since the last start
        started = False
        while heap:
            order, number, shape = heapq.heappop(heap)
            key = shape.ready[0][1]
            index = self.host.queues.head(key)
            alloc, for_capacity = self.host.admit(index)
            if alloc is None:
                self._block(shape, 1, for_capacity)
                failed[number] = (shape, for_capacity)
                continue
            self._start(shape, key, index, alloc)
            started = True
            for other, (tried, reason) in failed.items():  # tried, as alike, before this start
                self._block(tried, bisect_left(tried.ready, (order,)), reason)
                if tried.ready:
                    heapq.heappush(heap, (tried.ready[0][0], other, tried))
            failed.clear()
            if shape.ready:
                heapq.heappush(heap, (shape.ready[0][0], number, shape))
        for tried, reason in failed.values():
            self._block(tried, len(tried.ready), reason)
        self.clock.tick(now)
        return started

    def export(self) -> tuple[dict[BucketKey, bool], dict[BucketKey, float]]:
        """Hand the buckets to the engine's pass: blocked ones (for capacity?), last tries.

        The index then ignores every change until `resync`.
        """
        blocked: dict[BucketKey, bool] = {}
        for shape in self.shapes.values():
            if len(shape.ready) == len(shape.every):
                continue
            ready = set(shape.ready)
            for entry in shape.every:
                if entry not in ready:
                    blocked[entry[1]] = False
            for entry in shape.for_capacity:
                blocked[entry[1]] = True
        self.synced = False
        return blocked, self.clock.export()

    def resync(self, blocked: Mapping[BucketKey, bool], tried: Mapping[BucketKey, float]) -> None:
        """Take the buckets back from the engine's pass (`export`'s inverse)."""
        queues = self.host.queues
        self.of, self.shapes, self.order, self.for_capacity = {}, {}, {}, 0
        for key in queues.buckets:
            shape = self.of[key] = self.shapes.setdefault(self.shape(key), _Shape())
            entry = (queues.order(key), key)
            self.order[key] = entry[0]
            shape.every.append(entry)
            if key not in blocked:
                shape.ready.append(entry)
            elif blocked[key]:
                shape.for_capacity.append(entry)
                self.for_capacity += 1
        for shape in self.shapes.values():
            shape.every.sort()
            shape.ready.sort()
        self.clock.load(tried, (key for key in queues.buckets if self.may_preempt(key)))
        self.synced = True

    def _start(self, shape: _Shape, key: BucketKey, index: int, alloc: Allocation) -> None:
        entry = (self.order.pop(key), key)
        _remove(shape.every, entry)
        del shape.ready[0]  # the entry: the pass starts the first ready bucket
        self.host.queues.pop(key)
        self.host.start(index, alloc)
        if key in self.host.queues.buckets:
            self._place(shape, key)
        else:
            self.clock.drop(key)

    def _place(self, shape: _Shape, key: BucketKey) -> None:
        entry = (self.host.queues.order(key), key)
        self.order[key] = entry[0]
        insort(shape.every, entry)
        insort(shape.ready, entry)

    def _block(self, shape: _Shape, count: int, for_capacity: bool) -> None:
        """Block the first ``count`` ready buckets of ``shape`` for capacity or quota."""
        if for_capacity:
            shape.for_capacity.extend(shape.ready[:count])
            self.for_capacity += count
        del shape.ready[:count]


def _remove(entries: list[Entry], entry: Entry) -> bool:
    """Remove ``entry`` from sorted ``entries``; whether it was there."""
    at = bisect_left(entries, entry)
    if at < len(entries) and entries[at] == entry:
        del entries[at]
        return True
    return False
