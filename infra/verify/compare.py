"""The as-built check: a discovered InfiniBand fabric, names resolved, against the plan's cables.

`compare(plan, seen)` takes the links a discovery tool reported (each end already named as
the plan names devices: NodeDescription or a node-name map, resolved by the caller) and the
compute fabric's planned cables, and returns one `Finding` per fault a technician fixes:
a missing cable, an unexpected one, two cables whose far ends are exchanged (one swap, not
four findings), a server cable on the leaf of another rail, on the right switch but the wrong
port, or on another switch; a link below the planned rate; a port seen down or polling; a
device with none of its planned cables; an HCA that reports no name; a planned cable whose
rate the dump prints in a form that cannot be read. Each finding carries
both ends' device, port, rack and rack unit from the plan and the fix as a work order.
A pure function, linear in the number of cables.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from infra.topology.model import Cable, Plan

__all__ = [
    "KINDS",
    "LISTED",
    "Compared",
    "Finding",
    "NamedEnd",
    "Place",
    "Seen",
    "SeenConflict",
    "SeenLink",
    "SeenPort",
    "compare",
    "compare_listed",
    "link_gbps",
    "listed",
    "placer",
    "second_peer",
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
)
# Data rate per lane in Gb/s as the IB specification names the speeds (ibnetdiscover prints
# "4xHDR"): 4x HDR is the 200 Gb/s port, 2x NDR the 200 Gb/s half of a split NDR port.
LANE_GBPS = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
UP_STATES = frozenset({"active", "linkup", ""})
# Findings of one kind the dump alone can multiply (a cable to a switch the plan does not
# have, an HCA without a name) listed at most; the rest are counted. The plan bounds every
# other kind. A thousand is more than a shift fixes; after those, verify again.
LISTED = 1000
_LANES = frozenset({"1", "2", "4", "8", "12"})  # ASCII only: int() would also take "²"


@dataclass(frozen=True, slots=True, order=True)
class NamedEnd:
    """One end of a cable: a device as the plan names it and its port (``17``, ``mlx5_3``)."""

    device: str
    port: str


@dataclass(frozen=True, slots=True)
class SeenLink:
    """A link a discovery tool reported: both ends, width (``4x``), speed (``HDR``), state."""

    a: NamedEnd
    b: NamedEnd
    width: str = ""
    speed: str = ""
    state: str = ""
    source: str = ""  # file:line, for the reader
    unreadable: str = ""  # the width and speed as printed, when the parser could not read them


@dataclass(frozen=True, slots=True)
class SeenPort:
    """A port seen without a link: Down, Polling (no peer answers), Init."""

    end: NamedEnd
    state: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class SeenConflict:
    """A port the dumps show cabled to two peers (`infra.verify.model.Conflict`), named.

    ``link`` is the second sighting (``a`` the port, ``b`` its second peer, ``source`` where);
    ``first`` the peer the first sighting gave it, seen at ``first_source``. Not a link.
    """

    link: SeenLink
    first: NamedEnd
    first_source: str


@dataclass(frozen=True)
class Seen:
    """What discovery saw: links, lonely ports, and HCAs without a name (their description)."""

    links: tuple[SeenLink, ...]
    ports: tuple[SeenPort, ...] = ()
    unnamed: tuple[tuple[str, str], ...] = ()  # (GUID, NodeDescription)
    cables: int = 0  # distinct cables seen (a link, or a port down on one), each counted once
    conflicts: tuple[SeenConflict, ...] = ()  # ports seen with a second peer


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


def link_gbps(width: str, speed: str) -> float | None:
    """The data rate of ``4x`` ``HDR`` (200.0), or None when either is unknown."""
    lanes = width.lower().removesuffix("x")
    if lanes not in _LANES or speed.upper() not in LANE_GBPS:
        return None
    return int(lanes) * LANE_GBPS[speed.upper()]


@dataclass
class _Index:
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
        rack, unit = self.places.get(end.device, (None, None))
        return Place(end.device, end.port, rack, unit)

    def rail(self, switch: str) -> tuple[str | None, int | None] | None:
        """(SU, rail) of a compute leaf, or None for any other device."""
        try:
            sw = self.plan.switch(switch)
        except (KeyError, TypeError):
            return None
        return (sw.su, sw.rail) if sw.tier == "leaf" else None


Pair = tuple[NamedEnd, NamedEnd]


def pair(one: NamedEnd, two: NamedEnd) -> Pair:
    """A cable's two ends in sorted order: the key of a cable whichever end is named first.

    A tuple, not a frozenset: a fabric of a million cables keeps one key for each.
    """
    return (one, two) if one <= two else (two, one)


def placer(plan: Plan) -> Callable[[NamedEnd], Place]:
    """Where the plan puts a device: `Place` with its rack and unit, for other checks' findings."""
    return _Index(plan, plan.cables_in("compute")).place


def _ends(cable: Cable) -> tuple[NamedEnd, NamedEnd]:
    return NamedEnd(cable.a, cable.a_port), NamedEnd(cable.b, cable.b_port)


@dataclass(frozen=True)
class Compared:
    """The listed findings in walking order, and how many of each kind were not listed."""

    findings: list[Finding]
    not_listed: dict[str, int]


def compare(plan: Plan, seen: Seen) -> list[Finding]:
    """Every fault of the seen compute fabric against the plan, in walking order (rack, unit)."""
    return compare_listed(plan, seen, None).findings


def listed(findings: list[Finding], kinds: Iterable[str], most: int | None) -> Compared:
    """The first ``most`` findings (walking order) of each of ``kinds``, the others counted."""
    if most is None:
        return Compared(findings, {})
    capped, kept = frozenset(kinds), []
    counts: dict[str, int] = defaultdict(int)
    for finding in findings:
        counts[finding.kind] += 1
        if finding.kind not in capped or counts[finding.kind] <= most:
            kept.append(finding)
    over = {kind: counts[kind] - most for kind in sorted(capped) if counts[kind] > most}
    return Compared(kept, over)


def compare_listed(plan: Plan, seen: Seen, most: int | None = LISTED) -> Compared:
    """`compare`, listing at most ``most`` unexpected and unnamed findings (`LISTED`).

    The unexpected ones past ``most`` are counted, never made: a dump of a million stray
    cables costs a count, not a million findings.
    """
    index = _Index(plan, plan.cables_in("compute"))
    resolved, findings = _infer_unnamed(index, seen)
    peer: dict[NamedEnd, NamedEnd] = {}
    links: dict[Pair, SeenLink] = {}
    extra: list[SeenLink] = []
    for link in resolved:
        if link.a == link.b:
            continue  # a self-loop is not a cable between two planned ends
        key = pair(link.a, link.b)
        if key in links:  # another cable between the same two ends: the plan has one at most
            extra.append(link)
            continue
        peer[link.a], peer[link.b] = link.b, link.a
        links[key] = link
    absent = _absent_devices(index, peer, seen.ports, findings)
    unmatched: list[Cable] = []
    used: set[Pair] = set()
    for cable in index.cables:
        a, b = _ends(cable)
        planned = links.get(pair(a, b))
        if planned is not None:
            used.add(pair(a, b))
            findings.extend(_rate(index, cable, planned))
        elif cable.a not in absent and cable.b not in absent:
            unmatched.append(cable)
    findings.extend(_misplaced(index, unmatched, peer, seen.ports, used))
    strays = [
        (link, False)
        for key, link in links.items()
        if key not in used and not ({link.a.device, link.b.device} & absent)
    ]
    doubled = [(conflict.link, conflict) for conflict in seen.conflicts]
    first, more = _first(index, [*strays, *((link, True) for link in extra), *doubled], most)
    findings += [_unexpected(index, link, again=again) for link, again in first]
    found = listed(sorted(findings, key=Finding.sort_key), ("unnamed",), most)
    return Compared(found.findings, {**found.not_listed, **({"unexpected": more} if more else {})})


Stray = tuple[SeenLink, bool | SeenConflict]  # a link, and: a second one / a port's second peer


def _first(index: _Index, strays: list[Stray], most: int | None) -> tuple[list[Stray], int]:
    """The ``most`` unexpected links first in walking order, and how many more there are."""
    if most is None or len(strays) <= most:
        return strays, 0

    def near(stray: Stray) -> tuple[str, int, str, str]:
        place = index.place(min(stray[0].a, stray[0].b))
        return (place.rack or "~", place.rack_unit or 0, place.device, place.port)

    return heapq.nsmallest(most, strays, key=near), len(strays) - most


def _infer_unnamed(index: _Index, seen: Seen) -> tuple[list[SeenLink], list[Finding]]:
    """Name an unnamed HCA by the switch port it reaches, where the plan puts a cable there.

    A port reporting the default description (``MT4129 ConnectX7 Mellanox Technologies``)
    is known by GUID only; the leaf port at its other end says which server and HCA the plan
    expects, so the cable is checked as that one and the name is the finding.
    """
    descriptions = dict(seen.unnamed)
    links, findings, named = [], [], set()
    for link in seen.links:
        for near, far in ((link.a, link.b), (link.b, link.a)):
            cable = index.by_end.get(far)
            if near.device not in descriptions or cable is None:
                continue
            a, b = _ends(cable)
            planned = a if far == b else b
            link = replace(link, a=planned, b=far)
            named.add(near.device)
            findings.append(_unnamed(index, near.device, descriptions[near.device], planned))
            break
        links.append(link)
    for guid in sorted(set(descriptions) - named):
        findings.append(_unnamed(index, guid, descriptions[guid], None))
    return links, findings


def _absent_devices(
    index: _Index,
    peer: dict[NamedEnd, NamedEnd],
    ports: Iterable[SeenPort],
    findings: list[Finding],
) -> set[str]:
    """Planned devices with no port seen at all: one finding each instead of one per cable."""
    seen_devices = {end.device for end in peer} | {p.end.device for p in ports}
    planned: dict[str, int] = defaultdict(int)
    for cable in index.cables:
        planned[cable.a] += 1
        planned[cable.b] += 1
    absent = {device for device in planned if device not in seen_devices}
    for device in sorted(absent):
        place = index.place(NamedEnd(device, ""))
        where = index.rail(device)  # a leaf: say which rail of which SU goes without it
        role = f" (the leaf of rail {where[1]} in SU {where[0]})" if where and where[0] else ""
        findings.append(
            Finding(
                "device_missing",
                place,
                Place("", ""),
                f"{device}{role} with {planned[device]} cables",
                "not in the discovered fabric",
                f"power on {place.text()}, check its management and that it is cabled: "
                f"none of its {planned[device]} planned cables is seen",
            )
        )
    return absent


def _rate(index: _Index, cable: Cable, link: SeenLink) -> list[Finding]:
    """A planned cable that is there: below its planned rate, or not up."""
    a, z = (index.place(e) for e in _ends(cable))
    state = link.state.strip()
    if state.lower() not in UP_STATES:
        return [_down(a, z, state)]
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


def _down(a: Place, z: Place, state: str) -> Finding:
    return Finding(
        "down",
        a,
        z,
        "Active",
        state or "down",
        f"check the cable between {a.text()} and {z.text()} and both transceivers: "
        f"the port is {state or 'down'}",
    )


def _misplaced(
    index: _Index,
    unmatched: list[Cable],
    peer: dict[NamedEnd, NamedEnd],
    ports: Iterable[SeenPort],
    used: set[Pair],
) -> list[Finding]:
    """Classify planned cables not seen as planned: swapped, misplaced, down or missing."""
    states = {p.end: p.state for p in ports}
    findings: list[Finding] = []
    swapped: set[str] = set()
    for cable in unmatched:
        if cable.id in swapped:
            continue
        a, b = _ends(cable)
        twin = _swap_twin(index, cable, peer)
        if twin is not None:
            swapped |= {cable.id, twin.id}
            used |= {pair(a, peer[a]), pair(peer[b], b)}
            findings.append(_swap(index, cable, twin))
            continue
        found = peer.get(a)
        if found is not None:
            used.add(pair(a, found))
            findings.append(_moved(index, cable, found))
        elif a in states or b in states:
            state = states.get(a) or states.get(b) or ""
            findings.append(_down(index.place(a), index.place(b), state))
        else:
            findings.append(_missing(index, cable))
    return findings


def _swap_twin(index: _Index, cable: Cable, peer: dict[NamedEnd, NamedEnd]) -> Cable | None:
    """The planned cable whose far end this one's near end reaches, and back: a swapped pair."""
    a, b = _ends(cable)
    far = peer.get(a)
    if far is None or far == b:
        return None
    twin = index.by_end.get(far)
    if twin is None or twin is cable:
        return None
    ta, tb = _ends(twin)
    near = ta if far == tb else tb
    return twin if peer.get(near) == b else None


def _swap(index: _Index, cable: Cable, twin: Cable) -> Finding:
    a, b = _ends(cable)
    ta, tb = _ends(twin)
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


def _moved(index: _Index, cable: Cable, found: NamedEnd) -> Finding:
    """The near end of a planned cable reaches another port: wrong rail, switch or port."""
    a, b = _ends(cable)
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


def _missing(index: _Index, cable: Cable) -> Finding:
    a, b = (index.place(e) for e in _ends(cable))
    return Finding(
        "missing",
        a,
        b,
        f"{cable.gbps:g} Gb/s {cable.medium} cable",
        "no link",
        f"install a {cable.gbps:g} Gb/s {cable.medium} cable from {a.text()} to {b.text()}",
    )


def _unexpected(index: _Index, link: SeenLink, *, again: bool | SeenConflict = False) -> Finding:
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


def _planned(index: _Index, a: NamedEnd, b: NamedEnd) -> bool:
    cable = index.by_end.get(a)
    return cable is not None and b in _ends(cable)


def _unnamed(index: _Index, guid: str, description: str, planned: NamedEnd | None) -> Finding:
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
