"""An AWS GPU cluster as one Pulumi component: network, EFA launch templates, instances, FSx.

`AwsGpuCluster` builds, from a spec, its plan and the catalog (`AwsClusterArgs`):

* a VPC and one subnet in the chosen Availability Zone (the first half of the VPC unless
  given; EFA needs every instance in one AZ and one placement group);
* a cluster placement group (strategy ``cluster``);
* the EFA security group: all traffic in from, and out to, itself and nothing else, which
  EFA requires (see `efa_security_group`); a separate egress group adds outbound traffic to
  ``0.0.0.0/0`` for package installs unless ``internet_egress=False``;
* one launch template per node group: the instance type from the catalog node, one EFA
  interface per network card as the catalog counts them (``compute_nics``: 4 on p4d/p4de,
  32 on p5), the placement group, IMDSv2 required, an encrypted gp3 root volume;
* one EC2 instance per planned server, named and tagged after it;
* an FSx for Lustre file system (PERSISTENT_2) when the spec has a checkpoint budget, sized
  by `fsx_size` so a checkpoint can be written in its time limit.

Only instances scale with the cluster; everything else is per cluster or per node group.
Construction is pure: nothing here reads Pulumi config or prints; the project's
``__main__.py`` reads config (AMI, AZ, key pair) and exports the outputs.

Outputs (attributes and ``register_outputs``), the shape ``railplan render`` can turn into an
Ansible inventory::

    hosts: {hostname: private IPv4 of the primary interface}   # every planned server
    vpc_id: "vpc-..."
    fsx_dns_name: "fs-....fsx.<region>.amazonaws.com"          # only with FSx
    fsx_mount_name: "abcdef01"                                 # only with FSx

Not built here: a route to the internet (internet gateway / NAT) and any way in from outside
(bastion, SSM endpoints). Without them the egress group allows traffic that has nowhere to
go, and Ansible must run from a host inside the EFA security group.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.catalog import Catalog, Node
from infra.errors import RailplanError
from infra.spec import Spec
from infra.topology import Plan, Server

__all__ = [
    "FSX_CAPACITY_STEP_GIB",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_TIERS",
    "AwsClusterArgs",
    "AwsGpuCluster",
    "AwsTargetError",
    "fsx_size",
    "instance_type",
    "launch_template_interfaces",
    "server_tags",
    "subnet_cidr",
]


class AwsTargetError(RailplanError, ValueError):
    """The spec cannot be provisioned on AWS (not AWS instance types, subnet too small)."""


COMPONENT_TYPE = "railplan:aws:GpuCluster"

# FSx for Lustre PERSISTENT_2 (SSD): per-unit storage throughput, MB/s per TiB, is one of
# 125, 250, 500 or 1000 ("For PERSISTENT_2 SSD storage: 125, 250, 500, 1000",
# https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html), and
# storage capacity is "1200 GiB, 2400 GiB, and increments of 2400 GiB" (FSx API
# CreateFileSystem StorageCapacity, for SCRATCH_2, PERSISTENT_2 and PERSISTENT_1 SSD).
# The price weights rank the tiers only: rounded ratios of the list prices per GB-month as a
# third-party table quoted them (ap-northeast-1, September 2022: 0.31, 0.46, 0.77 and 1.39
# USD per hour for 1.2 TiB at 125/250/500/1000), not checked against the AWS pricing page.
# A higher tier costs more per GiB but less per MB/s; the weights are not a cost estimate.
FSX_TIERS: Mapping[int, float] = {125: 1.0, 250: 1.5, 500: 2.5, 1000: 4.5}
FSX_MIN_CAPACITY_GIB = 1200
FSX_CAPACITY_STEP_GIB = 2400
# Keep two checkpoints: the one being written must not overwrite the last good one.
FSX_CHECKPOINTS_KEPT = 2

# Addresses in the subnet besides the instances' interfaces: FSx file servers' interfaces and
# a margin. A guess: AWS does not state how many interfaces a file system takes.
SUBNET_ADDRESS_ALLOWANCE = 256
SUBNET_RESERVED = 5  # AWS reserves the first four and the last address of every subnet

ROOT_DEVICE_NAME = "/dev/sda1"  # Ubuntu AMIs (the Deep Learning AMIs); Amazon Linux: /dev/xvda


def fsx_size(nbytes: int, max_s: float) -> tuple[int, int]:
    """Size a PERSISTENT_2 file system for a checkpoint of ``nbytes`` within ``max_s`` seconds.

    Needs: capacity x tier >= ``nbytes / max_s`` (MB/s; 1 MB = 10**6 bytes, the conservative
    reading of AWS's "MB/s") and capacity >= two checkpoints. Rule: for every tier take the
    smallest valid capacity that meets both, then the cheapest by ``capacity x FSX_TIERS[tier]``;
    on a tie the lower tier (it gives more capacity for the price).

    >>> fsx_size(2_800_000_000_000, 120)
    (24000, 1000)
    >>> fsx_size(10**9, 600)
    (1200, 125)

    Returns:
        ``(storage capacity in GiB, per-unit storage throughput in MB/s/TiB)``.

    Raises:
        ValueError: ``nbytes`` or ``max_s`` is not positive.
    """
    if nbytes <= 0 or max_s <= 0:
        raise ValueError(f"checkpoint bytes and max_s must be positive, got {nbytes}, {max_s}")
    return _fsx_size(FSX_CHECKPOINTS_KEPT * nbytes, nbytes / max_s / 1e6)


def _fsx_size(keep_bytes: int, mbps: float) -> tuple[int, int]:
    """The cheapest (capacity GiB, tier) holding ``keep_bytes`` and writing ``mbps`` MB/s."""
    floor_gib = keep_bytes / 2**30
    options = []
    for tier, weight in FSX_TIERS.items():
        capacity = _valid_capacity(max(floor_gib, mbps * 1024 / tier))
        options.append((capacity * weight, tier, capacity))
    _, tier, capacity = min(options)
    return capacity, tier


def _valid_capacity(gib: float) -> int:
    """The smallest PERSISTENT_2 SSD capacity of at least ``gib``: 1200, 2400, 4800, ..."""
    if gib <= FSX_MIN_CAPACITY_GIB:
        return FSX_MIN_CAPACITY_GIB
    return FSX_CAPACITY_STEP_GIB * max(1, math.ceil(gib / FSX_CAPACITY_STEP_GIB))


def subnet_cidr(vpc_cidr: str) -> str:
    """The cluster subnet: the first half of the VPC.

    The other half stays free (e.g. for a public subnet with a NAT gateway). It does not
    depend on the cluster's size, so growing a node group never replaces the subnet and
    every instance in it.

    >>> subnet_cidr("10.0.0.0/16")
    '10.0.0.0/17'
    """
    vpc = ipaddress.IPv4Network(vpc_cidr)
    return str(next(vpc.subnets(prefixlen_diff=1)))


def launch_template_interfaces(
    efa_count: int, subnet_id: pulumi.Input[str], security_groups: list[pulumi.Input[str]]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One EFA interface per network card, as AWS recommends for multi-card instances.

    "For the primary network interface (network card index 0, device index 0), create an EFA
    (EFA with ENA) interface. You can't use an EFA-only network interface as the primary
    network interface. For each additional network interface, use the next unused network
    card index, device index 1" (EC2 User Guide, "Maximize network bandwidth on Amazon EC2
    instances with multiple network cards",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html; P5 needs
    this layout for its full 3,200 Gbps). All are "efa" (EFA with ENA): each takes a private
    IPv4 address, which `subnet_cidr` leaves room for.
    """
    if efa_count < 1:
        raise ValueError(f"an EFA launch template needs at least one interface, got {efa_count}")
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=0 if card == 0 else 1,
            interface_type="efa",
            subnet_id=subnet_id,
            security_groups=security_groups,
            delete_on_termination="true",
        )
        for card in range(efa_count)
    ]


@dataclass(frozen=True)
class AwsClusterArgs:
    """What `AwsGpuCluster` is built from.

    Attributes:
        spec: the cluster spec (its name tags every resource).
        plan: the spec's plan (``infra.topology.expand``): one instance per server.
        catalog: the hardware catalog (instance type and EFA count per node).
        availability_zone: the one AZ every instance and the file system go in.
        ami_id: the GPU AMI (e.g. a Deep Learning AMI); from Pulumi config, not the spec.
        key_name: an EC2 key pair for SSH, or None.
        vpc_cidr: the VPC's IPv4 range.
        subnet_cidr: the cluster subnet; default `subnet_cidr` of the VPC.
        internet_egress: attach a security group allowing all outbound traffic (package
            installs, container pulls); the EFA group itself stays self-only.
        root_volume_gib: size of the encrypted gp3 root volume.
        root_device_name: the AMI's root device (``/dev/sda1`` on Ubuntu DLAMIs).
    """

    spec: Spec
    plan: Plan
    catalog: Catalog
    availability_zone: str
    ami_id: str
    key_name: str | None = None
    vpc_cidr: str = "10.0.0.0/16"
    subnet_cidr: str | None = None
    internet_egress: bool = True
    root_volume_gib: int = 512
    root_device_name: str = ROOT_DEVICE_NAME

    def aws_nodes(self) -> dict[str, Node]:
        """The catalog node of every node group, checked to be an AWS instance type.

        Raises:
            AwsTargetError: a group's node is not an AWS cloud node with EFA interfaces.
        """
        nodes: dict[str, Node] = {}
        for group in self.spec.node_groups:
            node = self.catalog.nodes.get(group.node)
            if node is None or node.cloud != "aws" or node.kind != "cloud":
                raise AwsTargetError(
                    f"node group {group.name!r}: {group.node!r} is not an AWS instance type "
                    "(catalog nodes with cloud: aws, e.g. aws-p5.48xlarge)"
                )
            if node.compute_nics < 1:
                raise AwsTargetError(
                    f"node group {group.name!r}: {group.node!r} has no EFA devices"
                )
            nodes[group.name] = node
        return nodes

    def checkpoint_need(self) -> tuple[int, float] | None:
        """(bytes to keep, MB/s to write) over the spec's checkpoint budgets, or None."""
        budgets = [b.checkpoint for b in self.spec.budgets if b.checkpoint is not None]
        if not budgets:
            return None
        keep = FSX_CHECKPOINTS_KEPT * max(b.bytes for b in budgets)
        return keep, max(b.bytes / b.max_s / 1e6 for b in budgets)


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


class AwsGpuCluster(pulumi.ComponentResource):
    """A planned GPU cluster on EC2: VPC, subnet, placement group, EFA, instances, FSx."""

    vpc: aws.ec2.Vpc
    subnet: aws.ec2.Subnet
    placement_group: aws.ec2.PlacementGroup
    efa_security_group: aws.ec2.SecurityGroup
    egress_security_group: aws.ec2.SecurityGroup | None
    launch_templates: dict[str, aws.ec2.LaunchTemplate]
    instances: dict[str, aws.ec2.Instance]
    fsx: aws.fsx.LustreFileSystem | None
    hosts: pulumi.Output[dict[str, str]]
    vpc_id: pulumi.Output[str]
    fsx_dns_name: pulumi.Output[str] | None
    fsx_mount_name: pulumi.Output[str] | None

    def __init__(
        self, name: str, args: AwsClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        # Check everything that can be wrong before declaring any resource.
        nodes = args.aws_nodes()
        cidr = args.subnet_cidr or subnet_cidr(args.vpc_cidr)
        _check_subnet_room(cidr, args.plan, nodes)
        need = args.checkpoint_need()

        super().__init__(COMPONENT_TYPE, name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster = args.spec.name
        tags = {"railplan:cluster": cluster}

        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_support=True,  # FSx is mounted by its DNS name
            enable_dns_hostnames=True,
            tags={**tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        self.subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=self.vpc.id,
            cidr_block=cidr,
            availability_zone=args.availability_zone,
            tags={**tags, "Name": f"{name}-subnet"},
            opts=child,
        )
        self.placement_group = aws.ec2.PlacementGroup(
            f"{name}-pg", strategy="cluster", tags=tags, opts=child
        )
        self.efa_security_group = self._efa_security_group(name, tags, child)
        self.egress_security_group = (
            self._egress_security_group(name, tags, child) if args.internet_egress else None
        )
        groups: list[pulumi.Input[str]] = [self.efa_security_group.id]
        if self.egress_security_group is not None:
            groups.append(self.egress_security_group.id)

        self.launch_templates = {
            group: self._launch_template(name, group, node_id, node, args, groups, tags, child)
            for group, (node_id, node) in _group_nodes(args, nodes).items()
        }
        self.instances = {
            server.name: self._instance(name, server, args, cluster, child)
            for server in args.plan.servers
        }
        self.fsx = self._fsx(name, need, tags, child) if need is not None else None

        names = list(self.instances)
        self.hosts = pulumi.Output.all(*(i.private_ip for i in self.instances.values())).apply(
            lambda ips: dict(zip(names, ips, strict=True))
        )
        self.vpc_id = self.vpc.id
        self.fsx_dns_name = self.fsx.dns_name if self.fsx is not None else None
        self.fsx_mount_name = self.fsx.mount_name if self.fsx is not None else None
        outputs: dict[str, pulumi.Output[object]] = {"hosts": self.hosts, "vpc_id": self.vpc_id}
        if self.fsx_dns_name is not None and self.fsx_mount_name is not None:
            outputs["fsx_dns_name"] = self.fsx_dns_name
            outputs["fsx_mount_name"] = self.fsx_mount_name
        self.register_outputs(outputs)

    def _efa_security_group(
        self, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions
    ) -> aws.ec2.SecurityGroup:
        """All traffic from and to the group itself, as EFA requires, and nothing else.

        EC2 User Guide, "Get started with EFA", step "Prepare an EFA-enabled security group"
        (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html): the group must
        allow all inbound and outbound traffic from and to itself. The AWS PCS guide gives the
        same two rules as CLI calls (``--protocol -1 --source-group <the group itself>``,
        https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-sg.html).
        The FSx file system joins this group too, so Lustre's ports (988, 1018-1023) between
        clients and file servers are covered by the same self rules.

        Inline rules: the provider then removes AWS's default allow-all egress rule, so these
        two are the group's only rules.
        """
        return aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=self.vpc.id,
            description="EFA: all traffic within this group only",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)
            ],
            egress=[
                aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True)
            ],
            tags={**tags, "Name": f"{name}-efa"},
            opts=opts,
        )

    def _egress_security_group(
        self, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions
    ) -> aws.ec2.SecurityGroup:
        """Outbound to anywhere (package mirrors, registries, S3), no inbound.

        Kept out of the EFA group so that group stays exactly what the EFA guide asks for.
        A deliberate choice: nodes are useless without packages, and the EKS default cluster
        group makes the same one (all outbound to 0.0.0.0/0 next to the EFA self rule).
        """
        return aws.ec2.SecurityGroup(
            f"{name}-egress",
            vpc_id=self.vpc.id,
            description="Outbound to anywhere (package installs); no inbound",
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]
                )
            ],
            tags={**tags, "Name": f"{name}-egress"},
            opts=opts,
        )

    def _launch_template(
        self,
        name: str,
        group: str,
        node_id: str,
        node: Node,
        args: AwsClusterArgs,
        groups: list[pulumi.Input[str]],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
    ) -> aws.ec2.LaunchTemplate:
        """One node group's template: instance type, EFA interfaces, placement, IMDSv2, EBS."""
        return aws.ec2.LaunchTemplate(
            f"{name}-{group}",
            image_id=args.ami_id,
            instance_type=instance_type(node_id, node),
            key_name=args.key_name,
            network_interfaces=launch_template_interfaces(
                node.compute_nics, self.subnet.id, groups
            ),
            placement=aws.ec2.LaunchTemplatePlacementArgs(
                group_name=self.placement_group.name,
                availability_zone=args.availability_zone,
            ),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                # 2 hops: containers (one more hop behind the host) reach IMDS too.
                http_put_response_hop_limit=2,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=args.root_device_name,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            # The instances carry their own tags; their volumes and interfaces get these.
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags={**tags, "railplan:group": group}
                )
                for kind in ("volume", "network-interface")
            ],
            tags={**tags, "railplan:group": group},
            opts=opts,
        )

    def _instance(
        self,
        name: str,
        server: Server,
        args: AwsClusterArgs,
        cluster: str,
        opts: pulumi.ResourceOptions,
    ) -> aws.ec2.Instance:
        """One planned server: its group's template, the placement group, its tags."""
        template = self.launch_templates[server.group]
        return aws.ec2.Instance(
            f"{name}-{server.name}",
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            # Also in the template; stated here so the instance alone shows where it runs.
            placement_group=self.placement_group.name,
            availability_zone=args.availability_zone,
            # Only the hostname: user data is readable through IMDS, so never a secret here.
            user_data=f"#cloud-config\nhostname: {server.name}\npreserve_hostname: false\n",
            tags=server_tags(cluster, server),
            opts=opts,
        )

    def _fsx(
        self,
        name: str,
        need: tuple[int, float],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
    ) -> aws.fsx.LustreFileSystem:
        """The checkpoint file system, sized by `fsx_size`'s rule for the strictest budget."""
        capacity, tier = _fsx_size(*need)
        return aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            deployment_type="PERSISTENT_2",
            storage_type="SSD",
            storage_capacity=capacity,
            per_unit_storage_throughput=tier,
            subnet_ids=self.subnet.id,
            security_group_ids=[self.efa_security_group.id],
            tags={**tags, "Name": f"{name}-fsx"},
            opts=opts,
        )


def _group_nodes(args: AwsClusterArgs, nodes: dict[str, Node]) -> dict[str, tuple[str, Node]]:
    """Node groups with servers in the plan: (catalog id, node) each, in spec order."""
    planned = {s.group for s in args.plan.servers}
    return {g.name: (g.node, nodes[g.name]) for g in args.spec.node_groups if g.name in planned}


def _check_subnet_room(cidr: str, plan: Plan, nodes: dict[str, Node]) -> None:
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
