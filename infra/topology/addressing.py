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
  consecutive addresses in name order; those change only when the fabric's shape does.

A device beyond its block gets None; lint rule RP053 reports it. Partition keys: the default
partition 0x7fff holds every port; each node group gets its own (0x0001, 0x0002, ... in spec
order) so tenants can be isolated later.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology.model import Host, Pdu, PlanError, Server

if TYPE_CHECKING:
    from infra.topology.compute import ComputeFabricPlan
    from infra.topology.parts import SwitchPart
    from infra.topology.racks import RackPlanner
    from infra.topology.servers import ServerSeed

__all__ = ["AddressBook", "Block", "assign_addresses", "blocks", "partition_keys", "usable_hosts"]

DEFAULT_PKEY = "0x7fff"
SMALLEST_BLOCK_PREFIX = 28  # smaller blocks (a lab's /29 in 16) are not worth splitting


def usable_hosts(network: IPv4Network) -> int:
    """Host addresses in ``network`` (all but network and broadcast for /30 and wider)."""
    return network.num_addresses - 2 if network.prefixlen < 31 else network.num_addresses


class Block:
    """One address block: the gateway, then hosts counted up from the bottom or down from the top."""

    def __init__(self, network: IPv4Network) -> None:
        self.network = network
        self.gateway = int(network.network_address) + (1 if network.prefixlen < 31 else 0)
        self.top = self.gateway + usable_hosts(network) - 1  # highest host address

    def up(self, n: int) -> str | None:
        """The ``n``-th host above the gateway (0-based), or None past the top."""
        address = self.gateway + 1 + n
        return str(IPv4Address(address)) if address <= self.top else None

    def down(self, n: int, floor: int) -> str | None:
        """The ``n``-th host from the top (0-based), None once it meets the ``floor`` hosts."""
        address = self.top - n
        return str(IPv4Address(address)) if address > self.gateway + floor else None


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
        return replace(pdu, bmc_ip=self.bmc.get(pdu.name))


def _su_devices(racks: RackPlanner, leaves: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Each SU's own devices (leaves, its racks' PDUs and OOB switches), in name order."""
    own: dict[str, list[str]] = {su: list(names) for su, names in leaves.items()}
    for rack in racks.racks.values():
        if rack.row in own:
            own[rack.row] += [f"{rack.name}-pdu{j + 1}" for j in range(rack.pdus)]
            own[rack.row] += [n for n in rack.switches if n.startswith("oob-")]
    return {su: sorted(set(names)) for su, names in own.items()}


def _su_stride(
    racks: RackPlanner,
    spec: Spec,
    catalog: Catalog,
    own: dict[str, list[str]],
    leaves: int,
    node: str,
    class_name: str,
) -> int:
    """BMC addresses one SU of a group keeps: the devices of a full SU (at least)."""
    su_size = spec.fabrics.compute.su_size if spec.fabrics.compute else 1
    cap = max(1, racks.capacity(node, class_name))
    rack_class = spec.site.rack_class(class_name)
    pdus = int(catalog.site["pdu_per_rack_default"]) if rack_class.pdus is None else rack_class.pdus
    model = spec.fabrics.compute.switch if spec.fabrics.compute else ""
    network = racks.network_racks_for(leaves, model) if model else 0
    full = leaves + (math.ceil(su_size / cap) + network) * (pdus + 1)
    return max([full, *(len(v) for v in own.values())])


def assign_addresses(
    spec: Spec,
    catalog: Catalog,
    seeds: Sequence[ServerSeed],
    parts: Sequence[SwitchPart],
    hosts: Sequence[Host],
    pdus: Sequence[Pdu],
    racks: RackPlanner,
    compute: ComputeFabricPlan | None,
) -> AddressBook:
    """Addresses by the block scheme of this module's docstring."""
    devices = sorted(
        {p.name for p in parts}
        | {h.name for h in hosts if h.role == "ufm"}
        | {p.name for p in pdus}
    )
    mgmt = _servers_up(spec, seeds, spec.site.management_cidr)
    bmc = _servers_up(spec, seeds, spec.site.bmc_cidr)
    bmc_blocks = blocks(spec.site.bmc_cidr, spec)
    if bmc_blocks is None:
        block = Block(spec.site.bmc_cidr)
        bmc.update({name: block.down(i, len(seeds)) for i, name in enumerate(devices)})
        return AddressBook(mgmt, bmc, partition_keys(spec))
    counts: dict[str, int] = {}
    for s in seeds:
        counts[s.group] = counts.get(s.group, 0) + 1
    own = _su_devices(racks, compute.su_leaves if compute else {})
    group_no = {g.name: i + 1 for i, g in enumerate(spec.node_groups)}
    leaves = max((len(v) for v in compute.su_leaves.values()), default=0) if compute else 0
    _assign_group_devices(
        spec, catalog, seeds, racks, own, bmc, bmc_blocks, group_no, counts, leaves
    )
    shared = [name for name in devices if name not in bmc]
    bmc.update({name: bmc_blocks[0].up(i) for i, name in enumerate(shared)})
    return AddressBook(mgmt, bmc, partition_keys(spec))


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
    own: dict[str, list[str]],
    bmc: dict[str, str | None],
    bmc_blocks: list[Block],
    group_no: dict[str, int],
    counts: dict[str, int],
    leaves: int,
) -> None:
    """Per-SU (or per-rack, off the fabric) devices count down from each group's block top."""
    first = {s.group: s for s in reversed(seeds)}
    for group in spec.node_groups:
        seed = first.get(group.name)
        if seed is None:
            continue
        block, floor = bmc_blocks[group_no[group.name]], counts[group.name]
        sus = {s.su for s in seeds if s.group == group.name and s.su is not None}
        if sus:
            group_own = {su: own.get(su, []) for su in sus}
            stride = _su_stride(
                racks, spec, catalog, group_own, leaves, seed.node, group.rack_class or "default"
            )
            for su in sorted(sus):
                base = (int(su.rsplit("-su", 1)[1]) - 1) * stride
                bmc.update({n: block.down(base + i, floor) for i, n in enumerate(own.get(su, []))})
        else:
            _rack_devices_down(racks, group.name.replace("_", "-"), block, floor, bmc)


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
