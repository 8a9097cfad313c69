"""Read ``iblinkinfo``, grouped by node (default) or one line per port (``-l``).

A port line is ``<local> ==( 4X 53.125 Gbps Active/ LinkUp)==> <remote> "desc" ( ... )``.
By default nodes are groups (``Switch: 0x<guid> desc:`` / ``CA: desc:``) and the remote end
is named by LID only, so cables are resolved once the whole dump is read, from the LIDs the
dump itself lists; with ``-l`` both ends carry their GUID and description, but not whether
they are a switch or an HCA: a node with more than two ports listed is a switch (no HCA has
more than two). An unconnected port (``[  ] "" ( )``) says nothing about cabling.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from infra.verify.model import (
    AGGREGATION_NODE,
    End,
    FabricBuilder,
    Kind,
    Source,
    guid,
    lanes,
    located,
    number,
    speed_name,
    unread_rate,
)

_HINT = "is this the output of iblinkinfo, cut or edited?"
MAX_HCA_PORTS = 2


@dataclass(frozen=True, slots=True)
class _Row:
    """One port line, before the remote LID (default format) is resolved."""

    kind: Kind | None
    guid: str | None  # the switch node GUID or HCA port GUID, when the line says it
    description: str
    lid: int
    port: int
    remote_guid: str | None
    remote_lid: int
    remote_port: int
    remote_description: str
    rate: tuple[str | None, str | None, str | None, str | None]  # width, speed, state, phys
    unreadable: str | None  # the width and speed as printed, when they cannot be read
    source: Source


def _numbers(text: str, source: Source) -> tuple[str | None, int, int]:
    """``0x..02  4  1[  ]`` or ``4  1[  ]`` -> (GUID or None, LID, port)."""
    words = text.split("[", 1)[0].split()
    node = guid(words.pop(0), source) if words and words[0].startswith("0x") else None
    if len(words) != 2:
        raise located(f"expected a LID and a port in {text.strip()!r}", source, _HINT)
    return node, number(words[0], source, "LID"), number(words[1], source, "port")


def _rate(text: str) -> tuple[tuple[str | None, str | None, str | None, str | None], str | None]:
    """``4X 53.125 Gbps Active/  LinkUp`` -> (("4x", "HDR", "Active", "LinkUp"), None).

    ``-p`` appends ``) (HOQ:.. VL_Stall:..``; an FDR10 link reads ``10.0 Gbps (FDR10)``. The
    second item is the width and speed as printed when they cannot be read (`unread_rate`).
    """
    head, _, physical = text.partition(") (HOQ")[0].rpartition("/")
    words = head.split()
    if "(FDR10)" in words:
        words = [w for w in words if w != "(FDR10)"]
        words[1:2] = ["10.3125"] if len(words) > 1 else []
    state = words.pop() if words else None
    width = lanes(words[0][:-1]) if words and words[0][-1:] in ("x", "X") else None
    speed = speed_name(words[1]) if len(words) > 1 else None
    unread = unread_rate(" ".join(words), width, speed)
    return (width, speed, state, physical.strip() or None), unread


def _row(
    line: str,
    source: Source,
    kind: Kind | None,
    group: tuple[str | None, str],
    unconnected: dict[str, set[int]],
) -> _Row | None:
    start, stop = line.find("==("), line.find(")==>")
    if start < 0 or stop < start:
        raise located(f"cannot read port line {line.strip()[:80]!r}", source, _HINT)
    local, remote = line[:start], line[stop + 4 :]
    description = group[1]
    if local.count('"') >= 2:
        first, last = local.find('"'), local.rfind('"')
        description = local[first + 1 : last].strip()
        local = local[:first] + local[last + 1 :]
    node, lid, port = _numbers(local, source)
    first, last = remote.find('"'), remote.rfind('"')
    if first < 0 or last == first:
        raise located(f"no remote description in {line.strip()[:80]!r}", source, _HINT)
    if not remote[:first].split("[", 1)[0].strip():
        if node is not None:  # -l: a switch shows its unconnected ports, an HCA has 1 or 2
            unconnected[node].add(port)
        return None
    r_node, r_lid, r_port = _numbers(remote[:first], source)
    return _Row(
        kind,
        node or group[0],
        description,
        lid,
        port,
        r_node,
        r_lid,
        r_port,
        remote[first + 1 : last],
        *_rate(line[start + 3 : stop]),
        source,
    )


def _group(line: str, source: Source) -> tuple[Kind, tuple[str | None, str]]:
    """``Switch: 0x<guid> desc:`` / ``CA: desc:`` -> the node the next lines belong to."""
    kind: Kind = "SW" if line.startswith("Switch:") else "CA"
    rest = line.partition(":")[2].strip().removesuffix(":")
    if kind == "CA":
        return kind, (None, rest)
    first, _, description = rest.partition(" ")
    return kind, (guid(first, source), description.strip())


def _rows(
    lines: list[str], file: str, build: FabricBuilder, unconnected: dict[str, set[int]]
) -> list[_Row]:
    rows: list[_Row] = []
    kind: Kind | None = None
    group: tuple[str | None, str] = (None, "")
    router = False
    for index, raw in enumerate(lines, 1):
        line = raw.rstrip()
        text = line.strip()
        if not text or text.startswith(("#", "ibwarn")):
            continue
        source = Source(file, index)
        if text.startswith(("Switch:", "CA:", "Router:")):
            router = text.startswith("Router:")
            if router:
                build.ignore(source, "router: routers are not in a railplan fabric")
            else:
                kind, group = _group(text, source)
            continue
        if router:
            continue
        row = _row(line, source, kind, group, unconnected)
        if row is not None:
            rows.append(row)
    return rows


def _kinds(rows: list[_Row], unconnected: dict[str, set[int]]) -> dict[str, Kind]:
    """GUID -> kind: from the group header, else by how many ports the dump lists."""
    ports: dict[str, set[int]] = defaultdict(set, {g: set(p) for g, p in unconnected.items()})
    kinds: dict[str, Kind] = {}
    for row in rows:
        if row.guid is not None:
            ports[row.guid].add(row.port)
            if row.kind is not None:
                kinds[row.guid] = row.kind
    for node, seen in ports.items():
        kinds.setdefault(node, "SW" if len(seen) > MAX_HCA_PORTS else "CA")
    return kinds


def _lids(rows: list[_Row]) -> dict[int, tuple[str, ...]]:
    """LID -> the GUIDs that hold it.

    A LID names one port in a subnet: a LID two nodes hold (an edited dump, or LIDs before
    the subnet manager assigned them) names neither, and a cable found by it is not guessed
    (the last one read used to win).
    """
    held: dict[int, dict[str, None]] = defaultdict(dict)
    for row in rows:
        if row.guid is not None:
            held[row.lid][row.guid] = None
    return {lid: tuple(guids) for lid, guids in held.items()}


def read_linkinfo(lines: list[str], file: str, build: FabricBuilder) -> None:
    """Add every node and cable of an iblinkinfo dump (either layout) to `build`."""
    unconnected: dict[str, set[int]] = defaultdict(set)
    rows = _rows(lines, file, build, unconnected)
    kinds = _kinds(rows, unconnected)
    by_lid = _lids(rows)
    for row in rows:
        if row.guid is None:
            raise located("a port line before any Switch: or CA: group", row.source, _HINT)
        kind = kinds[row.guid]
        build.node(
            kind,
            row.guid,
            row.description,
            row.source,
            lid=row.lid,
            port_guid=row.guid if kind == "CA" else None,
        )
        if AGGREGATION_NODE in row.remote_description:
            build.aggregation_node(End.seen(kind, row.guid, row.port), row.source)
            continue
        holders = by_lid.get(row.remote_lid, ()) if row.remote_guid is None else ()
        remote = row.remote_guid or (holders[0] if len(holders) == 1 else None)
        if remote is None:
            where = f"held by {len(holders)} nodes" if holders else "not listed"
            build.ignore(
                row.source,
                f"remote LID {row.remote_lid} is {where} in this dump "
                "(iblinkinfo -l names it by GUID)",
            )
            continue
        r_kind = kinds.get(remote, "CA")
        ends = (End.seen(kind, row.guid, row.port), End.seen(r_kind, remote, row.remote_port))
        build.link(
            ends,
            (row.description, row.remote_description),
            row.source,
            *row.rate,
            unreadable=row.unreadable,
        )
