"""The simulated cluster built from the plan: nodes, SUs, pods and each group's MIG layout.

Walks the plan as the Kubernetes topology renderer does (`plan.sus` in plan order, each
server's group and SU; a server outside any SU counts as one SU per group, as without a
compute fabric the whole group is one rolling batch). A node's layout comes from the group's
MIG state: unsplit GPUs are whole, split ones contribute their instances per compute size
(``1g.10gb`` x 7 gives seven slices of size 1; a ``<C>c.`` compute-instance name counts
slices of ``C``). A group with GPU `sharing` gives each GPU its replicas. CPUs and memory
are the catalog node's host (logical CPUs, installed memory: the little the OS keeps is
not taken off) or the spec's generic shape; ``catalog`` must be the spec's view
(`Catalog.with_shapes`) when the spec has shapes.
"""

from __future__ import annotations

from collections.abc import Mapping

from infra.catalog import Catalog
from infra.catalog.mig import parse_profile
from infra.simulate.cluster import Cluster, GroupIndex, Node, slice_sizes
from infra.spec import Spec
from infra.topology.facts_model import MigState
from infra.topology.model import Plan

__all__ = ["CPU_MILLI", "MIB_PER_GIB", "build_cluster", "node_layout"]

CPU_MILLI = 1000
"""Thousandths of a CPU in one logical CPU (Kubernetes' ``1000m``; the trace unit)."""

MIB_PER_GIB = 1024


def node_layout(state: MigState, spec: Spec) -> tuple[int, dict[int, int]]:
    """(unsplit GPUs, slices per compute size) of one node of a group in MIG ``state``."""
    whole = 0
    slices: dict[int, int] = {}
    for layout in state.per_gpu:
        if layout is None or layout not in spec.mig_layouts:
            whole += 1
            continue
        profiles = spec.mig_layouts[layout].profiles
        for size, count in slice_sizes(profiles, _compute_sizes(profiles)).items():
            slices[size] = slices.get(size, 0) + count
    return whole, slices


def _compute_sizes(profiles: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for name in profiles:
        parsed = parse_profile(name)
        out[name] = parsed.compute_slices if parsed is not None else 7
    return out


def build_cluster(spec: Spec, plan: Plan, catalog: Catalog) -> Cluster:
    """Every planned server as a `Node` in its group's first MIG state, indexed by group."""
    su_index = {su.name: i for i, su in enumerate(plan.sus)}
    su_pod = {i: su.pod or 0 for i, su in enumerate(plan.sus)}
    loose = {name: len(plan.sus) + k for k, name in enumerate(plan.groups)}  # SU-less servers
    su_pod.update({i: -1 for i in loose.values()})
    replicas = _replicas(spec)
    nodes: list[Node] = []
    for server in plan.servers:
        group = plan.groups[server.group]
        whole, slices = node_layout(group.mig.now, spec)
        su = su_index[server.su] if server.su is not None else loose[server.group]
        host = catalog.nodes[group.node].host
        share = replicas.get(server.group, 1)
        cpu, mem = host.cpus * CPU_MILLI, host.memory_gib * MIB_PER_GIB
        node = Node(len(nodes), server.name, server.group, su, su_pod[su], group.gpus)
        node.whole_total = node.whole_free = whole
        node.slices_total, node.slices_free = dict(slices), dict(slices)
        node.cpu_total = node.cpu_free = cpu
        node.mem_total = node.mem_free = mem
        if share > 1:
            node.replicas, node.shared = share, [share] * group.gpus
        nodes.append(node)
    groups = [_group_index(name, nodes, plan, catalog, su_pod) for name in plan.groups]
    for g in groups:
        g.replicas = replicas.get(g.name, 1)
    return Cluster(nodes, groups)


def _replicas(spec: Spec) -> dict[str, int]:
    """Replicas per GPU of each group that shares its GPUs."""
    return {g.name: g.sharing.replicas for g in spec.node_groups if g.sharing is not None}


def _group_index(
    name: str, nodes: list[Node], plan: Plan, catalog: Catalog, su_pod: dict[int, int]
) -> GroupIndex:
    group = plan.groups[name]
    mine = [n for n in nodes if n.group == name]
    sus: dict[int, dict[int, None]] = {n.su: {} for n in mine}
    sizes: dict[int, int] = {}
    for n in mine:
        sizes[n.su] = sizes.get(n.su, 0) + 1
    return GroupIndex(
        name,
        catalog.nodes[group.node].gpu,
        group.gpus,
        max(sizes.values(), default=0),
        [{} for _ in range(group.gpus + 1)],
        {},
        sus,
        {su: su_pod[su] for su in sus},
        members=[n.index for n in mine],
    )
