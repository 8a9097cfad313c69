"""The twin's networks: the management bridge, one network namespace per host, the BMCs.

- ``rptw-mgmt``, a Linux bridge in this machine's namespace, carries the plan's management
  network: each host's ``eth0`` (a veth whose peer is on the bridge) has its planned
  ``mgmt_ip`` with the whole management CIDR as prefix, so hosts reach each other directly,
  and a default route through its address block's gateway (the plan never assigns a
  block's first address), which this machine answers on the bridge.
- The services the hosts use from outside (the apt proxy and the site mirror) listen on
  `SERVICE_IP`, a TEST-NET-2 address (RFC 5737) that no plan assigns, on the bridge.
- BMCs: every planned BMC address is a /32 on ``rptw-bmc`` here (a port-less bridge), where one
  ``ipmi_sim`` per server listens; the hosts reach them through their default route, as a
  controller reaches a BMC network through its router.

A host's namespace is ``/run/netns/rptw-<n>`` (``ip netns``); it outlives the host's power
cycles (nspawn joins it at every boot), so a reboot keeps its address, like a NIC keeps its
cabling. Names stay within IFNAMSIZ (15).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

from tests.cluster_twin.proc import run

BRIDGE = "rptw-mgmt"
BMC_LINK = "rptw-bmc"
SERVICE_IP = "198.51.100.1"
NETNS_DIR = Path("/run/netns")


@dataclass(frozen=True)
class HostNet:
    """One host's place on the management network."""

    index: int  # 1-based, plan order
    mgmt_ip: str
    gateway: str
    prefix: int  # of the whole management CIDR

    @property
    def netns(self) -> str:
        return f"rptw-{self.index}"

    @property
    def veth(self) -> str:
        return f"rptw-v{self.index}"


def block_gateway(ip: str, cidr: IPv4Network, block_prefix: int | None) -> str:
    """The first address of IP's address block (the whole CIDR when it is not split)."""
    prefix = block_prefix if block_prefix is not None else cidr.prefixlen
    block = IPv4Network(f"{ip}/{prefix}", strict=False)
    return str(IPv4Address(int(block.network_address) + 1))


def create_links(gateways: Iterable[str], prefix: int, bmc_ips: Iterable[str]) -> None:
    """The bridge with every gateway and the service address; the BMC link with its /32s."""
    teardown_links()
    run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    for address in sorted(set(gateways)):
        run(["ip", "addr", "add", f"{address}/{prefix}", "dev", BRIDGE])
    run(["ip", "addr", "add", f"{SERVICE_IP}/32", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    run(["ip", "link", "add", BMC_LINK, "type", "bridge"])  # no dummy driver in this kernel
    for address in sorted(set(bmc_ips)):
        run(["ip", "addr", "add", f"{address}/32", "dev", BMC_LINK])
    run(["ip", "link", "set", BMC_LINK, "up"])


def create_host(net: HostNet) -> None:
    """The host's namespace and its eth0 on the bridge, addressed as planned."""
    delete_host(net)
    ns = net.netns
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", net.veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", net.veth, "master", BRIDGE, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{net.mgmt_ip}/{net.prefix}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "route", "add", "default", "via", net.gateway])


def delete_host(net: HostNet) -> None:
    if (NETNS_DIR / net.netns).exists():
        run(["ip", "netns", "delete", net.netns], check=False)
    run(["ip", "link", "delete", net.veth], check=False)


def teardown_links() -> None:
    for link in (BRIDGE, BMC_LINK):
        run(["ip", "link", "delete", link], check=False)


def teardown_all() -> None:
    """Every namespace and link of a twin, including one a killed run left behind."""
    for path in sorted(NETNS_DIR.glob("rptw-*")) if NETNS_DIR.is_dir() else []:
        run(["ip", "netns", "delete", path.name], check=False)
    teardown_links()


def in_netns(net: HostNet, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", net.netns, *argv]
