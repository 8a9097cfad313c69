"""What discovery saw, names resolved: the links and ports `infra.verify.compare` checks.

This module owns the records between reading the dumps and judging them: a cable end as the
plan names devices (`NamedEnd`), a link with its width, speed and state (`SeenLink`), a port
seen without a link (`SeenPort`), a port the dumps give two peers (`SeenConflict`), and all
of it together (`Seen`, built by `infra.verify.resolve`); and what a link's width and speed
come to in Gb/s (`link_gbps`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "LANE_GBPS",
    "NamedEnd",
    "Seen",
    "SeenConflict",
    "SeenLink",
    "SeenPort",
    "link_gbps",
]

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


def link_gbps(width: str, speed: str) -> float | None:
    """The data rate of ``4x`` ``HDR`` (200.0), or None when either is unknown."""
    lanes = width.lower().removesuffix("x")
    if lanes not in _LANES or speed.upper() not in LANE_GBPS:
        return None
    return int(lanes) * LANE_GBPS[speed.upper()]
