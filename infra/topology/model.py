"""Typed views of a planned cluster: servers, switches, cables, racks and fabric summaries.

The `Plan` is what renderers and the budget model consume. It holds a networkx graph (see
`infra.topology.plan` for its node and edge schema) and flat, ordered views of the same
facts, so a renderer never walks the graph to list cables. Everything is immutable and
ordered deterministically (servers by index, switches by name, cables by fabric, tier, end A).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import networkx as nx

from infra.errors import RailplanError

Tier = Literal["node_leaf", "leaf_spine", "spine_core"]
FabricName = Literal["compute", "storage", "inband", "oob"]


class PlanError(RailplanError):
    """The spec cannot be turned into a plan (too big for the fabric, cannot be placed, ...)."""


@dataclass(frozen=True, slots=True)
class Server:
    """One GPU server.

    Attributes:
        name: hostname (from the group's pattern).
        group: node group name.
        node: catalog node id.
        index: position in the cluster, 0-based, in spec order.
        su: scalable unit (1-based) on the compute fabric, 0 without one.
        slot: server slot in its SU (1-based), 0 without a compute fabric.
        rack: rack name.
        rack_unit: lowest rack unit the server occupies (1 = bottom).
        mgmt_ip: in-band management address.
        bmc_ip: out-of-band (BMC) address.
        hcas: compute-fabric HCA device per rail (``mlx5_N``), for NCCL_IB_HCA.
    """

    name: str
    group: str
    node: str
    index: int
    su: int
    slot: int
    rack: str
    rack_unit: int
    mgmt_ip: str
    bmc_ip: str
    hcas: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch of any fabric.

    Attributes:
        name: switch hostname, e.g. ``ib0-leaf-su001-r3``.
        fabric: compute, storage, inband or oob.
        tier: leaf, spine or core.
        model: catalog switch id.
        plane: compute-fabric plane (0-based); 0 elsewhere.
        pod: pod (1-based) for spines of a three-tier fabric, else 0.
        su: scalable unit (1-based) for compute leaves, else 0.
        rail: rail for compute leaves, else -1.
        rack: rack name.
        ports: radix (logical ports).
        bmc_ip: management-port address on the out-of-band network.
    """

    name: str
    fabric: FabricName
    tier: str
    model: str
    plane: int
    pod: int
    su: int
    rail: int
    rack: str
    ports: int
    bmc_ip: str = ""


@dataclass(frozen=True, slots=True, order=True)
class Cable:
    """One cable: both ends with device and port, its fabric and tier, and its length class.

    Ports are strings so one field serves switch ports (``17``), HCAs (``mlx5_3``) and
    Ethernet/BMC ports (``bmc``). ``length_class`` is ``in-rack`` (same rack), ``row``
    (racks of the same SU or network row) or ``hall`` (anything else).
    """

    fabric: str
    tier: str
    a: str
    a_port: str
    b: str
    b_port: str
    gbps: float
    a_rack: str = ""
    b_rack: str = ""
    length_class: str = ""


@dataclass(frozen=True, slots=True)
class Rack:
    """One rack and what it holds."""

    name: str
    kind: Literal["compute", "network"]
    servers: tuple[str, ...]
    switches: tuple[str, ...]
    power_kw: float
    units_used: int
    pdus: int


@dataclass(frozen=True)
class FabricSummary:
    """Counts of one fabric, as `railplan plan --format json` reports them."""

    name: FabricName
    switch: str
    tiers: int
    planes: int
    leaf: int
    spine: int
    core: int
    cables: dict[str, int]
    oversubscription: float
    bisection_gbps: float
    radix: int
    pods: int = 0
    sus: int = 0


@dataclass
class Plan:
    """A planned cluster: the graph plus ordered views of servers, switches, cables, racks."""

    name: str
    graph: nx.Graph[str]
    servers: list[Server]
    switches: list[Switch]
    cables: list[Cable]
    racks: list[Rack]
    fabrics: dict[str, FabricSummary]
    gpus: int
    pkeys: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def power_kw(self) -> float:
        """IT power of everything planned (servers and switches at their maximum)."""
        return round(sum(r.power_kw for r in self.racks), 1)

    def switches_in(self, fabric: str, tier: str | None = None) -> list[Switch]:
        """Switches of one fabric (and tier), in name order."""
        return [s for s in self.switches if s.fabric == fabric and (tier is None or s.tier == tier)]

    def cables_in(self, fabric: str, tier: str | None = None) -> list[Cable]:
        """Cables of one fabric (and tier), in plan order."""
        return [c for c in self.cables if c.fabric == fabric and (tier is None or c.tier == tier)]
