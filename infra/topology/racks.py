"""Rack placement: servers into compute racks by power, space and SU; switches into network racks.

Servers fill compute racks in spec order, as many per rack as both the power budget and the
rack units allow (one unit per rack is kept for the out-of-band switch). A new rack starts at
every scalable-unit boundary and whenever the node model changes, so an SU's servers sit in
its own racks. Switches go to network racks: each SU's leaf switches to that SU's network
rack, spines and cores (and other fabrics' switches) to shared network racks, filled by units
and power.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.model import PlanError

__all__ = ["RackFill", "place_servers", "servers_per_rack"]

OOB_UNITS = 1  # the rack's out-of-band management switch


@dataclass
class RackFill:
    """A rack being filled: contents, units and power so far."""

    name: str
    kind: Literal["compute", "network"]
    units: int
    power_kw: float
    zone: str = ""  # su<N> for an SU's compute and network racks, core for the rest
    servers: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)


def oob_reserve_kw(spec: Spec, catalog: Catalog) -> float:
    """Power every rack keeps for an out-of-band switch (when the spec has one)."""
    management = spec.fabrics.management
    if management is None or management.oob_switch not in catalog.switches:
        return 0.0
    return catalog.switches[management.oob_switch].max_power_w / 1000


def servers_per_rack(spec: Spec, catalog: Catalog, node_id: str) -> int:
    """How many servers of ``node_id`` one rack holds (power and space); 0 if none fits."""
    node, rack = catalog.nodes[node_id], spec.site.rack
    budget = rack.power_kw - oob_reserve_kw(spec, catalog)
    by_power = int(budget // node.max_power_kw) if node.max_power_kw else 10**9
    by_space = (rack.units - OOB_UNITS) // node.rack_units if node.rack_units else 10**9
    return max(0, min(by_power, by_space))


def place_servers(
    spec: Spec, catalog: Catalog, servers: Sequence[tuple[str, str, int]]
) -> tuple[dict[str, tuple[str, int]], list[RackFill]]:
    """Place ``(name, node_id, su)`` servers; return name -> (rack, unit) and the racks.

    Cloud instances (no rack units) get no rack.

    Raises:
        PlanError: a server fits in no rack (its power or height exceeds the rack's).
    """
    where: dict[str, tuple[str, int]] = {}
    racks: list[RackFill] = []
    current: RackFill | None = None
    last_key: tuple[str, int] | None = None
    for name, node_id, su in servers:
        node = catalog.nodes[node_id]
        if node.rack_units == 0:
            continue
        capacity = servers_per_rack(spec, catalog, node_id)
        if capacity == 0:
            raise PlanError(
                f"{node.name} fits in no rack ({node.max_power_kw:g} kW, {node.rack_units}U)",
                path="site.rack",
                hint="raise site.rack.power_kw or site.rack.units",
            )
        if current is None or (node_id, su) != last_key or len(current.servers) >= capacity:
            current = RackFill(f"c{len(racks) + 1:03d}", "compute", 0, 0.0, f"su{su}")
            racks.append(current)
            last_key = (node_id, su)
        where[name] = (current.name, current.units + 1)
        current.servers.append(name)
        current.units += node.rack_units
        current.power_kw += node.max_power_kw
    return where, racks


class NetworkRacks:
    """Allocates switches to network racks; each zone (an SU, or the core row) fills its own."""

    def __init__(self, spec: Spec, catalog: Catalog) -> None:
        self._rack = spec.site.rack
        self._catalog = catalog
        self._power = spec.site.rack.power_kw - oob_reserve_kw(spec, catalog)
        self._open: dict[str, RackFill] = {}
        self.racks: list[RackFill] = []

    def place(self, switch: str, model: str, zone: str) -> str:
        """Put ``switch`` (catalog ``model``) in the current rack of ``zone``; return the rack."""
        sw = self._catalog.switches[model]
        kw = sw.max_power_w / 1000
        rack = self._open.get(zone)
        room = self._rack.units - OOB_UNITS  # every rack keeps a unit for its OOB switch
        if rack is None or rack.units + sw.rack_units > room or (rack.power_kw + kw > self._power):
            rack = RackFill(f"n{len(self.racks) + 1:03d}", "network", 0, 0.0, zone)
            self.racks.append(rack)
            self._open[zone] = rack
        rack.switches.append(switch)
        rack.units += sw.rack_units
        rack.power_kw += kw
        return rack.name
