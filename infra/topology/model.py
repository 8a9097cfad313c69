"""The typed, frozen plan of a cluster: the contract every renderer builds on.

`Plan` holds flat, ordered, immutable views of everything planned: servers (with SU, slot,
rack, unit, addresses, HCA per rail and MIG layout per GPU), scalable units, switches, hosts
(the UFM appliance, storage-system ports), PDUs, cables (with a stable id, both ends' rack
and unit, medium and length) and racks (class, row, position, power and units against the
class's budget). Names are stable identities: they follow what a thing is (group and index,
SU and rail, pod and position), so growing a node group or appending one never renames what
was planned. Absent facts are ``None``, never a sentinel. The networkx graph is a function of
the plan (`infra.topology.graph.plan_graph`), built only when asked. ``plan.facts`` is what
the spec means (`ClusterFacts`, recorded in `infra.topology.facts_model` and built by
`infra.topology.facts.cluster_facts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from infra.errors import RailplanError
from infra.topology.facts_model import ClusterFacts, FabricGeometry, GroupMig

Tier = Literal["node_leaf", "leaf_spine", "spine_core"]
TIERS: tuple[Tier, ...] = ("node_leaf", "leaf_spine", "spine_core")
FabricName = Literal["compute", "storage", "inband", "oob"]
SwitchTier = Literal["leaf", "spine", "core"]
SWITCH_TIERS: tuple[SwitchTier, ...] = ("leaf", "spine", "core")
RackKind = Literal["compute", "network"]
Cooling = Literal["air", "liquid"]
Medium = Literal["dac", "aoc", "optical", "cat6"]
Feed = Literal["A", "B"]
HostRole = Literal["ufm", "storage"]
_T = TypeVar("_T")


class PlanError(RailplanError):
    """The spec cannot be turned into a plan (too big for the fabric, cannot be placed, ...)."""


@dataclass(frozen=True, slots=True)
class PlanWarning:
    """Something the plan could not do as a reference design would, with a stable code."""

    code: str  # e.g. "ufm-no-port"
    message: str
    path: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class Server:
    """One GPU server.

    Attributes:
        name: hostname (from the group's pattern and the server's index).
        group: node group name.
        node: catalog node id.
        index: the server's index in its group's hostname pattern (``first_index`` + n).
        su: scalable unit name on the compute fabric, or None without one.
        slot: server slot in its SU (1-based), or None.
        rack: rack name, or None for cloud instances.
        rack_unit: lowest rack unit the server occupies (1 = bottom), or None.
        mgmt_ip: in-band management address, or None when the CIDR ran out.
        bmc_ip: out-of-band (BMC) address, or None.
        hcas: compute-fabric HCA device per rail (``mlx5_N``), for NCCL_IB_HCA.
        mig: MIG layout name per GPU (index = GPU), None where MIG is disabled.
    """

    name: str
    group: str
    node: str
    index: int
    su: str | None
    slot: int | None
    rack: str | None
    rack_unit: int | None
    mgmt_ip: str | None
    bmc_ip: str | None
    hcas: tuple[str, ...]
    mig: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One node group on the plan: its SUs, rolling batch and MIG (`infra.topology.groups`).

    Attributes:
        name: node group name; index: its position in ``node_groups`` (for spec paths).
        node: catalog node id; gpus: GPUs per server; servers: servers in the group.
        sus: its scalable units in plan order (empty without a compute fabric).
        rolling_batch: servers per batch of a rolling change (one SU; the group if no SUs).
        job_deadline_s: how long one scheduled MIG change may run over every SU, or None.
    """

    name: str
    index: int
    node: str
    gpus: int
    servers: int
    sus: tuple[str, ...]
    rolling_batch: int
    mig: GroupMig
    job_deadline_s: int | None

    @property
    def mig_split(self) -> bool:
        """Whether a GPU of the group is MIG-split at any time, now or by schedule."""
        return self.mig.split


@dataclass(frozen=True, slots=True)
class ScalableUnit:
    """One scalable unit of the compute fabric: its servers' group, slots, leaves and racks.

    Every node group fills its own SUs (numbered from 1 per group), so an SU's name is
    ``<group>-suNN`` and growing one group never moves another group's servers.
    """

    name: str
    group: str
    number: int
    pod: int | None
    servers: tuple[str, ...]
    leaves: tuple[str, ...]
    racks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Switch:
    """One switch of any fabric.

    Attributes:
        name: switch hostname, e.g. ``ib0-leaf-gpu-su01-r3``.
        fabric: compute, storage, inband or oob.
        tier: leaf, spine or core.
        model: catalog switch id.
        plane: compute-fabric plane (0-based); 0 elsewhere.
        pod: pod (1-based) of a three-tier fabric's leaves and spines, else None.
        su: scalable unit of a compute leaf, else None.
        rail: rail of a compute leaf, else None (a single-switch fabric carries every rail).
        rack: rack name.
        rack_unit: lowest rack unit the switch occupies.
        units: rack units it occupies.
        ports: radix (logical ports).
        bmc_ip: management-port address on the out-of-band network, or None.
    """

    name: str
    fabric: FabricName
    tier: SwitchTier
    model: str
    plane: int
    pod: int | None
    su: str | None
    rail: int | None
    rack: str
    rack_unit: int
    units: int
    ports: int
    bmc_ip: str | None


@dataclass(frozen=True, slots=True)
class Host:
    """A non-GPU host the fabric plan cables: the UFM appliance or a storage-system port."""

    name: str
    role: HostRole
    rack: str | None  # storage systems stand in the storage vendor's racks: None
    rack_unit: int | None
    units: int
    power_kw: float
    bmc_ip: str | None


@dataclass(frozen=True, slots=True)
class Pdu:
    """One rack PDU (zero-U, vertical): its rack, power feed and management address."""

    name: str
    rack: str
    feed: Feed
    bmc_ip: str | None


@dataclass(frozen=True, slots=True)
class Cable:
    """One cable: a stable id, both ends (device, port, rack, unit), rate, medium, length.

    Ports are strings so one field serves switch ports (``17``), HCAs (``mlx5_3``) and
    Ethernet/BMC ports (``bmc``). ``id`` is ``<a device>:<a port>`` (a port holds one
    cable, so it is unique and survives growth). ``length_m`` is estimated from rack
    positions (`infra.topology.geometry`).
    """

    fabric: FabricName
    tier: Tier
    a: str
    a_port: str
    b: str
    b_port: str
    gbps: float
    a_rack: str | None
    a_unit: int | None
    b_rack: str | None
    b_unit: int | None
    medium: Medium
    length_m: float | None  # None when an end stands outside the planned racks

    @property
    def id(self) -> str:
        """``<a device>:<a port>``, made when asked.

        Not stored: a large plan has half a million cables and few readers of their ids.
        """
        return f"{self.a}:{self.a_port}"


@dataclass(frozen=True, slots=True)
class Rack:
    """One rack: class, place in the hall, contents and use against its class's budget.

    ``power_kw`` is the most the rack can draw (servers and switches at their budgeted
    maximum); ``power_bound_kw`` is the part of it that is only an upper bound (a PSU
    rating where the catalog knows no measured maximum), so the true draw may be lower;
    ``power_typical_kw`` the part counted at a typical draw (no sourced maximum), so the
    true maximum may be higher.
    """

    name: str
    kind: RackKind
    rack_class: str
    row: str
    position: int  # 1-based position in its row
    cooling: Cooling
    power_budget_kw: float
    units: int
    servers: tuple[str, ...]
    switches: tuple[str, ...]
    hosts: tuple[str, ...]
    pdus: tuple[str, ...]
    power_kw: float
    power_bound_kw: float
    power_typical_kw: float
    units_used: int


@dataclass(frozen=True, slots=True)
class TierUse:
    """Ports of one switch tier: in use against what its switches have."""

    tier: SwitchTier
    switches: int
    ports_used: int
    ports_total: int


@dataclass(frozen=True, slots=True)
class FabricSummary:
    """Counts of one fabric, as `railplan plan --format json` reports them.

    ``injection_gbps`` is every endpoint NIC's rate added up; ``bisection_gbps`` the
    bandwidth across the worst cut that splits the servers into two equal halves.
    ``lower_bound`` is the fewest switches any fat tree over the same leaves could have;
    ``built_for_sus`` the SUs the spines and cores are built for (``max_sus``), if set.
    """

    name: FabricName
    switch: str
    tiers: int
    planes: int
    pods: int
    sus: int
    radix: int
    port_gbps: float
    leaf: int
    spine: int
    core: int
    cables: Mapping[Tier, int]
    oversubscription: float
    injection_gbps: float
    bisection_gbps: float
    lower_bound: int
    port_use: tuple[TierUse, ...]
    built_for_sus: int | None = None  # fabrics.compute.max_sus: upper tiers sized for it
    geometry: FabricGeometry | None = None  # the compute fabric's shape (compute only)

    @property
    def switches(self) -> int:
        """All switches of the fabric."""
        return self.leaf + self.spine + self.core


@dataclass(frozen=True)
class Plan:
    """A planned cluster: ordered, immutable views of everything planned, with lookups."""

    name: str
    servers: tuple[Server, ...]
    sus: tuple[ScalableUnit, ...]
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    pdus: tuple[Pdu, ...]
    cables: tuple[Cable, ...]
    racks: tuple[Rack, ...]
    fabrics: Mapping[FabricName, FabricSummary]
    gpus: int
    pkeys: Mapping[str, str]
    warnings: tuple[PlanWarning, ...]
    groups: Mapping[str, GroupPlan]  # node groups, spec order
    # what the spec means (`infra.topology.facts`): later stages read it, not the spec
    facts: ClusterFacts
    _by_name: dict[str, object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, object] = {}
        for items in (self.servers, self.switches, self.hosts, self.pdus, self.racks):
            index.update((item.name, item) for item in items)
        object.__setattr__(self, "_by_name", index)

    @property
    def power_kw(self) -> float:
        """IT power of everything racked (servers and switches at their budgeted maximum)."""
        return round(sum(r.power_kw for r in self.racks), 1)

    @property
    def power_typical_kw(self) -> float:
        """The part of `power_kw` counted at a typical draw (the maximum may be higher)."""
        return round(sum(r.power_typical_kw for r in self.racks), 1)

    @property
    def power_bound_kw(self) -> float:
        """The part of `power_kw` that is only an upper bound (PSU ratings)."""
        return round(sum(r.power_bound_kw for r in self.racks), 1)

    def server(self, name: str) -> Server:
        """The server called ``name`` (KeyError if there is none)."""
        return self._typed(name, Server)

    def switch(self, name: str) -> Switch:
        """The switch called ``name``."""
        return self._typed(name, Switch)

    def rack(self, name: str) -> Rack:
        """The rack called ``name``."""
        return self._typed(name, Rack)

    def _typed(self, name: str, kind: type[_T]) -> _T:
        item = self._by_name.get(name)
        if not isinstance(item, kind):
            raise KeyError(f"no {kind.__name__.lower()} named {name!r} in the plan")
        return item

    def servers_in(self, group: str) -> tuple[Server, ...]:
        """Servers of one node group, in index order."""
        return tuple(s for s in self.servers if s.group == group)

    def switches_in(self, fabric: FabricName, tier: SwitchTier | None = None) -> list[Switch]:
        """Switches of one fabric (and tier), in plan order."""
        return [s for s in self.switches if s.fabric == fabric and (tier is None or s.tier == tier)]

    def cables_in(self, fabric: FabricName, tier: Tier | None = None) -> list[Cable]:
        """Cables of one fabric (and tier), in plan order."""
        return [c for c in self.cables if c.fabric == fabric and (tier is None or c.tier == tier)]
