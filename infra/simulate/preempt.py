"""Priority preemption and reclaim: which running jobs a waiting head evicts to start.

A queue head may evict lower-priority jobs of its own tenant (`within_tenant:
lower_priority`) and, while its tenant stays within its nominal quota, jobs of tenants that
borrow (`reclaim: any`, or only of lower-priority tenants with `lower_priority`), as Kueue's
``withinClusterQueue`` and ``reclaimWithinCohort`` do. Candidates are taken lowest priority
first, then most recently started; all are lifted at once and, if the head then fits, put
back one at a time while it still fits, so the fewest are evicted. Admission reads what the
head would hold where it lands (`infra.simulate.cluster.held`), the number its tenant is then
charged: a reclaim never leaves the reclaimer borrowing, so the tenant it took from cannot
take it back at once (two tenants once evicted each other for good at one instant).
"""

from __future__ import annotations

from typing import Protocol

from infra.simulate.cluster import Allocation, Cluster, held_by, least_held
from infra.simulate.jobs import Job
from infra.simulate.livelock import EventBudget
from infra.simulate.place import could_fit, find, gang_fails_once_freed
from infra.simulate.state import BucketKey, Queues, Run
from infra.simulate.tenants import PRIORITY_RANK, Book

__all__ = ["PreemptHost", "Preemptor"]

_RANKS = range(len(PRIORITY_RANK))
"""Every job rank (`infra.simulate.tenants.PRIORITY_RANK`; unknown priorities rank normal)."""

_Counts = tuple[str, int, list[int], list[int]]
"""A spec tenant, its rank, its waiting buckets and its running jobs per job rank."""


class PreemptHost(Protocol):
    """What preemption reads and changes of the replay (`infra.simulate.engine.Replay`)."""

    jobs: list[Job]
    rank: list[tuple[int, int]]
    book: Book
    flavors: dict[str, tuple[str, ...]]
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
        self._nodes_of: tuple[Allocation, set[int]] = ((), set())  # a placement, its nodes
        book = replay.book
        # the tenants whose queue heads may evict anything under the spec's preemption
        self.preempting = frozenset(book.quota if self.possible() else ())
        # per spec tenant that may preempt: its rank, its keys in the queues' and the
        # running jobs' classes per job rank (none when nothing may be preempted)
        self.tenants = (
            [
                (t, r, [(t, -r, -j) for j in _RANKS], [(r, j, t) for j in _RANKS])
                for t, r in book.rank.items()
            ]
            if self.possible()
            else []
        )

    def may_preempt(self, key: BucketKey) -> bool:
        """Whether the head of ``key`` may evict anything under the spec's preemption."""
        return key[0] in self.preempting

    def possible(self) -> bool:
        """Whether the spec lets any waiting job evict anything (else no key `may_preempt`)."""
        book = self.replay.book
        if not book.managed or not book.quota:
            return False
        return book.preemption.within_tenant != "never" or book.preemption.reclaim != "never"

    def quiet(self, queues: Queues) -> bool:
        """Whether no waiting head can evict anything in a pass that starts now.

        A pass changes what runs only by starting waiting jobs until something is evicted,
        so a head's victims in it are among the jobs running or waiting now: of its own
        tenant at a lower priority, or (reclaim) of another tenant that borrows or may come
        to (it has jobs waiting), of a lower tenant priority under ``lower_priority``. Only
        the spec's tenants preempt; the others are counted in aggregate, so the cost is the
        spec's tenants and priorities, not the trace's tenants or jobs.
        """
        if not self.tenants:
            return True
        waiting, running = queues.classes, self.replay.classes
        counts, heads, waits_all, runs_all = [], False, 0, 0
        for tenant, rank, wkeys, rkeys in self.tenants:
            waits = [waiting.get(k, 0) for k in wkeys]
            runs = [len(running.get(k, ())) for k in rkeys]
            waits_all, runs_all = waits_all + sum(waits), runs_all + sum(runs)
            heads = heads or any(waits)
            counts.append((tenant, rank, waits, runs))
        if not heads:
            return True
        unmanaged = len(queues.buckets) > waits_all or len(self.replay.running) > runs_all
        return not any(self._may_find(at, counts, unmanaged) for at in range(len(counts)))

    def _may_find(self, at: int, counts: list[_Counts], unmanaged: bool) -> bool:
        """Whether a head of the tenant ``counts[at]`` describes may find a victim (`quiet`).

        ``counts``: per spec tenant, its rank and its buckets waiting and jobs running per
        job rank; ``unmanaged``: jobs of tenants without a quota wait or run (they always
        borrow, and rank ``normal``).
        """
        tenant, rank, waits, runs = counts[at]
        if not any(waits):
            return False
        book = self.replay.book
        top = max(j for j in _RANKS if waits[j])  # its highest-ranked waiting head
        if book.preemption.within_tenant == "lower_priority" and (
            any(waits[:top]) or any(runs[:top])
        ):
            return True
        reclaim = book.preemption.reclaim
        if reclaim == "never":
            return False
        for other, other_rank, other_waits, other_runs in counts:
            if other == tenant or (reclaim == "lower_priority" and other_rank >= rank):
                continue
            if any(other_waits) or (any(other_runs) and book.borrowing(other)):
                return True
        return unmanaged and (reclaim == "any" or PRIORITY_RANK["normal"] < rank)

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

        Candidates are lifted in order (lowest priority first) in doubling batches until
        the job fits; they are then put back one at a time, highest priority and oldest
        first, as long as it still fits: what stays lifted is evicted. Lifting all and
        putting back those after the batch that made it fit leaves the same set (it fits
        with every superset of what it fits with), so a job that needs 2 victims of 500
        lifts 3, not 500, and searches a few times, not once per candidate.
        """
        job = self.replay.jobs[index]
        victims = self._victims(job, self.replay.rank[index], reclaiming)
        running = self.replay.running
        freed = (part for victim in victims for part in running[victim].alloc)
        if not victims or not could_fit(self.replay.cluster, job, freed):
            return None
        if self._settled_unlifted(job, victims):
            return None
        lifted = self._lift_until_admitted(job, victims, reclaiming)
        if lifted is None:
            return None
        alloc, count = lifted
        evicted, searched = [], True  # searched: ``alloc`` is a search over the cluster now
        for victim in reversed(victims[:count]):
            self._lift(victim, +1)
            found, searched_now = self._still_admitted(job, alloc, victim, reclaiming)
            if found is None:
                self._lift(victim, -1)
                evicted.append(victim)
            else:
                alloc, searched = found, searched_now
        self._evict_for(job, evicted[::-1])
        return alloc if searched else self._admitted(job, reclaiming) or alloc

    def _settled_unlifted(self, job: Job, victims: list[int]) -> bool:
        """Settle, without lifting, a try that surely fails even with every victim lifted.

        `_lift_until_admitted` would lift them all, find no place, and put them all back;
        where `gang_fails_once_freed` knows that, its effects are made directly: the same
        quota changes in the same order (float sums stay bit for bit) and each node's place
        in the cluster's indexes as the put-backs leave it (`Cluster.lift_and_return`).
        """
        cluster, running = self.replay.cluster, self.replay.running
        freed = (part for victim in victims for part in running[victim].alloc)
        if not gang_fails_once_freed(cluster, job, freed):
            return False
        book, jobs = self.replay.book, self.replay.jobs
        if not _restores(book.usage, [running[victim].share for victim in victims]):
            for sign in (-1, +1):
                for victim in victims:
                    book.add(jobs[victim].tenant, sign * running[victim].share)
        cluster.lift_and_return([running[victim].alloc for victim in victims])
        return True

    def _lift_until_admitted(
        self, job: Job, victims: list[int], reclaiming: bool
    ) -> tuple[Allocation, int] | None:
        """Lift ``victims`` in batches of 1, 2, 4, ... until ``job`` is admitted.

        Where it then lands and how many were lifted; None, with all put back, when it
        is not admitted even with every candidate lifted.
        """
        count, batch = 0, 1
        while count < len(victims):
            for victim in victims[count : count + batch]:
                self._lift(victim, -1)
            count = min(len(victims), count + batch)
            alloc = self._admitted(job, reclaiming)
            if alloc is not None:
                return alloc, count
            batch *= 2
        for victim in victims:
            self._lift(victim, +1)
        return None

    def _still_admitted(
        self, job: Job, alloc: Allocation, victim: int, reclaiming: bool
    ) -> tuple[Allocation | None, bool]:
        """`_admitted` once ``victim`` is put back, and whether that took a search.

        A victim on none of ``alloc``'s nodes leaves that placement free, so only quota is
        read again; `_preempt_as` then searches once more at the end, so the job lands where
        a search over the final cluster puts it, as when every put-back searched.
        """
        if alloc is not self._nodes_of[0]:  # put-backs read one placement's nodes many times
            self._nodes_of = (alloc, {part.node for part in alloc})
        nodes = self._nodes_of[1]
        if any(part.node in nodes for part in self.replay.running[victim].alloc):
            return self._admitted(job, reclaiming), True
        return (alloc if self._quota_admits(job, alloc, reclaiming) else None), False

    def _admitted(self, job: Job, reclaiming: bool) -> Allocation | None:
        """Where ``job`` fits now, if quota admits what it would hold there, or None.

        When it reclaims, what it holds must also keep its tenant within its nominal quota.
        """
        book = self.replay.book
        if not book.admits(job.tenant, least_held(job, self.replay.cluster.replicas)):
            return None  # not even at its least: no placement search
        alloc = find(self.replay.cluster, job, order=self.replay.flavors.get(job.tenant))
        if alloc is None or not self._quota_admits(job, alloc, reclaiming):
            return None
        return alloc

    def _quota_admits(self, job: Job, alloc: Allocation, reclaiming: bool) -> bool:
        """Whether quota admits ``job`` holding ``alloc`` (within nominal when it reclaims)."""
        share = held_by(job, alloc)
        if not self.replay.book.admits(job.tenant, share):
            return False
        return not reclaiming or self.replay.book.within_quota(job.tenant, share)

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


def _restores(usage: dict[str, float], shares: list[float]) -> bool:
    """Whether taking ``shares`` off ``usage`` and adding them back leaves it bit for bit.

    Then the additions need not be made: whole numbers of GPUs well below 2**53 add and
    subtract exactly, and quota's lendable GPUs, read from usage, stay as they were.
    """
    exact = 2.0**52
    return (
        all(map(float.is_integer, shares))
        and all(map(float.is_integer, usage.values()))
        and sum(shares) < exact
        and all(abs(used) < exact for used in usage.values())
    )
