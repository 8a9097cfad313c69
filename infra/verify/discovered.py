"""Read discovered-fabric dumps into one `Fabric`, telling the formats apart by content.

`parse_files` reads any mix of ``ibnetdiscover`` (default or ``-p``), ``iblinkinfo`` (default
or ``-l``) dumps and ``--node-name-map`` files, each through `read_dump` (bounded; regular
files and shell pipes only); `parse_text` reads one text. The
format is decided by the first line that only one format can have, after skipping tool noise
(blank lines, ``#`` comments, ``ibwarn:`` lines), never by the file name. A node-name map's
names replace the descriptions' names of the nodes whose GUID it lists. A line no parser
understands is a `DiscoveredError` carrying its file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from infra.errors import DiscoveredError, InputError, Position, shorten
from infra.reading import read_bounded
from infra.verify.linkinfo import read_linkinfo
from infra.verify.model import Fabric, FabricBuilder, Source, guid, located
from infra.verify.ports import read_ports
from infra.verify.topology_file import read_topology
from infra.wording import plural

Format = Literal["ibnetdiscover", "ibnetdiscover-ports", "iblinkinfo", "node-name-map"]
_TOPOLOGY_WORDS = (
    "vendid=",
    "devid=",
    "sysimgguid=",
    "switchguid=",
    "caguid=",
    "Switch\t",
    "Switch ",
    "Ca\t",
    "Ca ",
)
MAX_BYTES = 512 * 1024 * 1024  # a 100,000-node fabric's dump is tens of MB
_USUAL_SIZE = "a dump of a 100,000-node fabric is tens of MB"


def _noise(line: str) -> bool:
    return not line or line.startswith(("#", "ibwarn", "ibpanic", "ibdebug"))


def detect(lines: list[str], file: str) -> Format:
    """The dump's format, from its first line that only one format has."""
    for index, raw in enumerate(lines, 1):
        line = raw.strip()
        if _noise(line):
            continue
        if line.startswith(_TOPOLOGY_WORDS):
            return "ibnetdiscover"
        if line.startswith(("Switch:", "CA:")) or "==(" in line:
            return "iblinkinfo"
        words = line.split()
        if words[0] in ("CA", "SW", "RT") and len(words) > 3 and words[3].startswith("0x"):
            return "ibnetdiscover-ports"
        if line.startswith("0x") and len(words) > 1 and words[1].startswith('"'):
            return "node-name-map"
        raise located(
            f"cannot tell what dump this is from {line[:80]!r}",
            Source(file, index),
            "give the output of ibnetdiscover, ibnetdiscover -p, iblinkinfo, "
            "iblinkinfo -l or an ibnetdiscover --node-name-map file",
        )
    raise DiscoveredError(
        "holds no switch, HCA or cable",
        file=file,
        hint="was the tool run on a host with an active InfiniBand port?",
    )


def read_name_map(
    lines: list[str], file: str, names: dict[str, str], seen: dict[str, Source] | None = None
) -> None:
    """Add ``0x<guid> "name"`` lines (``# comments`` allowed) to `names`.

    A GUID listed again with another name (in this map or an earlier one, whose lines
    ``seen`` keeps) is an error at the second line: which name is the device's, only the
    map's author knows. The same name again is harmless.
    """
    seen = {} if seen is None else seen
    for index, raw in enumerate(lines, 1):
        line = raw.strip()
        if _noise(line):
            continue
        source = Source(file, index)
        key, rest = [*line.split(None, 1), ""][:2]
        if len(rest) < 2 or rest[0] != '"' or rest.rfind('"') == 0:
            raise located(
                f'expected 0x<guid> "name", got {line[:80]!r}',
                source,
                "a node-name map line is a GUID and a quoted name",
            )
        node, name = guid(key, source), rest[1 : rest.rfind('"')]
        if names.get(node, name) != name:
            first = seen[node]
            raise located(
                f"{node} is named {shorten(repr(name))} here and {shorten(repr(names[node]))} at "
                f"{first.file}:{first.line}",
                source,
                "a node-name map gives each GUID one name: keep the right one",
            )
        names[node] = name
        seen.setdefault(node, source)


_READERS = {
    "ibnetdiscover": read_topology,
    "ibnetdiscover-ports": read_ports,
    "iblinkinfo": read_linkinfo,
}


def dump_lines(text: str) -> list[str]:
    r"""The lines of a dump, split at newlines only.

    Not str.splitlines(): it also splits at \v, \f, \x1c-\x1e, \x85, U+2028 and U+2029,
    which a NodeDescription may hold; every line number after one would then be wrong.
    """
    return text.split("\n")


def add_text(text: str, file: str, build: FabricBuilder) -> Format:
    """Add one dump's text to `build`; returns the format it was read as."""
    stripped = text.strip() if "\r" in text else ""  # a scan, no copy, for the usual LF dump
    if "\r" in stripped and "\n" not in stripped:
        # lines ended by CR alone (old Mac editors): read at LF, the dump is one line, which
        # said "no switch, HCA or cable" or "no cable" with a hint about InfiniBand ports
        raise DiscoveredError(
            "has lines ended by a carriage return alone (CR), so it reads as a single line",
            file=file,
            hint="give the tool's output as it printed it, or convert it: tr '\\r' '\\n'",
        )
    lines = dump_lines(text)
    kind = detect(lines, file)
    if kind == "node-name-map":
        read_name_map(lines, file, build.names, build.named_at)
    else:
        cables, ignored = build.cables, len(build.ignored)
        _READERS[kind](lines, file, build)
        if build.cables == cables:
            raise _nothing_to_compare(file, len(build.ignored) - ignored)
    build.sources.append(file)
    return kind


def _nothing_to_compare(file: str, ignored: int) -> DiscoveredError:
    """A dump without a cable: cut short, or taken where no port is up; never "as planned"."""
    skipped = f" ({plural(ignored, 'record')} ignored)" if ignored else ""
    return DiscoveredError(
        f"holds no cable between two nodes{skipped}: nothing to compare",
        file=file,
        hint="was the dump cut short, or taken on a host whose port is down? "
        "ibnetdiscover -p lists every cabled port of the fabric",
    )


def parse_text(text: str, file: str = "<input>") -> Fabric:
    """The fabric one dump describes."""
    build = FabricBuilder()
    add_text(text, file, build)
    return build.fabric()


def read_dump(path: str) -> str:
    """The text of one dump or node-name map: the one way `railplan verify` reads its inputs.

    Through `infra.reading.read_bounded`: a directory, device (``/dev/zero``), socket or named
    FIFO is refused before it is opened, a file over `MAX_BYTES` before it is read, and a pipe
    the shell hands over is read up to `MAX_BYTES` + 1 bytes at most.

    A UTF-8 byte-order mark is dropped, as the spec and trace readers drop it.

    Raises:
        InputError: unreadable, not a regular file or pipe, too large, or binary.
    """
    data = read_bounded(path, MAX_BYTES, noun="dump", usual=_USUAL_SIZE)
    if b"\0" in data:
        raise InputError(
            "is binary, not a text dump",
            file=path,
            position=Position(data[: data.index(b"\0")].count(b"\n") + 1, 1),
            hint="give the text output of ibnetdiscover or iblinkinfo",
        )
    return data.decode("utf-8-sig", errors="replace")  # a BOM (Windows editors) is no text


def parse_files(paths: Iterable[Path | str], texts: Mapping[str, str] | None = None) -> Fabric:
    """The fabric a set of dumps (and node-name maps) describe together.

    ``texts`` holds dumps already read (`read_dump`) by their path, such as a pipe that
    cannot be read twice; the others are read here.
    """
    build = FabricBuilder()
    files = list(map(str, paths))
    for path in files:
        text = texts[path] if texts is not None and path in texts else read_dump(path)
        add_text(text, path, build)
    if files and not build.cables:  # each dump has a cable (`add_text`): these are all maps
        raise DiscoveredError(
            "is a node-name map, and no dump is given: nothing to compare",
            file=files[0],
            hint="give ibnetdiscover or iblinkinfo output, and the map with --names",
        )
    return build.fabric()
