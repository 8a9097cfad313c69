"""Racks: servers and switches placed by units, power and rack class, every device at a unit.

Compute racks: each SU's servers fill their own racks in slot order (``<su>-c1``, ``-c2``,
...), as many per rack as the group's rack class allows by power and units; servers off the
compute fabric fill ``<group>-cNN`` racks the same way. Network racks: an SU's leaves go to
its own network racks (``<su>-n1``, placed after the racks of a full SU in the SU's row);
spines, cores, storage and in-band switches and the UFM host go to shared ``core-nNN``
racks in the ``core`` row, one zone per network (and per upper tiers when built for growth);
a zone may keep a block of rack numbers for its size at ``max_sus`` (`RackPlanner.reserve`). Every rack keeps its top unit and the power for an out-of-band
switch (when the spec has one) and holds no more management ports than that switch has.
Devices stack from unit 1 upwards; PDUs are zero-U, alternating feeds A and B.
A device too large or too hot for any rack of its class gets a rack of its own, over budget,
which lint RP055 reports (and `railplan plan` exits 1 on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from infra.catalog import Catalog
from infra.spec import Spec
from infra.spec.site import Rack as RackClass
from infra.topology.model import Feed, Pdu, RackKind

__all__ = ["OOB_UNITS", "RackFill", "RackPlanner", "pdu_records", "servers_per_rack"]

OOB_UNITS = 1  # the rack's out-of-band management switch


@dataclass
class RackFill:
    """A rack being filled: contents, units and power so far."""

    name: str
    kind: RackKind
    rack_class: str
    row: str
    position: int
    spec: RackClass
    units_used: int = 0
    power_kw: float = 0.0
    power_bound_kw: float = 0.0  # counted at a PSU rating (an upper bound)
    power_typical_kw: float = 0.0  # counted at a typical draw (the maximum is higher)
    servers: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    pdus: int = 0
    server_slots: int = 0  # servers a full rack of this kind holds (compute racks)
    # Switches in unit order, None for units kept for a leaf a node group's growth adds:
    # the rack's OOB ports follow these slots, so the leaf comes without moving a cable.
    switch_slots: list[str | None] = field(default_factory=list)
    kept_kw: float = 0.0  # power kept for those leaves (not drawn yet)

    @property
    def devices(self) -> int:
        """Management ports the rack's OOB switch serves (kept switch slots included)."""
        kept = self.switch_slots.count(None)
        return len(self.servers) + len(self.switches) + len(self.hosts) + self.pdus + kept


def _oob_kw(spec: Spec, catalog: Catalog) -> float:
    management = spec.fabrics.management
    if management is None or management.oob_switch not in catalog.switches:
        return 0.0
    return catalog.switches[management.oob_switch].max_power_w / 1000


def servers_per_rack(spec: Spec, catalog: Catalog, node_id: str, rack: RackClass) -> int:
    """How many servers of ``node_id`` one rack of class ``rack`` holds; 0 if none fits."""
    node = catalog.nodes[node_id]
    budget = rack.power_kw - _oob_kw(spec, catalog)
    by_power = int(budget // node.max_power_kw) if node.max_power_kw else 10**9
    by_space = (rack.units - OOB_UNITS) // node.rack_units if node.rack_units else 10**9
    return max(0, min(by_power, by_space))


def _add_power(rack: RackFill, units: int, kw: float, basis: str) -> None:
    rack.units_used += units
    rack.power_kw += kw
    if basis == "psu_rating":
        rack.power_bound_kw += kw
    elif basis == "typical":
        rack.power_typical_kw += kw


def pdu_records(racks: Sequence[RackFill]) -> list[Pdu]:
    """Zero-U PDUs of every rack, feeds alternating A and B."""
    feeds: tuple[Feed, Feed] = ("A", "B")
    return [
        Pdu(f"{r.name}-pdu{j + 1}", r.name, feeds[j % 2], None)
        for r in racks
        for j in range(r.pdus)
    ]


class RackPlanner:
    """Places servers, switches and hosts; keeps every rack within its class's budget."""

    def __init__(self, spec: Spec, catalog: Catalog) -> None:
        self.spec, self.catalog = spec, catalog
        self.oob_kw = _oob_kw(spec, catalog)
        management = spec.fabrics.management
        self.oob_ports = catalog.switches[management.oob_switch].ports if management else 10**9
        self.racks: dict[str, RackFill] = {}
        self.where: dict[str, tuple[str, int]] = {}  # device -> (rack, lowest unit)
        self.network_class = spec.site.network_rack_class or "default"
        self._open: dict[str, RackFill] = {}  # zone -> network rack being filled
        self._row_claimed: dict[str, int] = {}  # row -> highest rack number taken or kept
        self._zone_numbers: dict[str, list[int]] = {}  # zone -> its racks' numbers
        self._reserved: dict[str, int] = {}  # zone -> network racks kept for its growth
        self._capacities: dict[tuple[str, str], int] = {}  # (node, rack class) -> servers

    def reserve(self, zone: str, racks: int) -> None:
        """Keep ``racks`` consecutive rack numbers of the row for ``zone``'s growth.

        The zone's first rack opens the block; other zones of the row number after it, so
        the zone growing into its block renames and moves nothing of theirs.
        """
        self._reserved[zone] = racks

    def _rack_number(self, zone: str, row: str) -> int:
        mine = self._zone_numbers.setdefault(zone, [])
        if mine and len(mine) < self._reserved.get(zone, 0):
            number = mine[-1] + 1  # inside the zone's kept block
        else:
            number = self._row_claimed.get(row, 0) + 1
            kept = self._reserved.get(zone, 0) if not mine else 0
            self._row_claimed[row] = number - 1 + max(1, kept)
        mine.append(number)
        return number

    def _pdus(self, rack: RackClass) -> int:
        return int(self.catalog.site["pdu_per_rack_default"]) if rack.pdus is None else rack.pdus

    def _rack(
        self, name: str, kind: RackKind, class_name: str, row: str, position: int
    ) -> RackFill:
        rack = self.racks.get(name)
        if rack is None:
            spec = self.spec.site.rack_class(class_name)
            rack = RackFill(name, kind, class_name, row, position, spec, pdus=self._pdus(spec))
            self.racks[name] = rack
        return rack

    def _put(self, rack: RackFill, device: str, units: int, kw: float, basis: str = "max") -> None:
        self.where[device] = (rack.name, rack.units_used + 1)
        _add_power(rack, units, kw, basis)

    def place_server(
        self, name: str, node_id: str, class_name: str, row: str, rack_name: str, position: int
    ) -> None:
        """Put a server into ``rack_name`` (the caller's capacity arithmetic chose it)."""
        node = self.catalog.nodes[node_id]
        rack = self._rack(rack_name, "compute", class_name, row, position)
        key = (node_id, class_name)
        if key not in self._capacities:  # worked out once per node and class, not per server
            self._capacities[key] = self.capacity(node_id, class_name)
        rack.server_slots = self._capacities[key]
        self._put(rack, name, node.rack_units, node.max_power_kw)
        rack.servers.append(name)

    def capacity(self, node_id: str, class_name: str) -> int:
        """Servers of ``node_id`` per rack of the class; 1 when not even one fits.

        A server too large or too hot for its class still gets a rack (of its own), over
        budget: lint RP055 reports it and `railplan plan` exits 1, with the plan to look at.
        """
        rack = self.spec.site.rack_class(class_name)
        capacity = servers_per_rack(self.spec, self.catalog, node_id, rack)
        return max(1, min(capacity, self.oob_ports - self._pdus(rack)))

    def place_switch(self, name: str, model: str, zone: str, row: str, first: int) -> None:
        """Put a switch into the open network rack of ``zone`` (a new one when it is full)."""
        sw = self.catalog.switches[model]
        kw = sw.max_power_w / 1000
        rack = self._network_rack(zone, row, first, sw.rack_units, kw)
        self._put(rack, name, sw.rack_units, kw, sw.power_basis)
        rack.switches.append(name)
        rack.switch_slots.append(name)

    def keep_switch(self, model: str, zone: str, row: str, first: int) -> None:
        """Keep a switch's units, power and OOB port free in ``zone`` (a leaf growth adds)."""
        sw = self.catalog.switches[model]
        kw = sw.max_power_w / 1000
        rack = self._network_rack(zone, row, first, sw.rack_units, kw)
        rack.units_used += sw.rack_units
        rack.kept_kw += kw
        rack.switch_slots.append(None)

    def place_host(self, name: str, units: int, kw: float, zone: str, row: str) -> None:
        """Put a non-GPU host (the UFM appliance) into the open network rack of ``zone``."""
        rack = self._network_rack(zone, row, 1, units, kw)
        self._put(rack, name, units, kw)
        rack.hosts.append(name)

    def _network_rack(self, zone: str, row: str, first: int, units: int, kw: float) -> RackFill:
        spec = self.spec.site.rack_class(self.network_class)
        room = spec.units - OOB_UNITS
        power = spec.power_kw - self.oob_kw
        rack = self._open.get(zone)
        full = (
            rack is not None
            and rack.devices > 0
            and (
                rack.units_used + units > room
                or rack.power_kw + rack.kept_kw + kw > power + 1e-9
                or rack.devices + 1 > self.oob_ports
            )
        )
        if rack is None or full:
            # A device too large for any network rack gets one of its own, over budget
            # (lint RP055, `plan` exits 1).
            number = self._rack_number(zone, row)
            name = f"{row}-n{number}" if row != "core" else f"core-n{number:02d}"
            rack = self._rack(name, "network", self.network_class, row, first + number - 1)
            self._open[zone] = rack
        return rack

    def add_oob(self, rack_name: str, switch: str, model: str) -> None:
        """Put an OOB switch into the unit its rack kept free at the top."""
        sw = self.catalog.switches[model]
        rack = self.racks[rack_name]
        self.where[switch] = (rack.name, rack.spec.units - sw.rack_units + 1)
        _add_power(rack, sw.rack_units, sw.max_power_w / 1000, sw.power_basis)
        rack.switches.append(switch)

    def by_row(self) -> dict[str, list[RackFill]]:
        """Every rack, grouped by row, each row's racks in the order they were opened.

        One pass over the racks for callers that visit each row's racks: a filter over
        every rack per row was quadratic (512 rows, 4,600 racks at 16,384 servers).
        """
        rows: dict[str, list[RackFill]] = {}
        for rack in self.racks.values():
            rows.setdefault(rack.row, []).append(rack)
        return rows

    def network_racks_for(self, switches: int, model: str) -> int:
        """Network racks ``switches`` switches of ``model`` fill (for address strides)."""
        sw = self.catalog.switches[model]
        spec = self.spec.site.rack_class(self.network_class)
        per_rack = min(
            (spec.units - OOB_UNITS) // sw.rack_units,
            int((spec.power_kw - self.oob_kw) // (sw.max_power_w / 1000)),
            max(1, self.oob_ports - self._pdus(spec) - 1),
        )
        return math.ceil(switches / max(1, per_rack))
