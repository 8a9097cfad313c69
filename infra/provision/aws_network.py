"""The AWS target's network pieces: a way out, SSH through a bastion, EFA and egress groups.

The way out is an internet gateway, a public subnet and a NAT gateway with its route tables.
Functions here declare Pulumi resources under the options they are given (`AwsGpuCluster`
passes itself as the parent), so the component stays a short list of what it builds.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.provision.aws_layout import ANYWHERE, SSH_PORT, AwsTargetError

__all__ = [
    "Bastion",
    "BastionImage",
    "InternetAccess",
    "bastion_host",
    "efa_security_group",
    "egress_security_group",
    "internet_access",
    "ssh_groups",
]


@dataclass(frozen=True)
class InternetAccess:
    """The VPC's way out: internet gateway, public subnet, NAT gateway, route tables.

    The NAT lives in the public subnet (whose default route is the internet gateway) and the
    cluster subnet's default route is the NAT: instances without public addresses can open
    connections out, and nothing can open one in. EFA instances could not use a public
    subnet anyway: EC2 auto-assigns a public IP only to an instance with one network
    interface, and p4d/p5 have 4 or 32.
    """

    gateway: aws.ec2.InternetGateway
    public_subnet: aws.ec2.Subnet
    public_routes: aws.ec2.RouteTable
    public_association: aws.ec2.RouteTableAssociation
    nat_ip: aws.ec2.Eip
    nat: aws.ec2.NatGateway
    private_routes: aws.ec2.RouteTable
    private_association: aws.ec2.RouteTableAssociation

    def resources(self) -> list[pulumi.Resource]:
        """Every resource, in declaration order."""
        return [
            self.gateway,
            self.public_subnet,
            self.public_routes,
            self.public_association,
            self.nat_ip,
            self.nat,
            self.private_routes,
            self.private_association,
        ]


@dataclass(frozen=True)
class Bastion:
    """The jump host: SSH in from ``bastion_cidrs``, and from it to the cluster instances.

    Two groups so that each rule names the narrowest source: the bastion's group lets SSH
    in from the given CIDRs; the cluster's SSH group lets SSH in from members of the
    bastion's group only (a group reference, not a CIDR: it follows the bastion if it is
    replaced and admits nothing else in the public subnet, such as the NAT).
    """

    security_group: aws.ec2.SecurityGroup
    cluster_ssh_group: aws.ec2.SecurityGroup
    instance: aws.ec2.Instance

    def resources(self) -> list[pulumi.Resource]:
        """Every resource, in declaration order."""
        return [self.security_group, self.cluster_ssh_group, self.instance]


def internet_access(
    vpc: aws.ec2.Vpc,
    cluster_subnet: aws.ec2.Subnet,
    name: str,
    availability_zone: str,
    public_cidr: str,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> InternetAccess:
    """Internet gateway and public subnet, then the NAT the cluster subnet routes through."""
    gateway = aws.ec2.InternetGateway(
        f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-igw"}, opts=opts
    )
    # Same AZ as the cluster: a NAT gateway serves its own AZ, and traffic to one in
    # another AZ would pay cross-AZ charges and fail with that AZ.
    public = aws.ec2.Subnet(
        f"{name}-public",
        vpc_id=vpc.id,
        cidr_block=public_cidr,
        availability_zone=availability_zone,
        tags={**tags, "Name": f"{name}-public"},
        opts=opts,
    )
    public_route = aws.ec2.RouteTableRouteArgs(cidr_block=ANYWHERE, gateway_id=gateway.id)
    public_routes, public_association = _default_route(
        vpc, f"{name}-public", public, public_route, tags, opts
    )
    # AWS: a public NAT gateway (and its Elastic IP) needs the VPC's internet gateway.
    after_gateway = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[gateway]))
    nat_ip = aws.ec2.Eip(
        f"{name}-nat", domain="vpc", tags={**tags, "Name": f"{name}-nat"}, opts=after_gateway
    )
    nat = aws.ec2.NatGateway(
        f"{name}-nat",
        allocation_id=nat_ip.id,
        subnet_id=public.id,
        connectivity_type="public",
        tags={**tags, "Name": f"{name}-nat"},
        opts=after_gateway,
    )
    private_route = aws.ec2.RouteTableRouteArgs(cidr_block=ANYWHERE, nat_gateway_id=nat.id)
    private_routes, private_association = _default_route(
        vpc, f"{name}-private", cluster_subnet, private_route, tags, opts
    )
    return InternetAccess(
        gateway,
        public,
        public_routes,
        public_association,
        nat_ip,
        nat,
        private_routes,
        private_association,
    )


def _default_route(
    vpc: aws.ec2.Vpc,
    name: str,
    subnet: aws.ec2.Subnet,
    route: aws.ec2.RouteTableRouteArgs,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> tuple[aws.ec2.RouteTable, aws.ec2.RouteTableAssociation]:
    """A route table with one default route, and its association with ``subnet``.

    The VPC's local route is implicit in every table. Each subnet gets its own table
    rather than a change to the VPC's main one, which every other subnet would inherit.
    """
    table = aws.ec2.RouteTable(
        f"{name}-rt",
        vpc_id=vpc.id,
        routes=[route],
        tags={**tags, "Name": f"{name}-rt"},
        opts=opts,
    )
    association = aws.ec2.RouteTableAssociation(
        f"{name}-rt", subnet_id=subnet.id, route_table_id=table.id, opts=opts
    )
    return table, association


def ssh_groups(
    vpc: aws.ec2.Vpc,
    name: str,
    cidrs: list[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> tuple[aws.ec2.SecurityGroup, aws.ec2.SecurityGroup]:
    """The bastion's group (SSH from ``cidrs``) and the cluster's (SSH from the bastion)."""
    bastion = _bastion_group(vpc, name, cidrs, tags, opts)
    return bastion, _cluster_ssh_group(vpc, name, bastion, tags, opts)


def _bastion_group(
    vpc: aws.ec2.Vpc,
    name: str,
    cidrs: list[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> aws.ec2.SecurityGroup:
    """SSH in from ``cidrs`` only. Outbound comes from the egress group."""
    return aws.ec2.SecurityGroup(
        f"{name}-bastion",
        vpc_id=vpc.id,
        description="Bastion: SSH in from the listed CIDRs only",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(
                protocol="tcp", from_port=SSH_PORT, to_port=SSH_PORT, cidr_blocks=cidrs
            )
        ],
        tags={**tags, "Name": f"{name}-bastion"},
        opts=opts,
    )


def _cluster_ssh_group(
    vpc: aws.ec2.Vpc,
    name: str,
    bastion: aws.ec2.SecurityGroup,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> aws.ec2.SecurityGroup:
    """On the cluster instances: SSH in from the bastion's group only.

    No egress rules (replies to an allowed connection are let out: groups are stateful).
    """
    return aws.ec2.SecurityGroup(
        f"{name}-ssh",
        vpc_id=vpc.id,
        description="SSH in from the bastion's security group only",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(
                protocol="tcp",
                from_port=SSH_PORT,
                to_port=SSH_PORT,
                security_groups=[bastion.id],
            )
        ],
        tags={**tags, "Name": f"{name}-ssh"},
        opts=opts,
    )


@dataclass(frozen=True)
class BastionImage:
    """What the bastion boots: its AMI, instance type and EC2 key pair (`AwsClusterArgs`)."""

    ami_id: str
    instance_type: str
    key_name: str | None


def bastion_host(
    internet: InternetAccess | None,
    egress: aws.ec2.SecurityGroup | None,
    name: str,
    image: BastionImage,
    group: aws.ec2.SecurityGroup,
    cluster_ssh: aws.ec2.SecurityGroup,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> Bastion:
    """The jump host: the public subnet, a public IP, IMDSv2, an encrypted root volume.

    Outbound (updates, SSH on to the cluster) goes through the egress group.
    """
    if internet is None or egress is None:
        # AwsClusterArgs.ssh_cidrs refuses a bastion without internet_egress first.
        raise AwsTargetError("a bastion needs internet_egress (an internet gateway)")
    instance = aws.ec2.Instance(
        f"{name}-bastion",
        ami=image.ami_id,
        instance_type=image.instance_type,
        key_name=image.key_name,
        subnet_id=internet.public_subnet.id,
        associate_public_ip_address=True,
        vpc_security_group_ids=[group.id, egress.id],
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required"
        ),
        # Size from the AMI's snapshot: a large GPU AMI's needs more than a fixed default.
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_type="gp3", encrypted=True, delete_on_termination=True
        ),
        tags={**tags, "Name": f"{name}-bastion", "railplan:role": "bastion"},
        opts=opts,
    )
    return Bastion(group, cluster_ssh, instance)


def efa_security_group(
    vpc: aws.ec2.Vpc, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions
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
        vpc_id=vpc.id,
        description="EFA: all traffic within this group only",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)
        ],
        egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True)],
        tags={**tags, "Name": f"{name}-efa"},
        opts=opts,
    )


def egress_security_group(
    vpc: aws.ec2.Vpc, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    """Outbound to anywhere (package mirrors, registries, S3), no inbound.

    Kept out of the EFA group so that group stays exactly what the EFA guide asks for.
    A deliberate choice: nodes are useless without packages, and the EKS default cluster
    group makes the same one (all outbound to 0.0.0.0/0 next to the EFA self rule).
    """
    return aws.ec2.SecurityGroup(
        f"{name}-egress",
        vpc_id=vpc.id,
        description="Outbound to anywhere (package installs); no inbound",
        egress=[
            aws.ec2.SecurityGroupEgressArgs(
                protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]
            )
        ],
        tags={**tags, "Name": f"{name}-egress"},
        opts=opts,
    )
