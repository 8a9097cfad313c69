"""Tenants' GPU quotas per node group, in the resources each group exposes over the day.

A tenant's `gpus` is one number; the batch schedulers count quota per resource
(`nvidia.com/gpu`, and with the ``mixed`` MIG strategy each `nvidia.com/mig-<profile>`), and
Kueue per flavor (one per node group). `group_gpus` reads what each node group offers over
all its MIG states (its `mig` and every scheduled change): the most and the fewest whole
GPUs, and the most slices of each profile. Each tenant's quota is placed on the groups by
`infra.topology.tenant_quota.shares`. `amount` turns a share of a group's GPUs into a resource of that group:
n of its G GPUs give ``n * whole // G`` whole GPUs and ``n * slices // G`` slices.
`host_resources` reads what the group's hosts offer besides GPUs (CPUs, memory, the RDMA shared
device), which `amount` shares the same way, so CPUs and memory follow GPUs.
Everything here is a pure function of the spec and the plan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.k8s.gpu import RDMA_HCA_MAX, RDMA_RESOURCE
from infra.spec import Spec
from infra.topology import Plan
from infra.topology.facts_model import MigState

__all__ = [
    "CPU_RESOURCE",
    "GPU_RESOURCE",
    "HOST_SHARE_PCT",
    "MEMORY_RESOURCE",
    "RDMA_QUOTA_RESOURCE",
    "GroupGpus",
    "amount",
    "group_gpus",
    "host_resources",
    "mig_resource",
    "mig_resources",
    "per_group",
    "plain_profile",
    "totals",
]

GPU_RESOURCE = "nvidia.com/gpu"
CPU_RESOURCE = "cpu"
MEMORY_RESOURCE = "memory"  # counted in GiB here; rendered with a ``Gi`` suffix
RDMA_QUOTA_RESOURCE = f"rdma/{RDMA_RESOURCE}"
# Share of a node's CPUs and memory pods may be given: the kubelet's reservations, the
# container runtime and the node's DaemonSets (GPU Operator, DCGM exporter, RDMA plugin,
# monitoring agents) take the rest; the OS also sees a little less memory than the DIMMs
# hold. The same 95 % Slurm's RealMemory takes of the installed memory.
HOST_SHARE_PCT = 95
# Profiles the device plugin exposes as `nvidia.com/mig-<profile>` (no `+attribute` forms:
# `+` is not allowed in a resource name, and how those are named is not settled here).
_PLAIN_MIG_PROFILE = re.compile(r"^([1-7]c\.)?[1-7]g\.[0-9]+gb\Z")


def plain_profile(profile: str) -> bool:
    """Whether the device plugin exposes ``profile`` as a resource of its own name."""
    return _PLAIN_MIG_PROFILE.match(profile) is not None


def mig_resource(profile: str) -> str:
    """The extended resource of a MIG profile under the ``mixed`` strategy."""
    return f"nvidia.com/mig-{profile}"


@dataclass(frozen=True, slots=True)
class GroupGpus:
    """What one node group offers the schedulers, over every MIG state it goes through.

    Attributes:
        name: the node group; gpus: its GPUs (servers x GPUs per server).
        whole_max, whole_min: whole GPUs (`nvidia.com/gpu`) in its state with most, fewest.
        slices: per `nvidia.com/mig-*` resource, the most slices any state exposes; empty
            unless the MIG strategy is ``mixed`` (with ``single`` a slice is `nvidia.com/gpu`).
    """

    name: str
    gpus: int
    whole_max: int
    whole_min: int
    slices: dict[str, int]


def group_gpus(spec: Spec, plan: Plan) -> list[GroupGpus]:
    """`GroupGpus` of every node group on the plan, in spec order."""
    mixed = spec.scheduler.mig_strategy == "mixed"
    groups = []
    for group in spec.node_groups:
        planned = plan.groups[group.name]
        total = planned.servers * planned.gpus
        if not mixed:
            groups.append(GroupGpus(group.name, total, total, total, {}))
            continue
        states = planned.mig.states
        whole = [planned.servers * sum(1 for lay in s.per_gpu if lay is None) for s in states]
        slices: dict[str, int] = {}
        for state in states:
            for resource, count in _state_slices(spec, state).items():
                slices[resource] = max(slices.get(resource, 0), planned.servers * count)
        groups.append(GroupGpus(group.name, total, max(whole), min(whole), slices))
    return groups


def _state_slices(spec: Spec, state: MigState) -> dict[str, int]:
    """Slices per resource on one server in ``state`` (unknown layouts are lint's error)."""
    slices: dict[str, int] = {}
    for layout_name in state.per_gpu:
        layout = spec.mig_layouts.get(layout_name) if layout_name is not None else None
        if layout is None:
            continue
        for profile, count in layout.profiles.items():
            if count and plain_profile(profile):
                resource = mig_resource(profile)
                slices[resource] = slices.get(resource, 0) + count
    return slices


def host_resources(spec: Spec, plan: Plan, catalog: Catalog) -> list[dict[str, int]]:
    """Per node group (spec order): CPUs, memory (GiB) and RDMA devices its servers offer pods.

    CPUs and memory are `HOST_SHARE_PCT` of each host's (logical CPUs, installed GiB), rounded
    down per node. `rdma/rdma_shared_device_ib` counts what the RDMA shared device plugin
    advertises on each server with compute-fabric HCAs (its ``rdmaHcaMax``), and appears only
    when some server has them (the plugin is rendered only then).
    """
    rdma = any(server.hcas for server in plan.servers)
    found = []
    for group in spec.node_groups:
        host = catalog.nodes[group.node].host
        servers = plan.groups[group.name].servers
        on_fabric = sum(1 for s in plan.servers if s.group == group.name and s.hcas)
        per_group = {
            CPU_RESOURCE: servers * (host.cpus * HOST_SHARE_PCT // 100),
            MEMORY_RESOURCE: servers * (host.memory_gib * HOST_SHARE_PCT // 100),
        }
        if rdma:
            per_group[RDMA_QUOTA_RESOURCE] = on_fabric * RDMA_HCA_MAX
        found.append(per_group)
    return found


def mig_resources(groups: Sequence[GroupGpus]) -> list[str]:
    """Every `nvidia.com/mig-*` resource some group exposes at some time, sorted."""
    return sorted({r for g in groups for r in g.slices})


def amount(gpus: int, per_group: int, group: GroupGpus) -> int:
    """What ``gpus`` of ``group``'s GPUs give of a resource the group has ``per_group`` of."""
    return gpus * per_group // group.gpus if group.gpus else 0


def per_group(resource: str, group: GroupGpus, *, fewest: bool = False) -> int:
    """How much of ``resource`` ``group`` has: at its most, or (whole GPUs) at its fewest."""
    if resource == GPU_RESOURCE:
        return group.whole_min if fewest else group.whole_max
    return group.slices.get(resource, 0)


def totals(
    gpus: Sequence[int], groups: Sequence[GroupGpus], *, fewest: bool = False
) -> dict[str, int]:
    """What ``gpus[i]`` GPUs of each ``groups[i]`` give together, per resource.

    `nvidia.com/gpu` first, then the MIG resources any group exposes (`per_group`).
    """
    return {
        r: sum(
            amount(n, per_group(r, g, fewest=fewest), g) for n, g in zip(gpus, groups, strict=True)
        )
        for r in [GPU_RESOURCE, *mig_resources(groups)]
    }
