"""The rail-optimized compute fabric: leaves per SU and rail, then spines and cores per plane.

NIC ``r`` of the server in slot ``t`` of scalable unit ``s`` is cabled to port ``t`` of leaf
``(s, r)``: same-rail traffic inside an SU is one switch hop, as in NVIDIA's DGX SuperPOD
reference architectures. Every SU is wired as a full one (a partial SU's leaves and uplinks
exist; its missing servers' ports stay free). With ``planes: P`` the rails are split into P
groups (rail ``r`` in plane ``r * P // rails``), each its own fat tree. A fabric that is not
rail-optimized cables all NICs of a server to the same leaf instead (whole servers per leaf).
A fabric whose ports all fit one switch is that one switch.

Names are identities: leaves ``ib<plane>-leaf-<su>-r<rail>``, spines ``ib<plane>-spine-<pod>-
<position>`` (``ib<plane>-spine-<position>`` for two tiers), cores ``ib<plane>-core-<group>-
<member>``. A link's speed is the slower of switch port and NIC.

A UFM subnet manager takes the fabric ports of the first free server slot (NVIDIA's RA gives
the UFM appliance the 128th slot of a 4-SU, 127-node design); with no free slot it takes
the highest free spine (three tiers: core) ports, and with none of those it is left out with
a warning. With ``max_sus`` the upper-tier ports still free at that size come first, then
the last slot of the last partial SU (growth fills slots in order).

``max_sus`` builds spines and cores for that many SUs (tiers, pod size, spines per pod and
cores all follow from it); leaves and pods come as SUs do, and wiring is by position, so
growing up to it never moves a cable.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from infra.catalog import Catalog
from infra.catalog import Switch as CatalogSwitch
from infra.spec.fabrics import ComputeFabric
from infra.topology.fabric_geometry import UFM_PORTS, ComputeShape, fabric_shape
from infra.topology.facts_model import FabricGeometry
from infra.topology.fat_tree import TreeShape, wire_upper_tiers
from infra.topology.model import SWITCH_TIERS, FabricSummary, PlanWarning, Tier
from infra.topology.parts import (
    LeafLoad,
    Link,
    SwitchPart,
    bisection_links,
    half_cut,
    link_ends,
    make_link,
    port_text,
    switch_lower_bound,
    switch_max_flow,
    tier_use,
)

__all__ = ["UFM_HOST", "UFM_PORTS", "ComputeFabricPlan", "SuMembers", "plan_compute_fabric"]

UFM_HOST = "ufm-1"


@dataclass(frozen=True, slots=True)
class SuMembers:
    """One scalable unit as the fabric sees it: name and its servers' (slot, name, HCAs).

    ``position`` is the SU's place in the fabric (0-based; None: its place in the list):
    its leaves are leaves ``position * rails ...`` of the tree, so a node group keeping
    positions for its growth (`infra.topology.growth`) leaves the SUs after it in place.
    """

    name: str
    servers: tuple[tuple[int, str, tuple[str, ...]], ...]
    position: int | None = None


@dataclass(frozen=True)
class ComputeFabricPlan:
    """Switches, links and summary of the fabric, the leaves and pod of each SU."""

    switches: tuple[SwitchPart, ...]
    links: tuple[Link, ...]
    summary: FabricSummary
    su_leaves: dict[str, tuple[str, ...]]
    su_pod: dict[str, int | None]
    ufm_ports: tuple[tuple[str, str], ...]  # (switch, port) the UFM host is cabled to
    warnings: tuple[PlanWarning, ...]
    upper_at_max: int = 0  # spines and cores at fabrics.compute.max_sus (0: not set)


def plan_compute_fabric(
    fabric: ComputeFabric,
    catalog: Catalog,
    sus: Sequence[SuMembers],
    rails: int,
    nic_gbps: float,
) -> ComputeFabricPlan:
    """Plan the compute fabric for ``sus`` (in SU order) with ``rails`` NICs per server.

    Raises:
        PlanError: as `compute_geometry` (rails that do not split into the planes, more
            SUs than ``max_sus``, a plane beyond three tiers).
    """
    switch = catalog.switches[fabric.switch]
    gbps = min(switch.port_gbps, nic_gbps)
    servers = sum(len(su.servers) for su in sus)
    # positions kept for groups' growth count: the tree spans them
    shape = fabric_shape(fabric, catalog, servers=servers, sus=_positions(sus), rails=rails)
    if shape.tree is None:
        return _single_switch(fabric, sus, rails, gbps, switch, shape.geometry)
    return _Builder(fabric, switch, rails, gbps, shape).build(sus)


_Upper = tuple[Tier, int, str, int, str]  # tier, lower index and port, upper index and port


def _upper_links(shape: TreeShape, down: int) -> list[_Upper]:
    """`wire_upper_tiers` once for every plane (each plane is the same tree), ports as text."""
    return [
        (link.tier, link.lower, port_text(link.lower_port), link.upper, port_text(link.upper_port))
        for link in wire_upper_tiers(shape, down)
    ]


def _positions(sus: Sequence[SuMembers]) -> int:
    """SU positions the fabric spans: up to the last SU's (kept positions included)."""
    return max((_position(su, i) + 1 for i, su in enumerate(sus)), default=0)


def _position(su: SuMembers, index: int) -> int:
    return index if su.position is None else su.position


def _single_switch(
    fabric: ComputeFabric,
    sus: Sequence[SuMembers],
    rails: int,
    gbps: float,
    switch: CatalogSwitch,
    geometry: FabricGeometry,
) -> ComputeFabricPlan:
    """Every NIC on one switch: the whole fabric is a single hop."""
    name = "ib0-leaf-01"
    part = SwitchPart(name, "compute", "leaf", fabric.switch, 0, None, None, None, "core")
    links: list[Link] = []
    for su in sus:
        for _, server, hcas in su.servers:
            for hca in hcas:
                links.append(
                    Link("compute", "node_leaf", server, hca, name, str(len(links) + 1), gbps)
                )
    endpoints = len(links)
    ufm_ports: tuple[tuple[str, str], ...] = ()
    if fabric.subnet_manager == "ufm":
        ufm_ports = tuple((name, str(endpoints + j + 1)) for j in range(UFM_PORTS))
        links += [
            Link("compute", "node_leaf", UFM_HOST, f"ib{j}", sw, port, gbps)
            for j, (sw, port) in enumerate(ufm_ports)
        ]
    summary = FabricSummary(
        "compute", fabric.switch, 1, 1, 0, len(sus), switch.ports, gbps, 1, 0, 0,
        {"node_leaf": len(links), "leaf_spine": 0, "spine_core": 0},
        1.0, endpoints * gbps, _one_switch_bisection(sus) * rails * gbps, 1,
        (tier_use("leaf", [name], link_ends(links), switch.ports),), None, geometry,
    )  # fmt: skip
    return ComputeFabricPlan(
        (part,),
        tuple(links),
        summary,
        {su.name: (name,) for su in sus},
        dict.fromkeys((su.name for su in sus), None),
        ufm_ports,
        (),
    )


def _one_switch_bisection(sus: Sequence[SuMembers]) -> float:
    """Servers a side of the half cut on one (non-blocking) switch: n / 2, 0 for one."""
    servers = sum(len(su.servers) for su in sus)
    return servers / 2 if servers > 1 else 0.0


class _Builder:
    """Accumulates the switches and links of every plane of one compute fabric."""

    def __init__(
        self,
        fabric: ComputeFabric,
        switch: CatalogSwitch,
        rails: int,
        gbps: float,
        shape: ComputeShape,
    ) -> None:
        self.fabric, self.switch, self.rails, self.gbps = fabric, switch, rails, gbps
        self.geometry, self.tree = shape.geometry, shape.tree
        self.per_plane = rails // fabric.planes
        self.down, self.up = shape.geometry.down, shape.geometry.up
        self.switches: list[SwitchPart] = []
        self.links: list[Link] = []
        self.spine_names: list[list[str]] = []
        self.core_names: list[list[str]] = []
        # each leaf's name made once, not once per server cabled to it
        self._leaf_names: dict[tuple[int, str, int], str] = {}

    def leaf_name(self, plane: int, su: str, local: int) -> str:
        key = (plane, su, local)
        name = self._leaf_names.get(key)
        if name is None:
            if self.fabric.rail_optimized:
                name = f"ib{plane}-leaf-{su}-r{plane * self.per_plane + local}"
            else:
                name = f"ib{plane}-leaf-{su}-l{local + 1}"
            self._leaf_names[key] = name
        return name

    def leaf_of(self, su: str, slot: int, rail: int) -> tuple[str, int]:
        """(leaf, leaf port) for NIC ``rail`` of the server in ``slot`` of ``su``."""
        plane, local = divmod(rail, self.per_plane)
        if self.fabric.rail_optimized:
            return self.leaf_name(plane, su, local), slot
        flat = (slot - 1) * self.per_plane + local  # whole servers per leaf
        return self.leaf_name(plane, su, flat // self.down), flat % self.down + 1

    def build(self, sus: Sequence[SuMembers]) -> ComputeFabricPlan:
        shape = self.tree
        assert shape is not None  # one switch is `_single_switch`'s
        for su in sus:
            self._cable_servers(su)
        upper = _upper_links(shape, self.down)
        for plane in range(self.fabric.planes):
            self._wire_plane(plane, shape, sus, upper)
        ufm_ports, warnings = self._attach_ufm(sus, shape)
        su_pod = {
            su.name: (
                _position(su, i) * self.per_plane // shape.leaves_per_pod + 1
                if shape.tiers == 3
                else None
            )
            for i, su in enumerate(sus)
        }
        su_leaves = {
            su.name: tuple(
                self.leaf_name(p, su.name, k)
                for p in range(self.fabric.planes)
                for k in range(self.per_plane)
            )
            for su in sus
        }
        summary = self._summary(shape, len(sus), su_pod)
        return ComputeFabricPlan(
            tuple(self.switches), tuple(self.links), summary, su_leaves, su_pod, ufm_ports,
            warnings, self._upper_at_max(shape),
        )  # fmt: skip

    def _cable_servers(self, su: SuMembers) -> None:
        """Each NIC of the SU's servers to its leaf (`leaf_of`)."""
        if not self.fabric.rail_optimized:
            for slot, server, hcas in su.servers:
                for rail, hca in enumerate(hcas):
                    leaf, port = self.leaf_of(su.name, slot, rail)
                    self.links.append(
                        make_link("compute", "node_leaf", server, hca, leaf, port_text(port), self.gbps)
                    )  # fmt: skip
            return
        # rail-optimized: rail r's leaf is the SU's own, the port is the slot
        leaves = [self.leaf_of(su.name, 1, rail)[0] for rail in range(self.rails)]
        links, gbps = self.links, self.gbps
        for slot, server, hcas in su.servers:
            text = port_text(slot)
            links += [
                make_link("compute", "node_leaf", server, hca, leaf, text, gbps)
                for hca, leaf in zip(hcas, leaves, strict=True)
            ]

    def _upper_at_max(self, shape: TreeShape) -> int:
        """Spines and cores of every plane once the fabric holds ``max_sus`` SUs."""
        if self.fabric.max_sus is None:
            return 0
        if shape.tiers == 2:
            return self.fabric.planes * shape.spines_per_pod
        pods = math.ceil(self.fabric.max_sus * self.per_plane / shape.leaves_per_pod)
        return self.fabric.planes * (pods * shape.spines_per_pod + shape.cores)

    def _wire_plane(
        self, plane: int, shape: TreeShape, sus: Sequence[SuMembers], upper_links: list[_Upper]
    ) -> None:
        model = self.fabric.switch
        # By position: a position kept for a group's growth has no leaf (None) and no cable.
        leaves: list[str | None] = [None] * shape.leaves
        for i, su in enumerate(sus):
            for k in range(self.per_plane):
                at = _position(su, i) * self.per_plane + k
                leaves[at] = name = self.leaf_name(plane, su.name, k)
                pod = at // shape.leaves_per_pod + 1
                rail = plane * self.per_plane + k if self.fabric.rail_optimized else None
                self.switches.append(
                    SwitchPart(
                        name, "compute", "leaf", model, plane,
                        pod if shape.tiers == 3 else None, su.name, rail, su.name,
                    )
                )  # fmt: skip
        spines = [self._spine(plane, shape, i) for i in range(shape.spines)]
        groups = max(shape.cores_per_group, 1)
        cores = [
            f"ib{plane}-core-{i // groups + 1:02d}-{i % groups + 1:02d}" for i in range(shape.cores)
        ]
        self.spine_names.append(spines)
        self.core_names.append(cores)
        self.switches += [
            SwitchPart(n, "compute", "core", model, plane, None, None, None, "core") for n in cores
        ]
        for tier, lower_at, lower_port, upper_at, upper_port in upper_links:
            lower = leaves if tier == "leaf_spine" else spines
            upper = spines if tier == "leaf_spine" else cores
            below = lower[lower_at]
            if below is None:
                continue  # a kept position: its leaf and uplinks come with the growth
            self.links.append(
                make_link(
                    "compute", tier, below, lower_port, upper[upper_at], upper_port, self.gbps
                )
            )

    def _spine(self, plane: int, shape: TreeShape, i: int) -> str:
        pod, position = divmod(i, shape.spines_per_pod)
        name = (
            f"ib{plane}-spine-{pod + 1:02d}-{position + 1:02d}"
            if shape.tiers == 3
            else f"ib{plane}-spine-{position + 1:02d}"
        )
        self.switches.append(
            SwitchPart(
                name, "compute", "spine", self.fabric.switch, plane,
                pod + 1 if shape.tiers == 3 else None, None, None, "core",
            )
        )  # fmt: skip
        return name

    def _used_at_max(self, shape: TreeShape) -> set[tuple[str, int]]:
        """Spine and core ports the tree uses once grown to ``max_sus`` (empty without it)."""
        if self.fabric.max_sus is None:
            return set()
        leaves = self.fabric.max_sus * self.per_plane
        pods = math.ceil(leaves / shape.leaves_per_pod) if shape.tiers == 3 else 1
        full = replace(shape, leaves=leaves, pods=pods)
        used: set[tuple[str, int]] = set()
        for spines, cores in zip(self.spine_names, self.core_names, strict=True):
            for link in wire_upper_tiers(full, self.down):
                if link.tier == "spine_core":
                    used.add((cores[link.upper], link.upper_port))
                    if link.lower < len(spines):
                        used.add((spines[link.lower], link.lower_port))
                elif link.upper < len(spines):
                    used.add((spines[link.upper], link.upper_port))
        return used

    def _attach_ufm(
        self, sus: Sequence[SuMembers], shape: TreeShape
    ) -> tuple[tuple[tuple[str, str], ...], tuple[PlanWarning, ...]]:
        """Cable the UFM host into a free server slot, else into free spine ports."""
        if self.fabric.subnet_manager != "ufm":
            return (), ()
        moves: tuple[PlanWarning, ...] = ()
        if self.fabric.max_sus is None:
            ports = self._free_slot_ports(sus) or self._free_spine_ports(set())
        else:  # growth fills the free slots, and the spines are already built for it
            ports = self._free_spine_ports(self._used_at_max(shape))
            if not ports:
                ports = self._free_slot_ports(sus, last=True) or self._free_spine_ports(set())
                moves = (self._ufm_moves_warning(),) if ports else ()
        for j, (switch, port) in enumerate(ports):
            self.links.append(
                Link("compute", "node_leaf", UFM_HOST, f"ib{j}", switch, port, self.gbps)
            )
        if ports:
            return ports, moves
        warning = PlanWarning(
            "ufm-no-port",
            "no free leaf slot, spine or core port for the UFM appliance's fabric ports",
            "fabrics.compute.subnet_manager",
            f"leave one server slot free (NVIDIA's 4-SU design has "
            f"{4 * self.fabric.su_size - 1} servers)",
        )
        return (), (warning,)

    def _ufm_moves_warning(self) -> PlanWarning:
        max_sus = self.fabric.max_sus or 0
        return PlanWarning(
            "ufm-moves-with-growth",
            f"grown to max_sus {max_sus} the fabric has no port left for the UFM appliance: "
            "its cables move as servers fill the slot or ports it takes now",
            "fabrics.compute.max_sus",
            f"grow to at most {max_sus * self.fabric.su_size - 1} servers (one slot kept "
            "for the UFM, as NVIDIA's designs do), or raise max_sus",
        )

    def _free_slot_ports(
        self, sus: Sequence[SuMembers], last: bool = False
    ) -> tuple[tuple[str, str], ...]:
        """Leaf ports of a free server slot: the first, or (``last``) the slot growth fills last.

        ``last`` takes the last slot of the last partial SU.
        """
        partial = [s for s in sus if len(s.servers) < self.fabric.su_size]
        if not partial:
            return ()
        su = partial[-1] if last else partial[0]
        slot = self.fabric.su_size if last else len(su.servers) + 1
        per_plane = max(1, min(UFM_PORTS // self.fabric.planes, self.per_plane))
        rails = (
            p * self.per_plane + k for p in range(self.fabric.planes) for k in range(per_plane)
        )
        return tuple(
            (leaf, str(port)) for leaf, port in (self.leaf_of(su.name, slot, r) for r in rails)
        )

    def _free_spine_ports(self, kept: set[tuple[str, int]]) -> tuple[tuple[str, str], ...]:
        """Free ports on spines or cores (the subnet manager can sit anywhere).

        Each switch gives its highest-numbered free port first, one switch after another:
        growth fills spine and core ports from the bottom up, so the UFM's cables stay
        where they are until the tree is full, and no single switch carries all four.
        """
        used: dict[str, set[int]] = defaultdict(set)
        for link in self.links:
            if link.tier != "node_leaf":
                used[link.a].add(int(link.a_port))
                used[link.b].add(int(link.b_port))
        # Three tiers: a pod's spines fill their top (uplink) ports as the pod grows, the
        # cores theirs only when the whole tree is full, so cores go first.
        order = ("core", "spine") if any(p.tier == "core" for p in self.switches) else ("spine",)
        upper = [p.name for tier in order for p in self.switches if p.tier == tier]
        free = {
            name: [
                p
                for p in range(self.switch.ports, 0, -1)
                if p not in used[name] and (name, p) not in kept
            ]
            for name in upper
        }
        picked: list[tuple[str, str]] = []
        for rank in range(self.switch.ports):
            for name in upper:
                if rank < len(free[name]):
                    picked.append((name, str(free[name][rank])))
                    if len(picked) == UFM_PORTS:
                        return tuple(picked)
        return ()

    def _summary(self, shape: TreeShape, sus: int, su_pod: dict[str, int | None]) -> FabricSummary:
        counts: dict[Tier, int] = {"node_leaf": 0, "leaf_spine": 0, "spine_core": 0}
        for link in self.links:
            counts[link.tier] += 1
        endpoints = [lk for lk in self.links if lk.tier == "node_leaf" and lk.a != UFM_HOST]
        planes = self.fabric.planes
        by_tier: dict[str, list[str]] = defaultdict(list)
        for part in self.switches:
            by_tier[part.tier].append(part.name)
        ends = link_ends(self.links)
        use = tuple(
            tier_use(t, by_tier[t], ends, self.switch.ports) for t in SWITCH_TIERS if by_tier[t]
        )
        leaves = len(by_tier["leaf"]) // planes  # kept positions have no leaf
        return FabricSummary(
            "compute", self.fabric.switch, shape.tiers, planes, shape.pods if shape.tiers == 3 else 1,
            sus, self.switch.ports, self.gbps, leaves * planes, shape.spines * planes,
            shape.cores * planes, counts, self.geometry.oversubscription,
            len(endpoints) * self.gbps, self._bisection(shape, endpoints),
            planes * switch_lower_bound(leaves, self.up, self.switch.ports, shape.tiers), use,
            self.fabric.max_sus, self.geometry,
        )  # fmt: skip

    def _bisection(self, shape: TreeShape, endpoints: Sequence[Link]) -> float:
        """Gb/s across the cut between the first and second half of the servers."""
        ports, scale = half_cut(endpoints)
        if shape.tiers == 3 and not (shape.links_leaf_spine and shape.links_spine_core):
            # Uneven wiring: merged tiers would overstate; every plane is the same tree.
            plane0 = {p.name for p in self.switches if p.plane == 0}
            uplinks = [lk for lk in self.links if lk.tier != "node_leaf" and lk.a in plane0]
            flow = switch_max_flow(uplinks, {k: v for k, v in ports.items() if k in plane0})
            return round(flow * self.fabric.planes * self.gbps * scale, 3)
        pods = {p.name: p.pod or 0 for p in self.switches if p.tier == "leaf"}
        plane_of = {p.name: p.plane for p in self.switches if p.tier == "leaf"}
        spine_up = self._pod_uplinks(shape) if shape.tiers == 3 else None
        total = 0
        for plane in range(self.fabric.planes):
            loads = [
                LeafLoad(a, b, self.up, pods[leaf])
                for leaf, (a, b) in ports.items()
                if plane_of[leaf] == plane
            ]
            total += bisection_links(loads, spine_up)
        return round(total * self.gbps * scale, 3)

    def _pod_uplinks(self, shape: TreeShape) -> dict[int, int]:
        """Spine-core links of each pod of one plane (a partial pod has fewer)."""
        per_pod: dict[int, int] = defaultdict(int)
        spines = {n for n in self.spine_names[0]}
        for link in self.links:
            if link.tier == "spine_core" and link.a in spines:
                per_pod[int(link.a.split("-")[2])] += 1
        return {p: per_pod.get(p, 0) for p in range(1, shape.pods + 1)}
