"""Where a job would run now: its nodes, GPUs, slices or shared replicas, CPUs and memory.

`find` answers without changing the cluster. A job of at most one node's GPUs goes on one
node. A whole-GPU job or a fraction that states no CPUs or memory, under best fit, first fit
or random placement, is placed from the group indexes: best fit takes the node with the
fewest free whole GPUs that still holds it, a fraction the smallest free MIG slice that
covers it, else the replicas of one shared GPU, else a whole unsplit GPU. Everything else
(CPU-only jobs, jobs stating CPUs or memory, fractions on sharing groups, packing and FGD)
is scored node by node (`infra.simulate.score`). A job larger than a node takes
``gpus // per_node`` wholly free nodes and the rest on one more node (8 + 4 for 12 GPUs, as
Slurm's cons_tres packs them and a gang of pods lands): the whole nodes inside one SU when
they fit one (the SU with the fewest free nodes that suffices), else whole SUs of one pod
(the pod with the fewest free nodes that suffices), else across pods; its CPUs and memory
spread over its nodes in proportion to its GPUs there.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from infra.simulate.cluster import (
    COMPUTE_SLICES,
    Allocation,
    Cluster,
    GroupIndex,
    Node,
    Part,
    slices_needed,
    whole_part,
)
from infra.simulate.jobs import Job
from infra.simulate.score import scan

__all__ = ["INDEXED", "could_fit", "find", "gang_fails_once_freed", "spread"]

INDEXED = ("best-fit", "first-fit", "random")
"""Placements the group indexes answer for jobs that state no CPUs or memory."""


def find(
    cluster: Cluster,
    job: Job,
    *,
    only: str | None = None,
    order: tuple[str, ...] | None = None,
) -> Allocation | None:
    """Where ``job`` would run now, or None when it does not fit anywhere open.

    ``only``: in that node group alone (a Slurm partition). ``order``: in those groups
    alone (a tenant's Kueue flavors, `infra.simulate.flavors`), a whole-GPU job in the
    first of them that holds it; a fraction takes a slice in any of them before a whole GPU.
    """
    fractional = job.fractional
    if order is not None and len(order) > 1 and not fractional:
        return _first_of(cluster, job, order)
    key = (only, order, job.gpus, job.gpu_model, job.gpu_models)
    chosen = cluster.accepting.get(key)
    if chosen is None:
        chosen = cluster.accepting[key] = _accepting(cluster, job, only, order)
    return _find_in(cluster, job, chosen, fractional)


def _accepting(
    cluster: Cluster, job: Job, only: str | None, order: tuple[str, ...] | None
) -> tuple[list[GroupIndex], list[GroupIndex]]:
    """The groups that accept such a job, and those of them a node of which holds one."""
    groups = [
        g
        for g in cluster.groups.values()
        if (only is None or g.name == only)
        and (order is None or g.name in order)
        and (job.gpus == 0 or job.accepts(g.gpu_model))
    ]
    return groups, [g for g in groups if job.gpus <= g.per_node]


def _find_in(
    cluster: Cluster,
    job: Job,
    chosen: tuple[list[GroupIndex], list[GroupIndex]],
    fractional: bool,
) -> Allocation | None:
    """`find` among the groups ``chosen`` (`_accepting`'s answer for the job)."""
    groups, one = chosen
    if one:
        found = _one_node(cluster, job, one)
        if found is not None or fractional or job.gpus == 0:
            return found
    for g in groups:
        if job.gpus <= g.per_node:
            continue
        n = job.gpus // g.per_node
        # fewer wholly free nodes than the gang needs, in the group or (at most an SU) in
        # any one SU: `_find_nodes` answers None at once, so the search is not made
        if g.full >= n and (n > g.su_size or any(g.su_counts[n:])):
            found = _find_gang(cluster, g, job)
            if found is not None:
                return found
    return None


def _first_of(cluster: Cluster, job: Job, order: tuple[str, ...]) -> Allocation | None:
    """`find` in the first group of ``order`` that holds ``job`` (Kueue's flavor order).

    Each flavor's groups are looked up once per kind of job (``Cluster.flavor_groups``).
    """
    key = (order, job.gpus, job.gpu_model, job.gpu_models)
    per_flavor = cluster.flavor_groups.get(key)
    if per_flavor is None:
        per_flavor = cluster.flavor_groups[key] = [
            _accepting(cluster, job, name, None) for name in order
        ]
    for chosen in per_flavor:
        found = _find_in(cluster, job, chosen, False)
        if found is not None:
            return found
    return None


def _one_node(cluster: Cluster, job: Job, groups: list[GroupIndex]) -> Allocation | None:
    indexed = cluster.placement in INDEXED and not job.cpu_milli and not job.memory_mib
    if not indexed or job.gpus == 0:
        return scan(cluster, job, groups)
    if not job.fractional:
        return _find_one_node(cluster, groups, job.gpus)
    plain = [g for g in groups if g.replicas == 1]
    found = _find_slices(cluster, plain, job.gpus, slices_needed(job.milli))
    if found is None and len(plain) < len(groups):
        found = scan(cluster, job, [g for g in groups if g.replicas > 1])
    if found is None and plain:
        found = _find_one_node(cluster, plain, job.gpus)
    return found


def could_fit(cluster: Cluster, job: Job, freed: Iterable[Part]) -> bool:
    """Whether ``job`` might fit once the parts ``freed`` are given back.

    A necessary condition only (SUs, quota, CPUs and memory are not looked at), so
    preemption lifts its candidates only when it might help. Jobs that state CPUs or
    memory, CPU-only jobs and fractions on sharing groups are always worth a try. What is
    free already is looked at first; ``freed`` is read lazily and only as far as needed.
    """
    groups = {g.name: g for g in cluster.groups.values() if job.accepts(g.gpu_model)}
    if job.cpu_milli or job.memory_mib or job.gpus == 0:
        return True
    if job.fractional and any(g.replicas > 1 for g in groups.values()):
        return True
    need = slices_needed(job.milli) if job.fractional else 0
    if need and any(s >= need and n for g in groups.values() for s, n in g.by_slice.items()):
        return True
    for g in groups.values():
        if job.gpus <= g.per_node:  # one node: free already (quota blocks it)
            if any(g.by_free[k] for k in range(job.gpus, g.per_node + 1)):
                return True
        elif g.full >= job.gpus // g.per_node:
            return True
    return _fits_once_freed(cluster, job.gpus, need, groups, freed)


def gang_fails_once_freed(cluster: Cluster, job: Job, freed: Iterable[Part]) -> bool:
    """Whether `find` surely places ``job`` nowhere once the parts ``freed`` are given back.

    Answers True only where that is exact and the search is pure: a job of whole GPUs
    stating no CPUs or memory, larger than a node of every group it accepts and a multiple
    of their node size (whole nodes, no remainder), and ``freed`` whole-GPU parts alone
    (no slice, replica, CPU or memory; no node that shares GPUs). Such a gang fits a group
    iff enough of its nodes are wholly free: ``n`` in one SU when ``n`` is at most an SU,
    else ``n`` anywhere in the group (`_find_nodes`). False: it may fit, or not answered.
    ``freed`` is read lazily, and only until the job may fit.
    """
    if job.fractional or job.gpus == 0 or job.cpu_milli or job.memory_mib:
        return False
    groups = {g.name: g for g in cluster.groups.values() if job.accepts(g.gpu_model)}
    if any(job.gpus <= g.per_node or job.gpus % g.per_node for g in groups.values()):
        return False
    if any(_gang_room(g, job.gpus // g.per_node, g.full, 0) for g in groups.values()):
        return False  # it fits already (quota holds it back)
    nodes = cluster.nodes
    whole: dict[int, int] = {}
    full = {name: g.full for name, g in groups.items()}
    in_su: dict[tuple[str, int], int] = {}  # wholly free nodes per (group, SU), as freed
    for part in freed:
        index, gpus, slice_, units, _, cpu, mem, _ = part  # one unpacking, not six lookups
        node = nodes[index]
        if gpus <= 0 or slice_ or units or cpu or mem or node.shared:
            return False
        g = groups.get(node.group)
        if g is None or not node.open:
            continue
        k = whole[index] = whole.get(index, 0) + gpus
        if node.whole_free < node.gpus == node.whole_free + k:  # wholly free once freed
            where = (g.name, node.su)
            count = in_su[where] = in_su.get(where, len(g.su_full[node.su])) + 1
            full[g.name] += 1
            if _gang_room(g, job.gpus // g.per_node, full[g.name], count):
                return False
    return True


def _gang_room(g: GroupIndex, n: int, full: int, in_su: int) -> bool:
    """Whether ``n`` whole nodes of ``g`` may be found.

    ``full``: its wholly free nodes; ``in_su``: those of the SU that just gained one (0:
    read every SU's own count).
    """
    if full < n:
        return False
    if n > g.su_size:
        return True
    return in_su >= n or (not in_su and any(len(free) >= n for free in g.su_full.values()))


def _fits_once_freed(
    cluster: Cluster, gpus: int, need: int, groups: Mapping[str, GroupIndex], freed: Iterable[Part]
) -> bool:
    """`could_fit` counting ``freed`` part by part (what it frees only grows: stop once it fits).

    One node: a node of the job's groups with its GPUs free; a fraction (``need`` slices):
    such a slice freed; a gang: as many more wholly free nodes as it lacks.
    """
    lacking = {name: g.full - gpus // g.per_node for name, g in groups.items() if gpus > g.per_node}
    whole: dict[int, int] = {}
    nodes = cluster.nodes
    for part in freed:
        index, freed_gpus, slice_ = part[:3]
        node = nodes[index]
        if not node.open or node.group not in groups:
            continue
        if need and slice_ >= need:
            return True
        k = whole[index] = whole.get(index, 0) + freed_gpus
        if node.group not in lacking:
            if gpus <= node.whole_free + k:
                return True
        elif freed_gpus and node.whole_free < node.gpus == node.whole_free + k:
            lacking[node.group] += 1  # one more node wholly free
            if lacking[node.group] >= 0:
                return True
    return False


def _find_slices(
    cluster: Cluster, groups: list[GroupIndex], count: int, need: int
) -> Allocation | None:
    best: tuple[int, int] | None = None  # (slice size, node)
    for g in groups:
        for size, nodes in g.by_slice.items():
            if size < need or (best is not None and size >= best[0]):
                continue
            node = next((n for n in nodes if cluster.nodes[n].slices_free[size] >= count), None)
            if node is not None:
                best = (size, node)
    if best is None:
        return None
    part = Part(best[1], slice=best[0], held=best[0] / COMPUTE_SLICES)
    return tuple(part for _ in range(count))


def _find_one_node(cluster: Cluster, groups: list[GroupIndex], gpus: int) -> Allocation | None:
    if cluster.placement != "best-fit":
        return _find_by_policy(cluster, groups, gpus)
    best: tuple[int, int] | None = None  # (free whole GPUs, node): the tightest fit
    for g in groups:
        for k in range(gpus, g.per_node + 1):
            if best is not None and k >= best[0]:
                break
            bucket = g.by_free[k]
            if bucket:
                best = (k, next(iter(bucket)))
                break
    return None if best is None else (whole_part(cluster.nodes[best[1]], gpus),)


def _find_by_policy(cluster: Cluster, groups: list[GroupIndex], gpus: int) -> Allocation | None:
    """The node of a one-node job under first fit or random placement.

    First fit: the lowest node in plan order with room; random: any node with room,
    uniformly, from the replay's seeded generator.
    """
    buckets = [g.by_free[k] for g in groups for k in range(gpus, g.per_node + 1)]
    buckets = [bucket for bucket in buckets if bucket]
    if not buckets:
        return None
    if cluster.placement == "first-fit":
        node = min(min(bucket) for bucket in buckets)
    else:
        pick = cluster.rng.randrange(sum(len(bucket) for bucket in buckets))
        for bucket in buckets:
            if pick < len(bucket):
                node = next(itertools.islice(bucket, pick, None))
                break
            pick -= len(bucket)
    return (whole_part(cluster.nodes[node], gpus),)


def _share(amount: int, gpus: int, of: int) -> int:
    """A node's part of a job's CPUs or memory: pro rata to its GPUs, rounded up."""
    return -(-amount * gpus // of)


def spread(job: Job, nodes: list[tuple[Node, int]]) -> Allocation:
    """``job``'s parts on ``nodes`` (node, GPUs there): CPUs and memory pro rata to GPUs.

    Each node's part is rounded up (a gang over n nodes may hold up to n thousandths of a
    CPU and n MiB more than it stated).
    """
    if not job.cpu_milli and not job.memory_mib:  # nothing to share out
        # `whole_part`'s part made before for that node and size, else made now (a node
        # that shares its GPUs keeps none: its parts name the GPUs free now)
        return tuple([node.parts.get(k) or whole_part(node, k) for node, k in nodes])
    return tuple(
        whole_part(node, k, _share(job.cpu_milli, k, job.gpus), _share(job.memory_mib, k, job.gpus))
        for node, k in nodes
    )


def _find_gang(cluster: Cluster, g: GroupIndex, job: Job) -> Allocation | None:
    """``job``'s GPUs over ``g``'s nodes: whole free nodes, the rest on one more node.

    As Slurm's cons_tres packs ``--gpus=12`` on 8-GPU nodes (8 + 4) and as a gang of
    8-GPU pods and one 4-GPU pod lands: the remainder takes the tightest node with room
    in the SUs of the whole nodes, else the tightest anywhere in the group.
    """
    whole, rest = divmod(job.gpus, g.per_node)
    found = _find_nodes(cluster, g, whole, job)
    if found is None:
        return None
    chosen = [(cluster.nodes[n], g.per_node) for n in found]
    if rest:
        node = _remainder(cluster, g, rest, set(found), {n.su for n, _ in chosen}, job)
        if node is None:
            return None
        chosen.append((cluster.nodes[node], rest))
    return spread(job, chosen)


def _has_room(node: Node, gpus: int, job: Job) -> bool:
    """Whether ``node`` has the CPUs and memory of ``gpus`` of ``job``'s GPUs."""
    return node.room(_share(job.cpu_milli, gpus, job.gpus), _share(job.memory_mib, gpus, job.gpus))


def _remainder(
    cluster: Cluster,
    g: GroupIndex,
    rest: int,
    chosen: set[int],
    sus: set[int],
    job: Job,
) -> int | None:
    nodes = cluster.nodes
    if cluster.placement == "first-fit":
        room = [
            n
            for k in range(rest, g.per_node + 1)
            for n in g.by_free[k]
            if n not in chosen and _has_room(nodes[n], rest, job)
        ]
        return min(room, default=None)
    elsewhere = None
    states = job.cpu_milli or job.memory_mib  # else every node has room (0 CPUs, 0 MiB)
    for k in range(rest, g.per_node + 1):
        for node in g.by_free[k]:
            if node in chosen or (states and not _has_room(nodes[node], rest, job)):
                continue
            if nodes[node].su in sus:
                return node
            if elsewhere is None:
                elsewhere = node
    return elsewhere


def _find_nodes(cluster: Cluster, g: GroupIndex, n: int, job: Job) -> list[int] | None:
    if g.full < n:  # most gangs that wait: fewer wholly free nodes than they need, anywhere
        return None
    if n <= g.su_size:
        su = _tightest_su(g, n)
        return None if su is None else _whole_nodes(cluster, g, [su], n, job)
    sus = [(len(nodes), su) for su, nodes in g.su_full.items() if nodes]
    pods: dict[int, int] = {}
    for free, su in sus:
        pods[g.su_pod[su]] = pods.get(g.su_pod[su], 0) + free
    fits = [(free, pod) for pod, free in pods.items() if free >= n]
    if fits:  # one pod: its fullest-free SUs first, so the job spans the fewest SUs
        pod = min(fits)[1]
        order = sorted((-free, su) for free, su in sus if g.su_pod[su] == pod)
        return _whole_nodes(cluster, g, [su for _, su in order], n, job)
    if sum(pods.values()) < n:
        return None
    # across pods: the pods with most free nodes first, and within each its fullest SUs
    spread_out = sorted((-pods[g.su_pod[su]], g.su_pod[su], -free, su) for free, su in sus)
    return _whole_nodes(cluster, g, [item[3] for item in spread_out], n, job)


def _tightest_su(g: GroupIndex, n: int) -> int | None:
    """The SU with the fewest free whole nodes that still holds ``n`` (lowest SU on a tie).

    One pass without building tuples: the common multi-node search, run per candidate put
    back during preemption.
    """
    counts = g.su_counts
    if not any(counts[n:]):  # no SU holds it: the common answer for a gang that waits
        return None
    best_free, best_su = 0, None
    for su, nodes in g.su_full.items():
        free = len(nodes)
        if free < n:
            continue
        if best_su is None or free < best_free or (free == best_free and su < best_su):
            best_free, best_su = free, su
    return best_su


def _whole_nodes(
    cluster: Cluster, g: GroupIndex, sus: list[int], n: int, job: Job
) -> list[int] | None:
    """``n`` wholly free nodes of the SUs in order (with room for the job's CPUs and memory).

    None when CPUs or memory leave fewer than ``n``: the SU counts look at GPUs only.
    """
    out: list[int] = []
    states = job.cpu_milli or job.memory_mib  # else every node has room (0 CPUs, 0 MiB)
    for su in sus:
        free: Iterable[int] = g.su_full[su]
        if cluster.placement == "first-fit":  # the lowest-numbered, as cons_tres takes them
            free = sorted(free)
        for node in free:
            if states and not _has_room(cluster.nodes[node], g.per_node, job):
                continue
            out.append(node)
            if len(out) == n:
                return out
    return None
