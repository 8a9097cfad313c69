"""The rail-optimized compute fabric: leaves per SU and rail, then spines and cores per plane.

NIC ``r`` of the server in slot ``t`` of scalable unit ``s`` is cabled to port ``t`` of leaf
``(s, r)``: same-rail traffic inside an SU is one switch hop, as in NVIDIA's DGX SuperPOD
reference architectures. Every SU is wired as a full one (a partial SU's leaves and uplinks
exist; its missing servers' ports stay free). With ``planes: P`` the rails are split into P
groups (rail ``r`` in plane ``r * P // rails``), each its own fat tree. A fabric that is not
rail-optimized cables all NICs of a server to the same leaf instead (whole servers per leaf).

A UFM subnet manager takes the fabric ports of the first free server slot (NVIDIA's RA gives
the UFM appliance the 128th slot of a 4-SU, 127-node design); with no free slot it is left
out and the plan says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.catalog import Switch as CatalogSwitch
from infra.spec.models import ComputeFabric
from infra.topology.fat_tree import TreeShape, fat_tree_shape, wire_upper_tiers
from infra.topology.model import Cable, FabricSummary, PlanError, Switch

__all__ = ["UFM_PORTS", "ComputeFabricPlan", "FabricServer", "plan_compute_fabric"]

UFM_PORTS = 4  # UFM appliance fabric connections; see tests/data/superpod-ra.yaml


@dataclass(frozen=True, slots=True)
class FabricServer:
    """A server as the compute fabric sees it: name, rack and HCA per rail."""

    name: str
    rack: str
    hcas: tuple[str, ...]


@dataclass
class ComputeFabricPlan:
    """Switches (with zone for rack placement), cables and the summary of the fabric."""

    switches: list[tuple[Switch, str]]
    cables: list[Cable]
    summary: FabricSummary
    sm_ports: list[tuple[str, str, int]]  # (leaf, port, rail) given to the UFM host
    notes: list[str]


def _leaf_ports(fabric: ComputeFabric, radix: int) -> tuple[int, int]:
    down = fabric.su_size
    up = min(math.ceil(down / fabric.oversubscription), radix - down)
    if up < 1:
        raise PlanError(
            f"an SU of {down} servers leaves no uplink port on a {radix}-port leaf",
            path="fabrics.compute.su_size",
            hint=f"use su_size of at most {radix // 2}",
        )
    return down, up


def _leaf_name(plane: int, su: int, rail: int) -> str:
    return f"ib{plane}-leaf-su{su:03d}-r{rail}"


def plan_compute_fabric(
    fabric: ComputeFabric, catalog: Catalog, servers: Sequence[FabricServer], rails: int
) -> ComputeFabricPlan:
    """Plan the compute fabric for ``servers`` (in slot order) with ``rails`` NICs each.

    Raises:
        PlanError: rails do not split into the planes, or a plane needs > 3 tiers.
    """
    switch = catalog.switches[fabric.switch]
    if rails % fabric.planes:
        raise PlanError(
            f"{rails} rails do not split evenly into {fabric.planes} planes",
            path="fabrics.compute.planes",
            hint="use a divisor of the rail count",
        )
    down, up = _leaf_ports(fabric, switch.ports)
    sus = math.ceil(len(servers) / fabric.su_size)
    per_plane = rails // fabric.planes
    try:
        shape = fat_tree_shape(sus * per_plane, up, switch.ports, per_plane, fabric.spines)
    except PlanError as exc:
        raise PlanError(
            exc.message,
            path="fabrics.compute",
            hint="set fabrics.compute.planes (each plane its own fat tree)",
        ) from None
    builder = _Builder(fabric, switch, shape, per_plane)
    builder.wire_servers(servers)
    for plane in range(fabric.planes):
        builder.wire_upper(plane, down)
    free_slot = len(servers) + 1 if len(servers) < sus * fabric.su_size else 0
    sm_ports = builder.attach_ufm(free_slot) if fabric.subnet_manager == "ufm" else []
    notes = (
        []
        if sm_ports or fabric.subnet_manager != "ufm"
        else [
            (
                "no free leaf slot or spine port for the UFM appliance's fabric ports; leave one "
                f"server slot free (NVIDIA's 4-SU design has {4 * fabric.su_size - 1} servers)"
            )
        ]
    )
    summary = builder.summary(len(servers) * rails, down, up, sus)
    return ComputeFabricPlan(builder.switches, builder.cables, summary, sm_ports, notes)


class _Builder:
    """Accumulates the switches and cables of every plane of one compute fabric."""

    def __init__(
        self, fabric: ComputeFabric, switch: CatalogSwitch, shape: TreeShape, rails: int
    ) -> None:
        self.fabric, self.shape, self.rails = fabric, shape, rails
        self.gbps, self.radix = switch.port_gbps, switch.ports
        self.switches: list[tuple[Switch, str]] = []
        self.cables: list[Cable] = []

    def _leaf_of(self, su: int, slot: int, rail: int) -> tuple[int, int, int, int]:
        """(plane, leaf su, leaf rail, leaf port) for a server NIC."""
        plane, local = divmod(rail, self.rails)
        if self.fabric.rail_optimized:
            return plane, su, local, slot
        flat = (slot - 1) * self.rails + local  # whole servers per leaf
        return plane, su, flat // self.fabric.su_size, flat % self.fabric.su_size + 1

    def wire_servers(self, servers: Sequence[FabricServer]) -> None:
        for index, server in enumerate(servers):
            su, slot = divmod(index, self.fabric.su_size)
            for rail, hca in enumerate(server.hcas):
                plane, leaf_su, leaf_rail, port = self._leaf_of(su + 1, slot + 1, rail)
                self.cables.append(
                    Cable(
                        "compute",
                        "node_leaf",
                        server.name,
                        hca,
                        _leaf_name(plane, leaf_su, leaf_rail),
                        str(port),
                        self.gbps,
                        a_rack=server.rack,
                    )
                )

    def attach_ufm(self, slot_index: int) -> list[tuple[str, str, int]]:
        """Cable the UFM host into a free server slot, else into free spine ports."""
        ports = self._free_slot_ports(slot_index) or self._free_spine_ports()
        for j, (switch, port, _) in enumerate(ports):
            self.cables.append(
                Cable("compute", "node_leaf", "ufm-1", f"ib{j}", switch, port, self.gbps)
            )
        return ports

    def _free_slot_ports(self, slot_index: int) -> list[tuple[str, str, int]]:
        if not slot_index:
            return []
        su, slot = divmod(slot_index - 1, self.fabric.su_size)
        ports = []
        planes = self.fabric.planes  # every plane is its own subnet: the UFM reaches each
        per_plane = max(1, min(UFM_PORTS // planes, self.rails))
        for rail in (p * self.rails + k for p in range(planes) for k in range(per_plane)):
            plane, leaf_su, leaf_rail, port = self._leaf_of(su + 1, slot + 1, rail)
            ports.append((_leaf_name(plane, leaf_su, leaf_rail), str(port), rail))
        return ports

    def _free_spine_ports(self) -> list[tuple[str, str, int]]:
        used: dict[str, set[int]] = defaultdict(set)
        for cable in self.cables:
            if cable.tier == "leaf_spine":
                used[cable.b].add(int(cable.b_port))
            elif cable.tier == "spine_core":
                used[cable.a].add(int(cable.a_port))
        free = [
            (name, str(port), -1)
            for name in sorted(used)
            if "-spine-" in name
            for port in range(1, self.radix + 1)
            if port not in used[name]
        ]
        return free[:UFM_PORTS]

    def wire_upper(self, plane: int, down: int) -> None:
        shape, model = self.shape, self.fabric.switch
        leaves = [
            _leaf_name(plane, i // self.rails + 1, i % self.rails) for i in range(shape.leaves)
        ]
        spines = [
            f"ib{plane}-spine-{i // shape.spines_per_pod + 1:02d}-"
            f"{i % shape.spines_per_pod + 1:02d}"
            for i in range(shape.spines)
        ]
        cores = [
            f"ib{plane}-core-{i // max(shape.cores_per_group, 1) + 1:02d}-"
            f"{i % max(shape.cores_per_group, 1) + 1:02d}"
            for i in range(shape.cores)
        ]
        self._add_switches(plane, model, leaves, spines, cores)
        for link in wire_upper_tiers(shape, down):
            lower = leaves if link.tier == "leaf_spine" else spines
            upper = spines if link.tier == "leaf_spine" else cores
            self.cables.append(
                Cable(
                    "compute",
                    link.tier,
                    lower[link.lower],
                    str(link.lower_port),
                    upper[link.upper],
                    str(link.upper_port),
                    self.gbps,
                )
            )

    def _add_switches(
        self, plane: int, model: str, leaves: list[str], spines: list[str], cores: list[str]
    ) -> None:
        for i, name in enumerate(leaves):
            su, rail = i // self.rails + 1, i % self.rails
            leaf = Switch(name, "compute", "leaf", model, plane, 0, su, rail, "", self.radix)
            self.switches.append((leaf, f"su{su}"))
        for i, name in enumerate(spines):
            pod = i // self.shape.spines_per_pod + 1 if self.shape.tiers == 3 else 0
            spine = Switch(name, "compute", "spine", model, plane, pod, 0, -1, "", self.radix)
            self.switches.append((spine, "core"))
        for name in cores:
            core = Switch(name, "compute", "core", model, plane, 0, 0, -1, "", self.radix)
            self.switches.append((core, "core"))

    def summary(self, server_ports: int, down: int, up: int, sus: int) -> FabricSummary:
        counts = {
            t: sum(1 for c in self.cables if c.tier == t)
            for t in ("node_leaf", "leaf_spine", "spine_core")
        }
        planes, shape = self.fabric.planes, self.shape
        cuts = [server_ports, counts["leaf_spine"]]
        if shape.tiers == 3:
            cuts.append(counts["spine_core"])
        return FabricSummary(
            name="compute",
            switch=self.fabric.switch,
            tiers=shape.tiers,
            planes=planes,
            leaf=shape.leaves * planes,
            spine=shape.spines * planes,
            core=shape.cores * planes,
            cables=counts,
            oversubscription=round(down / up, 3),
            bisection_gbps=min(cuts) * self.gbps,
            radix=self.radix,
            pods=shape.pods,
            sus=sus,
        )
