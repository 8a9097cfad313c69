"""An AWS GPU cluster as one Pulumi component: network, EFA launch templates, instances, FSx.

`AwsGpuCluster` builds, from a spec, its plan and the catalog (`AwsClusterArgs`):

* a VPC and one private subnet for the cluster in the chosen Availability Zone (the first half
  of the VPC unless given; EFA needs every instance in one AZ and one placement group);
* unless ``internet_egress=False``: a way out (`InternetAccess`): an internet gateway, a small
  public subnet in the same AZ (the last /24 of the VPC, `public_subnet_cidr`), a NAT gateway
  with an Elastic IP in it, and route tables sending ``0.0.0.0/0`` from the public subnet to
  the gateway and from the cluster subnet to the NAT. The GPU instances stay private: they
  reach package mirrors through the NAT, and nothing outside can open a connection to them;
* when ``bastion_cidrs`` is given (`Bastion`): a small instance in the public subnet with a
  public IP, SSH allowed in from those CIDRs only, and a group on the cluster instances
  allowing SSH from the bastion's group only (Ansible's jump host);
* a cluster placement group (strategy ``cluster``);
* the EFA security group: all traffic in from, and out to, itself and nothing else, which
  EFA requires (see `efa_security_group`); a separate egress group adds outbound traffic to
  ``0.0.0.0/0`` for package installs unless ``internet_egress=False``;
* one launch template per node group: the instance type from the catalog node, one EFA
  interface per network card as the catalog counts them (``compute_nics``: 4 on p4d/p4de,
  32 on p5), the placement group, IMDSv2 required, an encrypted gp3 root volume;
* one EC2 instance per planned server, named and tagged after it;
* an FSx for Lustre file system (PERSISTENT_2): the spec's ``aws.fsx`` when given, else,
  when the spec has a checkpoint budget, sized by `fsx_size` so a checkpoint can be written
  in its time limit (`sized_fsx`: the same file system the checkpoint budget predicts
  with).

Only instances scale with the cluster; everything else is per cluster or per node group.
``internet_egress=False`` builds none of the way out (no gateway, NAT, public subnet, egress
group or bastion): an air-gapped VPC that brings its own VPC endpoints or mirrors.
Construction is pure: nothing here reads Pulumi config or prints; the project's
``__main__.py`` reads config (AMI, AZ, key pair, bastion CIDRs) and exports the outputs.

Outputs (attributes and ``register_outputs``), the shape ``railplan render`` can turn into an
Ansible inventory::

    hosts: {hostname: private IPv4 of the primary interface}   # every planned server
    vpc_id: "vpc-..."
    bastion_public_ip: "203.0.113.10"                          # only with bastion_cidrs
    fsx_dns_name: "fs-....fsx.<region>.amazonaws.com"          # only with FSx
    fsx_mount_name: "abcdef01"                                 # only with FSx

Not built here: SSM endpoints or any other way in besides the bastion. Without a bastion,
Ansible must run from a host inside the VPC that has the EFA security group.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.budget.storage import sized_fsx
from infra.catalog import Catalog, Node
from infra.catalog.fsx import FsxLustre
from infra.provision.aws_layout import (
    BASTION_INSTANCE_TYPE,
    FSX_CAPACITY_STEP_GIB,
    FSX_MIN_CAPACITY_GIB,
    FSX_TIERS,
    ROOT_DEVICE_NAME,
    AwsTargetError,
    bastion_ssh_cidrs,
    check_subnet_room,
    fsx_size,
    instance_type,
    public_subnet_cidr,
    server_tags,
    subnet_cidr,
)
from infra.provision.aws_network import (
    Bastion,
    BastionImage,
    InternetAccess,
    bastion_host,
    efa_security_group,
    egress_security_group,
    internet_access,
    ssh_groups,
)
from infra.spec import Spec
from infra.topology import Plan, Server

__all__ = [
    "FSX_CAPACITY_STEP_GIB",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_TIERS",
    "AwsClusterArgs",
    "AwsGpuCluster",
    "AwsTargetError",
    "Bastion",
    "InternetAccess",
    "bastion_ssh_cidrs",
    "fsx_size",
    "instance_type",
    "launch_template_interfaces",
    "public_subnet_cidr",
    "server_tags",
    "subnet_cidr",
]


COMPONENT_TYPE = "railplan:aws:GpuCluster"


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
        internet_egress: build the way out (`InternetAccess`: internet gateway, public
            subnet, NAT, routes) and attach a security group allowing all outbound traffic
            (package installs, container pulls); the EFA group itself stays self-only.
            False: none of these, for an air-gapped VPC with its own endpoints or mirrors.
        public_subnet_cidr: the public subnet; default `public_subnet_cidr` of the VPC.
        bastion_cidrs: when non-empty, build a bastion (`Bastion`) that SSH is allowed to
            from these IPv4 networks only (`bastion_ssh_cidrs`: at most a /16 in all, so
            never the internet, whole or in pieces); needs ``internet_egress``.
        bastion_instance_type: the bastion's instance type.
        bastion_ami_id: the bastion's AMI; default ``ami_id`` (a small AMI boots faster).
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
    public_subnet_cidr: str | None = None
    bastion_cidrs: tuple[str, ...] = ()
    bastion_instance_type: str = BASTION_INSTANCE_TYPE
    bastion_ami_id: str | None = None

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

    def public_cidr(self, cluster_cidr: str) -> str | None:
        """The public subnet's CIDR, checked against the VPC and the cluster subnet, or None.

        Raises:
            AwsTargetError: it is outside the VPC or overlaps the cluster subnet.
        """
        if not self.internet_egress:
            return None
        public = self.public_subnet_cidr or public_subnet_cidr(self.vpc_cidr)
        vpc = ipaddress.IPv4Network(self.vpc_cidr)
        net, cluster = ipaddress.IPv4Network(public), ipaddress.IPv4Network(cluster_cidr)
        if not net.subnet_of(vpc) or not cluster.subnet_of(vpc):
            raise AwsTargetError(
                f"subnets {cluster_cidr} (cluster) and {public} (public) must lie in the "
                f"VPC {self.vpc_cidr}"
            )
        if net.overlaps(cluster):
            raise AwsTargetError(
                f"public subnet {public} overlaps the cluster subnet {cluster_cidr}: give a "
                "public_subnet_cidr outside it"
            )
        return public

    def ssh_cidrs(self) -> list[str]:
        """The checked `bastion_ssh_cidrs`; empty when there is no bastion.

        Raises:
            AwsTargetError: a bad source, a bastion without ``internet_egress`` (it would
                have no way in), or a planned server named like the bastion.
        """
        cidrs = bastion_ssh_cidrs(self.bastion_cidrs)
        if cidrs and not self.internet_egress:
            raise AwsTargetError(
                "bastion_cidrs needs internet_egress: without an internet gateway nothing "
                "can reach the bastion"
            )
        if cidrs and any(s.name == "bastion" for s in self.plan.servers):
            raise AwsTargetError("a planned server is named 'bastion', as the bastion is")
        return cidrs

    def bastion_image(self) -> BastionImage:
        """The bastion's AMI (its own, else the cluster's), instance type and key pair."""
        return BastionImage(
            self.bastion_ami_id or self.ami_id, self.bastion_instance_type, self.key_name
        )

    def file_system(self) -> FsxLustre | None:
        """The FSx file system to create, or None (`sized_fsx`).

        The spec's ``aws.fsx``, else one sized from the checkpoint budgets: the file system
        the checkpoint budget predicts with.
        """
        return sized_fsx(self.spec)


class AwsGpuCluster(pulumi.ComponentResource):
    """A planned GPU cluster on EC2: VPC, subnets, NAT, placement group, EFA, instances, FSx."""

    vpc: aws.ec2.Vpc
    subnet: aws.ec2.Subnet
    internet: InternetAccess | None
    bastion: Bastion | None
    placement_group: aws.ec2.PlacementGroup
    efa_security_group: aws.ec2.SecurityGroup
    egress_security_group: aws.ec2.SecurityGroup | None
    launch_templates: dict[str, aws.ec2.LaunchTemplate]
    instances: dict[str, aws.ec2.Instance]
    fsx: aws.fsx.LustreFileSystem | None
    hosts: pulumi.Output[dict[str, str]]
    vpc_id: pulumi.Output[str]
    bastion_public_ip: pulumi.Output[str] | None
    fsx_dns_name: pulumi.Output[str] | None
    fsx_mount_name: pulumi.Output[str] | None

    def __init__(
        self, name: str, args: AwsClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        # Check everything that can be wrong before declaring any resource.
        nodes = args.aws_nodes()
        cidr = args.subnet_cidr or subnet_cidr(args.vpc_cidr)
        check_subnet_room(cidr, args.plan, nodes)
        public_cidr = args.public_cidr(cidr)
        ssh_cidrs = args.ssh_cidrs()
        fsx = args.file_system()

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
        self.internet = (
            internet_access(
                self.vpc, self.subnet, name, args.availability_zone, public_cidr, tags, child
            )
            if public_cidr is not None
            else None
        )
        self.placement_group = aws.ec2.PlacementGroup(
            f"{name}-pg", strategy="cluster", tags=tags, opts=child
        )
        self.efa_security_group = efa_security_group(self.vpc, name, tags, child)
        self.egress_security_group = (
            egress_security_group(self.vpc, name, tags, child) if args.internet_egress else None
        )
        groups: list[pulumi.Input[str]] = [self.efa_security_group.id]
        if self.egress_security_group is not None:
            groups.append(self.egress_security_group.id)
        ssh = ssh_groups(self.vpc, name, ssh_cidrs, tags, child) if ssh_cidrs else None
        if ssh is not None:
            groups.append(ssh[1].id)  # the cluster instances take SSH from the bastion

        self.launch_templates = {
            group: self._launch_template(name, group, node_id, node, args, groups, tags, child)
            for group, (node_id, node) in _group_nodes(args, nodes).items()
        }
        self.instances = {
            server.name: self._instance(name, server, args, cluster, child)
            for server in args.plan.servers
        }
        self.fsx = self._fsx(name, fsx, tags, child) if fsx is not None else None
        self.bastion = (
            bastion_host(
                self.internet,
                self.egress_security_group,
                name,
                args.bastion_image(),
                *ssh,
                tags,
                child,
            )
            if ssh
            else None
        )

        names = list(self.instances)
        self.hosts = pulumi.Output.all(*(i.private_ip for i in self.instances.values())).apply(
            lambda ips: dict(zip(names, ips, strict=True))
        )
        self.vpc_id = self.vpc.id
        self.bastion_public_ip = self.bastion.instance.public_ip if self.bastion else None
        self.fsx_dns_name = self.fsx.dns_name if self.fsx is not None else None
        self.fsx_mount_name = self.fsx.mount_name if self.fsx is not None else None
        outputs: dict[str, pulumi.Output[object]] = {"hosts": self.hosts, "vpc_id": self.vpc_id}
        if self.bastion_public_ip is not None:
            outputs["bastion_public_ip"] = self.bastion_public_ip
        if self.fsx_dns_name is not None and self.fsx_mount_name is not None:
            outputs["fsx_dns_name"] = self.fsx_dns_name
            outputs["fsx_mount_name"] = self.fsx_mount_name
        self.register_outputs(outputs)

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
        fsx: FsxLustre,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
    ) -> aws.fsx.LustreFileSystem:
        """The checkpoint file system: the spec's size and tier, or `fsx_size`'s rule."""
        return aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            deployment_type="PERSISTENT_2",
            storage_type="SSD",
            storage_capacity=fsx.capacity_gib,
            per_unit_storage_throughput=fsx.tier,
            subnet_ids=self.subnet.id,
            security_group_ids=[self.efa_security_group.id],
            tags={**tags, "Name": f"{name}-fsx"},
            opts=opts,
        )


def _group_nodes(args: AwsClusterArgs, nodes: dict[str, Node]) -> dict[str, tuple[str, Node]]:
    """Node groups with servers in the plan: (catalog id, node) each, in spec order."""
    planned = {s.group for s in args.plan.servers}
    return {g.name: (g.node, nodes[g.name]) for g in args.spec.node_groups if g.name in planned}
