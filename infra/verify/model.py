"""The typed result of reading discovered-fabric dumps, and the builder the parsers share.

A `Fabric` is what ibnetdiscover / iblinkinfo saw: `Node`s (switches and HCAs) and `Link`s
(cables, each between two `End`s), plus `Ignored` records for what was skipped on purpose
(self-loop cables, SHARP aggregation nodes) and the file and line every record came from.
An end is identified the way railplan's spec `guids:` and OpenSM's guid files identify
hardware: a switch by its node GUID, an HCA port by its port GUID (by its node GUID only when
the dump prints no port GUID). The parsers feed a `FabricBuilder`, which merges what several
lines or files say about one node, drops the second sighting of a cable (every tool prints a
cable from both ends) and records the ignored ones with a reason. A port holds one cable: a
port seen with a second, different peer (an edited dump, or dumps taken while a cable moved)
is a `Conflict`, kept apart from the links, for verify to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

from infra.digits import ascii_digits
from infra.errors import DiscoveredError, Position

Kind = Literal["CA", "SW"]
AGGREGATION_NODE = "Aggregation Node"  # SHARP's in-switch pseudo-HCA, on switch port 65
_VENDOR_DEFAULTS = ("Mellanox Technologies", "NVIDIA Technologies")
# iblinkinfo prints the per-lane signalling rate; ibnetdiscover names the generation.
_SPEED_NAMES = {
    "2.5": "SDR",
    "5.0": "DDR",
    "10.0": "QDR",
    "10.3125": "FDR10",
    "14.0625": "FDR",
    "25.78125": "EDR",
    "53.125": "HDR",
    "106.25": "NDR",
    "212.5": "XDR",
}
_SPEEDS = frozenset(_SPEED_NAMES.values())
_HEX = frozenset("0123456789abcdefABCDEF")
_GUIDS: dict[str, str] = {}  # printed form -> normalized; bounded by _GUID_CACHE
_GUID_CACHE = 200_000


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """Where a record came from: the dump's file name and 1-based line."""

    file: str
    line: int


@dataclass(frozen=True, slots=True, order=True)
class End:
    """One end of a cable: `guid` (switch node GUID or HCA port GUID) and port number."""

    guid: str
    port: int
    node_guid: str | None = None  # where the tool prints it (switches always)
    port_guid: str | None = None  # where the tool prints it (HCA ports)

    @classmethod
    def seen(cls, kind: Kind, printed: str, port: int) -> End:
        """An end as ibnetdiscover -p and iblinkinfo print it: one GUID, the node's or port's.

        Those tools print a switch's node GUID and an HCA's port GUID.
        """
        return (
            cls(printed, port, printed, None) if kind == "SW" else cls(printed, port, None, printed)
        )


@dataclass(frozen=True, slots=True)
class Link:
    """A cable the tool saw, ends in sorted order; None where the tool does not say."""

    a: End
    b: End
    width: str | None  # "4x", "2x" (a split port), ...
    speed: str | None  # "SDR" ... "NDR", "XDR"
    state: str | None  # "Active", "Down", "Polling", "Init", "Armed"
    physical: str | None  # "LinkUp", "Polling", "Disabled", ...
    source: Source
    unreadable: str | None = None  # the rate as printed when no tool prints it so (`unread_rate`)

    def key(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """The cable as ((guid, port), (guid, port)): equal across dump formats."""
        return (self.a.guid, self.a.port), (self.b.guid, self.b.port)


@dataclass(frozen=True, slots=True)
class Node:
    """A switch or HCA.

    `guid` is its node GUID, or its port GUID when no node GUID is known (ibnetdiscover -p
    and iblinkinfo print only port GUIDs for HCAs).
    """

    kind: Kind
    guid: str
    description: str  # the NodeDescription as printed
    name: str | None  # from a node-name map, an MF0; description or the description itself
    model: str | None  # from an MF0;<name>:<model>/U1 description
    unnamed: bool  # the firmware's default description ("MT4129 ConnectX7 Mellanox ...")
    ports: int | None
    lid: int | None
    port_guids: tuple[str, ...]
    source: Source


@dataclass(frozen=True, slots=True)
class Ignored:
    """Something skipped on purpose, and why."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """A port seen cabled to two different peers: `first` is kept as the link, `second` not."""

    port: End  # the port both sightings name
    first: Link
    second: Link

    def peers(self) -> tuple[End, End]:
        """The port's peer in the first sighting and in the second."""
        return _far(self.first, self.port), _far(self.second, self.port)


def _far(link: Link, near: End) -> End:
    return link.b if (link.a.guid, link.a.port) == (near.guid, near.port) else link.a


@dataclass(frozen=True)
class Fabric:
    """Everything the dumps said, sorted: nodes by GUID, links by their ends."""

    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    ignored: tuple[Ignored, ...]
    sources: tuple[str, ...]
    sharp: tuple[str, ...] = ()  # node GUIDs of the switches a SHARP aggregation node sits on
    conflicts: tuple[Conflict, ...] = ()  # ports seen with two peers, in dump order

    @cached_property
    def _by_guid(self) -> dict[str, Node]:
        index = {port: node for node in self.nodes for port in node.port_guids}
        return index | {node.guid: node for node in self.nodes}

    def node_for(self, end: End) -> Node | None:
        """The node an end belongs to (looked up by its GUID, then its node GUID)."""
        return self._by_guid.get(end.guid) or self._by_guid.get(end.node_guid or "")

    def edges(self) -> frozenset[tuple[tuple[str, int], tuple[str, int]]]:
        """Every cable as `Link.key`: compare fabrics read from different tools."""
        return frozenset(link.key() for link in self.links)


def guid(text: str, source: Source) -> str:
    """A GUID as "0x" and 16 lowercase hex digits (ibnetdiscover drops the 0x and zeros)."""
    known = _GUIDS.get(text)  # a dump names every GUID 2-4 times
    if known is not None:
        return known
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    if not digits or len(digits) > 16 or not _HEX.issuperset(digits):
        raise located(f"{text!r} is not a GUID", source, "a GUID is up to 16 hex digits")
    if len(_GUIDS) > _GUID_CACHE:
        _GUIDS.clear()
    _GUIDS[text] = "0x" + digits.lower().rjust(16, "0")
    return _GUIDS[text]


# InfiniBand's field widths (IBA vol. 1, 14.2.5): a port number is 8 bits (a switch has at
# most 254 ports and port 0 is its management port), a LID 16 bits.
_LARGEST = {"port": 255, "port count": 255, "LID": 0xFFFF}
_WIDTHS = frozenset({"1", "2", "4", "8", "12"})  # lanes of a link: 1x, 2x (split), 4x, 8x, 12x


def number(text: str, source: Source, what: str) -> int:
    """A port number, port count or LID: ASCII digits, within what InfiniBand allows.

    Only ASCII: str.isdigit() and int() take ``²`` or ``٣`` (and int() ``1_0`` or ``+1``), and
    no tool prints them; a dump that holds one was edited, and says where.
    """
    largest = _LARGEST[what]
    if len(text) > 5 or not ascii_digits(text) or int(text) > largest:
        shown = text if len(text) <= 20 else text[:20] + "..."
        raise located(f"{what} {shown!r} is not a number from 0 to {largest}", source, None)
    return int(text)


def lanes(text: str) -> str | None:
    """``4x`` for the lanes "4" (ASCII digits only: 1, 2, 4, 8 or 12), else None (unknown)."""
    return f"{text}x" if text in _WIDTHS else None


def speed_name(text: str) -> str | None:
    """The generation ("HDR") for "HDR" or iblinkinfo's "53.125" (Gbps a lane), else None."""
    upper = text.upper()
    return upper if upper in _SPEEDS else _SPEED_NAMES.get(text)


def unread_rate(printed: str, width: str | None, speed: str | None) -> str | None:
    """The rate as printed when it is there but not read (``¹x``, ``0xHDR``, ``4xXDR9``).

    None when both width and speed were read, when nothing was printed, and for the tools'
    own word for a value they do not know (ibnetdiscover's ``???``): that says unknown, it
    is not an edit. `compare` reports an unreadable rate on a planned cable, so an edited
    or damaged field cannot hide a degraded link.

    >>> unread_rate("0xHDR", None, None), unread_rate("???", None, None)
    ('0xHDR', None)
    """
    words = printed.split()
    if (width is not None and speed is not None) or not words:
        return None
    if any(not word.strip("?") for word in words):
        return None
    return " ".join(words)


UNEDITED = "give the unedited output of ibnetdiscover [-p] or iblinkinfo [-l]"


def located(message: str, source: Source, hint: str | None) -> DiscoveredError:
    """The error for a line no parser understands, at its file and line (always a hint)."""
    return DiscoveredError(
        message, file=source.file, position=Position(source.line, 1), hint=hint or UNEDITED
    )


def describe(description: str) -> tuple[str | None, str | None, bool]:
    """(name, model, unnamed) from a NodeDescription.

    ``MF0;ib-leaf-01:MQM9700/U1`` (NVIDIA switches) gives name and model; a description
    ending in the vendor name is the firmware default ("MT4129 ConnectX7 Mellanox
    Technologies", "Quantum Mellanox Technologies"): nobody named the node.
    """
    text = description.strip()
    if text.startswith("MF0;"):
        name, _, rest = text[4:].partition(":")
        return (name or None), (rest.split("/", 1)[0] or None), not name
    if not text or text.endswith(_VENDOR_DEFAULTS):
        return None, None, True
    return text, None, False


@dataclass
class FabricBuilder:
    """Collects nodes, links and ignored records from one or more dumps."""

    nodes: dict[str, Node] = field(default_factory=dict)
    links: dict[tuple[tuple[str, int], tuple[str, int]], Link] = field(default_factory=dict)
    ignored: list[Ignored] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # GUID -> node-name map name
    named_at: dict[str, Source] = field(default_factory=dict)  # GUID -> the map line naming it
    sharp: set[str] = field(default_factory=set)  # switches with an aggregation node
    cables: int = 0  # sightings of a cable between two nodes, repeats included
    peers: dict[tuple[str, int], Link] = field(default_factory=dict)  # (guid, port) -> its link
    conflicts: list[Conflict] = field(default_factory=list)

    def ignore(self, source: Source, reason: str) -> None:
        """Record something skipped on purpose."""
        self.ignored.append(Ignored(source.file, source.line, reason))

    def aggregation_node(self, switch: End, source: Source) -> None:
        """A SHARP aggregation node on `switch`: no cable, but the structure check counts it."""
        self.sharp.add(switch.node_guid or switch.guid)
        self.ignore(source, "SHARP aggregation node: not a cable")

    def node(
        self,
        kind: Kind,
        node_guid: str,
        description: str,
        source: Source,
        *,
        ports: int | None = None,
        lid: int | None = None,
        port_guid: str | None = None,
    ) -> None:
        """Add a node, or fill in what an earlier sighting of it did not know."""
        if AGGREGATION_NODE in description:
            return  # SHARP's pseudo-HCA: its cable is recorded as ignored, see `link`
        old = self.nodes.get(node_guid)
        if old is None:
            name, model, unnamed = describe(description)
            guids: tuple[str, ...] = (port_guid,) if port_guid else ()
            self.nodes[node_guid] = Node(
                kind, node_guid, description, name, model, unnamed, ports, lid, guids, source
            )
            return
        if (port_guid is None or port_guid in old.port_guids) and (
            (old.ports is not None or ports is None) and (old.lid is not None or lid is None)
        ):
            return  # nothing new: the usual case, and the cheap one
        known = old.port_guids
        if port_guid and port_guid not in known:
            known = tuple(sorted((*known, port_guid)))
        self.nodes[node_guid] = replace(
            old,
            ports=old.ports if old.ports is not None else ports,
            lid=old.lid if old.lid is not None else lid,
            port_guids=known,
        )

    def link(
        self,
        ends: tuple[End, End],
        descriptions: tuple[str, str],
        source: Source,
        width: str | None,
        speed: str | None,
        state: str | None = None,
        physical: str | None = None,
        unreadable: str | None = None,
    ) -> None:
        """Add a cable seen from one end; a second sighting of the same cable is dropped.

        A cable that gives one of its ports a second, different peer is a `Conflict`, not a
        link: a port holds one cable, so one of the two sightings is wrong.
        """
        if AGGREGATION_NODE in descriptions[1]:
            self.aggregation_node(ends[0], source)
            return
        if AGGREGATION_NODE in descriptions[0]:
            self.aggregation_node(ends[1], source)
            return
        a, b = ends if (ends[0].guid, ends[0].port) <= (ends[1].guid, ends[1].port) else ends[::-1]
        if a.guid == b.guid or (a.node_guid is not None and a.node_guid == b.node_guid):
            self.ignore(source, f"self-loop cable {a.guid}[{a.port}] - [{b.port}]")
            return
        self.cables += 1
        key = ((a.guid, a.port), (b.guid, b.port))
        if key in self.links:
            return  # the same cable from its other end, or from another dump
        link = Link(a, b, width, speed, state, physical, source, unreadable)
        for at, end, other in ((key[0], a, b), (key[1], b, a)):
            first = self.peers.get(at)
            if first is not None and not self._same_port(_far(first, end), other):
                self.conflicts.append(Conflict(end, first, link))
                return
        self.links[key] = link
        self.peers.setdefault(key[0], link)  # the key's tuples: no new objects per end
        self.peers.setdefault(key[1], link)

    def _same_port(self, one: End, two: End) -> bool:
        """Whether two ends may be one HCA port under two GUIDs (the same end otherwise).

        ibnetdiscover's topology file without port GUIDs names an HCA port by its node GUID,
        ``-p`` and iblinkinfo by its port GUID: which of these name one port, the names tell
        (`resolve`), not the GUIDs. Two switch ports, or two ends that each print the same
        kind of GUID, are never one.
        """
        if (one.guid, one.port) == (two.guid, two.port):
            return True
        if one.port != two.port:
            return False
        for by_node, by_port in ((one, two), (two, one)):
            node = self.nodes.get(by_node.guid)
            if (
                by_node.port_guid is None
                and by_port.node_guid in (None, by_node.guid)
                and node is not None
                and node.kind == "CA"
            ):
                return True
        return False

    def fabric(self) -> Fabric:
        """The collected records, sorted, with node-name-map names applied."""
        nodes = []
        for node in sorted(self.nodes.values(), key=lambda n: n.guid):
            name = self.names.get(node.guid) or next(
                (self.names[g] for g in node.port_guids if g in self.names), None
            )
            nodes.append(replace(node, name=name, unnamed=False) if name else node)
        links = tuple(sorted(self.links.values(), key=Link.key))
        return Fabric(
            tuple(nodes),
            links,
            tuple(self.ignored),
            tuple(self.sources),
            tuple(sorted(self.sharp)),
            tuple(self.conflicts),
        )
