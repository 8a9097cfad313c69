"""Pure helpers of the AWS target: subnet layout, SSH sources, tags, address room.

No Pulumi resources here: functions of numbers, CIDRs and plan records that `infra.provision.aws`
builds its resources from (and that tests check directly). FSx sizing lives in
`infra.catalog.fsx`, where the checkpoint budget reads it too; its names are re-exported here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from infra.catalog import Node
from infra.catalog.fsx import (
    FSX_CAPACITY_STEP_GIB,
    FSX_CHECKPOINTS_KEPT,
    FSX_MIN_CAPACITY_GIB,
    FSX_TIERS,
    fsx_capacity_and_tier,
    fsx_size,
)
from infra.errors import RailplanError
from infra.topology import Plan, Server
from infra.wording import plural

__all__ = [
    "FSX_CAPACITY_STEP_GIB",
    "FSX_CHECKPOINTS_KEPT",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_TIERS",
    "AwsTargetError",
    "bastion_ssh_cidrs",
    "check_subnet_room",
    "fsx_capacity_and_tier",
    "fsx_size",
    "instance_type",
    "public_subnet_cidr",
    "server_tags",
    "subnet_cidr",
]


class AwsTargetError(RailplanError, ValueError):
    """The spec cannot be provisioned on AWS (not AWS instance types, subnet too small)."""


# Addresses in the subnet besides the instances' interfaces: FSx file servers' interfaces and
# a margin. A guess: AWS does not state how many interfaces a file system takes.
SUBNET_ADDRESS_ALLOWANCE = 256
SUBNET_RESERVED = 5  # AWS reserves the first four and the last address of every subnet

ROOT_DEVICE_NAME = "/dev/sda1"  # Ubuntu AMIs (the Deep Learning AMIs); Amazon Linux: /dev/xvda

# The public subnet holds only the NAT gateway and the bastion: a /24 is plenty.
PUBLIC_SUBNET_PREFIX = 24
AWS_SMALLEST_SUBNET_PREFIX = 28  # AWS subnets are /16 to /28
ANYWHERE = "0.0.0.0/0"
MAX_BASTION_SSH_PREFIX = 16
"""The widest SSH source a bastion takes, in total: the sources, merged where they overlap,
may span at most the addresses of one /16 (65,536, 1/65,536 of IPv4). An office or VPN
egress is a handful of addresses; `0.0.0.0/1` + `128.0.0.0/1` is the whole internet."""
SSH_PORT = 22
BASTION_INSTANCE_TYPE = "t3.micro"  # a jump host forwards SSH; it needs no more


def subnet_cidr(vpc_cidr: str) -> str:
    """The cluster subnet: the first half of the VPC.

    The public subnet (`public_subnet_cidr`) takes the last /24 of the other half; the rest
    stays free. It does not depend on the cluster's size, so growing a node group never
    replaces the subnet and every instance in it.

    >>> subnet_cidr("10.0.0.0/16")
    '10.0.0.0/17'
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    return str(next(vpc.subnets(prefixlen_diff=1)))


def public_subnet_cidr(vpc_cidr: str) -> str:
    """The public subnet (NAT gateway, bastion): the last /24 of the VPC.

    It sits at the far end of the half `subnet_cidr` leaves free, so it never overlaps the
    default cluster subnet and, like it, does not depend on the cluster's size. In a VPC
    smaller than /22 the last /24 would be too much of it: there it is the last quarter.

    >>> public_subnet_cidr("10.0.0.0/16")
    '10.0.255.0/24'
    >>> public_subnet_cidr("172.31.0.0/20")
    '172.31.15.0/24'

    Raises:
        AwsTargetError: the VPC is too small for a quarter of it to be an AWS subnet.
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    prefix = max(PUBLIC_SUBNET_PREFIX, vpc.prefixlen + 2)
    if prefix > AWS_SMALLEST_SUBNET_PREFIX:
        raise AwsTargetError(
            f"VPC {vpc_cidr} is too small for a public subnet: use a /26 or larger"
        )
    size = 2 ** (32 - prefix)
    return str(ipaddress.IPv4Network((int(vpc.broadcast_address) + 1 - size, prefix)))


def bastion_ssh_cidrs(cidrs: Sequence[str]) -> list[str]:
    """The sources SSH to the bastion is allowed from, checked and in canonical form.

    Each must be an IPv4 network (host bits zero: ``203.0.113.7/32``, ``198.51.100.0/24``).
    The whole internet (``0.0.0.0/0``, ``::/0``) is refused: a bastion is the one host with
    a public address, and an SSH port open to everyone draws brute-force scans within
    minutes. So is the internet in pieces: sources that together, overlaps merged, span more
    addresses than a /16 (`MAX_BASTION_SSH_PREFIX`). IPv6 sources are refused too: the VPC
    and the bastion have no IPv6 address, so such a rule could never match.

    >>> bastion_ssh_cidrs(["203.0.113.7/32"])
    ['203.0.113.7/32']

    Raises:
        AwsTargetError: a source is not a CIDR, is the whole internet, or is IPv6, or the
            sources together span more than a /16.
    """
    checked: list[ipaddress.IPv4Network] = []
    for text in cidrs:
        try:
            net = ipaddress.ip_network(text, strict=True)
        except ValueError as exc:
            raise AwsTargetError(f"bastion_cidrs: {text!r} is not a network ({exc})") from None
        if net.prefixlen == 0:
            raise AwsTargetError(
                f"bastion_cidrs: {text} is the whole internet; allow SSH to the bastion from "
                "your own addresses only (e.g. your office or VPN egress as a /32)"
            )
        if net.version != 4:
            raise AwsTargetError(
                f"bastion_cidrs: {text} is IPv6; the VPC and the bastion are IPv4 only"
            )
        checked.append(ipaddress.IPv4Network(net))
    _check_span(checked)
    return [str(net) for net in checked]


def _check_span(nets: Sequence[ipaddress.IPv4Network]) -> None:
    """Refuse sources that together span more than a /16 (counted once where they overlap)."""
    most = 2 ** (32 - MAX_BASTION_SSH_PREFIX)
    spanned = sum(net.num_addresses for net in ipaddress.collapse_addresses(nets))
    if spanned > most:
        raise AwsTargetError(
            f"bastion_cidrs: {plural(len(nets), 'source')} together span {spanned:,} "
            f"addresses, more than a /{MAX_BASTION_SSH_PREFIX} ({most:,}); allow SSH to the bastion from your own addresses only "
            "(e.g. your office or VPN egress as a /32)"
        )


def instance_type(node_id: str, node: Node) -> str:
    """The EC2 instance type of a catalog node (``aws-p5.48xlarge`` -> ``p5.48xlarge``)."""
    return node.instance_type or node_id.removeprefix("aws-")


def server_tags(cluster: str, server: Server) -> dict[str, str]:
    """The tags of one instance: its planned name and where it sits in the plan."""
    tags = {
        "Name": server.name,
        "railplan:cluster": cluster,
        "railplan:group": server.group,
        "railplan:index": str(server.index),
    }
    if server.su is not None:
        tags["railplan:su"] = server.su
    return tags


def check_subnet_room(cidr: str, plan: Plan, nodes: dict[str, Node]) -> None:
    """Every EFA (with ENA) interface takes an address: the subnet must hold them all.

    Raises:
        AwsTargetError: the subnet is too small for the planned instances' interfaces.
    """
    needed = sum(nodes[s.group].compute_nics for s in plan.servers) + SUBNET_ADDRESS_ALLOWANCE
    usable = ipaddress.IPv4Network(cidr).num_addresses - SUBNET_RESERVED
    if needed > usable:
        raise AwsTargetError(
            f"subnet {cidr} has {usable} usable addresses; the planned instances' EFA "
            f"interfaces and FSx need about {needed}: use a larger vpc_cidr or subnet_cidr"
        )
