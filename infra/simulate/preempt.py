"""Priority preemption and reclaim: which running jobs a waiting head evicts to start.

A queue head may evict lower-priority jobs of its own tenant (`within_tenant:
lower_priority`) and, while its tenant stays within its nominal quota, jobs of tenants that
borrow (`reclaim: any`, or only of lower-priority tenants with `lower_priority`), as Kueue's
``withinClusterQueue`` and ``reclaimWithinCohort`` do. Candidates are taken lowest priority
first, then most recently started; all are lifted at once and, if the head then fits, put
back one at a time while it still fits, so the fewest are evicted. Admission reads what the
head would hold where it lands (`infra.simulate.cluster.held`), the number its tenant is then
charged: a reclaim never leaves the reclaimer borrowing, so the tenant it took from cannot
take it back at once (issue 32's livelock).
"""

from __future__ import annotations

from typing import Protocol

from infra.simulate.cluster import Allocation, Cluster, held_by, least_held
from infra.simulate.jobs import Job
from infra.simulate.livelock import EventBudget
from infra.simulate.place import could_fit, find
from infra.simulate.state import BucketKey, Run
from infra.simulate.tenants import Book

__all__ = ["PreemptHost", "Preemptor"]


class PreemptHost(Protocol):
    """What preemption reads and changes of the replay (`infra.simulate.engine.Replay`)."""

    jobs: list[Job]
    rank: list[tuple[int, int]]
    book: Book
    cluster: Cluster
    running: dict[int, Run]
    classes: dict[tuple[int, int, str], dict[int, None]]
    budget: EventBudget
    now: float
    preemptions: int
    reclaims: int

    def evict(self, index: int, *, freed: bool = False) -> float:
        """Stop a running job; the GPU-seconds of work it lost."""


class Preemptor:
    """Finds and evicts the victims a waiting head needs."""

    def __init__(self, replay: PreemptHost) -> None:
        self.replay = replay

    def may_preempt(self, key: BucketKey) -> bool:
        """Whether the head of ``key`` may evict anything under the spec's preemption."""
        book = self.replay.book
        if not book.managed or key[0] not in book.quota:
            return False
        return book.preemption.within_tenant != "never" or book.preemption.reclaim != "never"

    def _victims(self, job: Job, rank: tuple[int, int], reclaiming: bool) -> list[int]:
        """Running jobs ``job`` may evict: lowest priority first, then most recently started."""
        out: list[int] = []
        for trank, jrank, tenant in sorted(self.replay.classes):
            members = self.replay.classes[(trank, jrank, tenant)]
            if members and self.replay.book.may_evict(
                job.tenant, rank, tenant, (trank, jrank), reclaiming
            ):
                out.extend(reversed(members))
        return out

    def preempt(self, index: int) -> Allocation | None:
        """Evict the fewest low-priority jobs that make room, or None (nothing evicted).

        Reclaiming other tenants' borrowed GPUs is tried only when the job, as placed, keeps
        its tenant within its nominal quota (Kueue's ``reclaimWithinCohort``); when it would
        borrow, only its own tenant's lower-priority jobs are candidates. So a reclaim never
        turns the reclaimer into a borrower another tenant could reclaim from in turn.
        """
        job = self.replay.jobs[index]
        least = least_held(job, self.replay.cluster.replicas)
        reclaiming = self.replay.book.within_quota(job.tenant, least)
        alloc = self._preempt_as(index, reclaiming)
        if alloc is None and reclaiming:
            alloc = self._preempt_as(index, False)
        return alloc

    def _preempt_as(self, index: int, reclaiming: bool) -> Allocation | None:
        """`preempt` with or without reclaiming other tenants' borrowed GPUs.

        All candidates are lifted at once; if the job then fits, they are put back one at
        a time, highest priority and oldest first, as long as it still fits: what stays
        lifted is evicted. One placement search when it fails, one per candidate when it
        succeeds, so a blocked large job costs a pass over the running jobs, not more.
        """
        job = self.replay.jobs[index]
        victims = self._victims(job, self.replay.rank[index], reclaiming)
        if not victims or not could_fit(self.replay.cluster, job, self._freed(victims)):
            return None
        for victim in victims:
            self._lift(victim, -1)
        alloc = self._admitted(job, reclaiming)
        if alloc is None:
            for victim in victims:
                self._lift(victim, +1)
            return None
        evicted = []
        for victim in reversed(victims):
            self._lift(victim, +1)
            found = self._admitted(job, reclaiming)
            if found is None:
                self._lift(victim, -1)
                evicted.append(victim)
            else:
                alloc = found
        self._evict_for(job, evicted[::-1])
        return alloc

    def _admitted(self, job: Job, reclaiming: bool) -> Allocation | None:
        """Where ``job`` fits now, if quota admits what it would hold there, or None.

        When it reclaims, what it holds must also keep its tenant within its nominal quota.
        """
        book = self.replay.book
        if not book.admits(job.tenant, least_held(job, self.replay.cluster.replicas)):
            return None  # not even at its least: no placement search
        alloc = find(self.replay.cluster, job)
        if alloc is None:
            return None
        share = held_by(job, alloc)
        if not book.admits(job.tenant, share):
            return None
        if reclaiming and not book.within_quota(job.tenant, share):
            return None
        return alloc

    def _freed(self, victims: list[int]) -> dict[int, tuple[int, int]]:
        """Per node, the whole GPUs and the largest slice evicting ``victims`` would free."""
        freed: dict[int, tuple[int, int]] = {}
        for victim in victims:
            for part in self.replay.running[victim].alloc:
                had, largest = freed.get(part.node, (0, 0))
                freed[part.node] = (had + part.whole, max(largest, part.slice))
        return freed

    def _lift(self, victim: int, sign: int) -> None:
        """Take a running job's GPUs off the cluster (-1) or put them back (+1), tentatively."""
        run = self.replay.running[victim]
        (self.replay.cluster.take if sign > 0 else self.replay.cluster.give)(run.alloc)
        self.replay.book.add(self.replay.jobs[victim].tenant, sign * run.share)

    def _evict_for(self, job: Job, victims: list[int]) -> None:
        for victim in victims:
            self.replay.budget.preempted(victim, job.tenant, self.replay.now)
            self.replay.preemptions += 1
            if self.replay.jobs[victim].tenant != job.tenant:
                self.replay.reclaims += 1
            self.replay.evict(victim, freed=True)
