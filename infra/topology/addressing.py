"""Addresses and identifiers: management and BMC IPs, InfiniBand partition keys.

Management addresses go to servers in cluster order from the first host address of
``site.management_cidr``. BMC addresses go to server BMCs first, then switch management
ports (by switch name), then PDUs, from ``site.bmc_cidr``. A device past the end of a CIDR
gets no address; lint rule RP053 reports the shortfall. Partition keys: the default
partition 0x7fff holds every port; each node group also gets its own partition
(0x0001, 0x0002, ... in spec order) so tenants can be isolated later.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network

from infra.spec import Spec

__all__ = ["assign", "partition_keys", "usable_hosts"]

DEFAULT_PKEY = "0x7fff"


def usable_hosts(network: IPv4Network) -> int:
    """Host addresses in ``network`` (all but network and broadcast for /30 and wider)."""
    return network.num_addresses - 2 if network.prefixlen < 31 else network.num_addresses


def assign(network: IPv4Network, names: Sequence[str]) -> dict[str, str]:
    """Give ``names`` consecutive host addresses; names beyond the network get none."""
    first = int(network.network_address) + (1 if network.prefixlen < 31 else 0)
    count = min(len(names), usable_hosts(network))
    return {names[i]: str(network.network_address.__class__(first + i)) for i in range(count)}


def partition_keys(spec: Spec) -> dict[str, str]:
    """Partition key per partition: ``default`` plus one per node group."""
    keys = {"default": DEFAULT_PKEY}
    keys.update({g.name: f"0x{i + 1:04x}" for i, g in enumerate(spec.node_groups)})
    return keys
