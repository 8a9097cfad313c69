"""Names for what discovery saw: a `Fabric` (GUIDs and ports) as the plan names devices.

A switch is named by its NodeDescription (``MF0;<name>:<model>/U1`` or the plain name) or the
node-name map; its ports keep their numbers. An HCA port is named ``<host> <device>``, as
rdma-ndd sets it by default (``%h %d``) and railplan's rendered node-name map writes it; the
host's domain is dropped and ``gpu01-mlx5_0`` or ``gpu01:mlx5_0`` are taken as well. The plan
names a server's end of a cable by the server and the HCA device (``gpu01``, ``mlx5_0``), so
that is what an HCA end becomes. An HCA still carrying the firmware's default description
keeps its GUID as its name and is listed as unnamed, for `compare` to place by its leaf port.
"""

from __future__ import annotations

import re

from infra.verify.model import End, Fabric, Link, Node
from infra.verify.seen import NamedEnd, Seen, SeenConflict, SeenLink, SeenPort

__all__ = ["conflicts", "hca_name", "named", "resolve"]

# "<host> <device>": the device is the last word, an RDMA device name such as mlx5_3, or
# HCA-<n> as some sites set it (``node019 HCA-1``).
_HCA_NAME = re.compile(
    r"^(?P<host>[^\s:]+?)(?:[\s:]+|-)(?P<device>mlx[0-9]+_[0-9]+|HCA-[0-9]+|ib[a-z0-9_]+)\Z"
)  # ASCII digits: \d would also match "٣", which no RDMA device name has
_DOWN_STATES = frozenset({"down", "polling", "init", "armed", "disabled"})


def hca_name(node: Node) -> tuple[str, str] | None:
    """(host, device) of a named HCA (``gpu01 mlx5_0``, ``gpu01-mlx5_0``), else None."""
    if node.kind != "CA" or node.unnamed:
        return None
    match = _HCA_NAME.match((node.name or node.description).strip())
    return None if match is None else (match["host"].split(".", 1)[0], match["device"])


def named(end: End, node: Node | None) -> NamedEnd:
    """The plan's name of one end: (switch, port number) or (server, HCA device)."""
    if node is None:
        return NamedEnd(end.guid, str(end.port))
    if node.kind == "SW" or node.unnamed:
        return NamedEnd(node.guid if node.unnamed else (node.name or node.guid), str(end.port))
    host = hca_name(node)
    if host is None:
        return NamedEnd((node.name or node.description).strip(), str(end.port))
    return NamedEnd(*host)


def _state(link: Link) -> str:
    """The link's state for `compare`: "" when up or not said, else what the tool printed."""
    for state in (link.state, link.physical):
        if state and state.lower() in _DOWN_STATES:
            return state
    return ""


def resolve(fabric: Fabric) -> Seen:
    """The seen links of ``fabric`` under the plan's names, and its unnamed HCAs."""
    links: list[SeenLink] = []
    ports: list[SeenPort] = []
    cables: set[tuple[tuple[NamedEnd, int], tuple[NamedEnd, int]]] = set()
    for link in fabric.links:
        a, b = named(link.a, fabric.node_for(link.a)), named(link.b, fabric.node_for(link.b))
        ends = (a, link.a.port), (b, link.b.port)
        cable = ends if ends[0] <= ends[1] else (ends[1], ends[0])
        if cable in cables:
            # The same ends and port numbers: one cable whose HCA one dump names by its node
            # GUID and another by its port GUID. Other links between the same ends are
            # cables too, and `compare` reports them.
            continue
        cables.add(cable)
        source = f"{link.source.file}:{link.source.line}"
        state = _state(link)
        if state:
            # a port that trains no further than Polling or Init carries no traffic
            ports += [SeenPort(a, state, source), SeenPort(b, state, source)]
            continue
        width, speed, unread = link.width or "", link.speed or "", link.unreadable or ""
        links.append(SeenLink(a, b, width, speed, "", source, unread))
    unnamed = tuple(
        sorted((n.guid, n.description) for n in fabric.nodes if n.kind == "CA" and n.unnamed)
    )
    return Seen(tuple(links), tuple(ports), unnamed, len(cables), conflicts(fabric))


def conflicts(fabric: Fabric) -> tuple[SeenConflict, ...]:
    """The ports ``fabric`` saw with two peers (`Fabric.conflicts`), under the plan's names."""
    found = []
    for conflict in fabric.conflicts:
        first, second = conflict.peers()
        link = conflict.second
        port = named(conflict.port, fabric.node_for(conflict.port))
        source = f"{link.source.file}:{link.source.line}"
        width, speed = link.width or "", link.speed or ""
        seen = SeenLink(port, named(second, fabric.node_for(second)), width, speed, "", source)
        where = f"{conflict.first.source.file}:{conflict.first.source.line}"
        found.append(SeenConflict(seen, named(first, fabric.node_for(first)), where))
    return tuple(found)
