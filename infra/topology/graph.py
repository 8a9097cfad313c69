"""`plan_graph(plan, catalog)`: the plan as a networkx graph, built only when asked.

Nodes: racks (kind ``rack``), servers (``server``), their GPUs ``<host>/gpu<i>`` (``gpu``),
NVSwitch chips ``<host>/nvsw<i>`` (``nvswitch``) and compute NICs ``<host>/<hca>`` (``nic``,
with ``rail``), switches (``switch``), hosts (``host``: UFM, storage ports) and PDUs
(``pdu``). Edges: ``contains`` (rack to what it holds), ``nvlink`` (GPU to NVSwitch chip,
attribute ``links``), ``pcie`` (GPU to the NIC of its rail) and ``cable`` (one edge per pair
of devices, with the bundle's ``ports`` and ``cables``; a compute NIC's cable starts at the
NIC). Inside a DGX/HGX baseboard every GPU links to every NVSwitch chip, NVLink ports spread
evenly (A100: 12 links over 6 chips; H100/H200: 18 over 4, as 5+4+4+5 on DGX H100).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.catalog import Catalog, Node
from infra.topology.model import Plan

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["plan_graph"]


def _nvlink_split(links: int, chips: int) -> list[int]:
    """NVLink ports per NVSwitch chip, spread evenly with the remainder on the outer chips."""
    base, extra = divmod(links, chips)
    counts = [base] * chips
    for k in range(extra):  # 18 over 4 -> 5, 4, 4, 5 (DGX H100)
        counts[k // 2 if k % 2 == 0 else chips - 1 - k // 2] += 1
    return counts


def _add_node_internals(graph: nx.Graph[str], server: str, node: Node, catalog: Catalog) -> None:
    """One server's GPUs, NVSwitch chips and compute NICs, with NVLink and PCIe edges."""
    gpu = catalog.gpus[node.gpu]
    gpus = [f"{server}/gpu{i}" for i in range(node.gpus)]
    graph.add_nodes_from(gpus, kind="gpu", server=server)
    if node.nvswitches:
        chips = [f"{server}/nvsw{i}" for i in range(node.nvswitches)]
        graph.add_nodes_from(chips, kind="nvswitch", server=server)
        split = _nvlink_split(gpu.nvlink_links, node.nvswitches)
        graph.add_edges_from(
            (g, c, {"kind": "nvlink", "links": n})
            for g in gpus
            for c, n in zip(chips, split, strict=True)
        )
    for rail, hca in enumerate(node.compute_hcas):
        nic = f"{server}/{hca}"
        graph.add_node(nic, kind="nic", server=server, rail=rail, device=hca)
        if rail < len(gpus):
            graph.add_edge(gpus[rail], nic, kind="pcie")


def _add_devices(g: nx.Graph[str], plan: Plan, catalog: Catalog) -> None:
    g.add_nodes_from((r.name, {"kind": "rack", "role": r.kind}) for r in plan.racks)
    for s in plan.servers:
        g.add_node(s.name, kind="server", group=s.group, node=s.node, su=s.su, rack=s.rack)
        _add_node_internals(g, s.name, catalog.nodes[s.node], catalog)
    for sw in plan.switches:
        g.add_node(sw.name, kind="switch", fabric=sw.fabric, tier=sw.tier, model=sw.model)
    g.add_nodes_from((h.name, {"kind": "host", "role": h.role, "rack": h.rack}) for h in plan.hosts)
    g.add_nodes_from((p.name, {"kind": "pdu", "rack": p.rack, "feed": p.feed}) for p in plan.pdus)
    for rack in plan.racks:
        for device in (*rack.servers, *rack.switches, *rack.hosts, *rack.pdus):
            g.add_edge(rack.name, device, kind="contains")


def plan_graph(plan: Plan, catalog: Catalog) -> nx.Graph[str]:
    """The plan as a graph (schema in the module docstring)."""
    import networkx as nx  # here: planning never needs it, and it is slow to import

    g: nx.Graph[str] = nx.Graph()
    _add_devices(g, plan, catalog)
    nics = {(s.name, h) for s in plan.servers for h in s.hcas}
    bundles: dict[tuple[str, str], dict[str, Any]] = {}
    for c in plan.cables:
        a = f"{c.a}/{c.a_port}" if c.fabric == "compute" and (c.a, c.a_port) in nics else c.a
        bundle = bundles.get((a, c.b))
        if bundle is None:
            bundles[(a, c.b)] = {
                "kind": "cable",
                "fabric": c.fabric,
                "tier": c.tier,
                "gbps": c.gbps,
                "ports": [(c.a_port, c.b_port)],
                "cables": [c.id],
            }
        else:
            bundle["ports"].append((c.a_port, c.b_port))
            bundle["cables"].append(c.id)
    g.add_edges_from((a, b, attrs) for (a, b), attrs in bundles.items())
    return g
