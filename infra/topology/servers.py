"""Servers and their NVSwitch domains: hostnames, scalable-unit slots, GPUs, NVSwitches, NICs.

`list_servers` expands node groups into server records in spec order; `add_node_internals`
adds each server's GPUs, NVSwitch chips and NICs to the plan graph. Inside a DGX/HGX
baseboard every GPU links to every NVSwitch chip; NVLink ports are spread evenly over the
chips (A100: 12 links over 6 chips; H100/H200: 18 over 4, as 5+4+4+5 on DGX H100).

Graph nodes added here: ``<host>/gpu<i>`` (kind ``gpu``), ``<host>/nvsw<i>`` (kind
``nvswitch``), ``<host>/<hca>`` (kind ``nic``, with ``rail``). Edges: ``nvlink`` (GPU to
NVSwitch, attribute ``links``) and ``pcie`` (GPU to the NIC of its rail).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from infra.catalog import Catalog, Node
from infra.spec import Spec
from infra.topology.model import PlanError

__all__ = ["ServerSeed", "add_node_internals", "list_servers"]


@dataclass(frozen=True, slots=True)
class ServerSeed:
    """A server before placement: name, group, catalog node and cluster index."""

    name: str
    group: str
    node: str
    index: int


def list_servers(spec: Spec) -> list[ServerSeed]:
    """Every server of the spec, in order; hostnames must be unique across groups."""
    seeds: list[ServerSeed] = []
    seen: dict[str, str] = {}
    for group in spec.node_groups:
        pattern = group.hostname_pattern
        for i in range(group.count):
            name = pattern.format(index=group.first_index + i)
            if name in seen:
                raise PlanError(
                    f"hostname {name} is produced by node groups {seen[name]!r} and {group.name!r}",
                    path="node_groups",
                    hint="use distinct hostname patterns",
                )
            seen[name] = group.name
            seeds.append(ServerSeed(name, group.name, group.node, len(seeds)))
    return seeds


def _nvlink_split(links: int, chips: int) -> list[int]:
    """NVLink ports per NVSwitch chip, spread evenly with the remainder on the outer chips."""
    base, extra = divmod(links, chips)
    counts = [base] * chips
    for k in range(extra):  # 18 over 4 -> 5, 4, 4, 5 (DGX H100)
        counts[k // 2 if k % 2 == 0 else chips - 1 - k // 2] += 1
    return counts


def add_node_internals(graph: nx.Graph[str], server: str, node: Node, catalog: Catalog) -> None:
    """Add one server's GPUs, NVSwitches and compute NICs, with NVLink and PCIe edges."""
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
