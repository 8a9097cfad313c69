"""The simulated cluster: every server's free GPUs, MIG slices, shared GPUs, CPUs and memory.

Built once from the plan (`infra.simulate.build.build_cluster`); placement
(`infra.simulate.place`) asks where a job would go without changing anything, and the engine
then `take`s or `give`s the `Allocation` it returns, and cordons or re-lays out nodes for MIG
changes. A node offers unsplit GPUs, MIG slices (a group's MIG layout, counted per compute
size), or, in a group with GPU sharing (time-slicing or MPS, `replicas` per GPU), GPUs
whose replicas jobs take: a fraction of a GPU takes the replicas of one GPU that cover it,
a whole GPU all of them. Every node has CPUs (thousandths) and memory (MiB) from the
catalog's host facts or the spec's generic shape; a job that states them takes them where
it lands. The per-group indexes (nodes by free whole GPUs, by free slice size, wholly free
nodes per SU) are kept in step with every change; sets of nodes are insertion-ordered
dicts, so every choice is deterministic (no hash order).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from infra.simulate.jobs import MILLI_WHOLE, Job

__all__ = [
    "COMPUTE_SLICES",
    "PLACEMENTS",
    "Allocation",
    "Cluster",
    "Fragmentation",
    "GroupIndex",
    "Node",
    "Option",
    "Part",
    "held",
    "held_by",
    "least_held",
    "slice_sizes",
    "slices_needed",
    "units_needed",
    "whole_part",
]

PLACEMENTS = ("best-fit", "first-fit", "random", "packing", "fgd")
"""How a job of one node picks it (`infra.simulate.place`): the least room left (the
default, as railplan's rendered schedulers bin-pack), the first in plan order, uniformly at
random (the FGD paper's Random baseline), the FGD paper's GPU packing, or fragmentation
gradient descent (Weng et al., ATC '23). Random draws and score ties use ``--seed``. Jobs
larger than a node keep their SU placement."""

COMPUTE_SLICES = 7
"""Compute slices of a MIG-capable GPU (A100/H100/H200: a GPU instance of ``g`` slices
holds ``g/7`` of the SMs; MIG User Guide, "Concepts")."""


class Part(NamedTuple):
    """What a job holds on one node.

    ``whole`` unsplit GPUs (on a sharing node, ``gpus`` names them); a MIG ``slice`` of that
    many compute slices; ``units`` replicas of the one shared GPU ``gpus[0]``; ``cpu``
    thousandths of a CPU and ``mem`` MiB; ``held`` the GPUs this counts as (a slice its
    ``g/7``, replicas their share of the GPU).
    """

    node: int
    whole: int = 0
    slice: int = 0
    units: int = 0
    gpus: tuple[int, ...] = ()
    cpu: int = 0
    mem: int = 0
    held: float = 0.0


Allocation = tuple[Part, ...]
"""A job's parts, one per node it uses (a fraction on a MIG node: one part per slice)."""

Option = tuple[Part, int]
"""A way to land on a node, and the free replicas of the shared GPU it takes (else 0)."""

Scored = tuple[tuple[float, ...], Part]
"""A node's best option for a job and its score as a sort key, the lowest best
(`infra.simulate.score`; memoised per node in `Cluster.memo` while the node is unchanged)."""


class Fragmentation(Protocol):
    """What the FGD placement reads of the replay's meter (`infra.simulate.fragment.FgdMeter`).

    A protocol, so the cluster does not import the module that measures it.
    """

    def of(self, state: Any) -> float:
        """FGD fragmentation of a node in ``state`` (`infra.simulate.fragment.State`)."""
        ...


def slices_needed(milli: int) -> int:
    """Compute slices (of 7) a fraction of ``milli`` thousandths of a GPU needs, at least 1."""
    return max(1, math.ceil(milli * COMPUTE_SLICES / MILLI_WHOLE - 1e-9))


def units_needed(milli: int, replicas: int) -> int:
    """Replicas of one shared GPU (of ``replicas``) a fraction of ``milli`` thousandths needs."""
    return max(1, math.ceil(milli * replicas / MILLI_WHOLE - 1e-9))


def held(alloc: Allocation) -> float:
    """GPUs an allocation holds, a slice or a share of a GPU counted as its part of it.

    The one number a job is admitted on, charged to its tenant and metered as allocated:
    a 12-GPU job on two 8-GPU nodes holds 16, a fraction on an unshared GPU holds 1.
    """
    if len(alloc) == 1:  # most jobs: one part (the sum's 0 + x is x)
        return alloc[0].held
    return sum(part.held for part in alloc)


def held_by(job: Job, alloc: Allocation) -> float:
    """`held` of ``job``'s allocation without the sum where placement fixes it.

    Whole-GPU placements hold exactly the job's GPUs (one node, or whole nodes and the rest
    on one more); only a fraction's holding depends on where it lands.
    """
    return held(alloc) if job.fractional else float(job.gpus)


def least_held(job: Job, replicas: Iterable[int] = ()) -> float:
    """The least ``job`` can hold: its GPUs; a fraction its slice's share, or its replicas'.

    A lower bound of `held` for any placement (a fraction on an unshared GPU holds all of
    it); ``replicas`` are the sharing groups' replicas per GPU. Quota decisions made before
    a placement exists read it; admission and charge read `held`.
    """
    if not job.fractional:
        return float(job.gpus)
    least = slices_needed(job.milli) / COMPUTE_SLICES
    for r in replicas:
        least = min(least, units_needed(job.milli, r) / r)
    return job.gpus * least


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
    """One server: its place in the plan and what is free on it now.

    On a sharing node (``replicas`` > 1) ``shared`` holds each GPU's free replicas and
    ``whole_free`` counts the GPUs with all of them free.
    """

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
    replicas: int = 1  # replicas per GPU of a sharing group; 1: GPUs are not shared
    shared: list[int] = field(default_factory=list)  # sharing: free replicas per GPU
    cpu_total: int = 0  # thousandths of a CPU
    cpu_free: int = 0
    mem_total: int = 0  # MiB
    mem_free: int = 0
    stamp: int = 0  # counts changes: placement's per-node memo is valid while it holds
    # `whole_part`'s parts of whole GPUs alone, by GPUs (one tuple each, shared by the jobs)
    parts: dict[int, Part] = field(default_factory=dict, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """Nothing of it is in use."""
        return self.running == 0

    def share_used(self) -> float:
        """GPUs in use, slices and shares counted as their part of a GPU."""
        sliced = sum(g * (self.slices_total[g] - f) for g, f in self.slices_free.items())
        used = self.whole_total - self.whole_free + sliced / COMPUTE_SLICES
        if self.shared:  # partly used GPUs: whole_free does not count them as free
            used -= sum(u for u in self.shared if u < self.replicas) / self.replicas
        return used

    def gpu_free(self) -> float:
        """Free GPU capacity: free GPUs, slices and replicas as their part of a GPU."""
        return self.gpus - self.share_used() if self.open else 0.0

    def room(self, cpu: int, mem: int) -> bool:
        """Whether ``cpu`` thousandths of a CPU and ``mem`` MiB are free here."""
        return self.cpu_free >= cpu and self.mem_free >= mem


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
    replicas: int = 1  # GPU sharing: replicas per GPU; 1: none
    members: list[int] = field(default_factory=list)  # its nodes, in plan order
    full: int = 0  # open nodes with every GPU unsplit and free: the sizes of ``su_full``
    # [k]: SUs with k such nodes (``su_full``'s sizes counted), so a gang that no SU holds
    # is told so without reading every SU (`infra.simulate.place`)
    su_counts: list[int] = field(default_factory=list)


class Cluster:
    """Every node and the indexes placement reads (kept in step by `_unindex`/`_index`)."""

    def __init__(self, nodes: Sequence[Node], groups: Sequence[GroupIndex]) -> None:
        self.nodes = list(nodes)
        self.groups = {g.name: g for g in groups}
        self.gpus = sum(n.gpus for n in nodes)
        self.watch: Callable[[Node], None] | None = None  # told of every node that changed
        # the FGD meter's changed nodes (`FgdMeter.dirty`), marked in place: what ``watch``
        # would be told, without a call per part on the hot path
        self.dirty: dict[int, None] | None = None
        self.placement = "best-fit"  # a `PLACEMENTS` name: how a one-node job picks its node
        self.rng = random.Random(0)  # random placement's generator (the replay seeds it)
        self.rank = list(range(len(self.nodes)))  # score ties: the lowest rank wins
        self.replicas = sorted({g.replicas for g in groups if g.replicas > 1})
        self.max_cpu = max((n.cpu_total for n in nodes), default=0)
        self.max_gpus = max((n.gpus for n in nodes), default=0)
        self.fgd: Fragmentation | None = None  # the FGD placement's fragmentation (the replay's)
        self.memo: dict[tuple[int, tuple[int, ...]], tuple[int, Scored | None]] = {}
        self.fits: dict[tuple[int, tuple[int, ...]], tuple[int, list[Option]]] = {}
        self.layout = 0  # counts nodes closed or given a new layout (indexes built on it check)
        # placement's memo: (partition, GPUs, GPU model, models) -> the groups that accept
        # such a job, and those of them a node of which can hold it (`infra.simulate.place`)
        self.accepting: dict[Hashable, tuple[list[GroupIndex], list[GroupIndex]]] = {}
        # the same per group of a tenant's flavors, in their order: (flavors, GPUs, GPU
        # model, models) -> each flavor's answer (`infra.simulate.place`)
        self.flavor_groups: dict[Hashable, list[tuple[list[GroupIndex], list[GroupIndex]]]] = {}
        for g in groups:
            g.su_counts = [0] * (max(g.su_size, *map(len, g.su_full.values()), 0) + 1)
            for free in g.su_full.values():
                g.su_counts[len(free)] += 1
        for node in self.nodes:
            self._index(node)

    def seed(self, seed: int) -> None:
        """Seed the random placement and the order that breaks score ties (a permutation).

        Kubernetes breaks ties between equal node scores at random; the FGD paper's
        simulator by node name, the names prefixed with a seeded permutation. Both give
        every replay seed its own order of equal nodes.
        """
        self.rng = random.Random(seed)
        order = list(range(len(self.nodes)))
        random.Random(seed + 0x5EED).shuffle(order)
        for rank, node in enumerate(order):
            self.rank[node] = rank

    # --- indexes -----------------------------------------------------------------------

    def _index(self, node: Node) -> None:
        if not node.open:
            return
        g = self.groups[node.group]
        g.by_free[node.whole_free][node.index] = None
        for size, free in node.slices_free.items():
            if free > 0:
                g.by_slice.setdefault(size, {})[node.index] = None
        if node.whole_free == node.gpus:
            _su_free(g, node.su, node.index, +1)
            g.full += 1

    def _unindex(self, node: Node) -> None:
        if not node.open:
            return
        g = self.groups[node.group]
        g.by_free[node.whole_free].pop(node.index, None)
        for size in node.slices_free:
            g.by_slice.get(size, {}).pop(node.index, None)
        _su_free(g, node.su, node.index, -1)
        g.full -= node.whole_free == node.gpus

    # --- changes -----------------------------------------------------------------------

    def take(self, alloc: Allocation) -> None:
        """Mark ``alloc`` in use."""
        self._apply(alloc, -1)

    def give(self, alloc: Allocation) -> None:
        """Free ``alloc``."""
        self._apply(alloc, +1)

    def _apply(self, alloc: Allocation, sign: int) -> None:
        # `_unindex`, the change and `_index` fused (the hottest loop of preemption): the
        # same operations on each dict in the same order, so every insertion order stays as
        # it was. A node is in ``su_full`` exactly while it is open with every GPU free, so
        # only such a node is looked up there; nodes without MIG slices skip ``by_slice``.
        nodes, groups, watch, dirty = self.nodes, self.groups, self.watch, self.dirty
        for part in alloc:
            index, whole, slice_, _, _, cpu, mem, _ = part  # one unpacking, not five lookups
            node = nodes[index]
            if not node.open:
                _change(node, part, sign)
                continue
            g = groups[node.group]
            by_free = g.by_free
            before = node.whole_free
            if before == node.gpus:
                g.full -= 1
                free = g.su_full[node.su]  # `_su_free`, inline
                g.su_counts[len(free)] -= 1
                free.pop(index, None)
                g.su_counts[len(free)] += 1
            by_free[before].pop(index, None)
            sliced = node.slices_free
            if sliced:
                _unslice(g, index, sliced)
            if node.shared or slice_ or cpu or mem:
                _change(node, part, sign)
                after = node.whole_free
            else:  # whole GPUs alone: `_change`'s arithmetic, without the call
                after = node.whole_free = before + sign * whole
                node.running -= sign
                node.stamp += 1
                assert 0 <= after <= node.whole_total, "whole GPUs over-allocated"
            by_free[after][index] = None
            if sliced:
                _reslice(g, index, sliced)
            if after == node.gpus:
                free = g.su_full[node.su]
                g.su_counts[len(free)] -= 1
                free[index] = None
                g.su_counts[len(free)] += 1
                g.full += 1
            if dirty is not None:
                dirty[index] = None
            if watch is not None:
                watch(node)

    def lift_and_return(self, allocs: Sequence[Allocation]) -> None:
        """What giving back every allocation of ``allocs`` and taking them again leaves.

        `give` of each in order, then `take` of each in order, without the changes in
        between: free counts end as they were, but each node's place in the indexes is its
        last touch's (dicts keep insertion order), its ``stamp`` counts both changes and
        ``watch`` hears of both. Whole-GPU parts only, on nodes that share no GPU: a
        preemption that lifts its candidates, finds nothing and puts them back settles with
        this.
        """
        if self.watch is not None:
            for _ in range(2):  # give, then take: ``watch`` hears of each
                self._touch(allocs)
        else:  # both touches at once: ``dirty`` keeps a node where its first mark put it
            self._touch(allocs, 2)
        nodes, groups = self.nodes, self.groups
        for alloc in allocs:  # the takes' index moves, in their order
            for part in alloc:
                index = part.node
                node = nodes[index]
                if not node.open:
                    continue
                g = groups[node.group]
                bucket = g.by_free[node.whole_free]
                bucket.pop(index, None)
                bucket[index] = None
                for g_size, free in node.slices_free.items():
                    if free > 0:
                        slot = g.by_slice.setdefault(g_size, {})
                        slot.pop(index, None)
                        slot[index] = None

    def _touch(self, allocs: Sequence[Allocation], times: int = 1) -> None:
        """Count ``times`` changes on every node of ``allocs`` (and tell ``dirty`` and ``watch``)."""
        nodes, watch, dirty = self.nodes, self.watch, self.dirty
        for alloc in allocs:
            for part in alloc:
                node = nodes[part.node]
                node.stamp += times
                if node.open:
                    if dirty is not None:
                        dirty[part.node] = None
                    if watch is not None:
                        watch(node)

    def close(self, indices: Iterable[int]) -> None:
        """Stop nodes taking new jobs (a MIG change drains them)."""
        for index in indices:
            node = self.nodes[index]
            self._unindex(node)
            node.open = False
            node.stamp += 1
            self.layout += 1
            self._heard(node)

    def relayout(self, indices: Iterable[int], whole: int, slices: Mapping[int, int]) -> None:
        """Give empty, closed nodes a new MIG layout and open them again."""
        for index in indices:
            node = self.nodes[index]
            assert node.empty and not node.open, "re-partitioning a node in use"
            node.whole_total = node.whole_free = whole
            node.slices_total = dict(slices)
            node.slices_free = dict(slices)
            node.open = True
            node.stamp += 1
            self.layout += 1
            self._index(node)
            self._heard(node)

    def _heard(self, node: Node) -> None:
        """Tell ``dirty`` and ``watch`` that ``node`` changed."""
        if self.dirty is not None:
            self.dirty[node.index] = None
        if self.watch is not None:
            self.watch(node)


def _su_free(g: GroupIndex, su: int, index: int, sign: int) -> None:
    """Add (+1) or drop (-1) node ``index`` in ``su``'s wholly free nodes, counted by size."""
    free = g.su_full[su]
    g.su_counts[len(free)] -= 1
    if sign > 0:
        free[index] = None
    else:
        free.pop(index, None)
    g.su_counts[len(free)] += 1


def _unslice(g: GroupIndex, index: int, slices: Mapping[int, int]) -> None:
    """Take node ``index`` out of its group's slice index (``slices``: its free slices)."""
    for g_size in slices:
        g.by_slice.get(g_size, {}).pop(index, None)


def _reslice(g: GroupIndex, index: int, slices: Mapping[int, int]) -> None:
    """Put node ``index`` back in its group's slice index, under each size it has free."""
    for g_size, free in slices.items():
        if free > 0:
            g.by_slice.setdefault(g_size, {})[index] = None


def whole_part(node: Node, gpus: int, cpu: int = 0, mem: int = 0) -> Part:
    """``gpus`` whole GPUs of ``node``: on a sharing node the first wholly free ones."""
    chosen: tuple[int, ...] = ()
    if node.shared:
        free = [i for i, u in enumerate(node.shared) if u == node.replicas]
        chosen = tuple(free[:gpus])
    elif not cpu and not mem:  # the same part every time: made once per node and size
        part = node.parts.get(gpus)
        if part is None:
            part = node.parts[gpus] = _new_part(
                Part, (node.index, gpus, 0, 0, (), 0, 0, float(gpus))
            )
        return part
    # `Part(node.index, whole=gpus, gpus=chosen, cpu=cpu, mem=mem, held=float(gpus))`
    # without the keyword call: every placement of whole GPUs makes its parts here
    return _new_part(Part, (node.index, gpus, 0, 0, chosen, cpu, mem, float(gpus)))


_new_part = tuple.__new__


def _change(node: Node, part: Part, sign: int) -> None:
    """Apply one part to its node: ``sign`` -1 takes it, +1 gives it back."""
    if node.shared:
        for gpu in part.gpus:
            free = node.shared[gpu] + sign * (part.units or node.replicas)
            assert 0 <= free <= node.replicas, "shared GPU over-allocated"
            node.shared[gpu] = free
        node.whole_free = sum(1 for u in node.shared if u == node.replicas)
    else:
        node.whole_free += sign * part.whole
    if part.slice:  # only this slice size changes, so only it needs checking
        free = node.slices_free[part.slice] + sign
        assert 0 <= free <= node.slices_total[part.slice], "slices over-allocated"
        node.slices_free[part.slice] = free
    if part.cpu or part.mem:
        node.cpu_free += sign * part.cpu
        node.mem_free += sign * part.mem
        assert 0 <= node.cpu_free <= node.cpu_total, "CPUs over-allocated"
        assert 0 <= node.mem_free <= node.mem_total, "memory over-allocated"
    node.running -= sign
    node.stamp += 1
    assert 0 <= node.whole_free <= node.whole_total, "whole GPUs over-allocated"
