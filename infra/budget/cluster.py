"""From a spec to the inputs of the performance models: which GPUs a job runs on.

A job runs on one node group, on as few nodes as hold its GPUs: the group the user names
(`--group`, or `group:` in a budget), else the largest group whose GPUs are not split by MIG
(the training partition of a real cluster); the output names the group either way. A
MIG-partitioned group is refused: MIG instances have no peer-to-peer or NVLink, so a
collective over them is not an NVLink domain. The network side comes from the compute
fabric: each NIC runs at the slower of its own rate and the switch port's (the group's
`compute_nics` when stated); the flows of a job that leave its scalable unit share the leaves'
uplinks (the fabric's oversubscription; ranks assumed placed in topology order), and
climbs the switch tiers the planned fat tree has (one leaf per rail inside an SU, spines
within a pod, cores beyond), which SHARP's latency follows. SHARP counts as usable only when
the spec enables it on a fabric where it can work (rail-optimized, host subnet manager,
SHARP-capable switches): the same conditions lint checks. The spec's NCCL version gates the
algorithms; AWS instances (EFA) get EFA's network latency.
"""

from __future__ import annotations

import math

from infra.budget.collectives import CommTopology
from infra.catalog import Catalog, Node
from infra.errors import RailplanError, spelling_hint
from infra.spec import NodeGroup, Spec
from infra.topology.fabric_geometry import spec_geometry
from infra.topology.facts import group_nic_gbps, group_nics, sharp_state
from infra.topology.facts_model import FabricGeometry, GroupMig
from infra.topology.groups import group_migs
from infra.topology.model import PlanError

__all__ = [
    "BudgetError",
    "comm_topology",
    "job_tiers",
    "main_group",
    "sharp_usable",
]


class BudgetError(RailplanError):
    """A budget cannot be evaluated on this spec (asks for more GPUs than exist, ...)."""


def main_group(
    spec: Spec, catalog: Catalog, name: str | None = None, path: str = "--group"
) -> tuple[NodeGroup, Node]:
    """The node group ``name``, else the largest one not split by MIG (first on a tie).

    Every catalog id of the spec is checked first, as planning does: ``predict`` and
    ``train`` do not plan, and a node or switch the catalog lacks must not give numbers.

    Raises:
        BudgetError: an unknown node or switch, no such group, or it is MIG-partitioned, or
            there is no whole-GPU group.
    """
    for i, g in enumerate(spec.node_groups):
        if g.node not in catalog.nodes:  # skipping it would blame MIG or the group name
            raise BudgetError(
                f"unknown node {g.node!r}",
                path=f"node_groups[{i}].node",
                hint=spelling_hint(g.node, catalog.nodes),
            )
    for switch_path, switch, _ in spec.fabrics.switch_references():
        if switch not in catalog.switches:  # a typo must not fall back on a default fabric
            raise BudgetError(
                f"unknown switch {switch!r}",
                path=switch_path,
                hint=spelling_hint(switch, catalog.switches),
            )
    known = list(spec.node_groups)
    # A group MIG-split by day is no place for a job that needs whole GPUs at any time.
    migs = {g.name: m for g, m in zip(known, group_migs(spec, catalog), strict=True)}
    if name is not None:
        group = next((g for g in known if g.name == name), None)
        if group is None:
            raise BudgetError(
                f"no node group {name!r}",
                path=path,
                hint=spelling_hint(name, [g.name for g in known]) or "name a node group",
            )
    else:
        whole = [g for g in known if not migs[g.name].split]
        if not whole:
            raise BudgetError(
                "every node group is MIG-partitioned: no NVLink domain to run a job on",
                path="node_groups",
                hint="name a group without MIG, or predict on whole GPUs",
            )
        group = max(whole, key=lambda g: g.count * catalog.nodes[g.node].gpus)
    if migs[group.name].split:
        raise BudgetError(
            f"group {group.name} is MIG-partitioned ({_mig_summary(spec, migs[group.name])}): MIG "
            "instances have no NVLink or P2P",
            path=path,
            hint="predict on a group without MIG",
        )
    return group, catalog.nodes[group.node]


def _mig_summary(spec: Spec, mig: GroupMig) -> str:
    """The group's MIG layouts as instance counts, e.g. ``7 x 1g.10gb``."""
    parts: list[str] = []
    for state in mig.states:
        for a in state.assignments:
            layout = spec.mig_layouts.get(a.layout) if a.layout != "disabled" else None
            if layout is None:
                continue
            text = ", ".join(f"{n} x {p}" for p, n in layout.profiles.items() if n)
            if text not in parts:
                parts.append(text)
    return "; ".join(parts) or "MIG layouts"


def sharp_usable(spec: Spec, catalog: Catalog) -> bool:
    """Whether NCCL could use IB SHARP (CollNet) on this spec's compute fabric.

    For callers without a plan (lint on an unplannable spec, budgets); a plan carries the
    same answer as ``plan.facts.sharp()`` (`infra.topology.facts.sharp_state` owns it).
    """
    return sharp_state(spec, catalog) == "usable"


def comm_topology(
    spec: Spec,
    catalog: Catalog,
    gpus: int,
    *,
    sharp: bool | None = None,
    path: str = "",
    group: str | None = None,
    group_path: str = "--group",
) -> CommTopology:
    """The communicator of a ``gpus``-GPU job on one node group (see `main_group`).

    Raises:
        BudgetError: fewer than 2 GPUs, more than the group has, or no usable group.
    """
    chosen, node = main_group(spec, catalog, group, group_path)
    available = chosen.count * node.gpus
    if gpus < 2 or gpus > available:
        raise BudgetError(
            f"asks for {gpus} GPUs but node group {chosen.name!r} has {available}",
            path=path,
            hint="use a GPU count between 2 and the group's GPUs",
        )
    per_node = min(gpus, node.gpus)
    if gpus % per_node:
        raise BudgetError(
            f"{gpus} GPUs is not a whole number of {node.gpus}-GPU nodes",
            path=path,
            hint=f"use a multiple of {node.gpus}",
        )
    gpu = catalog.gpus[node.gpu]
    nodes = math.ceil(gpus / per_node)
    fabric = spec.fabrics.compute
    return CommTopology(
        arch=gpu.architecture,
        gpus_per_node=per_node,
        nodes=nodes,
        nvswitch=node.nvswitches > 0,
        nvlink_links=gpu.nvlink_links,
        nics=group_nics(chosen, node),
        nic_gbps=group_nic_gbps(spec, catalog, node, chosen),
        cpu=node.cpu,
        sharp=(sharp_usable(spec, catalog) and bool(node.compute_hcas)) if sharp is None else sharp,
        nccl=spec.software.nccl,
        tiers=job_tiers(spec, catalog, node, nodes),
        leaf_nodes=fabric.su_size if fabric is not None else 0,
        oversubscription=_uplink_ratio(_geometry(spec, catalog)),
        efa=node.cloud == "aws" or node.compute_nic_model.upper().startswith("EFA"),
    )


def _geometry(spec: Spec, catalog: Catalog) -> FabricGeometry | None:
    """The compute fabric's shape as the planner builds it.

    None without a compute fabric, or when the spec cannot be planned (lint reports why).
    """
    try:
        shape = spec_geometry(spec, catalog)
    except PlanError:
        return None
    return shape.geometry if shape is not None else None


def _uplink_ratio(geometry: FabricGeometry | None) -> float:
    """The leaves' down:up ratio as built (>= 1; 1 without a planned fabric)."""
    return max(1.0, geometry.oversubscription) if geometry is not None else 1.0


def job_tiers(spec: Spec, catalog: Catalog, node: Node, nodes: int) -> int:
    """Switch tiers a ``nodes``-node job's traffic climbs on the planned compute fabric.

    1 inside one SU (every rail's NICs meet at one leaf) or on a single-switch fabric, 2 in a
    two-tier fabric or inside one pod of a three-tier one, 3 across pods (also when the
    fabric cannot be planned: beyond three tiers lint reports it, and the job spans them
    all). Without a planned fabric (cloud instances) NCCL's reference, 2.
    """
    del node  # the fabric's shape holds the rails of every node on it
    fabric = spec.fabrics.compute
    if fabric is None or fabric.switch not in catalog.switches:
        return 2
    if nodes <= fabric.su_size:
        return 1
    try:
        shape = spec_geometry(spec, catalog)
    except PlanError:
        return 3
    if shape is None:
        return 2
    g = shape.geometry
    if g.tiers < 3:
        return g.tiers
    return 2 if nodes <= g.sus_per_pod * fabric.su_size else 3
