"""The simulated cluster: every server's free whole GPUs and MIG slices, and where a job fits.

Built once from the plan (`build_cluster`); the engine then asks `Cluster.find` where a job
would go (without changing anything), `take`s or `give`s an `Allocation`, and cordons or
re-lays out nodes for MIG changes. Placement follows what railplan renders for Kueue and
Volcano: a job of at most one node's GPUs goes on one node (best fit: the node with the
fewest free whole GPUs that still holds it); a larger job takes ``gpus // per_node`` whole
free nodes and the rest on one more node (`Cluster._find_gang`: 8 + 4 for 12 GPUs, as
cons_tres packs them), the whole nodes inside one SU when they fit an SU (the SU with the
fewest free nodes that suffices), else whole SUs of one pod (the pod with the fewest free
nodes that suffices), else across pods. A fractional job takes
the smallest free MIG slice whose compute share (``g/7`` of a GPU) covers its fraction, or a
whole unsplit GPU when no slice fits. Sets of nodes are insertion-ordered dicts, so every
choice is deterministic (no hash order).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from infra.simulate.jobs import MILLI_WHOLE, Job

__all__ = [
    "COMPUTE_SLICES",
    "PLACEMENTS",
    "Allocation",
    "Cluster",
    "Node",
    "held",
    "held_by",
    "least_held",
    "slice_sizes",
    "slices_needed",
]

PLACEMENTS = ("best-fit", "first-fit", "random")
"""How a job of one node picks it: the fewest free GPUs that hold it (the default, as
railplan's rendered schedulers bin-pack), the first in plan order, or uniformly at random (the
FGD paper's Random baseline; seeded by ``--seed``). Larger jobs keep their SU placement."""

COMPUTE_SLICES = 7
"""Compute slices of a MIG-capable GPU (A100/H100/H200: a GPU instance of ``g`` slices
holds ``g/7`` of the SMs; MIG User Guide, "Concepts")."""

Allocation = tuple[tuple[int, int, int], ...]
"""Per node used: ``(node index, whole GPUs, slice size g)``; a slice entry has 0 whole GPUs."""


def slices_needed(milli: int) -> int:
    """Compute slices (of 7) a fraction of ``milli`` thousandths of a GPU needs, at least 1."""
    return max(1, math.ceil(milli * COMPUTE_SLICES / MILLI_WHOLE - 1e-9))


def held(alloc: Allocation) -> float:
    """GPUs an allocation holds, a slice counted as its share (``g/7``) of a GPU.

    The one number a job is admitted on, charged to its tenant and metered as allocated:
    a 12-GPU job on two 8-GPU nodes holds 16, a fraction on an unsplit GPU holds 1.
    """
    return sum(whole + size / COMPUTE_SLICES for _, whole, size in alloc)


def held_by(job: Job, alloc: Allocation) -> float:
    """`held` of ``job``'s allocation without the sum where placement fixes it.

    Whole-GPU placements hold exactly the job's GPUs (`Cluster.find`: one node, or whole
    nodes and the rest on one more); only a fraction's holding depends on where it lands.
    """
    return held(alloc) if job.fractional else float(job.gpus)


def least_held(job: Job) -> float:
    """The least ``job`` can hold: its GPUs, a fraction at least its slice's share.

    A lower bound of `held` for any placement (a fraction on an unsplit GPU holds all of
    it). Quota decisions made before a placement exists read it (whether a head waits for
    quota or for GPUs, whether it may reclaim); admission and charge read `held`.
    """
    if job.fractional:
        return job.gpus * slices_needed(job.milli) / COMPUTE_SLICES
    return float(job.gpus)


def slice_sizes(layout: Mapping[str, int], compute_of: Mapping[str, int]) -> dict[int, int]:
    """Slices per compute size of one GPU's MIG layout (profile name -> count)."""
    out: dict[int, int] = {}
    for name, count in layout.items():
        if count > 0:
            g = compute_of[name]
            out[g] = out.get(g, 0) + count
    return out


@dataclass(slots=True)
class Node:
    """One server: its place in the plan and what is free on it now."""

    index: int
    name: str
    group: str
    su: int
    pod: int
    gpus: int
    whole_total: int = 0  # unsplit GPUs
    whole_free: int = 0
    slices_total: dict[int, int] = field(default_factory=dict)  # compute size -> slices
    slices_free: dict[int, int] = field(default_factory=dict)
    open: bool = True  # takes new jobs (False while a MIG change drains it)
    running: int = 0  # jobs with a share of this node

    @property
    def empty(self) -> bool:
        """Nothing of it is in use."""
        return self.running == 0

    def share_used(self) -> float:
        """GPUs in use, slices counted as their share of a GPU."""
        sliced = sum(g * (self.slices_total[g] - f) for g, f in self.slices_free.items())
        return self.whole_total - self.whole_free + sliced / COMPUTE_SLICES


@dataclass(slots=True)
class GroupIndex:
    """One node group's open nodes by free whole GPUs, by free slice size, and free per SU."""

    name: str
    gpu_model: str
    per_node: int
    su_size: int
    by_free: list[dict[int, None]]  # [k]: open nodes with k free whole GPUs
    by_slice: dict[int, dict[int, None]]  # g: open nodes with a free slice of size g
    su_full: dict[int, dict[int, None]]  # su: open nodes with every GPU unsplit and free
    su_pod: dict[int, int]


class Cluster:
    """Every node and the indexes placement reads (kept in step by `_unindex`/`_index`)."""

    def __init__(self, nodes: Sequence[Node], groups: Sequence[GroupIndex]) -> None:
        self.nodes = list(nodes)
        self.groups = {g.name: g for g in groups}
        self.gpus = sum(n.gpus for n in nodes)
        self.free_whole = 0  # free unsplit GPUs on open nodes (a quick bound for placement)
        self.watch: Callable[[Node], None] | None = None  # told of every node that changed
        self.placement = "best-fit"  # a `PLACEMENTS` name: how a one-node job picks its node
        self.rng = random.Random(0)  # random placement's generator (the replay seeds it)
        for node in self.nodes:
            self._index(node)

    # --- indexes -----------------------------------------------------------------------

    def _index(self, node: Node) -> None:
        if not node.open:
            return
        self.free_whole += node.whole_free
        g = self.groups[node.group]
        g.by_free[node.whole_free][node.index] = None
        for size, free in node.slices_free.items():
            if free > 0:
                g.by_slice.setdefault(size, {})[node.index] = None
        if node.whole_free == node.gpus:
            g.su_full[node.su][node.index] = None

    def _unindex(self, node: Node) -> None:
        if not node.open:
            return
        self.free_whole -= node.whole_free
        g = self.groups[node.group]
        g.by_free[node.whole_free].pop(node.index, None)
        for size in node.slices_free:
            g.by_slice.get(size, {}).pop(node.index, None)
        g.su_full[node.su].pop(node.index, None)

    # --- changes -----------------------------------------------------------------------

    def take(self, alloc: Allocation) -> None:
        """Mark ``alloc`` in use."""
        self._apply(alloc, -1)

    def give(self, alloc: Allocation) -> None:
        """Free ``alloc``."""
        self._apply(alloc, +1)

    def _apply(self, alloc: Allocation, sign: int) -> None:
        # `_unindex`, the change and `_index` fused (the hottest loop of preemption): the
        # same dict operations in the same order, so every insertion order stays as it was.
        nodes, groups, watch = self.nodes, self.groups, self.watch
        for index, whole, size in alloc:
            node = nodes[index]
            if not node.open:
                self._change(node, sign * whole, size, sign)
                continue
            g = groups[node.group]
            g.by_free[node.whole_free].pop(index, None)
            for g_size in node.slices_free:
                g.by_slice.get(g_size, {}).pop(index, None)
            g.su_full[node.su].pop(index, None)
            self.free_whole += sign * whole
            self._change(node, sign * whole, size, sign)
            g.by_free[node.whole_free][index] = None
            for g_size, free in node.slices_free.items():
                if free > 0:
                    g.by_slice.setdefault(g_size, {})[index] = None
            if node.whole_free == node.gpus:
                g.su_full[node.su][index] = None
            if watch is not None:
                watch(node)

    @staticmethod
    def _change(node: Node, whole: int, size: int, sign: int) -> None:
        node.whole_free += whole
        if size:  # only this slice size changes, so only it needs checking
            free = node.slices_free[size] + sign
            assert 0 <= free <= node.slices_total[size], "slices over-allocated"
            node.slices_free[size] = free
        node.running -= sign
        assert 0 <= node.whole_free <= node.whole_total, "whole GPUs over-allocated"

    def close(self, indices: Iterable[int]) -> None:
        """Stop nodes taking new jobs (a MIG change drains them)."""
        for index in indices:
            node = self.nodes[index]
            self._unindex(node)
            node.open = False
            if self.watch is not None:
                self.watch(node)

    def relayout(self, indices: Iterable[int], whole: int, slices: Mapping[int, int]) -> None:
        """Give empty, closed nodes a new MIG layout and open them again."""
        for index in indices:
            node = self.nodes[index]
            assert node.empty and not node.open, "re-partitioning a node in use"
            node.whole_total = node.whole_free = whole
            node.slices_total = dict(slices)
            node.slices_free = dict(slices)
            node.open = True
            self._index(node)
            if self.watch is not None:
                self.watch(node)

    # --- placement ---------------------------------------------------------------------

    def find(self, job: Job, *, only: str | None = None) -> Allocation | None:
        """Where ``job`` would run now, or None when it does not fit anywhere open.

        ``only``: in that node group alone (a Slurm partition).
        """
        groups = [
            g
            for g in self.groups.values()
            if job.accepts(g.gpu_model) and (only is None or g.name == only)
        ]
        if job.fractional:
            found = self._find_slices(groups, job.gpus, slices_needed(job.milli))
            if found is not None:
                return found
        one = [g for g in groups if job.gpus <= g.per_node]
        found = self._find_one_node(one, job.gpus) if one else None
        if found is not None or job.fractional:
            return found
        for g in groups:
            if job.gpus > g.per_node:
                found = self._find_gang(g, job.gpus)
                if found is not None:
                    return found
        return None

    def could_fit(self, job: Job, freed: Mapping[int, tuple[int, int]]) -> bool:
        """Whether ``job`` might fit once ``freed`` (per node: whole GPUs, largest slice) is back.

        A necessary condition only (SUs and quota are not looked at), so preemption lifts
        its candidates only when it might help.
        """
        groups = {g.name: g for g in self.groups.values() if job.accepts(g.gpu_model)}
        opened = [(self.nodes[n], k, s) for n, (k, s) in freed.items()]
        opened = [(node, k, s) for node, k, s in opened if node.open and node.group in groups]
        if job.fractional and self._slice_could_fit(job, groups.values(), opened):
            return True
        touched = [(node, k) for node, k, _ in opened]
        for g in groups.values():
            if job.gpus <= g.per_node:  # one node: free already (quota blocks) or once freed
                if any(g.by_free[k] for k in range(job.gpus, g.per_node + 1)) or any(
                    node.group == g.name and job.gpus <= node.whole_free + k for node, k in touched
                ):
                    return True
                continue
            full = sum(len(nodes) for nodes in g.su_full.values())
            full += sum(
                1
                for node, k in touched
                if node.group == g.name and node.whole_free < node.gpus == node.whole_free + k
            )
            if full >= job.gpus // g.per_node:  # the whole nodes; the rest may share a node
                return True
        return False

    def _slice_could_fit(
        self, job: Job, groups: Iterable[GroupIndex], opened: list[tuple[Node, int, int]]
    ) -> bool:
        need = slices_needed(job.milli)
        if any(size >= need for _, _, size in opened):
            return True
        return any(size >= need and nodes for g in groups for size, nodes in g.by_slice.items())

    def _find_slices(self, groups: list[GroupIndex], count: int, need: int) -> Allocation | None:
        best: tuple[int, int] | None = None  # (slice size, node)
        for g in groups:
            for size, nodes in g.by_slice.items():
                if size < need or (best is not None and size >= best[0]):
                    continue
                node = next((n for n in nodes if self.nodes[n].slices_free[size] >= count), None)
                if node is not None:
                    best = (size, node)
        if best is None:
            return None
        return tuple((best[1], 0, best[0]) for _ in range(count))

    def _find_one_node(self, groups: list[GroupIndex], gpus: int) -> Allocation | None:
        if self.placement != "best-fit":
            return self._find_by_policy(groups, gpus)
        best: tuple[int, int] | None = None  # (free whole GPUs, node): the tightest fit
        for g in groups:
            for k in range(gpus, g.per_node + 1):
                if best is not None and k >= best[0]:
                    break
                bucket = g.by_free[k]
                if bucket:
                    best = (k, next(iter(bucket)))
                    break
        return None if best is None else ((best[1], gpus, 0),)

    def _find_by_policy(self, groups: list[GroupIndex], gpus: int) -> Allocation | None:
        """The node of a one-node job under first fit or random placement.

        First fit: the lowest node in plan order with room; random: any node with room,
        uniformly, from the replay's seeded generator.
        """
        buckets = [g.by_free[k] for g in groups for k in range(gpus, g.per_node + 1)]
        buckets = [bucket for bucket in buckets if bucket]
        if not buckets:
            return None
        if self.placement == "first-fit":
            node = min(min(bucket) for bucket in buckets)
        else:
            pick = self.rng.randrange(sum(len(bucket) for bucket in buckets))
            for bucket in buckets:
                if pick < len(bucket):
                    node = next(itertools.islice(bucket, pick, None))
                    break
                pick -= len(bucket)
        return ((node, gpus, 0),)

    def _find_gang(self, g: GroupIndex, gpus: int) -> Allocation | None:
        """``gpus`` over ``g``'s nodes: whole free nodes, the rest on one more node.

        As Slurm's cons_tres packs ``--gpus=12`` on 8-GPU nodes (8 + 4) and as a gang of
        8-GPU pods and one 4-GPU pod lands: the remainder takes the tightest node with room
        in the SUs of the whole nodes, else the tightest anywhere in the group.
        """
        whole, rest = divmod(gpus, g.per_node)
        found = self._find_nodes(g, whole)
        if found is None or rest == 0:
            return found
        chosen = {node for node, _, _ in found}
        node = self._remainder(g, rest, chosen, {self.nodes[n].su for n in chosen})
        return None if node is None else (*found, (node, rest, 0))

    def _remainder(self, g: GroupIndex, rest: int, chosen: set[int], sus: set[int]) -> int | None:
        if self.placement == "first-fit":
            room = [n for k in range(rest, g.per_node + 1) for n in g.by_free[k] if n not in chosen]
            return min(room, default=None)
        elsewhere = None
        for k in range(rest, g.per_node + 1):
            for node in g.by_free[k]:
                if node in chosen:
                    continue
                if self.nodes[node].su in sus:
                    return node
                if elsewhere is None:
                    elsewhere = node
        return elsewhere

    def _find_nodes(self, g: GroupIndex, n: int) -> Allocation | None:
        if n <= g.su_size:
            su = self._tightest_su(g, n)
            return None if su is None else self._whole_nodes(g, [su], n)
        sus = [(len(nodes), su) for su, nodes in g.su_full.items() if nodes]
        pods: dict[int, int] = {}
        for free, su in sus:
            pods[g.su_pod[su]] = pods.get(g.su_pod[su], 0) + free
        fits = [(free, pod) for pod, free in pods.items() if free >= n]
        if fits:  # one pod: its fullest-free SUs first, so the job spans the fewest SUs
            pod = min(fits)[1]
            order = sorted((-free, su) for free, su in sus if g.su_pod[su] == pod)
            return self._whole_nodes(g, [su for _, su in order], n)
        if sum(pods.values()) < n:
            return None
        # across pods: the pods with most free nodes first, and within each its fullest SUs
        spread = sorted((-pods[g.su_pod[su]], g.su_pod[su], -free, su) for free, su in sus)
        return self._whole_nodes(g, [item[3] for item in spread], n)

    @staticmethod
    def _tightest_su(g: GroupIndex, n: int) -> int | None:
        """The SU with the fewest free whole nodes that still holds ``n`` (lowest SU on a tie).

        One pass without building tuples: the common multi-node search, run per candidate
        put back during preemption.
        """
        best_free, best_su = 0, None
        for su, nodes in g.su_full.items():
            free = len(nodes)
            if free < n:
                continue
            if best_su is None or free < best_free or (free == best_free and su < best_su):
                best_free, best_su = free, su
        return best_su

    def _whole_nodes(self, g: GroupIndex, sus: list[int], n: int) -> Allocation:
        out: list[tuple[int, int, int]] = []
        for su in sus:
            free: Iterable[int] = g.su_full[su]
            if self.placement == "first-fit":  # the lowest-numbered, as cons_tres takes them
                free = sorted(free)
            for node in free:
                out.append((node, g.per_node, 0))
                if len(out) == n:
                    return tuple(out)
        raise AssertionError("fewer free nodes than counted")
