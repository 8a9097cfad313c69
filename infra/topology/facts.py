"""What a spec means, worked out once: the facts every stage after topology reads.

`cluster_facts(spec, catalog)` answers the questions later stages kept asking the raw spec:
per node group its compute NICs (count and the rate each gets from the fabric), its SUs (name
and number, as data), rolling batch and MIG states; per fabric its geometry and SHARP as one
value (``off``: not asked; ``asked``: the spec enables it but NCCL could not use it;
``usable``: asked on a rail-optimized fabric of SHARP-capable switches with a host subnet
manager, the conditions lint checks); and, given the planned servers, the Slurm controller,
the OpenSM master and standby, and which servers Slurm may power off with the reason each
other one stays on. The builder owns only the SHARP and NIC rules; every other fact comes
from its owner in this package (`groups` for SUs, batches and MIG, `fabric_geometry` for
the shape, `control` for the control hosts, `power_saving` for power-off), called once.
`expand` stores the result on ``plan.facts``; `railplan predict`/`train`, which do not plan,
call the builder without servers and get the same spec-level facts (a test holds the two
equal on every example), with no placement facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from infra.catalog import Catalog, Node
from infra.spec import NodeGroup, Spec
from infra.topology.control import controller_host, subnet_manager_hosts, uses_opensm
from infra.topology.fabric_geometry import spec_geometry
from infra.topology.facts_model import (
    ClusterFacts,
    ControlFacts,
    FabricFacts,
    FabricGeometry,
    GroupFacts,
    SharpState,
    SuFacts,
)
from infra.topology.groups import check_nodes, group_migs, plan_groups
from infra.topology.growth import with_growth
from infra.topology.model import GroupPlan, ScalableUnit, Server
from infra.topology.power_saving import kept_reasons
from infra.topology.servers import list_servers

__all__ = [
    "ClusterFacts",
    "ControlFacts",
    "FabricFacts",
    "GroupFacts",
    "SharpState",
    "SuFacts",
    "cluster_facts",
    "group_nic_gbps",
    "group_nics",
    "sharp_state",
]


class _Placed(NamedTuple):
    servers: tuple[Server, ...]
    sus: tuple[ScalableUnit, ...]


def sharp_state(spec: Spec, catalog: Catalog) -> SharpState:
    """SHARP on the compute fabric: off, asked (NCCL could not use it) or usable."""
    c = spec.fabrics.compute
    if c is None or not c.sharp:
        return "off"
    switch = catalog.switches.get(c.switch)
    capable = switch is not None and switch.sharp
    usable = capable and c.rail_optimized and c.subnet_manager != "switch"
    return "usable" if usable else "asked"


def group_nics(group: NodeGroup | None, node: Node) -> int:
    """Compute NICs per server: the group's ``compute_nics.count`` if stated, else the node's."""
    if group is not None and group.compute_nics is not None:
        return group.compute_nics.count
    return node.compute_nics


def group_nic_gbps(spec: Spec, catalog: Catalog, node: Node, group: NodeGroup | None) -> float:
    """Gb/s each NIC gets from the compute fabric: the slower of NIC and switch port.

    (A DGX H100 on HDR switches runs at HDR.) The NIC's rate is the group's
    ``compute_nics.gbps`` when the spec states it (a server the catalog lacks), else the
    catalog node's. Oversubscription is not in this rate: the performance model applies it
    only to traffic that leaves the job's leaf group.
    """
    own = group.compute_nics.gbps if group is not None and group.compute_nics else None
    rate = own if own is not None else node.compute_nic_gbps
    fabric = spec.fabrics.compute
    if fabric is None or fabric.switch not in catalog.switches:
        return rate
    return min(rate, catalog.switches[fabric.switch].port_gbps)


def cluster_facts(
    spec: Spec,
    catalog: Catalog,
    *,
    groups: Mapping[str, GroupPlan] | None = None,
    geometry: FabricGeometry | None = None,
    servers: Sequence[Server] | None = None,
    sus: Sequence[ScalableUnit] = (),
) -> ClusterFacts:
    """The facts of ``spec`` (module docstring).

    The planner passes what it built already (``groups``, the compute ``geometry``, the
    planned ``servers`` and ``sus``) so nothing is worked out twice; without them the
    builder works them out itself, and has no control facts without ``servers``.

    Raises:
        PlanError: a node group names a node the catalog lacks, or the spec cannot be
            planned (as `expand` would report it).
    """
    if groups is None:
        groups = _plan_groups(spec, catalog)
        geometry = _geometry(spec, catalog)
    sus_of = _sus_by_group(groups, sus)
    saving = spec.scheduler.power_saving
    excluded = set(saving.exclude_groups) if saving is not None else set()
    by_name = {g.name: g for g in spec.node_groups}
    facts = {
        name: _group_facts(
            spec,
            catalog,
            by_name[name],
            g,
            sus_of[name],
            saving is not None and name not in excluded,
        )
        for name, g in groups.items()
    }
    fabrics: dict[str, FabricFacts] = {}
    if spec.fabrics.compute is not None:
        fabrics["compute"] = FabricFacts("compute", geometry, sharp_state(spec, catalog))
    if servers is None:
        return ClusterFacts(facts, fabrics, ControlFacts(), planned=False)
    control = _control(spec, _Placed(tuple(servers), tuple(sus)))
    return ClusterFacts(facts, fabrics, control, planned=True)


def _plan_groups(spec: Spec, catalog: Catalog) -> dict[str, GroupPlan]:
    """The planner's group records, without planning (the same owners, the same order)."""
    check_nodes(spec, catalog)
    grown = with_growth(spec, catalog)
    migs = group_migs(grown, catalog)
    return plan_groups(grown, migs, list_servers(grown, catalog, migs), catalog)


def _geometry(spec: Spec, catalog: Catalog) -> FabricGeometry | None:
    shape = spec_geometry(spec, catalog)
    return shape.geometry if shape is not None else None


def _sus_by_group(
    groups: Mapping[str, GroupPlan], sus: Sequence[ScalableUnit]
) -> dict[str, tuple[SuFacts, ...]]:
    """Each group's SUs with their numbers: the planned records where there are some.

    Without planned SUs a group's n-th SU name (plan order) is its SU number n, as
    `infra.topology.servers` numbers them.
    """
    planned: dict[str, list[SuFacts]] = {}
    for su in sus:
        planned.setdefault(su.group, []).append(SuFacts(su.name, su.number))
    return {
        name: tuple(planned[name])
        if name in planned
        else tuple(SuFacts(su, k + 1) for k, su in enumerate(g.sus))
        for name, g in groups.items()
    }


def _group_facts(
    spec: Spec,
    catalog: Catalog,
    group: NodeGroup,
    planned: GroupPlan,
    sus: tuple[SuFacts, ...],
    power_off: bool,
) -> GroupFacts:
    node = catalog.nodes[group.node]
    return GroupFacts(
        name=group.name,
        index=planned.index,
        node=group.node,
        nics=group_nics(group, node),
        nic_gbps=group_nic_gbps(spec, catalog, node, group),
        sus=sus,
        rolling_batch=planned.rolling_batch,
        mig=planned.mig,
        power_off=power_off,
    )


def _control(spec: Spec, placed: _Placed) -> ControlFacts:
    controller = (
        controller_host(placed) if spec.scheduler.kind == "slurm" and placed.servers else None
    )
    managers = tuple(subnet_manager_hosts(placed)) if uses_opensm(spec) else ()
    kept = kept_reasons(placed, spec)
    may = (
        tuple(s.name for s in placed.servers if s.name not in kept)
        if spec.scheduler.power_saving is not None
        else ()
    )
    return ControlFacts(controller, managers, tuple(kept.items()), may)
