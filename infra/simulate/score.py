"""Placement by node scores: every open node the job may use is scored, the best one wins.

Used for what the group indexes cannot answer (`infra.simulate.place`): CPU-only jobs, jobs
that state CPUs or memory, fractions on groups that share GPUs, and the packing and FGD
placements. On each node the job's options are its ways to land there: whole GPUs; for a
fraction the smallest free MIG slice that covers it, the replicas of each shared GPU with
enough free, or a whole unshared GPU. The policies, after Weng et al.'s simulator (ATC '23,
``pkg/simulator/plugin``):

- ``first-fit``: the first node in plan order with room, its first option;
- ``random``: a node with room uniformly at random, then one of its options;
- ``best-fit``: the least room left: free GPU capacity after the job over the largest
  node's GPUs, plus, when the job states CPUs, free CPUs after it over the largest node's
  (the simulator's BestFit, equal weights); within a node the tightest shared GPU;
- ``packing``: the simulator's GpuPacking score: a partly used GPU first (the fuller the
  better), then wholly free GPUs of a node in use, then an empty node;
- ``fgd``: fragmentation gradient descent: the option that grows the node's FGD
  fragmentation least (`infra.simulate.fragment`), scored as the simulator's plugin scores
  it, ``int(100 * sigmoid(before - after))`` in GPUs: a Kubernetes score plugin returns an
  integer from 0 to 100, so nearby options tie.

Ties between nodes go to the lowest rank in a permutation of the nodes seeded by the replay
(`Cluster.seed`), as the FGD simulator breaks them by node name, each name prefixed with a
seeded permutation (its fork of kube-scheduler's ``selectHost``). The quantised FGD score
matters: with the exact fragmentation change instead, FGD placed 93.2 % of the inflated openb
workload's GPUs, not 95.4 % (one seed, an earlier run; docs/simulate.md). A node's result is
memoised until the node changes (`Node.stamp`), so a placement costs a dictionary look-up per
unchanged node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TypeVar

from infra.simulate.cluster import (
    COMPUTE_SLICES,
    Allocation,
    Cluster,
    GroupIndex,
    Node,
    Option,
    Part,
    Scored,
    slices_needed,
    units_needed,
    whole_part,
)
from infra.simulate.fragment import after, node_state
from infra.simulate.jobs import Job

__all__ = ["MAX_SCORE", "options", "scan"]

MAX_SCORE = 100
"""kube-scheduler's highest node score (``framework.MaxNodeScore``)."""

T = TypeVar("T")


def options(node: Node, job: Job) -> list[Option]:
    """``job``'s ways to land on ``node`` now (none when it lacks room)."""
    cpu, mem = job.cpu_milli, job.memory_mib
    if not node.open or not node.room(cpu, mem):
        return []
    if job.gpus == 0:
        return [(Part(node.index, cpu=cpu, mem=mem), 0)]
    if not job.fractional:
        return [(whole_part(node, job.gpus, cpu, mem), 0)] if node.whole_free >= job.gpus else []
    out: list[Option] = []
    need = slices_needed(job.milli)
    sizes = [size for size, free in node.slices_free.items() if free and size >= need]
    if sizes:
        size = min(sizes)
        out.append((Part(node.index, slice=size, cpu=cpu, mem=mem, held=size / COMPUTE_SLICES), 0))
    if node.shared:
        units = units_needed(job.milli, node.replicas)
        share = units / node.replicas
        for gpu, free in enumerate(node.shared):
            if free >= units:
                part = Part(node.index, units=units, gpus=(gpu,), cpu=cpu, mem=mem, held=share)
                out.append((part, free))
    elif node.whole_free:
        out.append((Part(node.index, whole=1, cpu=cpu, mem=mem, held=1.0), 0))
    return out


def scan(cluster: Cluster, job: Job, groups: list[GroupIndex]) -> Allocation | None:
    """The best node of ``groups`` for ``job`` under the cluster's placement, or None."""
    if cluster.placement == "random":
        return _random(cluster, job, groups)
    rate = _POLICIES[cluster.placement]
    best: Scored | None = None
    rated = _per_node(
        cluster.memo, cluster, job, groups, lambda n: rate(cluster, n, job, options(n, job))
    )
    for found in rated:
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return None if best is None else (best[1],)


def _random(cluster: Cluster, job: Job, groups: list[GroupIndex]) -> Allocation | None:
    """A node with room uniformly at random, then one of its options (the Random baseline)."""
    found = _per_node(cluster.fits, cluster, job, groups, lambda n: options(n, job))
    fits = [mine for mine in found if mine]
    if not fits:
        return None
    mine = fits[cluster.rng.randrange(len(fits))]
    return (mine[cluster.rng.randrange(len(mine))][0],)


def _per_node(
    memo: dict[tuple[int, tuple[int, ...]], tuple[int, T]],
    cluster: Cluster,
    job: Job,
    groups: list[GroupIndex],
    compute: Callable[[Node], T],
) -> Iterator[T]:
    """``compute`` of each node of ``groups`` in plan order, memoised in ``memo``.

    Per node and job shape, valid while the node is unchanged (`Node.stamp`).
    """
    shape = (job.gpus, job.milli, job.cpu_milli, job.memory_mib)
    nodes = cluster.nodes
    for g in groups:
        for index in g.members:
            node = nodes[index]
            hit = memo.get((index, shape))
            if hit is not None and hit[0] == node.stamp:
                yield hit[1]
            else:
                found = compute(node)
                memo[(index, shape)] = (node.stamp, found)
                yield found


Rate = Callable[[Cluster, Node, Job, list[Option]], "Scored | None"]


def _first_fit(cluster: Cluster, node: Node, job: Job, found: list[Option]) -> Scored | None:
    del cluster, job
    return ((float(node.index),), found[0][0]) if found else None


def _best_fit(cluster: Cluster, node: Node, job: Job, found: list[Option]) -> Scored | None:
    if not found:
        return None
    cpu = (node.cpu_free - job.cpu_milli) / cluster.max_cpu if job.cpu_milli else 0.0
    gpu_free = node.gpu_free()
    part, _ = min(found, key=lambda o: (gpu_free - o[0].held, o[1]))
    left = (gpu_free - part.held) / cluster.max_gpus + cpu
    return ((round(left, 9), cluster.rank[node.index]), part)


def _packing(cluster: Cluster, node: Node, job: Job, found: list[Option]) -> Scored | None:
    del job
    if not found:
        return None
    part, free = min(found, key=lambda o: (o[1] or o[0].held * node.replicas, o[0].held))
    return ((-_packing_score(node, part, free), cluster.rank[node.index]), part)


def _packing_score(node: Node, part: Part, free: int) -> int:
    """The FGD simulator's GpuPacking score (``gpu_packing_score.go``), 0-100.

    An empty node ``max(33 - n, n)`` for its ``n`` GPUs; wholly free GPUs of a node in use
    ``max(50 - k, 33)`` for the ``k`` it takes; a partly used GPU (or a MIG slice)
    ``max(100 - free% / 10, 50)``. A CPU-only job scores 0 everywhere.
    """
    if part.whole == 0 and part.units == 0 and part.slice == 0:
        return 0
    if node.whole_free == node.gpus and not node.slices_total:
        return max(MAX_SCORE // 3 - node.gpus, node.gpus)
    if part.units and free < node.replicas:
        return max(MAX_SCORE - free * 100 // node.replicas // 10, MAX_SCORE // 2)
    if part.slice:
        return max(MAX_SCORE - part.slice * 100 // COMPUTE_SLICES // 10, MAX_SCORE // 2)
    return max(MAX_SCORE // 2 - max(part.whole, 1), MAX_SCORE // 3)


def _fgd(cluster: Cluster, node: Node, job: Job, found: list[Option]) -> Scored | None:
    del job
    meter = cluster.fgd
    if not found or meter is None:
        return None
    state = node_state(node, cluster.groups[node.group].gpu_model)
    before = meter.of(state)
    best: tuple[int, Part] | None = None
    for part, free in found:
        score = _sigmoid_score(before - meter.of(after(state, part, free)))
        if best is None or score > best[0]:
            best = (score, part)
    assert best is not None
    return ((-best[0], cluster.rank[node.index]), best[1])


def _sigmoid_score(gain: float) -> int:
    """kube-scheduler's integer score of a fragmentation change of ``gain`` GPUs."""
    return int(MAX_SCORE / (1.0 + math.exp(-gain)))


_POLICIES: dict[str, Rate] = {
    "first-fit": _first_fit,
    "best-fit": _best_fit,
    "packing": _packing,
    "fgd": _fgd,
}
