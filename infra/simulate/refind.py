"""Admission searches known to fail again: skipped, the answer (None) being the same.

A search (`infra.simulate.place.find`) changes nothing, and for a job of whole GPUs or a
fraction that states no CPUs or memory, placed from the group indexes (best fit, first fit,
random) on groups that share no GPU, whether it fails reads only which open nodes have at
least some number of free whole GPUs (or free slices): a node of one node's GPUs with ``k``
free; a gang's wholly free nodes per SU and one more node with the remainder free; a
fraction's slice or whole GPU. Takes only shrink those sets and put-backs that restore
counts (`Cluster.lift_and_return`) only reorder them, so the search fails again unless,
since it failed, a node of a group it may use rose to the free GPUs it needs
(`GroupIndex.rose`, stamped by every give and new layout): ``k`` for one node, the
remainder (else a whole node) for a gang, any rise for a fraction. Searches are keyed by
what `find` reads of a job (flavors, GPUs, thousandths, models), so a second bucket of the
same shape skips too. Quota is read as before, every time. `FailedSearches.check` makes
every skipped search run anyway and raise if it finds a place (the tests turn it on).
"""

from __future__ import annotations

from collections.abc import Hashable

from infra.simulate.cluster import Allocation, Cluster, GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.place import INDEXED, find

__all__ = ["FailedSearches"]

Need = list[tuple[GroupIndex, int]]
"""The groups a search may use, each with the free whole GPUs a node must rise to."""


class FailedSearches:
    """The clock of each kind of job's last failed search, and the searches skipped."""

    check = False
    """Run every skipped search and raise AssertionError if it would have found a place."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.failed: dict[Hashable, int] = {}  # search key -> `Cluster.ticks` when it failed
        self.needs: dict[Hashable, Need | None] = {}  # None: not skippable, always searched
        self.skipped = 0

    def find(self, job: Job, order: tuple[str, ...] | None) -> Allocation | None:
        """`find` of ``job`` in ``order`` (its tenant's flavors), or None where it surely fails."""
        key = (order, job.gpus, job.milli, job.gpu_model, job.gpu_models)
        at = self.failed.get(key)
        if at is not None:
            for g, k in self.needs[key] or ():  # recorded only where not None
                if max(g.rose[k:]) > at:  # a node rose to what it needs: search
                    break
            else:
                self.skipped += 1
                if self.check and find(self.cluster, job, order=order) is not None:
                    raise AssertionError(f"skipped a search that finds a place: {key}")
                return None
        alloc = find(self.cluster, job, order=order)
        if alloc is None:
            need = self.needs.get(key, False)
            if need is False:
                need = self.needs[key] = _need(self.cluster, job, order)
            if need is not None:
                self.failed[key] = self.cluster.ticks
        return alloc


def _need(cluster: Cluster, job: Job, order: tuple[str, ...] | None) -> Need | None:
    """What must rise for ``job``'s failed search to be worth making again; None: always.

    Every group the job accepts (its flavors' alone when it has flavors), with the free
    whole GPUs a node must reach: its GPUs for one node, a gang's remainder (a whole node
    when none), 0 (any give) for a fraction.
    """
    if cluster.placement not in INDEXED or job.cpu_milli or job.memory_mib or job.gpus == 0:
        return None
    need: Need = []
    for g in cluster.groups.values():
        if (order is not None and g.name not in order) or not job.accepts(g.gpu_model):
            continue
        if g.replicas > 1:  # sharing: scored node by node, not read from the indexes
            return None
        if job.fractional and job.gpus > g.per_node:
            return None
        if job.fractional:
            need.append((g, 0))
        elif job.gpus <= g.per_node:
            need.append((g, job.gpus))
        else:
            need.append((g, job.gpus % g.per_node or g.per_node))
    return need
