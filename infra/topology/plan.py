r"""`expand(spec, catalog) -> Plan`: the whole cluster as typed, frozen views.

Order (each step needs the one before): servers, SUs and slots -> compute racks -> fabrics
(compute, storage, in-band) -> network racks -> out-of-band network -> PDUs -> addresses ->
cables with both ends' rack, unit, medium and length. The networkx graph is a separate
function of the finished plan (`infra.topology.graph.plan_graph`).

>>> from infra.catalog import load_catalog
>>> from infra.spec import load_spec_text
>>> spec = load_spec_text("name: x\nnode_groups: [{name: g, node: dgx-h100, count: 32}]\n"
...                       "fabrics: {compute: {switch: qm9700}}\n").spec
>>> plan = expand(spec, load_catalog())
>>> plan.gpus, plan.fabrics["compute"].leaf, plan.fabrics["compute"].spine
(256, 8, 4)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

from infra.catalog import Catalog
from infra.errors import spelling_hint
from infra.gc_pause import paused_gc
from infra.progress import Progress, quiet
from infra.spec import Spec
from infra.topology.addressing import AddressBook, assign_addresses
from infra.topology.compute import (
    UFM_HOST,
    ComputeFabricPlan,
    SuMembers,
    plan_compute_fabric,
)
from infra.topology.facts import cluster_facts
from infra.topology.facts_model import GroupMig
from infra.topology.finish import finish_cables, rack_records, switch_records
from infra.topology.groups import check_nodes, group_migs, plan_groups
from infra.topology.growth import natural_key, su_offsets, with_growth
from infra.topology.model import FabricName, FabricSummary, Host, Plan, PlanError, ScalableUnit
from infra.topology.networks import (
    Endpoints,
    NetworkPlan,
    OobRow,
    plan_inband,
    plan_oob,
    plan_storage,
    upper_zone,
)
from infra.topology.parts import Link, SwitchPart
from infra.topology.racks import RackFill, RackPlanner, pdu_records
from infra.topology.servers import ServerSeed, list_servers

__all__ = ["expand"]

# Zones whose switches stand in the shared core row (the others are SU names).
SHARED_ZONES = ("core", "storage", "inband", upper_zone("storage"), upper_zone("inband"))
PLAN_STEPS = (
    "servers and racks",
    "compute fabric",
    "storage and management networks",
    "network racks",
    "addresses",
    "cables",
)
UFM_UNITS = 1  # the UFM Enterprise appliance is a 1U server (inferred; see the catalog)


def expand(spec: Spec, catalog: Catalog, progress: Progress = quiet) -> Plan:
    """Plan ``spec``: racks, NVSwitch domains, fabrics, addresses, cables.

    ``progress`` hears each of the planning steps (`PLAN_STEPS`) as it starts.

    Raises:
        PlanError: the spec cannot be planned (no rack fits a node, the fabric would need
            more than three tiers, rails do not split into planes, ...).
    """
    _check_references(spec, catalog)
    # A plan allocates millions of small objects that all live until the end; the cyclic
    # GC would rescan them again and again (superlinear time), and they form no cycles.
    with paused_gc():
        plan = _expand(spec, catalog, progress)
        progress("planned", len(PLAN_STEPS), len(PLAN_STEPS))
        return plan


def _check_references(spec: Spec, catalog: Catalog) -> None:
    """Catalog ids and rack classes must resolve before planning (lint adds context)."""
    check_nodes(spec, catalog)
    unresolved = spec.unresolved_references()  # the loader refuses these (a spec built
    if unresolved:  # without it, e.g. by model_validate, still gets a located error here)
        path, message, hint = unresolved[0]
        raise PlanError(message, path=path, hint=hint)
    for path, switch, _ in spec.fabrics.switch_references():
        if switch not in catalog.switches:
            raise PlanError(
                f"unknown switch {switch!r}",
                path=path,
                hint=spelling_hint(switch, catalog.switches),
            )


def _expand(spec: Spec, catalog: Catalog, progress: Progress) -> Plan:
    spec = with_growth(spec, catalog)  # node groups' max_count: upper tiers built for them
    step = _stepper(progress)
    step("servers and racks")
    migs = group_migs(spec, catalog)
    seeds = list_servers(spec, catalog, migs)
    racks = RackPlanner(spec, catalog)
    first_network = _place_servers(spec, catalog, seeds, racks)
    step("compute fabric")
    compute = _plan_compute(spec, catalog, seeds)
    networks: dict[FabricName, NetworkPlan | ComputeFabricPlan] = {}
    if compute is not None:
        networks["compute"] = compute
    step("storage and management networks")
    networks.update(_plan_other_networks(spec, catalog, seeds))
    parts = [p for net in networks.values() for p in net.switches]
    step("network racks")
    _reserve_core_row(networks, racks)
    hosts = _hosts(spec, catalog, compute, racks)  # the UFM first: growth never moves it
    for part, name in _with_kept_slots(_placement_order(parts), networks):
        row = "core" if part.zone in SHARED_ZONES else part.zone
        if name is None:  # a leaf a node group keeps room for: its units stay free
            racks.keep_switch(part.model, part.zone, row, first_network.get(row, 1))
        else:
            racks.place_switch(name, part.model, part.zone, row, first_network.get(row, 1))
    oob = _plan_oob(spec, catalog, racks, first_network)
    if oob is not None:
        networks["oob"] = oob
        parts += _place_oob(oob, racks)
    pdus = pdu_records(sorted(racks.racks.values(), key=lambda r: natural_key(r.name)))
    chunked = [
        ("st" if name == "storage" else "mg", *net.chunking)
        for name, net in networks.items()
        if isinstance(net, NetworkPlan) and net.chunking is not None and name != "oob"
    ]
    step("addresses")
    book = assign_addresses(spec, catalog, seeds, parts, hosts, pdus, racks, compute, chunked)
    links = [link for net in networks.values() for link in net.links]
    step("cables")
    return _assemble(
        spec, catalog, seeds, parts, hosts, pdus, links, networks, racks, book, compute, migs
    )


def _place_servers(
    spec: Spec, catalog: Catalog, seeds: Sequence[ServerSeed], racks: RackPlanner
) -> dict[str, int]:
    """Compute racks for every racked server; returns each SU row's first network position."""
    first_network: dict[str, int] = {}
    groups = {g.name: g for g in spec.node_groups}
    capacity: dict[str, int] = {}
    for seed in seeds:
        group = groups[seed.group]
        if not catalog.nodes[seed.node].rack_units:
            continue  # a cloud instance: nothing to rack
        class_name = group.rack_class or "default"
        if seed.group not in capacity:
            capacity[seed.group] = racks.capacity(seed.node, class_name)
        cap = capacity[seed.group]
        if seed.su is not None and seed.slot is not None:
            k = (seed.slot - 1) // cap + 1
            rack, row = f"{seed.su}-c{k}", seed.su
            first_network[row] = math.ceil(spec.fabrics.compute.su_size / cap) + 1  # type: ignore[union-attr]
        else:
            k = seed.ordinal // cap + 1
            row = seed.group.replace("_", "-")
            rack = f"{row}-c{k:02d}"
        racks.place_server(seed.name, seed.node, class_name, row, rack, k)
    return first_network


def _plan_compute(
    spec: Spec, catalog: Catalog, seeds: Sequence[ServerSeed]
) -> ComputeFabricPlan | None:
    fabric = spec.fabrics.compute
    members = [s for s in seeds if s.su is not None]
    if fabric is None or not members:
        return None
    rails = {len(catalog.nodes[s.node].compute_hcas) for s in members}
    if len(rails) > 1:
        raise PlanError(
            f"node groups on one compute fabric have different rail counts ({sorted(rails)})",
            path="node_groups",
            hint="put nodes with different NIC counts on separate clusters",
        )
    by_su: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}
    position: dict[str, int] = {}
    offsets = su_offsets(spec, catalog)  # each group's SUs from its first kept position
    for s in members:
        su = s.su or ""
        by_su.setdefault(su, []).append((s.slot or 0, s.name, catalog.nodes[s.node].compute_hcas))
        position[su] = offsets[s.group] + (s.su_number or 0) - 1
    sus = [SuMembers(name, tuple(servers), position[name]) for name, servers in by_su.items()]
    nic = min(catalog.nodes[s.node].compute_nic_gbps for s in members)
    return plan_compute_fabric(fabric, catalog, sus, rails.pop(), nic)


def _owners(spec: Spec, seeds: Sequence[ServerSeed], ports_of: dict[str, int]) -> list[Endpoints]:
    """Endpoints per node group, in spec order, for servers with ports on the network.

    Each keeps room for its group's ``max_count`` servers (``count`` without it).
    """
    owners: dict[str, list[tuple[str, int]]] = {}
    reserve: dict[str, int] = {}
    for s in seeds:
        if ports_of[s.node]:
            key = s.group.replace("_", "-")
            owners.setdefault(key, []).append((s.name, ports_of[s.node]))
            reserve[key] = next(g.reserved for g in spec.node_groups if g.name == s.group)
    return [Endpoints(key, tuple(devices), reserve[key]) for key, devices in owners.items()]


def _plan_other_networks(
    spec: Spec, catalog: Catalog, seeds: Sequence[ServerSeed]
) -> dict[FabricName, NetworkPlan]:
    nets: dict[FabricName, NetworkPlan] = {}
    racked = [s for s in seeds if catalog.nodes[s.node].rack_units]
    extra = _growth(spec, seeds)
    compute = spec.fabrics.compute
    sus = None if compute is None or compute.max_sus is None else (compute.max_sus, compute.su_size)
    if spec.fabrics.storage is not None:
        ports = {n: catalog.nodes[n].storage_nic_ports for n in catalog.nodes}
        owners = _owners(spec, racked, ports)
        nets["storage"] = plan_storage(spec.fabrics.storage, catalog, owners, extra, sus)
    if spec.fabrics.management is not None and racked:
        ports = dict.fromkeys(catalog.nodes, 2)
        owners = _owners(spec, racked, ports)
        nets["inband"] = plan_inband(spec.fabrics.management, catalog, owners, extra, sus)
    return nets


def _stepper(progress: Progress) -> Callable[[str], None]:
    """``step(what)``: report ``what`` as the next of `PLAN_STEPS`."""
    done = iter(range(len(PLAN_STEPS)))

    def step(what: str) -> None:
        progress(what, next(done), len(PLAN_STEPS))

    return step


def _reserve_core_row(
    networks: dict[FabricName, NetworkPlan | ComputeFabricPlan], racks: RackPlanner
) -> None:
    """Keep core-row racks for each zone's switches at ``max_sus``."""
    for name, net in networks.items():
        if not net.switches:
            continue
        model = net.switches[0].model
        if isinstance(net, ComputeFabricPlan):
            zones = {"core": net.upper_at_max + UFM_UNITS if net.upper_at_max else 0}
        else:
            leaves, upper = net.switches_at_max
            zones = {name: leaves, upper_zone(name): upper}
        for zone, switches in zones.items():
            if switches:
                racks.reserve(zone, racks.network_racks_for(switches, model))


def _growth(spec: Spec, seeds: Sequence[ServerSeed]) -> int | None:
    """Servers ``max_sus`` leaves room for beyond the groups' ``max_count``; None without it.

    The storage and in-band trees size their spines for them too (as growth of the last
    group), so growing the cluster up to ``max_sus`` SUs does not recable those either.
    """
    compute = spec.fabrics.compute
    if compute is None or compute.max_sus is None:
        return None
    on_fabric = {s.group for s in seeds if s.su is not None}
    kept = sum(g.reserved for g in spec.node_groups if g.name in on_fabric)
    return max(0, compute.max_sus * compute.su_size - kept)


def _placement_order(parts: Sequence[SwitchPart]) -> list[SwitchPart]:
    """Per network: cores, then spines pod by pod, then leaves, so growth only appends.

    Cores and spines are sized for the growth the spec declares (``max_sus``), leaves are
    added as servers are: placed in this order, a zone's racks fill at their end and
    nothing placed before moves. Networks keep their order, and so do ties (stable sort).
    """
    fabrics = list(dict.fromkeys(p.fabric for p in parts))
    rank = {"core": 0, "spine": 1, "leaf": 2}

    def key(part: SwitchPart) -> tuple[int, int, int, int]:
        return (fabrics.index(part.fabric), rank[part.tier], part.pod or 0, part.plane)

    return sorted(parts, key=key)


def _with_kept_slots(
    parts: Sequence[SwitchPart], networks: dict[FabricName, NetworkPlan | ComputeFabricPlan]
) -> Iterator[tuple[SwitchPart, str | None]]:
    """Each part with its name; a network's leaves by position, None for kept ones."""
    slots = {
        name: net.leaf_slots
        for name, net in networks.items()
        if isinstance(net, NetworkPlan) and net.leaf_slots
    }
    done: set[str] = set()
    for part in parts:
        fabric = part.fabric
        if part.tier != "leaf" or fabric not in slots:
            yield part, part.name
        elif fabric not in done:  # the network's first leaf: all its positions, in order
            done.add(fabric)
            yield from ((part, name) for name in slots[fabric])
    return


def _hosts(
    spec: Spec, catalog: Catalog, compute: ComputeFabricPlan | None, racks: RackPlanner
) -> list[Host]:
    hosts: list[Host] = []
    if compute is not None and compute.ufm_ports:
        kw = float(catalog.site.get("ufm_appliance_kw", 0.0))
        racks.place_host(UFM_HOST, UFM_UNITS, kw, "core", "core")
        hosts.append(Host(UFM_HOST, "ufm", None, None, UFM_UNITS, kw, None))
    if spec.fabrics.storage is not None:
        hosts += [
            Host(f"storage-port{n + 1:04d}", "storage", None, None, 0, 0.0, None)
            for n in range(spec.fabrics.storage.storage_ports)
        ]
    return hosts


def _plan_oob(
    spec: Spec, catalog: Catalog, racks: RackPlanner, first_network: dict[str, int]
) -> NetworkPlan | None:
    management = spec.fabrics.management
    if management is None or not racks.racks:
        return None
    rows: dict[str, list[tuple[str, tuple[tuple[str, str] | None, ...]]]] = {}
    by_row = racks.by_row()
    for rack in sorted(racks.racks.values(), key=lambda r: (r.row != "core", r.row, r.position)):
        row = rows.setdefault(rack.row, [])
        if rack.kind == "network" and rack.position == first_network.get(rack.row):
            row += _missing_compute_racks(by_row[rack.row], first_network[rack.row], len(row))
        # A compute rack keeps ports for a full rack of servers, so growth moves no cable.
        free = max(0, rack.server_slots - len(rack.servers))
        pdus: list[tuple[str, str] | None] = [
            (f"{rack.name}-pdu{j + 1}", "net") for j in range(rack.pdus)
        ]
        devices = (
            [(n, "bmc") for n in rack.servers]
            + [None] * free
            + [(n, "mgmt0") for n in rack.switches]
            + [(n, "bmc") for n in rack.hosts]
            + pdus
        )
        if rack.kind == "network":  # a network rack fills with switches: those go last
            switches = [None if n is None else (n, "mgmt0") for n in rack.switch_slots]
            devices = pdus + [(n, "bmc") for n in rack.hosts] + switches
        row.append((rack.name, tuple(devices)))
    return plan_oob(
        management, catalog, [OobRow(tuple(r), shared=row != "core") for row, r in rows.items()]
    )


def _missing_compute_racks(
    row_racks: Sequence[RackFill], first_network: int, present: int
) -> list[tuple[str, tuple[None, ...]]]:
    """Placeholders for the compute racks a partial SU has yet to fill (OOB ports kept free).

    ``row_racks``: the row's racks (`RackPlanner.by_row`).
    """
    model = next(r for r in row_racks if r.kind == "compute")
    ports = (None,) * (model.server_slots + model.pdus)
    row = model.row
    return [(f"{row}-c{k}", ports) for k in range(present + 1, first_network)]


def _place_oob(oob: NetworkPlan, racks: RackPlanner) -> list[SwitchPart]:
    for part in oob.switches:
        racks.add_oob(part.zone, part.name, part.model)
    return list(oob.switches)


def _assemble(
    spec: Spec,
    catalog: Catalog,
    seeds: Sequence[ServerSeed],
    parts: Sequence[SwitchPart],
    hosts: Sequence[Host],
    pdus: Sequence[object],
    links: Sequence[Link],
    networks: dict[FabricName, NetworkPlan | ComputeFabricPlan],
    racks: RackPlanner,
    book: AddressBook,
    compute: ComputeFabricPlan | None,
    migs: Sequence[GroupMig],
) -> Plan:
    servers = book.servers(seeds, racks.where, catalog)
    racked_hosts = tuple(book.host(h, racks.where) for h in hosts)
    rack_list = rack_records(racks)
    summaries: dict[FabricName, FabricSummary] = {n: net.summary for n, net in networks.items()}
    sus = _scalable_units(seeds, compute, racks)
    groups = plan_groups(spec, migs, seeds, catalog)
    geometry = summaries["compute"].geometry if "compute" in summaries else None
    facts = cluster_facts(spec, catalog, groups=groups, geometry=geometry, servers=servers, sus=sus)
    return Plan(
        spec.name,
        servers,
        sus,
        switch_records(parts, racks.where, book, catalog),
        racked_hosts,
        tuple(book.pdu(p) for p in pdus),  # type: ignore[arg-type]
        finish_cables(links, racks, rack_list, spec, catalog),
        rack_list,
        summaries,
        sum(catalog.nodes[s.node].gpus for s in seeds),
        book.pkeys,
        compute.warnings if compute else (),
        groups,
        facts,
    )


def _scalable_units(
    seeds: Sequence[ServerSeed], compute: ComputeFabricPlan | None, racks: RackPlanner
) -> tuple[ScalableUnit, ...]:
    if compute is None:
        return ()
    members: dict[str, list[ServerSeed]] = {}
    for s in seeds:
        if s.su is not None:
            members.setdefault(s.su, []).append(s)
    rows: dict[str, list[str]] = {}
    for rack in sorted(racks.racks.values(), key=lambda r: r.position):
        rows.setdefault(rack.row, []).append(rack.name)
    return tuple(
        ScalableUnit(
            su,
            group[0].group,
            group[0].su_number or 0,
            compute.su_pod.get(su),
            tuple(s.name for s in group),
            compute.su_leaves.get(su, ()),
            tuple(rows.get(su, ())),
        )
        for su, group in members.items()
    )
