"""The compute fabric as the batch scheduler sees it: Volcano HyperNodes or a Kueue Topology.

`scheduler_topology(spec, plan)` returns plain objects (see `infra.k8s.objects`):

- ``batch: volcano``: HyperNodes (``topology.volcano.sh/v1alpha1``), a tree of switch domains.
  Tier 1 is the scalable unit: on a rail-optimized fabric every server of an SU reaches every
  other through one leaf per rail, so the SU, not a single leaf, is the smallest domain.
  Tier 2 is a pod of a three-tier fabric (its SUs share the pod's spines); the top tier (3, or
  2 without pods) is the whole compute fabric. Tier-1 members select nodes by the
  ``railplan.dev/su`` label, so an SU is one entry however many servers it has.
- ``batch: kueue``: one Topology (levels coarse to fine: pod, SU, hostname) and one
  ResourceFlavor per node group, which counts every resource of the group's nodes (MIG
  slices included); only groups on the compute fabric point at the Topology.
- ``batch: none``: nothing.

Names are cluster-scoped, so each starts with the cluster name and ends with a fixed,
alphanumeric part; they follow SU, pod and group names, which the plan keeps stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from infra.k8s.objects import KubeObject, kube_object, topology_label
from infra.spec import Spec
from infra.topology import Plan, ScalableUnit

__all__ = [
    "HOSTNAME_LABEL",
    "HYPERNODE_API",
    "KUEUE_API",
    "fabric_hypernode_name",
    "flavor_name",
    "hypernodes",
    "kueue_topology",
    "pod_hypernode_name",
    "scheduler_topology",
    "su_hypernode_name",
    "topology_levels",
    "topology_name",
]

HYPERNODE_API = "topology.volcano.sh/v1alpha1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"  # the storage version; v1beta1 is deprecated upstream
HOSTNAME_LABEL = "kubernetes.io/hostname"  # Kueue allows it only as the last level


def scheduler_topology(spec: Spec, plan: Plan) -> list[KubeObject]:
    """The batch scheduler's view of the compute fabric (empty for ``batch: none``)."""
    batch = spec.scheduler.batch
    if batch == "volcano":
        return hypernodes(spec, plan)
    if batch == "kueue":
        return kueue_topology(spec, plan)
    return []


# --- names -------------------------------------------------------------------------------------


def su_hypernode_name(spec: Spec, su: str) -> str:
    """Tier-1 HyperNode of an SU (SU names are DNS labels ending ``-suNN``)."""
    return f"{spec.name}-{su}"


def pod_hypernode_name(spec: Spec, pod: int) -> str:
    """Tier-2 HyperNode of a pod of a three-tier fabric."""
    return f"{spec.name}-pod{pod}"


def fabric_hypernode_name(spec: Spec) -> str:
    """The top HyperNode: the whole compute fabric."""
    return f"{spec.name}-compute"


def topology_name(spec: Spec) -> str:
    """The Kueue Topology of the compute fabric."""
    return f"{spec.name}-compute"


def flavor_name(spec: Spec, group: str) -> str:
    """The ResourceFlavor of a node group.

    Group names may hold ``_`` (and end with it), which a DNS name may not: ``_`` becomes
    ``-`` (one-to-one, since group names never hold ``-``) and a fixed suffix keeps the name
    ending in an alphanumeric.
    """
    return f"{spec.name}-{group.replace('_', '-')}-flavor"


# --- Volcano -----------------------------------------------------------------------------------


def hypernodes(spec: Spec, plan: Plan) -> list[KubeObject]:
    """HyperNodes of the compute fabric, leaves (SUs) first, the root last.

    Servers without an SU (no compute fabric, or nodes without compute HCAs) are in none.
    """
    if not plan.sus:
        return []
    objects = [_su_hypernode(spec, su) for su in plan.sus]
    pods = sorted({su.pod for su in plan.sus if su.pod is not None})
    top_members = [pod_hypernode_name(spec, pod) for pod in pods]
    for pod in pods:
        members = [su_hypernode_name(spec, su.name) for su in plan.sus if su.pod == pod]
        objects.append(_hypernode(spec, pod_hypernode_name(spec, pod), 2, _exact(members)))
    # SUs outside any pod (a two-tier fabric has no pods) hang from the root directly.
    top_members += [su_hypernode_name(spec, su.name) for su in plan.sus if su.pod is None]
    top_tier = 3 if pods else 2
    objects.append(_hypernode(spec, fabric_hypernode_name(spec), top_tier, _exact(top_members)))
    return objects


def _su_hypernode(spec: Spec, su: ScalableUnit) -> KubeObject:
    # labelMatch applies to Node members only (the CRD's own description of the field); one
    # selector per SU keeps the object small however many servers the SU holds.
    member = {
        "type": "Node",
        "selector": {"labelMatch": {"matchLabels": {topology_label("su"): su.name}}},
    }
    return _hypernode(spec, su_hypernode_name(spec, su.name), 1, [member])


def _exact(names: Iterable[str]) -> list[dict[str, Any]]:
    return [{"type": "HyperNode", "selector": {"exactMatch": {"name": n}}} for n in names]


def _hypernode(spec: Spec, name: str, tier: int, members: list[dict[str, Any]]) -> KubeObject:
    return kube_object(
        HYPERNODE_API, "HyperNode", name, spec, spec={"tier": tier, "members": members}
    )


# --- Kueue -------------------------------------------------------------------------------------


def kueue_topology(spec: Spec, plan: Plan) -> list[KubeObject]:
    """A Topology of the compute fabric (when there is one) and a flavor per node group."""
    on_fabric = {s.group for s in plan.servers if s.su is not None}
    objects: list[KubeObject] = []
    if on_fabric:
        levels = [{"nodeLabel": label} for label in topology_levels(plan.sus)]
        objects.append(
            kube_object(KUEUE_API, "Topology", topology_name(spec), spec, spec={"levels": levels})
        )
    for group in spec.node_groups:
        fabric = group.name in on_fabric
        objects.append(_flavor(spec, flavor_name(spec, group.name), group.name, fabric))
    return objects


def topology_levels(sus: Sequence[ScalableUnit]) -> list[str]:
    """Node labels of the Topology levels, coarse to fine; the hostname is always last."""
    pods = any(su.pod is not None for su in sus)
    return [*([topology_label("pod")] if pods else []), topology_label("su"), HOSTNAME_LABEL]


def _flavor(spec: Spec, name: str, group: str, on_fabric: bool) -> KubeObject:
    # Nodes off the compute fabric carry no su/pod labels: a topology there would leave
    # Kueue's TAS unable to place anything, so their flavor stays plain.
    body: dict[str, Any] = {"nodeLabels": {topology_label("node-group"): group}}
    if on_fabric:
        body["topologyName"] = topology_name(spec)
    return kube_object(KUEUE_API, "ResourceFlavor", name, spec, spec=body)
