"""Power as stated bounds: each device's typical and maximum draw, per rack and for the cluster.

The planner racks devices by their catalog maximum (`infra.topology`); the power budgets test a
band from typical to maximum draw (a PSU rating counted as the draw overstated the cluster's
power without saying it was an upper bound). Per device, the maximum is the catalog's
``max_power_kw`` / ``max_power_w`` (for QM87xx a PSU rating, an upper bound: the datasheet's
figure was not found); the typical draw is the catalog's ``typical_power_*`` where a source
states one, else the maximum (the band then has no width for that device, and the budget says
which devices lack a typical figure). ``site.device_power`` replaces either figure per catalog
id (a metered reading, a vendor's number), for the budgets only: racks stay placed by the
catalog maximum, the conservative choice.

>>> PowerBounds(10.0, 12.0).as_band()
(10.0, 12.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology import Plan

__all__ = ["PowerBounds", "cluster_bounds", "device_kw", "rack_bounds"]


@dataclass(frozen=True)
class PowerBounds:
    """Typical and maximum kW of some devices, and what the figures are made of."""

    typical_kw: float
    max_kw: float
    no_typical: tuple[str, ...] = ()  # catalog ids whose typical draw no source states
    psu_rated: tuple[str, ...] = ()  # catalog ids whose maximum is a PSU rating
    overridden: tuple[str, ...] = ()  # catalog ids the spec's site.device_power replaces
    psu_rated_kw: float = 0.0  # the part of max_kw that is PSU ratings

    def as_band(self) -> tuple[float, float]:
        """(typical, maximum) kW, rounded to watts."""
        return round(self.typical_kw, 3), round(self.max_kw, 3)

    def plus(self, other: PowerBounds) -> PowerBounds:
        """Both sets of devices together."""
        return PowerBounds(
            self.typical_kw + other.typical_kw,
            self.max_kw + other.max_kw,
            _union(self.no_typical, other.no_typical),
            _union(self.psu_rated, other.psu_rated),
            _union(self.overridden, other.overridden),
            self.psu_rated_kw + other.psu_rated_kw,
        )

    def caveats(self) -> str:
        """What the band is made of, in words (empty when every figure is sourced)."""
        parts = []
        if self.psu_rated:
            parts.append(
                f"{self.psu_rated_kw:,.1f} kW of the maximum is the PSU rating of "
                f"{', '.join(self.psu_rated)} (an upper bound, no sourced maximum)"
            )
        if self.no_typical:
            parts.append(f"no sourced typical draw for {', '.join(self.no_typical)}")
        if self.overridden:
            parts.append(f"site.device_power for {', '.join(self.overridden)}")
        return "; ".join(parts)


def _union(a: Iterable[str], b: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({*a, *b}))


def device_kw(spec: Spec, catalog: Catalog, device: str) -> PowerBounds:
    """Typical and maximum kW of one catalog node or switch, with the spec's override."""
    if device in catalog.nodes:
        node = catalog.nodes[device]
        typical, most = node.typical_power_kw, node.max_power_kw
        rated = False
    else:
        switch = catalog.switches[device]
        typical = switch.typical_power_w / 1000 if switch.typical_power_w else None
        most, rated = switch.max_power_w / 1000, switch.power_basis == "psu_rating"
    override = spec.site.device_power.get(device)
    if override is not None:
        most = override.max_kw or most
        typical = override.typical_kw or typical
        rated = rated and override.max_kw is None
    low = min(typical, most) if typical is not None else most
    return PowerBounds(
        low,
        most,
        () if typical is not None else (device,),
        (device,) if rated else (),
        (device,) if override is not None else (),
        most if rated else 0.0,
    )


def rack_bounds(spec: Spec, catalog: Catalog, plan: Plan) -> dict[str, PowerBounds]:
    """Bounds of every rack: its servers, switches and hosts (hosts at their planned kW)."""
    found: dict[str, PowerBounds] = {}
    for rack in plan.racks:
        total = PowerBounds(0.0, 0.0)
        for name in rack.servers:
            total = total.plus(device_kw(spec, catalog, plan.server(name).node))
        for name in rack.switches:
            total = total.plus(device_kw(spec, catalog, plan.switch(name).model))
        hosts = sum(h.power_kw for h in plan.hosts if h.name in rack.hosts)
        found[rack.name] = total.plus(PowerBounds(hosts, hosts))
    return found


def cluster_bounds(spec: Spec, catalog: Catalog, plan: Plan, unracked_kw: float) -> PowerBounds:
    """Bounds of the whole cluster: every rack, plus the unracked servers' ``unracked_kw``."""
    total = PowerBounds(unracked_kw, unracked_kw)
    for bounds in rack_bounds(spec, catalog, plan).values():
        total = total.plus(bounds)
    return total
