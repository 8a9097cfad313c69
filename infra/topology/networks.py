"""The other networks: storage fabric, in-band management and out-of-band (BMC) networks.

- Storage fabric (InfiniBand): each server's storage ports go to a group of leaves (port p
  of a server to leaf p of its group, so one leaf failure leaves every server reachable);
  server-facing leaves are oversubscribed as the spec says (NVIDIA RA: about 4:3), leaves
  for the storage systems' ports are 1:1. Spines and cores come from the same fat-tree
  builder as the compute fabric.
- In-band management (Ethernet): every server has two bonded ports to an MLAG leaf pair;
  one port in eight of a leaf is kept for uplinks to two spines when there is more than one
  pair.
- Out-of-band (Ethernet, 1 GbE): each row of racks (an SU's compute and network racks, or
  the shared network row) gets as many switches as its BMCs, switch management ports and
  PDUs need, in the row's first network rack (NVIDIA's 4-SU H100 design has 8: two per SU).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec.models import ManagementFabric, StorageFabric
from infra.topology.fat_tree import fat_tree_shape, wire_upper_tiers
from infra.topology.model import Cable, FabricName, FabricSummary, Switch

__all__ = ["NetworkPlan", "plan_inband", "plan_oob", "plan_storage"]

INBAND_PORTS_PER_SERVER = 2  # bonded pair to an MLAG leaf pair (NVIDIA RA: 100 GbE bonded)


@dataclass
class NetworkPlan:
    """Switches (with their rack zone), cables and summary of one network."""

    switches: list[tuple[Switch, str]]
    cables: list[Cable]
    summary: FabricSummary


def _tree(
    fabric: FabricName,
    prefix: str,
    model: str,
    radix: int,
    gbps: float,
    leaf_down: Sequence[int],
    up: int,
    group: int,
    min_spines: int = 1,
) -> tuple[list[tuple[Switch, str]], list[Cable], FabricSummary]:
    """Leaves (given their endpoint counts) plus the spines/cores above them."""
    shape = fat_tree_shape(len(leaf_down), up, radix, group)
    if shape.tiers == 2 and shape.spines < min_spines and len(leaf_down) * up <= min_spines * radix:
        shape = fat_tree_shape(len(leaf_down), up, radix, group, spines=min_spines)
    down = max(leaf_down)
    leaves = [f"{prefix}-leaf-{i + 1:03d}" for i in range(shape.leaves)]
    spines = [f"{prefix}-spine-{i + 1:02d}" for i in range(shape.spines)] if len(leaves) > 1 else []
    cores = [f"{prefix}-core-{i + 1:02d}" for i in range(shape.cores)]
    switches: list[tuple[Switch, str]] = [
        (Switch(n, fabric, "leaf", model, 0, 0, 0, -1, "", radix), fabric) for n in leaves
    ]
    switches += [
        (Switch(n, fabric, t, model, 0, 0, 0, -1, "", radix), "core")
        for t, names in (("spine", spines), ("core", cores))
        for n in names
    ]
    cables = []
    if spines:
        for link in wire_upper_tiers(shape, down):
            lower = leaves if link.tier == "leaf_spine" else spines
            upper = spines if link.tier == "leaf_spine" else cores
            cables.append(
                Cable(
                    fabric,
                    link.tier,
                    lower[link.lower],
                    str(link.lower_port),
                    upper[link.upper],
                    str(link.upper_port),
                    gbps,
                )
            )
    counts = {t: sum(1 for c in cables if c.tier == t) for t in ("leaf_spine", "spine_core")}
    summary = FabricSummary(
        fabric,
        model,
        shape.tiers if spines else 1,
        1,
        len(leaves),
        len(spines),
        len(cores),
        counts,
        round(down / up, 3) if spines else 0,
        0.0,
        radix,
        shape.pods if spines else 0,
    )
    return switches, cables, summary


def plan_storage(
    fabric: StorageFabric, catalog: Catalog, servers: Sequence[tuple[str, int]]
) -> NetworkPlan:
    """Storage fabric for ``(server, storage ports)`` pairs plus the spec's storage ports."""
    switch = catalog.switches[fabric.switch]
    k = switch.ports
    down = int(k * fabric.oversubscription // (fabric.oversubscription + 1))
    up = k - down  # every remaining port goes up: the ratio never exceeds the spec's
    group = max((p for _, p in servers), default=1) or 1
    server_groups = math.ceil(len(servers) / down)
    storage_leaves = math.ceil(fabric.storage_ports / up) if fabric.storage_ports else 0
    leaf_down = [down] * (server_groups * group) + [up] * storage_leaves
    switches, cables, summary = _tree(
        "storage", "st", fabric.switch, k, switch.port_gbps, leaf_down, up, group
    )
    cables += _server_cables("storage", "st", servers, down, group, switch.port_gbps)
    cables += list(_storage_system_cables(fabric, server_groups * group, up, switch.port_gbps))
    summary.cables["node_leaf"] = sum(1 for c in cables if c.tier == "node_leaf")
    return NetworkPlan(switches, cables, summary)


def _server_cables(
    fabric: FabricName,
    prefix: str,
    servers: Sequence[tuple[str, int]],
    per_leaf: int,
    group: int,
    gbps: float,
) -> list[Cable]:
    """Server port ``p`` to leaf ``p`` of the server's leaf group (one leaf per port)."""
    cables = []
    for i, (server, ports) in enumerate(servers):
        g, slot = divmod(i, per_leaf)
        for p in range(ports):
            leaf = f"{prefix}-leaf-{g * group + p + 1:03d}"
            cables.append(
                Cable(fabric, "node_leaf", server, f"{fabric}{p}", leaf, str(slot + 1), gbps)
            )
    return cables


def _storage_system_cables(
    fabric: StorageFabric, first_leaf: int, per_leaf: int, gbps: float
) -> Iterator[Cable]:
    for n in range(fabric.storage_ports):
        leaf, port = divmod(n, per_leaf)
        yield Cable(
            "storage",
            "node_leaf",
            f"storage-system-port{n + 1:04d}",
            "p1",
            f"st-leaf-{first_leaf + leaf + 1:03d}",
            str(port + 1),
            gbps,
        )


def plan_inband(fabric: ManagementFabric, catalog: Catalog, servers: Sequence[str]) -> NetworkPlan:
    """In-band management: MLAG leaf pairs for servers, two spines when there are many."""
    switch = catalog.switches[fabric.inband_switch]
    k = switch.ports
    up = max(1, k // 8)
    down = k - up
    pairs = max(1, math.ceil(len(servers) / down))
    switches, cables, summary = _tree(
        "inband",
        "mg",
        fabric.inband_switch,
        k,
        switch.port_gbps,
        [down] * (2 * pairs),
        up,
        2,
        min_spines=2,
    )  # no single spine: it would be a SPOF
    ports = [(server, INBAND_PORTS_PER_SERVER) for server in servers]
    cables += _server_cables("inband", "mg", ports, down, 2, switch.port_gbps)
    summary.cables["node_leaf"] = len(servers) * INBAND_PORTS_PER_SERVER
    return NetworkPlan(switches, cables, summary)


def plan_oob(
    fabric: ManagementFabric,
    catalog: Catalog,
    racks: Sequence[tuple[str, Sequence[tuple[str, str]]]],
) -> NetworkPlan:
    """OOB switches for ``(hosting rack, devices)`` rows: enough ports for every device."""
    switch = catalog.switches[fabric.oob_switch]
    switches: list[tuple[Switch, str]] = []
    cables: list[Cable] = []
    for rack, devices in racks:
        count = max(1, math.ceil(len(devices) / switch.ports))
        names = [f"oob-{rack}" + (f"-{j + 1}" if count > 1 else "") for j in range(count)]
        switches += [
            (Switch(n, "oob", "leaf", fabric.oob_switch, 0, 0, 0, -1, rack, switch.ports), rack)
            for n in names
        ]
        for i, (device, device_port) in enumerate(devices):
            j, port = divmod(i, switch.ports)
            cables.append(
                Cable(
                    "oob",
                    "node_leaf",
                    device,
                    device_port,
                    names[j],
                    str(port + 1),
                    switch.port_gbps,
                )
            )
    summary = FabricSummary(
        "oob",
        fabric.oob_switch,
        1,
        1,
        len(switches),
        0,
        0,
        {"node_leaf": len(cables)},
        0.0,
        0.0,
        switch.ports,
    )
    return NetworkPlan(switches, cables, summary)
