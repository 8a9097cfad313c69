"""The other networks: storage fabric, in-band management and out-of-band (BMC) networks.

- Storage fabric (InfiniBand): each server's storage ports go to a group of leaves (port p
  of a server to leaf p of its group, so one leaf failure leaves every server reachable);
  server-facing leaves are oversubscribed as the spec says (NVIDIA RA: about 4:3), leaves
  for the storage systems' ports are 1:1. Spines and cores come from the same fat-tree
  builder as the compute fabric. Leaf groups belong to one node group each
  (``st-leaf-<group>-NN``), so growing a group never moves another group's cables.
- In-band management (Ethernet): every server has two bonded ports to an MLAG leaf pair;
  one port in eight of a leaf is kept for uplinks to two spines when there is more than one
  pair. Pairs belong to node groups the same way (``mg-leaf-<group>-NN``).
- Either network whose endpoints fit one switch (one MLAG pair for in-band) is just that.
- Out-of-band (Ethernet, 1 GbE, RJ45): along each row of racks, consecutive whole racks
  share an OOB switch while its ports last (a compute rack counts the ports of a full rack);
  the switch stands in the first rack it serves (every rack keeps a unit and the power).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec.fabrics import ManagementFabric, StorageFabric
from infra.topology.fat_tree import fat_tree_shape, wire_upper_tiers
from infra.topology.model import SWITCH_TIERS, FabricName, FabricSummary, PlanError, Tier
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
    tier_use,
)

__all__ = [
    "Endpoints",
    "NetworkPlan",
    "OobRow",
    "plan_inband",
    "plan_oob",
    "plan_storage",
    "upper_zone",
]


@dataclass(frozen=True)
class NetworkPlan:
    """Switches, links and summary of one network.

    ``chunking`` is ``(servers per leaf group, leaves per group)`` when leaves belong to
    node groups (``<prefix>-leaf-<group>-NN``), so addresses can follow a leaf's identity.
    """

    switches: tuple[SwitchPart, ...]
    links: tuple[Link, ...]
    summary: FabricSummary
    chunking: tuple[int, int] | None = None
    switches_at_max: tuple[int, int] = (0, 0)  # (leaves, spines + cores) at max_sus
    # Leaves by position up to the last one, None where a node group keeps room to grow:
    # racks keep those units, so the leaves after them stay where they are.
    leaf_slots: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Devices of one node group (or the storage system) and their ports on a network."""

    key: str  # DNS-safe group name, or "storage"
    devices: tuple[tuple[str, int], ...]  # (device, ports)
    reserve: int = 0  # devices the group keeps room for (node_groups[].max_count)


@dataclass(frozen=True)
class _Tree:
    fabric: FabricName
    prefix: str
    model: str
    radix: int
    gbps: float
    down: int  # endpoint ports per leaf
    up: int
    group: int  # leaves that serve one chunk of endpoints (ports per device)
    min_spines: int = 1


def _leaf_links(tree: _Tree, owners: Sequence[Endpoints]) -> tuple[list[str | None], list[Link]]:
    """Leaves per owner by position, and the endpoint links (device port p to leaf p).

    An owner keeping room (``reserve``) is followed by None positions for the
    leaves of that room, except the last owner (its growth appends).
    """
    leaves: list[str | None] = []
    links: list[Link] = []
    nics = [f"{tree.fabric}{p}" for p in range(max(map(_ports, owners), default=0))]
    for i, owner in enumerate(owners):
        chunks = math.ceil(len(owner.devices) / tree.down)
        kept = max(chunks, math.ceil(owner.reserve / tree.down))
        names = [f"{tree.prefix}-leaf-{owner.key}-{j + 1:02d}" for j in range(chunks * tree.group)]
        leaves += names
        # leaf names and port names made once, not again for every link (group >= ports)
        if i < len(owners) - 1:
            leaves += [None] * ((kept - chunks) * tree.group)
        for i, (device, ports) in enumerate(owner.devices):
            chunk, slot = divmod(i, tree.down)
            for p in range(ports):
                leaf = names[chunk * tree.group + p]
                links.append(
                    make_link(tree.fabric, "node_leaf", device, nics[p], leaf, port_text(slot + 1), tree.gbps)
                )  # fmt: skip
    return leaves, links


def _room(owner: Endpoints) -> int:
    """Devices ``owner`` keeps room for beyond those it has."""
    return max(0, owner.reserve - len(owner.devices))


def _ports(owner: Endpoints) -> int:
    return max((p for _, p in owner.devices), default=0)


def _single(tree: _Tree, owners: Sequence[Endpoints], leaves: int) -> NetworkPlan:
    """All endpoints on ``leaves`` switches (1, or an MLAG pair) with no tier above.

    An owner's kept room (not the last owner's) keeps its ports free, so the owners after
    it keep theirs as it grows.
    """
    names = [f"{tree.prefix}-leaf-{j + 1:02d}" for j in range(leaves)]
    links: list[Link] = []
    used = [0] * leaves
    for k, owner in enumerate(owners):
        if k:
            previous = owners[k - 1]
            for p in range(_ports(previous)):
                used[p % leaves] += _room(previous)
        for device, ports in owner.devices:
            for p in range(ports):
                j = p % leaves
                used[j] += 1
                links.append(
                    make_link(tree.fabric, "node_leaf", device, f"{tree.fabric}{p}", names[j], port_text(used[j]), tree.gbps)
                )  # fmt: skip
    parts = [
        SwitchPart(n, tree.fabric, "leaf", tree.model, 0, None, None, None, tree.fabric)
        for n in names
    ]
    summary = _summary(tree, parts, links, 1, 0)
    # chunking as a tree would have it: addresses keep room for the leaves growth adds
    return NetworkPlan(tuple(parts), tuple(links), summary, (tree.down, tree.group))


def _bound(tree: _Tree, owners: Sequence[Endpoints], sus: tuple[int, int]) -> tuple[int, int]:
    """(endpoint ports, leaves) at most, once ``sus`` = (max_sus, su_size) SUs are filled.

    A group's leaves are ``ceil(servers / down)`` chunks, at most one chunk more than its
    share, and no group has less than an SU: ``ceil(su_size / down)`` chunks per SU bound
    every split, so the bound, and the shape sized for it, stay the same as groups grow
    or are appended (the storage systems' leaves come on top).
    """
    max_sus, su_size = sus
    fixed = [o for o in owners if o.key == "storage"]
    ports = sum(p for o in fixed for _, p in o.devices) + max_sus * su_size * tree.group
    leaves = sum(math.ceil(len(o.devices) / tree.down) * tree.group for o in fixed)
    return ports, leaves + max_sus * math.ceil(su_size / tree.down) * tree.group


def _tree_plan(
    tree: _Tree,
    owners: Sequence[Endpoints],
    extra: int | None = None,
    sus: tuple[int, int] | None = None,
) -> NetworkPlan:
    """One network over ``owners``, its upper tiers sized for ``extra`` more servers.

    The extra servers (what ``fabrics.compute.max_sus`` leaves room for beyond the groups'
    ``max_count``; None when it is not set) are counted as growth of the last owner, the
    way clusters grow: more leaves of its own. With ``sus`` (max_sus, su_size) the tree is
    sized for `_bound` when that is more, so growing or appending a group within max_sus
    never changes its shape.
    """
    growth = (extra or 0) + _room(owners[-1])
    endpoints = sum(p for o in owners for _, p in o.devices)
    kept = sum(_room(o) * _ports(o) for o in owners[:-1])
    pair = tree.group if tree.fabric == "inband" else 1
    bound_ports, bound_leaves = _bound(tree, owners, sus) if sus is not None else (0, 0)
    if max(endpoints + kept + growth * tree.group, bound_ports) <= tree.radix * pair:
        return _single(tree, owners, pair)
    slots, links = _leaf_links(tree, owners)
    last = len(owners[-1].devices)
    more = math.ceil((last + growth) / tree.down) - math.ceil(last / tree.down)
    sized = max(len(slots) + more * tree.group, bound_leaves)
    shape = fat_tree_shape(len(slots), tree.up, tree.radix, tree.group, sized_for=sized)
    if shape.tiers == 2 and shape.spines < tree.min_spines:
        shape = fat_tree_shape(
            len(slots), tree.up, tree.radix, tree.group, tree.min_spines, sized_for=sized
        )
    leaves = [n for n in slots if n is not None]
    # Built for growth, the upper tiers keep racks of their own (leaves grow past them).
    zone = upper_zone(tree.fabric) if extra is not None else tree.fabric
    spines = [f"{tree.prefix}-spine-{i + 1:02d}" for i in range(shape.spines)]
    cores = [f"{tree.prefix}-core-{i + 1:02d}" for i in range(shape.cores)]
    parts = [
        SwitchPart(n, tree.fabric, "leaf", tree.model, 0, None, None, None, tree.fabric)
        for n in leaves
    ]
    parts += [
        SwitchPart(n, tree.fabric, "spine", tree.model, 0, None, None, None, zone) for n in spines
    ]
    parts += [
        SwitchPart(n, tree.fabric, "core", tree.model, 0, None, None, None, zone) for n in cores
    ]
    for link in wire_upper_tiers(shape, tree.down):
        lower = slots if link.tier == "leaf_spine" else spines
        upper = spines if link.tier == "leaf_spine" else cores
        below = lower[link.lower]
        if below is None:
            continue  # a position kept for a group's growth: no leaf yet
        links.append(
            make_link(tree.fabric, link.tier, below, port_text(link.lower_port), upper[link.upper], port_text(link.upper_port), tree.gbps)
        )  # fmt: skip
    summary = _summary(tree, parts, links, shape.tiers, shape.pods)
    pods = math.ceil(sized / shape.leaves_per_pod) if shape.tiers == 3 else 1
    at_max = (sized, pods * shape.spines_per_pod + shape.cores) if extra is not None else (0, 0)
    return NetworkPlan(
        tuple(parts), tuple(links), summary, (tree.down, tree.group), at_max, tuple(slots)
    )


def upper_zone(fabric: FabricName) -> str:
    """The core-row zone of a storage or in-band tree's spines and cores.

    Leaves and upper tiers both grow, so each fills (and keeps) racks of its own.
    """
    return f"{fabric}-upper"


def _summary(
    tree: _Tree, parts: Sequence[SwitchPart], links: Sequence[Link], tiers: int, pods: int
) -> FabricSummary:
    counts: dict[Tier, int] = {"node_leaf": 0, "leaf_spine": 0, "spine_core": 0}
    for link in links:
        counts[link.tier] += 1
    tiers_of = {t: [p.name for p in parts if p.tier == t] for t in SWITCH_TIERS}
    ends = link_ends(links)
    use = tuple(tier_use(t, n, ends, tree.radix) for t, n in tiers_of.items() if n)
    endpoints = [lk for lk in links if lk.tier == "node_leaf"]
    leaves = len(tiers_of["leaf"])
    up = tree.up if tiers > 1 else 0
    return FabricSummary(
        tree.fabric, tree.model, tiers, 1, pods if tiers == 3 else 1, 0, tree.radix, tree.gbps,
        leaves, len(tiers_of["spine"]), len(tiers_of["core"]), counts,
        round(tree.down / tree.up, 3) if tiers > 1 else 1.0, len(endpoints) * tree.gbps,
        _bisection(endpoints, up, tiers, tree.gbps),
        switch_lower_bound(leaves, up, tree.radix, tiers) if tiers > 1 else leaves, use,
    )  # fmt: skip


def _bisection(endpoints: Sequence[Link], up: int, tiers: int, gbps: float) -> float:
    """Gb/s across the cut between the first and second half of the endpoint devices."""
    ports, scale = half_cut(endpoints)
    # One switch switches everything; separate switches with no tier above (an MLAG pair,
    # whose peer link is not modelled, or OOB switches) carry nothing between them.
    cap = up if tiers > 1 else (10**9 if len(ports) == 1 else 0)
    links = bisection_links([LeafLoad(a, b, cap, 0) for a, b in ports.values()])
    return round(links * gbps * scale, 3)


def plan_storage(
    fabric: StorageFabric,
    catalog: Catalog,
    owners: Sequence[Endpoints],
    extra: int | None = None,
    sus: tuple[int, int] | None = None,
) -> NetworkPlan:
    """Storage fabric for each node group's storage ports plus the storage systems' ports."""
    switch = catalog.switches[fabric.switch]
    k = switch.ports
    down = int(k * fabric.oversubscription // (fabric.oversubscription + 1))
    group = max((p for o in owners for _, p in o.devices), default=1) or 1
    tree = _Tree("storage", "st", fabric.switch, k, switch.port_gbps, down, k - down, group)
    storage = Endpoints(
        "storage", tuple((f"storage-port{n + 1:04d}", 1) for n in range(fabric.storage_ports))
    )
    # The storage systems' leaves first: node groups grow and append at the end, so the
    # position-based uplink wiring of everything planned before stays put.
    with _fabric_path("fabrics.storage", "fewer storage_ports, or a switch of a larger radix"):
        return _tree_plan(tree, [storage, *owners] if fabric.storage_ports else owners, extra, sus)


@contextmanager
def _fabric_path(path: str, hint: str) -> Iterator[None]:
    """A sizing error of a fabric without planes names that fabric (the CLI locates it)."""
    try:
        yield
    except PlanError as exc:
        if not exc.path:
            exc.path, exc.hint = path, hint  # "split into planes" is for the compute fabric
        raise


def plan_inband(
    fabric: ManagementFabric,
    catalog: Catalog,
    owners: Sequence[Endpoints],
    extra: int | None = None,
    sus: tuple[int, int] | None = None,
) -> NetworkPlan:
    """In-band management: MLAG leaf pairs per node group, two spines when there are many."""
    switch = catalog.switches[fabric.inband_switch]
    k = switch.ports
    up = max(1, k // 8)
    tree = _Tree("inband", "mg", fabric.inband_switch, k, switch.port_gbps, k - up, up, 2, 2)
    with _fabric_path("fabrics.management.inband_switch", "use a switch of a larger radix"):
        return _tree_plan(tree, owners, extra, sus)  # no single spine: it would be a SPOF


@dataclass(frozen=True, slots=True)
class OobRow:
    """One row of racks in order, each with the management ports it holds (None: kept free).

    ``shared``: consecutive racks may share an OOB switch. The core row's racks do not: their
    contents are repacked as the fabric grows, and a shared switch would then change its name
    (and address) with the packing.
    """

    racks: tuple[tuple[str, tuple[tuple[str, str] | None, ...]], ...]
    shared: bool = True


def plan_oob(fabric: ManagementFabric, catalog: Catalog, rows: Sequence[OobRow]) -> NetworkPlan:
    """OOB switches along each row: consecutive racks share one while its ports last.

    Only in a row that allows sharing; otherwise each rack has its own. Each rack's ports are consecutive on its switch, free slots included, so a rack that
    fills up keeps every cable and the switch's name (``oob-<first rack>``) stays.

    Raises:
        PlanError: a rack holds more management ports than one OOB switch has.
    """
    switch = catalog.switches[fabric.oob_switch]
    parts: list[SwitchPart] = []
    links: list[Link] = []
    for row in rows:
        for chunk in _rack_chunks(row, switch.ports):
            # Named after the chunk's first rack (a placeholder for a rack a partial SU has
            # yet to fill keeps the name stable); it stands in the first rack that exists.
            name = f"oob-{chunk[0][0]}"
            host = next((rack for rack, devices in chunk if any(devices)), None)
            if host is None:
                continue  # only racks yet to be filled: no switch until they are
            parts.append(
                SwitchPart(name, "oob", "leaf", fabric.oob_switch, 0, None, None, None, host)
            )
            port = 0
            for _, devices in chunk:
                for device in devices:
                    port += 1
                    if device is not None:
                        links.append(
                            make_link(
                                "oob",
                                "node_leaf",
                                device[0],
                                device[1],
                                name,
                                port_text(port),
                                switch.port_gbps,
                            )
                        )
    tree = _Tree(
        "oob", "oob", fabric.oob_switch, switch.ports, switch.port_gbps, switch.ports, 1, 1
    )
    summary = _summary(tree, parts, links, 1, 0)
    return NetworkPlan(tuple(parts), tuple(links), summary)


def _rack_chunks(
    row: OobRow, ports: int
) -> list[list[tuple[str, tuple[tuple[str, str] | None, ...]]]]:
    """Consecutive racks whose ports (free slots included) fit one switch."""
    chunks: list[list[tuple[str, tuple[tuple[str, str] | None, ...]]]] = []
    used = ports
    for rack, devices in row.racks:
        if len(devices) > ports:
            raise PlanError(
                f"rack {rack} holds {len(devices)} management ports but an OOB switch has {ports}",
                path="fabrics.management.oob_switch",
                hint="use an OOB switch with more ports",
            )
        if used + len(devices) > ports or not row.shared:
            chunks.append([])
            used = 0
        chunks[-1].append((rack, devices))
        used += len(devices)
    return chunks
