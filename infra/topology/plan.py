r"""`expand(spec, catalog) -> Plan`: the whole cluster as a graph plus typed views.

Order (each step needs the one before): servers and SU slots -> compute racks -> fabrics
(compute, storage, in-band) -> network racks -> PDUs and out-of-band network -> addresses ->
cable ends' racks and length classes -> graph.

Graph schema (`networkx.Graph`; parallel cables between two switches are one edge whose
``ports`` lists every cable's (a port, b port), so ``len(ports)`` is the cable count):

Nodes, attribute ``kind``:
    ``rack`` (``role`` compute|network), ``server`` (``group``, ``node``, ``su``, ``rack``),
    ``gpu``/``nvswitch``/``nic`` (``server``; nics also ``rail``, ``device``), ``switch``
    (``fabric``, ``tier``, ``model``, ``rack``), ``host`` (the UFM appliance), ``pdu``
    (``rack``) and ``storage`` (storage-system ports).
Edges, attribute ``kind``:
    ``contains`` (rack to server/switch/pdu), ``nvlink`` (gpu to nvswitch, ``links``),
    ``pcie`` (gpu to its rail's nic), ``cable`` (``fabric``, ``tier``, ``ports``, ``gbps``,
    ``length_class``). A compute cable's server end is the NIC node
    ``<server>/<hca>``; other server cables end at the server node.

>>> from infra.catalog import load_catalog
>>> from infra.spec import load_spec_text
>>> spec = load_spec_text("name: x\\nnode_groups: [{name: g, node: dgx-h100, count: 32}]\\n"
...                       "fabrics: {compute: {switch: qm9700}}\\n").spec
>>> plan = expand(spec, load_catalog())
>>> plan.gpus, plan.fabrics["compute"].leaf, plan.fabrics["compute"].spine
(256, 8, 4)
"""

from __future__ import annotations

import dataclasses
import gc
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx

from infra.catalog import Catalog
from infra.errors import spelling_hint
from infra.spec import Spec
from infra.topology.addressing import assign, partition_keys
from infra.topology.compute import ComputeFabricPlan, FabricServer, plan_compute_fabric
from infra.topology.model import Cable, FabricSummary, Plan, PlanError, Rack, Server, Switch
from infra.topology.networks import NetworkPlan, plan_inband, plan_oob, plan_storage
from infra.topology.racks import NetworkRacks, RackFill, place_servers
from infra.topology.servers import ServerSeed, add_node_internals, list_servers

__all__ = ["expand"]


def expand(spec: Spec, catalog: Catalog, *, with_graph: bool = True) -> Plan:
    """Plan ``spec``: racks, NVSwitch domains, fabrics, addresses, cables.

    ``with_graph=False`` skips building the graph (half the time on large plans) for
    callers that need only the typed views, such as lint.

    Raises:
        PlanError: the spec cannot be planned (no rack fits a node, the fabric would need
            more than three tiers, rails do not split into planes, ...).
    """
    _check_references(spec, catalog)
    # A plan allocates millions of small objects that all live until the end; the cyclic
    # GC would rescan them again and again (superlinear time), and they form no cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _expand(spec, catalog, with_graph)
    finally:
        if was_enabled:
            gc.enable()


def _expand(spec: Spec, catalog: Catalog, with_graph: bool) -> Plan:
    seeds = list_servers(spec)
    on_fabric = _fabric_servers(spec, catalog, seeds)
    su_of = (
        {s.name: i // spec.fabrics.compute.su_size + 1 for i, s in enumerate(on_fabric)}
        if spec.fabrics.compute
        else {}
    )
    where, compute_racks = place_servers(
        spec, catalog, [(s.name, s.node, su_of.get(s.name, 0)) for s in seeds]
    )
    state = _State(spec, catalog, where)
    compute = _plan_compute(spec, catalog, on_fabric, where)
    if compute is not None:
        state.add_network("compute", compute.switches, compute.cables, compute.summary)
        state.add_ufm(compute)
    _plan_other_networks(spec, catalog, seeds, state)
    state.close_racks(compute_racks)
    servers = state.servers(seeds, su_of, on_fabric)
    plan = Plan(
        spec.name,
        nx.Graph(name=spec.name),
        servers,
        state.finished_switches(),
        state.finished_cables(),
        state.rack_records(),
        state.summaries,
        sum(catalog.nodes[s.node].gpus for s in seeds),
        partition_keys(spec),
        state.notes,
    )
    if with_graph:
        _build_graph(plan, catalog)
    return plan


def _check_references(spec: Spec, catalog: Catalog) -> None:
    """Catalog ids must resolve before planning (lint reports them with more context)."""
    for i, group in enumerate(spec.node_groups):
        if group.node not in catalog.nodes:
            raise PlanError(
                f"unknown node {group.node!r}",
                path=f"node_groups[{i}].node",
                hint=spelling_hint(group.node, catalog.nodes),
            )
    for path, switch, _ in spec.fabrics.switch_references():
        if switch not in catalog.switches:
            raise PlanError(
                f"unknown switch {switch!r}",
                path=path,
                hint=spelling_hint(switch, catalog.switches),
            )


def _fabric_servers(spec: Spec, catalog: Catalog, seeds: Sequence[ServerSeed]) -> list[ServerSeed]:
    """Servers cabled to the compute fabric: every non-cloud server with compute HCAs."""
    if spec.fabrics.compute is None:
        return []
    servers = [s for s in seeds if catalog.nodes[s.node].compute_hcas]
    rails = {len(catalog.nodes[s.node].compute_hcas) for s in servers}
    if len(rails) > 1:
        raise PlanError(
            f"node groups on one compute fabric have different rail counts ({sorted(rails)})",
            path="node_groups",
            hint="put nodes with different NIC counts on separate clusters",
        )
    return servers


def _plan_compute(
    spec: Spec, catalog: Catalog, servers: Sequence[ServerSeed], where: dict[str, tuple[str, int]]
) -> ComputeFabricPlan | None:
    fabric = spec.fabrics.compute
    if fabric is None or not servers:
        return None
    rails = len(catalog.nodes[servers[0].node].compute_hcas)
    members = [
        FabricServer(s.name, where.get(s.name, ("", 0))[0], catalog.nodes[s.node].compute_hcas)
        for s in servers
    ]
    return plan_compute_fabric(fabric, catalog, members, rails)


def _plan_other_networks(
    spec: Spec, catalog: Catalog, seeds: Sequence[ServerSeed], state: _State
) -> None:
    racked = [s for s in seeds if catalog.nodes[s.node].rack_units]
    storage = spec.fabrics.storage
    if storage is not None:
        ports = [(s.name, catalog.nodes[s.node].storage_nic_ports) for s in racked]
        net = plan_storage(storage, catalog, [p for p in ports if p[1]])
        state.add_network("storage", net.switches, net.cables, net.summary)
    management = spec.fabrics.management
    if management is not None and racked:
        net = plan_inband(management, catalog, [s.name for s in racked])
        state.add_network("inband", net.switches, net.cables, net.summary)


class _State:
    """Collects switches, cables and rack contents while the plan is assembled."""

    def __init__(self, spec: Spec, catalog: Catalog, where: dict[str, tuple[str, int]]):
        self.spec, self.catalog, self.where = spec, catalog, where
        self.network_racks = NetworkRacks(spec, catalog)
        self.switch_rack: dict[str, str] = {}
        self.switches: list[Switch] = []
        self.cables: list[Cable] = []
        self.summaries: dict[str, FabricSummary] = {}
        self.notes: list[str] = []
        self.extra: dict[str, str] = {}  # hosts, PDUs, storage ports -> rack
        self.racks: list[RackFill] = []
        self.bmc: dict[str, str] = {}

    def add_network(
        self,
        name: str,
        switches: Iterable[tuple[Switch, str]],
        cables: list[Cable],
        summary: FabricSummary,
    ) -> None:
        for switch, zone in switches:
            rack = self.network_racks.place(switch.name, switch.model, zone)
            self.switch_rack[switch.name] = rack
            self.switches.append(switch)
        self.cables += cables
        self.summaries[name] = summary

    def add_ufm(self, compute: ComputeFabricPlan) -> None:
        self.notes += compute.notes
        if compute.sm_ports:  # the UFM appliance sits with the switches it is cabled to
            self.extra["ufm-1"] = self.switch_rack[compute.sm_ports[0][0]]

    def close_racks(self, compute_racks: list[RackFill]) -> None:
        """Add PDUs and the out-of-band network to every rack, then assign BMC addresses."""
        self.racks = compute_racks + self.network_racks.racks
        pdus = self.spec.site.rack.pdus
        per_rack = int(self.catalog.site["pdu_per_rack_default"]) if pdus is None else pdus
        devices: dict[str, list[tuple[str, str]]] = defaultdict(list)  # per row, first rack
        host: dict[str, str] = {}
        for rack in sorted(self.racks, key=lambda r: (r.kind != "network", r.name)):
            rack_pdus = [f"{rack.name}-pdu{j + 1}" for j in range(per_rack)]
            self.extra.update(dict.fromkeys(rack_pdus, rack.name))
            host.setdefault(rack.zone, rack.name)
            devices[host[rack.zone]] += [(n, "bmc") for n in rack.servers]
            devices[host[rack.zone]] += [(n, "mgmt0") for n in rack.switches]
            devices[host[rack.zone]] += [(n, "net") for n in rack_pdus]
        management = self.spec.fabrics.management
        if management is not None:
            net = plan_oob(management, self.catalog, sorted(devices.items()))
            self._add_oob(net)
        switch_names = sorted(s.name for s in self.switches)
        servers = [name for rack in self.racks for name in rack.servers]
        pdu_names = sorted(n for n in self.extra if "-pdu" in n)
        self.bmc = assign(self.spec.site.bmc_cidr, [*servers, *switch_names, *pdu_names])

    def _add_oob(self, net: NetworkPlan) -> None:
        racks = {r.name: r for r in self.racks}
        model = self.catalog.switches[self.spec.fabrics.management.oob_switch]  # type: ignore[union-attr]
        for switch, rack in net.switches:
            racks[rack].switches.append(switch.name)
            racks[rack].units += model.rack_units  # the unit every rack kept free for it
            racks[rack].power_kw += model.max_power_w / 1000
            self.switch_rack[switch.name] = rack
            self.switches.append(switch)
        self.cables += net.cables
        self.summaries["oob"] = net.summary

    def servers(
        self, seeds: Sequence[ServerSeed], su_of: dict[str, int], on_fabric: Sequence[ServerSeed]
    ) -> list[Server]:
        mgmt = assign(self.spec.site.management_cidr, [s.name for s in seeds])
        slot_of = (
            {s.name: i % self.spec.fabrics.compute.su_size + 1 for i, s in enumerate(on_fabric)}
            if self.spec.fabrics.compute
            else {}
        )
        return [
            Server(
                s.name,
                s.group,
                s.node,
                s.index,
                su_of.get(s.name, 0),
                slot_of.get(s.name, 0),
                *self.where.get(s.name, ("", 0)),
                mgmt.get(s.name, ""),
                self.bmc.get(s.name, ""),
                self.catalog.nodes[s.node].compute_hcas,
            )
            for s in seeds
        ]

    def finished_switches(self) -> list[Switch]:
        return sorted(
            (
                dataclasses.replace(
                    s, rack=self.switch_rack[s.name], bmc_ip=self.bmc.get(s.name, "")
                )
                for s in self.switches
            ),
            key=lambda s: s.name,
        )

    def finished_cables(self) -> list[Cable]:
        zone = _rack_zones(self.racks)
        racks = {s: r for s, (r, _) in self.where.items()} | self.extra | self.switch_rack
        done = []
        for c in self.cables:  # the positional constructor: dataclasses.replace is 3x slower
            a_rack, b_rack = racks.get(c.a, ""), racks.get(c.b, "")
            length = (
                "in-rack"
                if a_rack == b_rack and a_rack
                else ("row" if zone.get(a_rack) == zone.get(b_rack) else "hall")
            )
            done.append(
                Cable(
                    c.fabric, c.tier, c.a, c.a_port, c.b, c.b_port, c.gbps, a_rack, b_rack, length
                )
            )
        return done

    def rack_records(self) -> list[Rack]:
        pdus: dict[str, int] = defaultdict(int)
        for name, rack in self.extra.items():
            if "-pdu" in name:
                pdus[rack] += 1
        return [
            Rack(
                r.name,
                r.kind,
                tuple(r.servers),
                tuple(r.switches),
                round(r.power_kw, 3),
                r.units,
                pdus[r.name],
            )
            for r in self.racks
        ]


def _rack_zones(racks: Sequence[RackFill]) -> dict[str, str]:
    """Row of each rack: an SU's compute racks and its network rack share a row."""
    return {r.name: r.zone for r in racks}


def _build_graph(plan: Plan, catalog: Catalog) -> None:
    g = plan.graph
    g.add_nodes_from((r.name, {"kind": "rack", "role": r.kind}) for r in plan.racks)
    for s in plan.servers:
        g.add_node(s.name, kind="server", group=s.group, node=s.node, su=s.su, rack=s.rack)
        add_node_internals(g, s.name, catalog.nodes[s.node], catalog)
        if s.rack:
            g.add_edge(s.rack, s.name, kind="contains")
    for sw in plan.switches:
        g.add_node(
            sw.name, kind="switch", fabric=sw.fabric, tier=sw.tier, model=sw.model, rack=sw.rack
        )
        g.add_edge(sw.rack, sw.name, kind="contains")
    bundles: dict[tuple[str, str], dict[str, Any]] = {}
    for c in plan.cables:
        a = (
            f"{c.a}/{c.a_port}"
            if c.fabric == "compute"
            and c.tier == "node_leaf"
            and g.nodes.get(c.a, {}).get("kind") == "server"
            else c.a
        )
        for end, rack in ((a, c.a_rack), (c.b, c.b_rack)):
            if end not in g:
                g.add_node(end, kind=_kind_of(end), rack=rack)
        bundle = bundles.get((a, c.b))
        if bundle is None:
            bundles[(a, c.b)] = {
                "kind": "cable",
                "fabric": c.fabric,
                "tier": c.tier,
                "gbps": c.gbps,
                "length_class": c.length_class,
                "ports": [(c.a_port, c.b_port)],
            }
        else:
            bundle["ports"].append((c.a_port, c.b_port))
    g.add_edges_from((a, b, attrs) for (a, b), attrs in bundles.items())


def _kind_of(device: str) -> str:
    if device.startswith("ufm-"):
        return "host"
    if "-pdu" in device:
        return "pdu"
    return "storage"
