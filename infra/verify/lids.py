"""Ports the dumps give one LID: a `duplicate_lid` finding for each LID two devices hold.

The subnet manager gives every switch one LID (its port 0) and every HCA port its own; routing
tables forward by LID, so a LID two ports hold reaches one of them (which one depends on the
switch) and the other is cut off for what is sent to it. It happens when two subnet managers
run as masters of one fabric, or a LID was pinned by hand (opensm's guid2lid file), and the
cables look right, so the plan check alone passes it. LID 0 is no LID (a port not yet swept)
and is not compared. One physical port can be named twice (by its node GUID in an
``ibnetdiscover`` topology, by its port GUID in ``-p`` and ``iblinkinfo``): holders that are
one port are one holder.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from infra.verify.findings import Finding, Place
from infra.verify.model import Fabric, Node
from infra.verify.resolve import hca_name
from infra.verify.seen import NamedEnd

__all__ = ["duplicate_lids"]

_FIX = (
    "each port needs a LID of its own: run one master subnet manager (sminfo names it), "
    "remove LIDs pinned by hand (opensm's guid2lid file), and sweep again (ibdiagnet lists "
    "duplicate LIDs)"
)


def duplicate_lids(fabric: Fabric, place: Callable[[NamedEnd], Place]) -> list[Finding]:
    """One `duplicate_lid` finding per LID held by more than one port, in LID order."""
    holders: dict[int, dict[object, Node]] = defaultdict(dict)
    alias = {guid: node.guid for node in fabric.nodes for guid in node.port_guids}
    for node in fabric.nodes:
        if node.lid:  # None (not printed) or 0 (not swept): no LID to compare
            holders[node.lid].setdefault(_identity(node, alias), node)
    return [
        _finding(lid, list(held.values()), place)
        for lid, held in sorted(holders.items())
        if len(held) > 1
    ]


def _identity(node: Node, alias: dict[str, str]) -> object:
    """What makes two sightings one port: a named HCA's (host, device), else its node GUID."""
    named = hca_name(node)
    if named is not None:
        return named
    return alias.get(node.guid, node.guid)


def _end(node: Node) -> NamedEnd:
    named = hca_name(node)
    if named is not None:
        return NamedEnd(*named)
    return NamedEnd(node.guid if node.unnamed else (node.name or node.guid), "")


def _finding(lid: int, held: list[Node], place: Callable[[NamedEnd], Place]) -> Finding:
    first, second = place(_end(held[0])), place(_end(held[1]))
    more = f" and {len(held) - 2:,} more" if len(held) > 2 else ""
    return Finding(
        "duplicate_lid",
        first,
        second,
        "a LID of its own on each port",
        f"LID {lid} on {first.text()} ({held[0].source.file}:{held[0].source.line}) and "
        f"{second.text()} ({held[1].source.file}:{held[1].source.line}){more}",
        _FIX,
    )
