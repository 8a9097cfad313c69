"""Addresses assigned outside railplan (cloud instances): a plan with those management IPs.

On AWS the cloud, not the spec's CIDR, gives each instance its address; the Pulumi program
exports them as its ``hosts`` stack output (``{hostname: private_ip}``). `with_addresses`
returns the plan with each named server's management address replaced, so `railplan render
--addresses` writes an inventory whose ``ansible_host`` values reach the instances. Every
name must be a planned server and every value an IPv4 address, else `AddressesError` says
which entry (its path in the file) is wrong.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from ipaddress import IPv4Address

from infra.errors import RailplanError
from infra.topology.model import Plan

__all__ = ["AddressesError", "with_addresses"]


class AddressesError(RailplanError):
    """An addresses file names a server the plan lacks, or holds something not an address."""


def _address(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise AddressesError(f"address of {name!r} is {value!r}, not an IPv4 address", path=name)
    try:
        return str(IPv4Address(value))
    except ValueError:
        raise AddressesError(
            f"address of {name!r} is {value!r}, not an IPv4 address", path=name
        ) from None


def with_addresses(plan: Plan, addresses: Mapping[str, object]) -> Plan:
    """``plan`` with the management address of every server named in ``addresses``."""
    servers = {s.name for s in plan.servers}
    unknown = sorted(set(addresses) - servers)
    if unknown:
        raise AddressesError(
            f"{len(unknown)} name(s) are not planned servers, e.g. {unknown[0]!r}",
            path=unknown[0],
            hint="pass the `hosts` stack output of this spec's Pulumi stack",
        )
    checked = {name: _address(name, value) for name, value in addresses.items()}
    replaced = tuple(
        dataclasses.replace(s, mgmt_ip=checked[s.name]) if s.name in checked else s
        for s in plan.servers
    )
    return dataclasses.replace(plan, servers=replaced)
