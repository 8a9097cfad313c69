"""Read ``ibnetdiscover``'s default output, the topology file format.

One record per node: ``vendid=`` / ``devid=`` / ``sysimgguid=`` / ``switchguid=`` or
``caguid=`` lines, a header (``Switch 36 "S-<guid>" # "desc" enhanced port 0 lid 1 lmc 0``
or ``Ca 2 "H-<guid>" # "desc"``) and one line per connected port
(``[1](<port guid>) "S-<guid>"[17](<remote port guid>) # "desc" lid 3 4xHDR``). Lines are cut
with str.find/partition, not backtracking regexes, so a 100,000-line dump reads in a blink.
"""

from __future__ import annotations

from dataclasses import dataclass

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

_KINDS: dict[str, Kind] = {"Switch": "SW", "Ca": "CA"}
_KEYS = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")


@dataclass
class _Current:
    """The node whose port lines are being read."""

    kind: Kind | None = None  # None inside a router record, whose ports are skipped
    guid: str = ""
    description: str = ""


def _bracket(text: str, source: Source) -> tuple[int, str | None, str]:
    """``[17](98039b...) rest`` -> (17, port GUID or None, rest)."""
    close = text.find("]")
    if not text.startswith("[") or close < 0:
        raise located(f"expected a [port] in {text!r}", source, None)
    port = number(text[1:close].strip(), source, "port")
    rest = text[close + 1 :]
    if rest.startswith("[ext"):  # "[1][ext 3]": the front-panel number ibnetdiscover -m adds
        rest = rest[rest.find("]") + 1 :]
    port_guid = None
    rest = rest.lstrip()  # a remote HCA's GUID is printed as " (<guid>) " after its port
    if rest.startswith("("):
        end = rest.find(")")
        if end < 0:
            raise located(f"unclosed port GUID in {text!r}", source, None)
        port_guid = guid(rest[1:end], source)
        rest = rest[end + 1 :]
    return port, port_guid, rest.strip()


def _comment(text: str) -> tuple[str, list[str]]:
    """``# lid 5 lmc 0 "desc" lid 4 4xSDR`` -> ("desc", words after the description)."""
    first, last = text.find('"'), text.rfind('"')
    if first < 0 or last == first:
        return "", text.split()
    return text[first + 1 : last], text[last + 1 :].split()


def _header(line: str, source: Source, build: FabricBuilder) -> _Current:
    body, _, comment = line.partition("#")
    words = body.split()
    if len(words) != 3 or not words[2].startswith('"') or not words[2].endswith('"'):
        raise located(f"cannot read node header {line.strip()!r}", source, _HINT)
    if words[0] == "Rt":
        build.ignore(source, f"router {words[2]}: routers are not in a railplan fabric")
        return _Current(None, "router")
    kind, ports = _KINDS[words[0]], number(words[1], source, "port count")
    node_guid = guid(words[2].strip('"')[2:], source)  # "S-<guid>" / "H-<guid>"
    description, rest = _comment(comment)
    lid = number(rest[rest.index("lid") + 1], source, "LID") if "lid" in rest[:-1] else None
    build.node(kind, node_guid, description, source, ports=ports, lid=lid)
    return _Current(kind, node_guid, description)


def _port(line: str, source: Source, current: _Current, build: FabricBuilder) -> None:
    body, _, comment = line.partition("#")
    port, port_guid, rest = _bracket(body.strip(), source)
    if not rest.startswith('"') or rest.find('"', 1) < 0:
        raise located(f"cannot read port line {line.strip()!r}", source, _HINT)
    remote_id = rest[1 : rest.find('"', 1)]
    remote_port, remote_port_guid, _ = _bracket(rest[len(remote_id) + 2 :], source)
    description, words = _comment(comment)
    width, speed, unread = _rate(words)
    remote_guid = guid(remote_id[2:], source)
    remote_kind: Kind = "SW" if remote_id.startswith("S-") else "CA"
    local = _end(current.kind, current.guid, port, port_guid)
    remote = _end(remote_kind, remote_guid, remote_port, remote_port_guid)
    # the port line is where HCA port GUIDs and LIDs are printed (the Ca header has neither)
    if current.kind == "CA" and port_guid:
        build.node("CA", current.guid, current.description, source, port_guid=port_guid)
    lid = number(words[words.index("lid") + 1], source, "LID") if "lid" in words[:-1] else None
    r_port_guid = remote_port_guid if remote_kind == "CA" else None
    build.node(remote_kind, remote_guid, description, source, lid=lid, port_guid=r_port_guid)
    descriptions = (current.description, description)
    build.link((local, remote), descriptions, source, width, speed, unreadable=unread)


def _end(kind: Kind | None, node_guid: str, port: int, port_guid: str | None) -> End:
    identity = port_guid if kind == "CA" and port_guid else node_guid
    return End(identity, port, node_guid, port_guid if kind == "CA" else None)


def _rate(words: list[str]) -> tuple[str | None, str | None, str | None]:
    """``lid 3 4xHDR`` -> ("4x", "HDR", None); ``???`` -> (None, None, None).

    The rate is the last word of that form: ``-f`` adds ``s=.. w=.. v=..`` and Xsigo ports
    ``(scp)`` after it. The third item is the rate as printed when it cannot be read
    (`unread_rate`): ``4xXDR9`` (no such speed), or ``0xHDR``/``¹xHDR`` in the rate's place,
    the word after ``lid N``.
    """
    for word in reversed(words):
        width, x, speed = word.partition("x")
        if x and lanes(width):
            return (
                lanes(width),
                speed_name(speed),
                unread_rate(word, lanes(width), speed_name(speed)),
            )
    at = words.index("lid") + 2 if "lid" in words else len(words)
    printed = words[at] if at < len(words) else ""
    return None, None, unread_rate(printed, None, None)


_HINT = "is this ibnetdiscover's default output, cut or edited?"


def read_topology(lines: list[str], file: str, build: FabricBuilder) -> None:
    """Add every node and cable of an ibnetdiscover topology file to `build`."""
    current = _Current()
    for index, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(("#", "ibwarn")):
            continue
        source = Source(file, index)
        if line.startswith(_KEYS):
            continue  # the node GUID is read from the header's "S-<guid>" / "H-<guid>"
        word = line.split(None, 1)[0]
        if word in _KINDS or word == "Rt":
            current = _header(line, source, build)
        elif line.startswith("["):
            if current.kind is not None:
                _port(line, source, current, build)
            elif not current.guid:
                raise located("port line before any Switch or Ca header", source, _HINT)
        else:
            raise located(f"cannot read {line[:80]!r}", source, _HINT)
