"""Read ``ibnetdiscover -p`` (``--ports``): one line per port.

``CA  9  1 0x...0a 4x HDR - SW  6  2 0x...03 ( 'gpu04 mlx5_0' - 'leaf-02' )`` is a cable:
kind, LID, port, GUID (an HCA's port GUID, a switch's node GUID), width and speed of the local
port, then the same for the remote one and both descriptions. A line without the ``- <remote>``
part (or with ``???``) is an unconnected port and says nothing about cabling. Every port line
ends with its description (``'leaf-02'``, or the cable's ``( 'a' - 'b' )``): a line without it
was cut, and is refused where it stands rather than read as a node with a GUID cut short.
"""

from __future__ import annotations

from infra.errors import DiscoveredError
from infra.verify.model import (
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

_KINDS: dict[str, Kind] = {"CA": "CA", "SW": "SW"}
_HINT = "is this the output of ibnetdiscover -p, cut or edited?"


def _descriptions(text: str) -> tuple[str, str]:
    """``'a' - 'b'`` -> ("a", "b"); one description for an unconnected port."""
    inner = text.strip().strip("()").strip()
    left, sep, right = inner.partition("' - '")
    if not sep:
        return inner.strip("'"), ""
    return left.removeprefix("'"), right.removesuffix("'")


def _side(words: list[str], source: Source) -> tuple[Kind, int, int, str]:
    kind = _KINDS.get(words[0])
    if kind is None:
        raise located(f"{words[0]!r} is not CA or SW", source, _HINT)
    lid = number(words[1], source, "LID")
    return kind, lid, number(words[2], source, "port"), guid(words[3], source)


def _cut_short(line: str, source: Source, ending: str) -> DiscoveredError:
    """The error for a port line without the description ibnetdiscover -p ends it with.

    The dump was cut inside the line: read as it stands, a GUID cut short is another node.
    """
    what = "cable's" if ending.startswith("a cable") else "port's"
    return located(
        f"the {what} line is cut short: {line[-40:]!r}",
        source,
        f"ibnetdiscover -p ends the line of {ending}: was the dump cut?",
    )


def read_ports(lines: list[str], file: str, build: FabricBuilder) -> None:
    """Add every node and cable of an ``ibnetdiscover -p`` dump to `build`."""
    for index, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(("#", "ibwarn")):
            continue
        source = Source(file, index)
        quote = line.find("'")
        body = line[:quote] if quote >= 0 else line
        words = body.replace("(", " ").split()
        if words and words[0] in ("RT", "Rt"):
            build.ignore(source, "router port: routers are not in a railplan fabric")
            continue
        if len(words) < 4:
            raise located(f"cannot read port line {line[:80]!r}", source, _HINT)
        kind, lid, port, node = _side(words, source)
        descs = _descriptions(line[quote:]) if quote >= 0 else ("", "")
        connected = "-" in words and "???" not in words[4:]
        if "-" not in words and (quote < 0 or not line.endswith("'")):
            raise _cut_short(line, source, "an unconnected port with ... 'desc'")
        build.node(kind, node, descs[0], source, lid=lid, port_guid=node if kind == "CA" else None)
        if not connected:
            continue  # an unconnected port
        dash = words.index("-")
        if len(words) != dash + 5:
            raise located(f"cannot read the remote port in {line[:80]!r}", source, _HINT)
        if quote < 0 or not line.endswith(")"):  # the tool ends a cable with ( 'a' - 'b' )
            raise _cut_short(line, source, "a cable with ( 'desc' - 'desc' )")
        r_kind, r_lid, r_port, r_node = _side(words[dash + 1 :], source)
        build.node(
            r_kind,
            r_node,
            descs[1],
            source,
            lid=r_lid,
            port_guid=r_node if r_kind == "CA" else None,
        )
        rate = words[4:dash]
        width = lanes(rate[0][:-1]) if rate and rate[0][-1:] in ("x", "X") else None
        speed = speed_name(rate[1]) if len(rate) > 1 else None
        ends = (End.seen(kind, node, port), End.seen(r_kind, r_node, r_port))
        unread = unread_rate(" ".join(rate), width, speed)
        build.link(ends, descs, source, width, speed, unreadable=unread)
