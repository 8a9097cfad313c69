"""The compute fabric's shape from plain numbers: the one place its tiers, pods and uplinks are set.

`compute_geometry` takes counts (servers, SUs, rails, switch radix, ``su_size``,
oversubscription, planes, pinned spines, ``max_sus``) and returns the `FabricGeometry` the
planner builds and carries on ``plan.fabrics["compute"]``, with the fat tree
(`infra.topology.fat_tree.fat_tree_shape`) the planner wires. `spec_geometry` reads those
counts off a spec without planning, for the performance models (`railplan predict`,
budgets, `railplan train`): a test holds it equal to the plan's on random specs.

Rules: a fabric whose NICs (and the UFM appliance's ports) all fit one switch, in one plane,
even grown to ``max_sus``, is that one switch. Otherwise each leaf gives ``su_size`` ports
to servers and ``ceil(su_size / oversubscription)`` to spines, at most what the radix
leaves; the rails are split into ``planes`` fat trees of one leaf per SU and rail, sized by
`fat_tree_shape` (for ``max_sus`` SUs when it is set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec import Spec
from infra.spec.fabrics import ComputeFabric
from infra.topology.facts_model import FabricGeometry
from infra.topology.fat_tree import TreeShape, fat_tree_shape
from infra.topology.growth import su_offsets, with_growth
from infra.topology.model import PlanError

__all__ = [
    "UFM_PORTS",
    "ComputeShape",
    "compute_geometry",
    "fabric_shape",
    "leaf_ports",
    "spec_geometry",
]

UFM_PORTS = 4  # UFM appliance fabric connections; see tests/data/superpod-ra.yaml


@dataclass(frozen=True)
class ComputeShape:
    """A compute fabric's geometry and one plane's fat tree (None on a single switch)."""

    geometry: FabricGeometry
    tree: TreeShape | None


def leaf_ports(su_size: int, oversubscription: float, radix: int) -> tuple[int, int]:
    """(down, up): a leaf's ports to servers and to spines.

    Raises:
        PlanError: the SU leaves the leaf no uplink port.
    """
    up = min(math.ceil(su_size / oversubscription), radix - su_size)
    if up < 1:
        raise PlanError(
            f"an SU of {su_size} servers leaves no uplink port on a {radix}-port leaf",
            path="fabrics.compute.su_size",
            hint=f"use su_size of at most {radix // 2}",
        )
    return su_size, up


def compute_geometry(
    *,
    servers: int,
    sus: int,
    rails: int,
    radix: int,
    su_size: int,
    oversubscription: float,
    planes: int = 1,
    spines: int | None = None,
    max_sus: int | None = None,
    ufm_ports: int = 0,
) -> ComputeShape:
    """The shape of a compute fabric of ``sus`` SUs holding ``servers`` servers of ``rails`` NICs.

    Raises:
        PlanError: rails do not split into the planes, more SUs than ``max_sus``, an SU
            leaves no uplink, or a plane needs more than three tiers.
    """
    if rails % planes:
        raise PlanError(
            f"{rails} rails do not split evenly into {planes} planes",
            path="fabrics.compute.planes",
            hint="use a divisor of the rail count",
        )
    if max_sus is not None and sus > max_sus:
        raise PlanError(
            f"{sus} scalable units are planned (or kept by node groups' max_count) but the "
            f"fabric is built for max_sus {max_sus}",
            path="fabrics.compute.max_sus",
            hint=f"raise max_sus to at least {sus} (growing past it recables the spines)",
        )
    per_plane = rails // planes
    held = max(servers, (max_sus or 0) * su_size)  # one switch only if it also holds growth
    if planes == 1 and held * rails + ufm_ports <= radix:
        one = FabricGeometry(1, 1, sus, per_plane, su_size, 0, 0, max(sus, max_sus or 0), 0, 0, 1.0)
        return ComputeShape(one, None)
    down, up = leaf_ports(su_size, oversubscription, radix)
    tree = _tree(sus * per_plane, up, radix, per_plane, spines, (max_sus or 0) * per_plane)
    three = tree.tiers == 3
    geometry = FabricGeometry(
        tree.tiers, planes, sus, per_plane, down, up, tree.pods if three else 1,
        tree.leaves_per_pod // per_plane if three else max(sus, max_sus or 0),
        tree.spines, tree.cores, round(down / up, 3),
    )  # fmt: skip
    return ComputeShape(geometry, tree)


def _tree(
    leaves: int, up: int, radix: int, per_su: int, spines: int | None, sized_for: int
) -> TreeShape:
    """One plane's fat tree; a tree too large for three tiers is blamed on the fabric."""
    try:
        return fat_tree_shape(leaves, up, radix, per_su, spines, sized_for=sized_for)
    except PlanError as exc:
        if exc.path:  # a spec value the tree cannot take (fabrics.compute.spines)
            raise
        raise PlanError(
            exc.message,
            path="fabrics.compute",
            hint="set fabrics.compute.planes (each plane its own fat tree)",
        ) from None


def spec_geometry(spec: Spec, catalog: Catalog) -> ComputeShape | None:
    """`compute_geometry` of the spec's compute fabric, without planning (None: no fabric).

    The counts are the planner's: a group's servers fill SUs of ``su_size`` of their own
    (`infra.topology.servers`), and only nodes with compute HCAs are on the fabric.

    Raises:
        PlanError: as `compute_geometry`, or the groups on the fabric differ in rails.
    """
    spec = with_growth(spec, catalog)  # max_sus as planning sees it (groups' max_count)
    fabric = spec.fabrics.compute
    if fabric is None or fabric.switch not in catalog.switches:
        return None
    on_fabric = [
        (g, len(catalog.nodes[g.node].compute_hcas))
        for g in spec.node_groups
        if g.node in catalog.nodes and catalog.nodes[g.node].compute_hcas and g.count
    ]
    if not on_fabric:
        return None
    rails = {r for _, r in on_fabric}
    if len(rails) > 1:
        raise PlanError(
            f"node groups on one compute fabric have different rail counts ({sorted(rails)})",
            path="node_groups",
        )
    offsets = su_offsets(spec, catalog)  # each group's SUs start at its kept position
    positions = max(offsets[g.name] + math.ceil(g.count / fabric.su_size) for g, _ in on_fabric)
    servers = sum(g.count for g, _ in on_fabric)
    return fabric_shape(fabric, catalog, servers=servers, sus=positions, rails=rails.pop())


def fabric_shape(
    fabric: ComputeFabric, catalog: Catalog, *, servers: int, sus: int, rails: int
) -> ComputeShape:
    """`compute_geometry` with the rest of its counts read off the spec's compute fabric.

    ``sus`` counts SU positions, kept ones included (`infra.topology.growth`).
    """
    return compute_geometry(
        servers=servers,
        sus=sus,
        rails=rails,
        radix=catalog.switches[fabric.switch].ports,
        su_size=fabric.su_size,
        oversubscription=fabric.oversubscription,
        planes=fabric.planes,
        spines=fabric.spines,
        max_sus=fabric.max_sus,
        ufm_ports=UFM_PORTS if fabric.subnet_manager == "ufm" else 0,
    )
