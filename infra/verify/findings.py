"""The findings of the as-built check: one `Finding` per fault, and what each one says.

This module owns the faults a technician fixes and their wording (`infra.verify.compare`
decides which apply): the kinds (`KINDS`), a cable end placed where the plan puts it
(`Place`, found through `PlanIndex`), and one maker per kind, each giving both ends, what
the plan expects, what was found and the fix as a work order: a link below its planned
rate or not up, a rate that cannot be read, a swapped pair, a cable on the wrong rail,
switch or port, a missing cable, an unexpected one (or a port's second peer), an HCA
without a name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from infra.topology.model import Cable, Plan
from infra.verify.seen import NamedEnd, SeenConflict, SeenLink, link_gbps

__all__ = [
    "KINDS",
    "Finding",
    "Place",
    "PlanIndex",
    "down",
    "ends",
    "missing",
    "moved",
    "rate_faults",
    "second_peer",
    "swapped_pair",
    "unexpected",
    "unnamed",
    "unreadable",
]

KINDS = (
    "missing",
    "unexpected",
    "swapped_pair",
    "wrong_rail",
    "wrong_port",
    "wrong_switch",
    "degraded",
    "down",
    "device_missing",
    "unnamed",
    "unreadable_rate",
    "duplicate_lid",
)
UP_STATES = frozenset({"active", "linkup", ""})


@dataclass(frozen=True, slots=True)
class Place:
    """A cable end as the technician finds it: device, port, rack and unit (from the plan)."""

    device: str
    port: str
    rack: str | None = None
    rack_unit: int | None = None

    def text(self) -> str:
        """``gpu01 port mlx5_0 (gpu-su01-c1 U1)``, as a work order names it."""
        where = f" ({self.rack} U{self.rack_unit})" if self.rack else ""
        return f"{self.device} port {self.port}{where}" if self.port else f"{self.device}{where}"


@dataclass(frozen=True, slots=True)
class Finding:
    """One fault: its kind (`KINDS`), both ends, what the plan expects, what was found, the fix."""

    kind: str
    a: Place
    z: Place
    expected: str
    found: str
    fix: str

    def sort_key(self) -> tuple[str, int, str, str]:
        """Walking order: rack, unit, device, port of the near end."""
        return (self.a.rack or "~", self.a.rack_unit or 0, self.a.device, self.a.port)


@dataclass
class PlanIndex:
    """The plan's compute cables by end, and where each device stands."""

    plan: Plan
    cables: list[Cable]
    by_end: dict[NamedEnd, Cable] = field(default_factory=dict)
    places: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for cable in self.cables:
            self.by_end[NamedEnd(cable.a, cable.a_port)] = cable
            self.by_end[NamedEnd(cable.b, cable.b_port)] = cable
            self.places[cable.a] = (cable.a_rack, cable.a_unit)
            self.places[cable.b] = (cable.b_rack, cable.b_unit)

    def place(self, end: NamedEnd) -> Place:
        """Where the plan puts ``end``'s device (no rack for a device it does not cable)."""
        rack, unit = self.places.get(end.device, (None, None))
        return Place(end.device, end.port, rack, unit)

    def rail(self, switch: str) -> tuple[str | None, int | None] | None:
        """(SU, rail) of a compute leaf, or None for any other device."""
        try:
            sw = self.plan.switch(switch)
        except (KeyError, TypeError):
            return None
        return (sw.su, sw.rail) if sw.tier == "leaf" else None


def ends(cable: Cable) -> tuple[NamedEnd, NamedEnd]:
    """A cable's two ends, ``a`` first."""
    return NamedEnd(cable.a, cable.a_port), NamedEnd(cable.b, cable.b_port)


def rate_faults(index: PlanIndex, cable: Cable, link: SeenLink) -> list[Finding]:
    """A planned cable that is there: below its planned rate, or not up."""
    a, z = (index.place(e) for e in ends(cable))
    state = link.state.strip()
    if state.lower() not in UP_STATES:
        return [down(a, z, state)]
    if link.unreadable:
        return [unreadable(a, z, f"{cable.gbps:g} Gb/s", link.unreadable, link.source)]
    gbps = link_gbps(link.width, link.speed)
    if gbps is None or gbps >= cable.gbps:
        return []
    seen = f"{link.width}{link.speed} ({gbps:g} Gb/s)"
    return [
        Finding(
            "degraded",
            a,
            z,
            f"{cable.gbps:g} Gb/s",
            seen,
            f"reseat the cable between {a.text()} and {z.text()}; if it stays at {seen}, "
            "replace the cable or its transceivers",
        )
    ]


def unreadable(a: Place, z: Place, expected: str, printed: str, source: str) -> Finding:
    """A cable whose rate the dump prints in a form no tool prints (`unread_rate`).

    Not passed, by the plan check or the structure check: the field that would show it
    degraded (``1x``) is the one that cannot be read, so an edited or damaged dump would
    otherwise hide a slow link. ``printed``: the rate as the dump prints it; ``source``: its
    file:line.
    """
    where = f" ({source})" if source else ""
    return Finding(
        "unreadable_rate",
        a,
        z,
        expected,
        f"rate {printed!r}{where}, which cannot be read",
        f"read the rate of the cable between {a.text()} and {z.text()} again (iblinkinfo, "
        "or ibportstate on either port) and verify an unedited dump",
    )


def down(a: Place, z: Place, state: str) -> Finding:
    """A cable whose port is seen down, polling or initialising: ``state`` as seen."""
    return Finding(
        "down",
        a,
        z,
        "Active",
        state or "down",
        f"check the cable between {a.text()} and {z.text()} and both transceivers: "
        f"the port is {state or 'down'}",
    )


def swapped_pair(index: PlanIndex, cable: Cable, twin: Cable) -> Finding:
    """Two planned cables whose far ends are exchanged: one finding, not four."""
    a, b = ends(cable)
    ta, tb = ends(twin)
    pa, pb, pta, ptb = (index.place(e) for e in (a, b, ta, tb))
    if b.device == tb.device:  # the usual case: two cables crossed at one switch
        near, twin_near = f"{a.device} {a.port}", f"{ta.device} {ta.port}"
        return Finding(
            "swapped_pair",
            pa,
            pb,
            f"{b.device} port {b.port}: {near}, port {tb.port}: {twin_near}",
            f"port {b.port}: {twin_near}, port {tb.port}: {near}",
            f"at {b.device} exchange the cables in ports {b.port} and {tb.port}",
        )
    return Finding(
        "swapped_pair",
        pa,
        pb,
        f"{pa.text()} - {pb.text()}; {pta.text()} - {ptb.text()}",
        f"{pa.text()} - {ptb.text()}; {pta.text()} - {pb.text()}",
        f"exchange the far ends: {pa.text()} to {pb.text()}, {pta.text()} to {ptb.text()}",
    )


def moved(index: PlanIndex, cable: Cable, found: NamedEnd) -> Finding:
    """The near end of a planned cable reaches another port: wrong rail, switch or port."""
    a, b = ends(cable)
    pa, pb, pf = index.place(a), index.place(b), index.place(found)
    if found.device == b.device:
        kind = "wrong_port"
    else:
        planned, seen = index.rail(b.device), index.rail(found.device)
        same_su = planned is not None and seen is not None and planned[0] == seen[0]
        kind = "wrong_rail" if same_su and planned != seen else "wrong_switch"
    return Finding(
        kind,
        pa,
        pb,
        pb.text(),
        pf.text(),
        f"move the cable of {pa.text()} from {pf.text()} to {pb.text()}",
    )


def missing(index: PlanIndex, cable: Cable) -> Finding:
    """A planned cable with no link and neither end seen down."""
    a, b = (index.place(e) for e in ends(cable))
    return Finding(
        "missing",
        a,
        b,
        f"{cable.gbps:g} Gb/s {cable.medium} cable",
        "no link",
        f"install a {cable.gbps:g} Gb/s {cable.medium} cable from {a.text()} to {b.text()}",
    )


def unexpected(index: PlanIndex, link: SeenLink, *, again: bool | SeenConflict = False) -> Finding:
    """A seen link the plan does not have; ``again``: a second one between the same two ends.

    A `SeenConflict` for ``again``: the link gives a port a second peer (`second_peer`).
    """
    if isinstance(again, SeenConflict):
        return second_peer(index.place, again)
    a, b = sorted((link.a, link.b))
    pa, pb = index.place(a), index.place(b)
    rate = f" ({link.width}{link.speed})" if link.width else ""
    if again:
        where = f" at {link.source}" if link.source else ""
        return Finding(
            "unexpected",
            pa,
            pb,
            "one cable" if _planned(index, a, b) else "no cable",
            f"a second link{rate}{where}",
            f"two ports report a cable between {pa.text()} and {pb.text()}: find the one"
            f"{where} (the dump names it by GUID and port) and remove its cable",
        )
    return Finding(
        "unexpected",
        pa,
        pb,
        "no cable",
        f"a link{rate}",
        f"remove the cable between {pa.text()} and {pb.text()} (not in the plan)",
    )


def second_peer(place: Callable[[NamedEnd], Place], conflict: SeenConflict) -> Finding:
    """A port the dumps give two peers: one `unexpected` finding naming both dump lines."""
    link = conflict.link
    port, second, first = place(link.a), place(link.b), place(conflict.first)
    rate = f" ({link.width}{link.speed})" if link.width else ""
    return Finding(
        "unexpected",
        port,
        second,
        "one cable",
        f"a second link{rate} at {link.source}",
        f"{port.text()} holds one cable, and the dumps give it two peers: {first.text()} at "
        f"{conflict.first_source} and {second.text()} at {link.source}; see which one is "
        "cabled there, move or remove the other, and discover again",
    )


def _planned(index: PlanIndex, a: NamedEnd, b: NamedEnd) -> bool:
    cable = index.by_end.get(a)
    return cable is not None and b in ends(cable)


def unnamed(index: PlanIndex, guid: str, description: str, planned: NamedEnd | None) -> Finding:
    """An HCA known by GUID only; ``planned``: the end the plan cables to its switch port."""
    where = index.place(planned) if planned is not None else Place("", "")
    guess = f", at the plan's {where.text()}" if planned is not None else ""
    return Finding(
        "unnamed",
        Place(guid, ""),
        where,
        "a NodeDescription that names the server",
        f"{description!r}{guess}",
        f"set the node description of HCA {guid} (rdma-ndd, or "
        "/sys/class/infiniband/<dev>/node_desc), or add it to the node-name map",
    )
