"""Addresses and identifiers: management and BMC IPs in stable blocks, partition keys.

Each of ``site.management_cidr`` and ``site.bmc_cidr`` is split into ``2**address_block_bits``
equal blocks (16 by default: a /16 gives sixteen /20s of 4,094 hosts). Block 0 holds the
shared infrastructure; block ``g`` holds node group ``g`` (1-based, spec order). In every
block the first host address is the gateway and is never assigned.

- Management: server ``n`` of a group (0-based in the group) gets its block's address
  ``gateway + 1 + n``.
- BMC: server BMCs count up from ``gateway + 1`` the same way; each scalable unit's own
  devices (its leaves, its racks' PDUs and OOB switches) count down from the top of the
  group's block, SU ``k`` in a fixed stride (the devices of a full SU), so a growing group
  takes new addresses without moving old ones. Block 0 gives shared devices (spines,
  cores, storage and in-band switches, the UFM host, the core row's PDUs and OOB switches)
  consecutive addresses in name order (numbers compared as numbers: ``st-spine-100`` after
``st-spine-99``); those change only when the fabric's shape does.

A device beyond its block gets None; lint rule RP053 reports it. Partition keys: the default
partition 0x7fff holds every port; each node group gets its own (0x0001, 0x0002, ... in spec
order) so tenants can be isolated later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from ipaddress import IPv4Network
from typing import TYPE_CHECKING

from infra.catalog import Catalog
from infra.spec import NodeGroup, Spec
from infra.topology.growth import natural_key
from infra.topology.model import Host, Pdu, PlanError, Server

if TYPE_CHECKING:
    from infra.topology.compute import ComputeFabricPlan
    from infra.topology.parts import SwitchPart
    from infra.topology.racks import RackPlanner
    from infra.topology.servers import ServerSeed

__all__ = [
    "AddressBook",
    "Block",
    "assign_addresses",
    "blocks",
    "dotted",
    "partition_keys",
    "usable_hosts",
]

DEFAULT_PKEY = "0x7fff"
SMALLEST_BLOCK_PREFIX = 28  # smaller blocks (a lab's /29 in 16) are not worth splitting


def usable_hosts(network: IPv4Network) -> int:
    """Host addresses in ``network`` (all but network and broadcast for /30 and wider)."""
    return network.num_addresses - 2 if network.prefixlen < 31 else network.num_addresses


def dotted(address: int) -> str:
    """``str(IPv4Address(address))`` of an address inside a network, without the object.

    A large plan writes tens of thousands of addresses; the object costs three times this.
    """
    return f"{address >> 24}.{address >> 16 & 255}.{address >> 8 & 255}.{address & 255}"


class Block:
    """One address block: the gateway, then hosts counted up from the bottom or down from the top."""

    def __init__(self, network: IPv4Network) -> None:
        self.network = network
        self.gateway = int(network.network_address) + (1 if network.prefixlen < 31 else 0)
        self.top = self.gateway + usable_hosts(network) - 1  # highest host address

    def up(self, n: int) -> str | None:
        """The ``n``-th host above the gateway (0-based), or None past the top."""
        address = self.gateway + 1 + n
        return dotted(address) if address <= self.top else None

    def down(self, n: int, floor: int) -> str | None:
        """The ``n``-th host from the top (0-based), None once it meets the ``floor`` hosts."""
        address = self.top - n
        return dotted(address) if address > self.gateway + floor else None


def blocks(network: IPv4Network, spec: Spec) -> list[Block] | None:
    """Block 0 (shared) and one block per node group; None when ``network`` is too small.

    A network whose blocks would be smaller than a /28 (14 hosts; a lab's /29, say) is not
    split: every device shares it (servers up from the gateway, other devices down from
    the top), and appending a group may then renumber.

    Raises:
        PlanError: more node groups than blocks.
    """
    bits = spec.site.address_block_bits
    if network.prefixlen + bits > SMALLEST_BLOCK_PREFIX:
        return None
    if len(spec.node_groups) + 1 > 2**bits:
        raise PlanError(
            f"{len(spec.node_groups)} node groups need {len(spec.node_groups) + 1} address "
            f"blocks but address_block_bits {bits} gives {2**bits}",
            path="site.address_block_bits",
            hint="raise site.address_block_bits",
        )
    subnets = network.subnets(new_prefix=network.prefixlen + bits)
    return [Block(next(subnets)) for _ in range(len(spec.node_groups) + 1)]


@dataclass(frozen=True)
class AddressBook:
    """Every device's management and BMC address, and the partition keys."""

    mgmt: dict[str, str | None]
    bmc: dict[str, str | None]
    pkeys: dict[str, str]

    def servers(
        self, seeds: Sequence[ServerSeed], where: dict[str, tuple[str, int]], catalog: Catalog
    ) -> tuple[Server, ...]:
        """The finished server records."""
        return tuple(
            Server(
                s.name,
                s.group,
                s.node,
                s.index,
                s.su,
                s.slot,
                where[s.name][0] if s.name in where else None,
                where[s.name][1] if s.name in where else None,
                self.mgmt.get(s.name),
                self.bmc.get(s.name),
                catalog.nodes[s.node].compute_hcas,
                s.mig,
            )
            for s in seeds
        )

    def host(self, host: Host, where: dict[str, tuple[str, int]]) -> Host:
        """A host with its rack, unit and BMC address."""
        rack, unit = where.get(host.name, (None, None))
        return replace(host, rack=rack, rack_unit=unit, bmc_ip=self.bmc.get(host.name))

    def pdu(self, pdu: Pdu) -> Pdu:
        """A PDU with its address."""
        # made, not `replace`d: 15,000 PDUs in a large plan, and replace is slow
        return Pdu(pdu.name, pdu.rack, pdu.feed, self.bmc.get(pdu.name))


@dataclass(frozen=True)
class SuLayout:
    """Where an SU's own devices sit in its stride of BMC addresses (offsets from its base).

    Leaves by rail first; then each of a full SU's racks (compute racks, then network
    racks) its PDUs and the OOB switch it may host; then the node group's storage and
    in-band leaves whose first server is in the SU. Offsets follow identities, so a
    growing SU or group keeps every address it had.
    """

    leaves: int
    compute_racks: int  # racks a full SU fills
    network_racks: int
    pdus: int
    networks: tuple[tuple[str, int, int], ...]  # (leaf prefix, servers per chunk, leaves per chunk)
    su_size: int

    def _chunks(self, down: int) -> int:
        return self.su_size // down + 2

    @property
    def stride(self) -> int:
        """Addresses one SU keeps."""
        racks = (self.compute_racks + self.network_racks) * (self.pdus + 1)
        return self.leaves + racks + sum(self._chunks(d) * g for _, d, g in self.networks)

    def rack_slot(self, rack: str) -> int:
        """Offset of a rack's first PDU (``<su>-cK`` or ``<su>-nK``)."""
        kind, k = rack.rsplit("-", 1)[1][0], int(rack.rsplit("-", 1)[1][1:])
        slot = k - 1 if kind == "c" else self.compute_racks + k - 1
        return self.leaves + slot * (self.pdus + 1)

    def network_leaf(self, network: int, number: int) -> tuple[int, int]:
        """(SU number, offset) of leaf ``number`` (1-based) of a group network.

        A leaf chunk belongs to the SU of its first server.
        """
        _, down, group = self.networks[network]
        chunk, port = divmod(number - 1, group)
        su = (chunk * down) // self.su_size + 1
        first = -(-((su - 1) * self.su_size) // down)  # first chunk starting in this SU
        base = self.leaves + (self.compute_racks + self.network_racks) * (self.pdus + 1)
        base += sum(self._chunks(d) * g for _, d, g in self.networks[:network])
        return su, base + (chunk - first) * group + port


def _layout(
    spec: Spec,
    catalog: Catalog,
    racks: RackPlanner,
    group: NodeGroup,
    leaves: int,
    networks: Sequence[tuple[str, int, int]],
) -> SuLayout:
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 1
    class_name = group.rack_class or "default"
    cap = racks.capacity(group.node, class_name)
    rack_class = spec.site.rack_class(class_name)
    pdus = int(catalog.site["pdu_per_rack_default"]) if rack_class.pdus is None else rack_class.pdus
    model = spec.fabrics.compute.switch if spec.fabrics.compute else ""
    network = racks.network_racks_for(leaves, model) if model else 0
    return SuLayout(leaves, math.ceil(su_size / cap), network, pdus, tuple(networks), su_size)


def _growth_order(parts: Sequence[SwitchPart]) -> Callable[[str], tuple[object, ...]]:
    """Sort key for shared devices: compute cores, then spines by pod, before the rest.

    Shared devices are numbered in this order within their family, and growth (more
    pods, in every plane) then only appends: no spine or core of another plane moves.
    """
    rank = {
        p.name: (0 if p.tier == "core" else 1, p.pod or 0, p.plane)
        for p in parts
        if p.fabric == "compute" and p.tier != "leaf"
    }

    def key(name: str) -> tuple[object, ...]:
        return (*rank.get(name, (2, 0, 0)), natural_key(name))  # spine 100 after 99

    return key


def assign_addresses(
    spec: Spec,
    catalog: Catalog,
    seeds: Sequence[ServerSeed],
    parts: Sequence[SwitchPart],
    hosts: Sequence[Host],
    pdus: Sequence[Pdu],
    racks: RackPlanner,
    compute: ComputeFabricPlan | None,
    networks: Sequence[tuple[str, int, int]] = (),
) -> AddressBook:
    """Addresses by the block scheme of this module's docstring.

    ``networks`` lists the group-owned leaf networks as ``(prefix, servers per chunk,
    leaves per chunk)`` (storage ``st``, in-band ``mg``).
    """
    devices = sorted(
        {p.name for p in parts}
        | {h.name for h in hosts if h.role == "ufm"}
        | {p.name for p in pdus},
        key=_growth_order(parts),
    )
    mgmt = _servers_up(spec, seeds, spec.site.management_cidr)
    bmc = _servers_up(spec, seeds, spec.site.bmc_cidr)
    bmc_blocks = blocks(spec.site.bmc_cidr, spec)
    if bmc_blocks is None:
        block = Block(spec.site.bmc_cidr)
        bmc.update({name: block.down(i, len(seeds)) for i, name in enumerate(devices)})
        return AddressBook(mgmt, bmc, partition_keys(spec))
    if compute is not None:
        _assign_group_devices(
            spec, catalog, seeds, racks, compute, networks, devices, bmc, bmc_blocks
        )
    else:
        for i, group in enumerate(spec.node_groups):
            floor = sum(1 for s in seeds if s.group == group.name)
            row = group.name.replace("_", "-")
            _rack_devices_down(racks, row, bmc_blocks[i + 1], floor, bmc)
    stride = max((r.pdus for r in racks.racks.values() if r.row == "core"), default=0) + 1
    bmc.update(_shared_addresses([n for n in devices if n not in bmc], bmc_blocks[0], stride))
    return AddressBook(mgmt, bmc, partition_keys(spec))


# Block 0 is split by family of shared devices, in sixteenths: where each family starts.
# Compute spines and cores (family 1) get half: they are most of the shared switches.
FAMILY_START = (0, 1, 9, 11, 12, 14)  # UFM/one-switch, compute, storage, in-band, core row, other
FAMILY_SIXTEENTHS = 16
MIN_FAMILY_SIZE = 16  # below this (block 0 under a /24) block 0 is not split


def _family(name: str) -> int:
    """Which part of block 0 a shared device takes (so one family's growth moves no other)."""
    if name.removeprefix("oob-").startswith("core-n"):
        return 4  # the core row's PDUs and OOB switches
    if name.startswith("oob-") or "-pdu" in name:
        return 5  # PDUs and OOB switches of other shared racks
    for family, prefix in enumerate(("ib", "st-", "mg-"), start=1):
        if (
            prefix in {"st-", "mg-"}
            and name.startswith(prefix)
            and "-spine-" not in name
            and "-core-" not in name
        ):
            return 0  # a one-switch (or MLAG pair) storage or in-band network
        if name.startswith(prefix):
            return family
    return 0  # the UFM host, anything else


def _core_rack_offset(name: str, stride: int) -> int | None:
    """Offset of a core-row PDU (``core-nKK-pduJ``) or OOB switch (``oob-core-nKK``)."""
    rack, _, pdu = name.removeprefix("oob-").partition("-pdu")
    if not rack.startswith("core-n") or not rack[6:].isdigit():
        return None
    slot = (int(rack[6:]) - 1) * stride
    return slot + int(pdu) - 1 if pdu.isdigit() else slot + stride - 1


def _shared_addresses(names: Sequence[str], block: Block, stride: int) -> dict[str, str | None]:
    """Block 0: each family of shared devices in its own part (`FAMILY_START`), in name order.

    The core row's racks keep a fixed stride (its PDUs, then the OOB switch it may host),
    so adding a rack there moves nothing.
    """
    size = (block.top - block.gateway) // FAMILY_SIXTEENTHS
    if size < MIN_FAMILY_SIZE:  # a small block: no room for families, plain name order
        return {name: block.up(i) for i, name in enumerate(names)}
    families: dict[int, list[str]] = {}
    for name in names:
        families.setdefault(_family(name), []).append(name)
    out: dict[str, str | None] = {}
    for family, members in families.items():
        for i, name in enumerate(members):
            fixed = _core_rack_offset(name, stride) if family == 4 else None
            offset = i if fixed is None else fixed
            start = FAMILY_START[family]
            end = FAMILY_START[family + 1] if family + 1 < len(FAMILY_START) else FAMILY_SIXTEENTHS
            room = (end - start) * size
            out[name] = block.up(start * size + offset) if offset < room else None
    return out


def _servers_up(
    spec: Spec, seeds: Sequence[ServerSeed], network: IPv4Network
) -> dict[str, str | None]:
    """Each server's address: its group's block from the gateway up (or the one block)."""
    split = blocks(network, spec)
    if split is None:
        block = Block(network)
        return {s.name: block.up(i) for i, s in enumerate(seeds)}
    group_no = {g.name: i + 1 for i, g in enumerate(spec.node_groups)}
    return {s.name: split[group_no[s.group]].up(s.ordinal) for s in seeds}


def _assign_group_devices(
    spec: Spec,
    catalog: Catalog,
    seeds: Sequence[ServerSeed],
    racks: RackPlanner,
    compute: ComputeFabricPlan,
    networks: Sequence[tuple[str, int, int]],
    devices: Sequence[str],
    bmc: dict[str, str | None],
    bmc_blocks: list[Block],
) -> None:
    """Each SU's devices at fixed offsets, SU ``k`` at ``(k - 1) * stride`` from the top."""
    counts = {g.name: 0 for g in spec.node_groups}
    for s in seeds:
        counts[s.group] += 1
    leaves = max((len(v) for v in compute.su_leaves.values()), default=0)
    by_row = racks.by_row()
    for i, group in enumerate(spec.node_groups):
        block, floor = bmc_blocks[i + 1], counts[group.name]
        numbers = {s.su: s.su_number for s in seeds if s.group == group.name and s.su is not None}
        sus = sorted(numbers)
        if not sus:
            _rack_devices_down(racks, group.name.replace("_", "-"), block, floor, bmc)
            continue
        key = group.name.replace("_", "-")
        group_nets = [(f"{prefix}-leaf-{key}-", d, g) for prefix, d, g in networks]
        layout = _layout(spec, catalog, racks, group, leaves, group_nets)
        net_leaves = _network_leaf_offsets(layout, devices)
        for su in sus:
            number = numbers[su] or 0
            base = (number - 1) * layout.stride
            offsets = {n: k for k, n in enumerate(compute.su_leaves.get(su, ()))}
            for rack in by_row.get(su, ()):
                slot = layout.rack_slot(rack.name)
                offsets.update((f"{rack.name}-pdu{j + 1}", slot + j) for j in range(rack.pdus))
                # an OOB switch's offset follows its name (the rack it is named after)
                offsets.update(
                    (n, layout.rack_slot(n.removeprefix("oob-")) + rack.pdus)
                    for n in rack.switches
                    if n.startswith("oob-")
                )
            offsets.update(net_leaves.get(number, {}))
            bmc.update({n: block.down(base + k, floor) for n, k in offsets.items()})


def _network_leaf_offsets(layout: SuLayout, names: Iterable[str]) -> dict[int, dict[str, int]]:
    """Per SU number, the offsets of the group's storage and in-band leaves."""
    found: dict[int, dict[str, int]] = {}
    for i, (prefix, _, _) in enumerate(layout.networks):
        for name in names:
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                su, offset = layout.network_leaf(i, int(name[len(prefix) :]))
                found.setdefault(su, {})[name] = offset
    return found


def _rack_devices_down(
    racks: RackPlanner, row: str, block: Block, floor: int, bmc: dict[str, str | None]
) -> None:
    """A group without SUs: each rack's PDUs and OOB switch in a fixed stride from the top."""
    for rack in racks.racks.values():
        if rack.row != row:
            continue
        k = int(rack.name.rsplit("-c", 1)[1]) if "-c" in rack.name else 0
        names = [f"{rack.name}-pdu{j + 1}" for j in range(rack.pdus)]
        names += [n for n in rack.switches if n.startswith("oob-")]
        stride = rack.pdus + 1
        bmc.update({n: block.down((k - 1) * stride + i, floor) for i, n in enumerate(names)})


def partition_keys(spec: Spec) -> dict[str, str]:
    """Partition key per partition: ``default`` plus one per node group."""
    keys = {"default": DEFAULT_PKEY}
    keys.update({g.name: f"0x{i + 1:04x}" for i, g in enumerate(spec.node_groups)})
    return keys
