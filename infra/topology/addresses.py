"""Addresses assigned outside railplan (cloud instances): a plan with those management IPs.

On AWS the cloud, not the spec's CIDR, gives each instance its address; the Pulumi program
exports them as its ``hosts`` stack output (``{hostname: private_ip}``). `with_addresses`
returns the plan with each named server's management address replaced, so `railplan render
--addresses` writes an inventory whose ``ansible_host`` values reach the instances. Every
name must be a planned server and every value a usable unicast IPv4 address: not loopback,
unspecified, broadcast, multicast, link-local (169.254.169.254 is the cloud's metadata
service) or reserved, inside the management subnet for racked servers, given to one server
only and to no other planned device (a server's or switch's planned address). Else
`AddressesError` says which entry (its path in the file) is wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from ipaddress import IPv4Address, IPv4Network

from infra.errors import RailplanError
from infra.topology.model import Plan, Server

__all__ = ["AddressesError", "with_addresses"]

# What each kind of address is, for the message: ansible_host would never reach a server there.
_UNUSABLE = (
    ("is_loopback", "a loopback address (this machine)"),
    ("is_unspecified", "the unspecified address"),
    ("is_multicast", "a multicast address"),
    ("is_link_local", "a link-local address (169.254.169.254 is the cloud metadata service)"),
    ("is_reserved", "a reserved address (240.0.0.0/4, the broadcast 255.255.255.255)"),
)


class AddressesError(RailplanError):
    """An addresses file names a server the plan lacks, or holds something not an address."""


_DOTTED_QUAD = (
    "write a dotted-quad IPv4 address in quotes, four numbers 0-255 without leading zeros, "
    'e.g. "10.0.0.5"'
)


def _address(name: str, value: object) -> IPv4Address:
    if not isinstance(value, str):
        raise AddressesError(
            f"address of {name!r} is {value!r}, not an IPv4 address", path=name, hint=_DOTTED_QUAD
        )
    try:
        address = IPv4Address(value)
    except ValueError:
        raise AddressesError(
            f"address of {name!r} is {value!r}, not an IPv4 address", path=name, hint=_DOTTED_QUAD
        ) from None
    for test, what in _UNUSABLE:
        if getattr(address, test):
            raise AddressesError(
                f"address of {name!r} is {address}, {what}",
                path=name,
                hint="give the instance's private address, e.g. from the `hosts` stack output",
            )
    return address


def _check_subnet(server: Server, address: IPv4Address, subnet: IPv4Network | None) -> None:
    """A racked server's address must be a host of the management subnet."""
    if subnet is None or server.rack is None:  # a cloud instance: the VPC, not the spec, decides
        return
    if address not in subnet or address in (subnet.network_address, subnet.broadcast_address):
        raise AddressesError(
            f"address of {server.name!r} is {address}, not a host address of the management "
            f"subnet {subnet}",
            path=server.name,
            hint="use an address of site.management_cidr, or change that CIDR in the spec",
        )


def _planned(plan: Plan, moved: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    """(address, owner) of every address the plan keeps: BMCs, and servers not moved."""
    for server in plan.servers:
        if server.mgmt_ip and server.name not in moved:
            yield server.mgmt_ip, server.name
    bmcs = [
        *((d.name, d.bmc_ip) for d in plan.servers),
        *((d.name, d.bmc_ip) for d in plan.switches),
        *((d.name, d.bmc_ip) for d in plan.hosts),
        *((d.name, d.bmc_ip) for d in plan.pdus),
    ]
    for name, bmc_ip in bmcs:
        if bmc_ip:
            yield bmc_ip, f"{name} (BMC)"


def _check_unique(plan: Plan, checked: Mapping[str, IPv4Address]) -> None:
    """No address is given twice, nor given while another planned device keeps it."""
    owners = dict(_planned(plan, checked))
    for name, address in checked.items():
        owner = owners.setdefault(str(address), name)
        if owner != name:
            raise AddressesError(
                f"address of {name!r} is {address}, already the address of {owner!r}",
                path=name,
                hint="each server needs an address of its own; check the file for a copy slip",
            )


def with_addresses(
    plan: Plan, addresses: Mapping[str, object], subnet: IPv4Network | None = None
) -> Plan:
    """``plan`` with the management address of every server named in ``addresses``.

    ``subnet`` is the management network racked servers' addresses must lie in (cloud
    instances, with no rack, take whatever their VPC gives).

    Raises:
        AddressesError: the first entry that names no planned server or holds an unusable,
            out-of-subnet, repeated or already planned address.
    """
    servers = {s.name: s for s in plan.servers}
    unknown = sorted(set(addresses) - set(servers))
    if unknown:
        raise AddressesError(
            f"{len(unknown)} name(s) are not planned servers, e.g. {unknown[0]!r}",
            path=unknown[0],
            hint="pass the `hosts` stack output of this spec's Pulumi stack",
        )
    checked = {name: _address(name, value) for name, value in addresses.items()}
    for name, address in checked.items():
        _check_subnet(servers[name], address, subnet)
    _check_unique(plan, checked)
    replaced = tuple(
        dataclasses.replace(s, mgmt_ip=str(checked[s.name])) if s.name in checked else s
        for s in plan.servers
    )
    return dataclasses.replace(plan, servers=replaced)
