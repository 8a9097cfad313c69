"""A fixture writer: the plan's compute cabling as `ibnetdiscover -p` prints it, faults optional.

What a real fabric of that size would give, where none exists here: one line per cable in the
tool's format (``CA lid port guid 4x HDR - SW lid port guid ( 'desc' - 'desc' )``), HCAs
described as rdma-ndd does by default (``<host> <device>``), switches by their plan names.
"""

from __future__ import annotations

from infra.topology.model import Cable, Plan

DEFAULT_DESCRIPTION = "MT4123 ConnectX6 Mellanox Technologies"  # ConnectX-6 out of the box
# SHARP's in-switch pseudo-HCA, on the port after the last front-panel one (QM8700: 41).
AGGREGATION_NODE = "Mellanox Technologies Aggregation Node"


class Dump:
    """GUIDs and LIDs for every planned device, and the lines of the cables given to `line`."""

    def __init__(
        self, plan: Plan, speed: str = "HDR", unnamed: frozenset[str] = frozenset()
    ) -> None:
        self.speed = speed
        self.unnamed = unnamed  # servers whose HCAs still report the firmware's description
        self.switches = {s.name for s in plan.switches if s.fabric == "compute"}
        self.guids: dict[tuple[str, str], str] = {}
        self.lids: dict[str, int] = {}

    def _end(self, device: str, port: str) -> tuple[str, str, int, str, str]:
        """(kind, port, lid, guid, description) of one cable end."""
        kind = "SW" if device in self.switches else "CA"
        key = (device, "" if kind == "SW" else port)
        guid = self.guids.setdefault(key, f"0x{0x100000 + len(self.guids):016x}")
        lid = self.lids.setdefault(guid, len(self.lids) + 1)
        if kind == "SW":
            return kind, port, lid, guid, device
        if device in self.unnamed:
            return kind, "1", lid, guid, DEFAULT_DESCRIPTION
        return kind, "1", lid, guid, f"{device} {port}"

    def line(self, a: tuple[str, str], b: tuple[str, str], width: str = "4x") -> str:
        ka, pa, la, ga, da = self._end(*a)
        kb, pb, lb, gb, db = self._end(*b)
        return (
            f"{ka} {la:5d} {int(pa):2d} {ga} {width} {self.speed} - "
            f"{kb} {lb:5d} {int(pb):2d} {gb} ( '{da}' - '{db}' )"
        )

    def cable(self, cable: Cable, width: str = "4x") -> str:
        return self.line((cable.a, cable.a_port), (cable.b, cable.b_port), width)

    def aggregation_node(self, switch: str, port: int = 41) -> str:
        """The line of a switch's SHARP aggregation node, as `ibnetdiscover -p` prints it."""
        _, _, lid, guid, _ = self._end(switch, str(port))
        node = self.guids.setdefault((switch, "sharp"), f"0x{0x300000 + len(self.guids):016x}")
        return (
            f"SW {lid:5d} {port:2d} {guid} 4x {self.speed} - CA {lid + 50000:5d}  1 {node} "
            f"( '{switch}' - '{AGGREGATION_NODE}' )"
        )


def as_built(plan: Plan, dump: Dump | None = None) -> dict[str, str]:
    """Cable id -> its line, for every planned compute cable."""
    dump = dump or Dump(plan)
    return {c.id: dump.cable(c) for c in plan.cables_in("compute")}


def unknown_cables(count: int, first_lid: int = 10_000) -> list[str]:
    """``count`` cables from HCAs the plan does not have to switches it does not have.

    A hostile or careless dump: each is an unexpected cable, so verify's cost and output are
    tried at its size. 250 cables to a switch (a port number is at most 255).
    """
    lines = []
    for k in range(count):
        switch, port = divmod(k, 250)
        lines.append(
            f"CA {first_lid + k % 50_000:5d}  1 0x{0x5000000000 + k:016x} 4x HDR - "
            f"SW {first_lid + 50_000 + switch % 10_000:5d} {port + 1:2d} "
            f"0x{0x6000000000 + switch:016x} ( 'stray{k:07d} mlx5_0' - 'stray-sw-{switch:05d}' )"
        )
    return lines
