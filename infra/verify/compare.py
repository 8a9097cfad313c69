"""The as-built check: a discovered InfiniBand fabric, names resolved, against the plan's cables.

`compare(plan, seen)` takes the links a discovery tool reported (each end already named as
the plan names devices: NodeDescription or a node-name map, resolved by the caller) and the
compute fabric's planned cables, and returns one `Finding` per fault a technician fixes:
a missing cable, an unexpected one, two cables whose far ends are exchanged (one swap, not
four findings), a server cable on the leaf of another rail, on the right switch but the wrong
port, or on another switch; a link below the planned rate; a port seen down or polling; a
device with none of its planned cables; an HCA that reports no name; a planned cable whose
rate the dump prints in a form that cannot be read. This module owns the matching (which
planned cable each seen link is, which fault each unmatched one is, how many are listed);
the records it reads are `infra.verify.seen`, the findings and their work orders
`infra.verify.findings`. A pure function, linear in the number of cables.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from infra.topology.model import Cable, Plan
from infra.verify.findings import (
    Finding,
    Place,
    PlanIndex,
    down,
    ends,
    missing,
    moved,
    rate_faults,
    swapped_pair,
    unexpected,
    unnamed,
)
from infra.verify.seen import NamedEnd, Seen, SeenConflict, SeenLink, SeenPort

__all__ = [
    "LISTED",
    "Compared",
    "compare",
    "compare_listed",
    "listed",
    "placer",
]

# Findings of one kind the dump alone can multiply (a cable to a switch the plan does not
# have, an HCA without a name) listed at most; the rest are counted. The plan bounds every
# other kind. A thousand is more than a shift fixes; after those, verify again.
LISTED = 1000


Pair = tuple[NamedEnd, NamedEnd]


def pair(one: NamedEnd, two: NamedEnd) -> Pair:
    """A cable's two ends in sorted order: the key of a cable whichever end is named first.

    A tuple, not a frozenset: a fabric of a million cables keeps one key for each.
    """
    return (one, two) if one <= two else (two, one)


def placer(plan: Plan) -> Callable[[NamedEnd], Place]:
    """Where the plan puts a device: `Place` with its rack and unit, for other checks' findings."""
    return PlanIndex(plan, plan.cables_in("compute")).place


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
    index = PlanIndex(plan, plan.cables_in("compute"))
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
        a, b = ends(cable)
        planned = links.get(pair(a, b))
        if planned is not None:
            used.add(pair(a, b))
            findings.extend(rate_faults(index, cable, planned))
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
    findings += [unexpected(index, link, again=again) for link, again in first]
    found = listed(sorted(findings, key=Finding.sort_key), ("unnamed",), most)
    return Compared(found.findings, {**found.not_listed, **({"unexpected": more} if more else {})})


Stray = tuple[SeenLink, bool | SeenConflict]  # a link, and: a second one / a port's second peer


def _first(index: PlanIndex, strays: list[Stray], most: int | None) -> tuple[list[Stray], int]:
    """The ``most`` unexpected links first in walking order, and how many more there are."""
    if most is None or len(strays) <= most:
        return strays, 0

    def near(stray: Stray) -> tuple[str, int, str, str]:
        place = index.place(min(stray[0].a, stray[0].b))
        return (place.rack or "~", place.rack_unit or 0, place.device, place.port)

    return heapq.nsmallest(most, strays, key=near), len(strays) - most


def _infer_unnamed(index: PlanIndex, seen: Seen) -> tuple[list[SeenLink], list[Finding]]:
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
            a, b = ends(cable)
            planned = a if far == b else b
            link = replace(link, a=planned, b=far)
            named.add(near.device)
            findings.append(unnamed(index, near.device, descriptions[near.device], planned))
            break
        links.append(link)
    for guid in sorted(set(descriptions) - named):
        findings.append(unnamed(index, guid, descriptions[guid], None))
    return links, findings


def _absent_devices(
    index: PlanIndex,
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


def _misplaced(
    index: PlanIndex,
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
        a, b = ends(cable)
        twin = _swap_twin(index, cable, peer)
        if twin is not None:
            swapped |= {cable.id, twin.id}
            used |= {pair(a, peer[a]), pair(peer[b], b)}
            findings.append(swapped_pair(index, cable, twin))
            continue
        found = peer.get(a)
        if found is not None:
            used.add(pair(a, found))
            findings.append(moved(index, cable, found))
        elif a in states or b in states:
            state = states.get(a) or states.get(b) or ""
            findings.append(down(index.place(a), index.place(b), state))
        else:
            findings.append(missing(index, cable))
    return findings


def _swap_twin(index: PlanIndex, cable: Cable, peer: dict[NamedEnd, NamedEnd]) -> Cable | None:
    """The planned cable whose far end this one's near end reaches, and back: a swapped pair."""
    a, b = ends(cable)
    far = peer.get(a)
    if far is None or far == b:
        return None
    twin = index.by_end.get(far)
    if twin is None or twin is cable:
        return None
    ta, tb = ends(twin)
    near = ta if far == tb else tb
    return twin if peer.get(near) == b else None
