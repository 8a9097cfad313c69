"""Tenants as Kubernetes objects: namespace, GPU quota, priorities, network isolation, queues.

`tenants(spec, plan, catalog)` returns, in apply order, for the tenants of ``scheduler``:

- a `PriorityClass` per priority some tenant uses (cluster-scoped), ordered
  low < normal < high < critical and far below ``system-cluster-critical`` (2,000,000,000);
- per tenant a Namespace, a ResourceQuota on GPUs and four NetworkPolicies (deny all,
  then allow the namespace itself, DNS, and scrapes from the monitoring namespace), and a
  fifth admitting its clients when it serves any (`scheduler.tenants[].clients`);
- with ``batch: volcano`` a Queue per tenant; with ``batch: kueue`` WorkloadPriorityClasses,
  a ClusterQueue per tenant and a LocalQueue in its namespace. Both count quota in whole
  GPUs and, with the ``mixed`` MIG strategy, in the MIG slices the tenant's share of each
  node group gives (`infra.k8s.quota`); Kueue's ClusterQueues also in the CPUs, memory and
  RDMA devices that share gives, since Kueue admits nothing asking for a resource they
  leave out; and the admission policy holding each tenant's workloads to its priority
  (`infra.k8s.admission`);
- whatever the batch scheduler, the admission policy holding the PriorityClass of each
  tenant's pods (and PodGroups and Volcano Jobs) to its priority (`infra.k8s.admission`).

`podgroup_examples` returns example Volcano PodGroups (one gang per tenant) that a renderer
writes as examples: they are templates for jobs, not objects to apply.

Whether the tenants' quotas add up to more GPUs than the cluster has is lint's concern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra import namespaces
from infra.catalog import Catalog
from infra.k8s.admission import (
    PRIORITY_VALUES,
    tenant_class_policy,
    tenant_priority_policy,
    used_priorities,
)
from infra.k8s.elastic import (
    MONITORING_NAMESPACE,
    borrowing,
    cohort_name,
    kueue_preemption,
    kueue_resource,
    quota_ceiling,
    volcano_queue_body,
)
from infra.k8s.objects import LABEL_PREFIX, KubeObject, kube_object
from infra.k8s.quota import (
    CPU_RESOURCE,
    MEMORY_RESOURCE,
    RDMA_QUOTA_RESOURCE,
    GroupGpus,
    amount,
    group_gpus,
    host_resources,
    mig_resources,
    per_group,
    plain_profile,
)
from infra.k8s.topology import KUEUE_API, flavor_name
from infra.spec import Spec
from infra.spec.scheduling import Tenant
from infra.topology import Plan
from infra.topology.tenant_quota import Share, shares

__all__ = [
    "GPU_RESOURCE",
    "MONITORING_NAMESPACE",
    "PRIORITY_VALUES",
    "VOLCANO_API",
    "mig_quota",
    "podgroup_examples",
    "priority_class_name",
    "tenants",
]

GPU_RESOURCE = "nvidia.com/gpu"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
TENANT_LABEL = f"{LABEL_PREFIX}/tenant"
_VOLCANO_WEIGHT_MAX = 65_535  # the Queue CRD's maximum weight
_HOST_RESOURCES = (CPU_RESOURCE, MEMORY_RESOURCE, RDMA_QUOTA_RESOURCE)


def priority_class_name(spec: Spec, priority: str) -> str:
    """The PriorityClass (and Kueue WorkloadPriorityClass) of a tenant priority.

    One name for render and lint (`infra.namespaces`: lint RP075 refuses a reserved one).
    """
    return namespaces.priority_class_name(spec.name, priority)


def tenants(spec: Spec, plan: Plan, catalog: Catalog) -> list[KubeObject]:
    """Every tenant object in apply order (cluster-scoped first); [] without tenants."""
    listed = spec.scheduler.tenants
    if not listed:
        return []
    objects = priority_classes(spec)
    objects += [_namespace(spec, t) for t in listed]
    gpus = cluster_gpus(spec, catalog)
    for tenant in listed:
        objects += [_resource_quota(spec, tenant, gpus), *network_policies(spec, tenant)]
    if spec.scheduler.batch == "volcano":
        objects += volcano_queues(spec, plan)
    elif spec.scheduler.batch == "kueue":
        objects += kueue_queues(spec, plan, catalog) + tenant_priority_policy(spec)
    return objects + tenant_class_policy(spec)


def cluster_gpus(spec: Spec, catalog: Catalog) -> int:
    """GPUs in every node group (unlimited borrowing is capped at these)."""
    return sum(catalog.nodes[g.node].gpus * g.count for g in spec.node_groups)


def _tenant_labels(tenant: Tenant) -> dict[str, str]:
    return {TENANT_LABEL: tenant.name}


# --- priorities --------------------------------------------------------------------------------


def priority_classes(spec: Spec) -> list[KubeObject]:
    """A PriorityClass per priority the tenants use, lowest first."""
    return [
        kube_object(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            priority_class_name(spec, p),
            spec,
            value=PRIORITY_VALUES[p],
            globalDefault=False,
            preemptionPolicy="PreemptLowerPriority",
            description=f"railplan tenant priority {p!r}: preempts lower tenant priorities.",
        )
        for p in used_priorities(spec)
    ]


# --- namespace, quota, network policies --------------------------------------------------------


def _namespace(spec: Spec, tenant: Tenant) -> KubeObject:
    return kube_object("v1", "Namespace", tenant.name, spec, labels=_tenant_labels(tenant))


def _resource_quota(spec: Spec, tenant: Tenant, cluster: int) -> KubeObject:
    # Extended resources take only `requests.` quotas (they cannot be overcommitted). A
    # tenant that borrows may hold its quota plus what it borrows (`quota_ceiling`).
    ceiling = quota_ceiling(tenant, cluster)
    hard = {f"requests.{GPU_RESOURCE}": str(ceiling)}
    hard.update({f"requests.{r}": str(n) for r, n in mig_quota(spec, ceiling).items()})
    return kube_object(
        "v1",
        "ResourceQuota",
        "gpus",
        spec,
        namespace=tenant.name,
        labels=_tenant_labels(tenant),
        spec={"hard": hard},
    )


def mig_quota(spec: Spec, gpus: int) -> dict[str, int]:
    """MIG slices a tenant of ``gpus`` GPUs may request, per `nvidia.com/mig-*` resource.

    With the ``mixed`` strategy MIG slices are their own resources and a quota on
    `nvidia.com/gpu` would leave them unlimited. Each profile is capped at what ``gpus``
    whole GPUs give when cut into the densest layout holding it: a tenant never holds more
    of one slice than its GPU quota could yield. With ``single`` the slices *are*
    `nvidia.com/gpu` and the GPU quota counts slices; with ``none`` there are none.
    """
    if spec.scheduler.mig_strategy != "mixed":
        return {}
    per_gpu: dict[str, int] = {}
    for layout in spec.mig_layouts.values():
        for profile, count in layout.profiles.items():
            if count and plain_profile(profile):
                per_gpu[profile] = max(per_gpu.get(profile, 0), count)
    return {f"nvidia.com/mig-{p}": gpus * n for p, n in sorted(per_gpu.items())}


def network_policies(spec: Spec, tenant: Tenant) -> list[KubeObject]:
    """Deny all traffic, then allow the namespace, DNS, the monitoring namespace and clients.

    NetworkPolicies add up: the deny-all selects every pod with no rule, and each allow
    policy opens one path; ``allow-clients`` only for a tenant that serves clients. Egress to the API server stays closed (it is not a pod a
    selector can name); a tenant whose jobs talk to it needs a policy of its own.
    """
    everyone: dict[str, Any] = {}
    rules: dict[str, dict[str, Any]] = {
        "default-deny": {"policyTypes": ["Ingress", "Egress"]},
        "allow-same-namespace": {
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": everyone}]}],
            "egress": [{"to": [{"podSelector": everyone}]}],
        },
        "allow-dns": {"policyTypes": ["Egress"], "egress": [_dns_egress()]},
        "allow-monitoring": {
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [_namespace_peer(MONITORING_NAMESPACE)]}],
        },
    }
    clients = _clients_ingress(tenant)
    if clients is not None:
        rules["allow-clients"] = {"policyTypes": ["Ingress"], "ingress": [clients]}
    return [
        kube_object(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            name,
            spec,
            namespace=tenant.name,
            labels=_tenant_labels(tenant),
            spec={"podSelector": everyone, **body},
        )
        for name, body in rules.items()
    ]


def _clients_ingress(tenant: Tenant) -> dict[str, Any] | None:
    """The ingress rule admitting the tenant's clients (`Tenant.clients_in_effect`), or None.

    An inference tenant's Deployment serves requests from outside its namespace: without
    this rule the deny-all drops them all, and KEDA scales a service nobody can reach.
    """
    clients = tenant.clients_in_effect()
    if clients is None or not (clients.namespaces or clients.cidrs):
        return None
    peers = [_namespace_peer(n) for n in clients.namespaces]
    peers += [{"ipBlock": {"cidr": cidr}} for cidr in clients.cidrs]
    rule: dict[str, Any] = {"from": peers}
    if clients.ports:
        rule["ports"] = [{"protocol": "TCP", "port": port} for port in clients.ports]
    return rule


def _namespace_peer(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}


def _dns_egress() -> dict[str, Any]:
    dns = {
        **_namespace_peer("kube-system"),
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    ports = [{"protocol": proto, "port": 53} for proto in ("UDP", "TCP")]
    return {"to": [dns], "ports": ports}


# --- Volcano -----------------------------------------------------------------------------------


def volcano_queues(spec: Spec, plan: Plan) -> list[KubeObject]:
    """A Queue per tenant, weighted by its GPUs; its quota fields in `volcano_queue_body`."""
    listed = spec.scheduler.tenants
    largest = max(t.gpus for t in listed)
    cohort = borrowing(spec)
    groups = group_gpus(spec, plan)
    placed = shares(spec, groups)
    return [
        _volcano_queue(
            spec, t, volcano_queue_body(t, _weight(t.gpus, largest), cohort, placed[t.name], groups)
        )
        for t in listed
    ]


def _weight(gpus: int, largest: int) -> int:
    # `proportion` splits idle capacity by weight: weighting by quota keeps each tenant's
    # deserved share in line with its quota. Scaled into the CRD's 1..65535 range.
    if largest <= _VOLCANO_WEIGHT_MAX:
        return max(1, gpus)
    return max(1, round(gpus * _VOLCANO_WEIGHT_MAX / largest))


def _volcano_queue(spec: Spec, tenant: Tenant, body: dict[str, Any]) -> KubeObject:
    # capability is a hard cap (the ResourceQuota again, seen by the scheduler, so a gang
    # over quota waits in the queue instead of failing pod creation); reclaimable lets
    # other queues take back what this one borrowed beyond its deserved share.
    return kube_object(
        VOLCANO_API, "Queue", tenant.name, spec, labels=_tenant_labels(tenant), spec=body
    )


def podgroup_examples(spec: Spec, plan: Plan, catalog: Catalog) -> list[KubeObject]:
    """One example gang per tenant (Volcano only): as many whole nodes as fit one SU.

    The gang asks for ``min(SU size, tenant GPUs // GPUs per node)`` nodes of the largest
    SU's node type, one pod per node, and is held to one tier-1 HyperNode (one SU) so its
    same-rail traffic stays on the SU's leaves, never crossing a spine. Without a compute fabric there is no topology
    constraint. A tenant with less than one node's GPUs gets no example.
    """
    if spec.scheduler.batch != "volcano":
        return []
    examples = []
    for tenant in spec.scheduler.tenants:
        example = _podgroup(spec, plan, catalog, tenant)
        if example is not None:
            examples.append(example)
    return examples


def _gang_shape(spec: Spec, plan: Plan, catalog: Catalog) -> tuple[int, int]:
    """(nodes in the example's domain, GPUs per node): the largest SU, else largest group."""
    if plan.sus:
        su = max(plan.sus, key=lambda s: len(s.servers))
        group = next(g for g in spec.node_groups if g.name == su.group)
        return len(su.servers), catalog.nodes[group.node].gpus
    group = max(spec.node_groups, key=lambda g: g.count)
    return group.count, catalog.nodes[group.node].gpus


def _podgroup(spec: Spec, plan: Plan, catalog: Catalog, tenant: Tenant) -> KubeObject | None:
    domain, per_node = _gang_shape(spec, plan, catalog)
    nodes = min(domain, tenant.gpus // per_node)
    if nodes == 0:
        return None
    body: dict[str, Any] = {
        "minMember": nodes,
        "minResources": {GPU_RESOURCE: str(nodes * per_node)},
        "queue": tenant.name,
        "priorityClassName": priority_class_name(spec, tenant.priority),
    }
    if plan.sus:
        body["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    return kube_object(
        VOLCANO_API,
        "PodGroup",
        f"{tenant.name}-example-gang",
        spec,
        namespace=tenant.name,
        labels=_tenant_labels(tenant),
        spec=body,
    )


# --- Kueue -------------------------------------------------------------------------------------


def kueue_queues(spec: Spec, plan: Plan, catalog: Catalog) -> list[KubeObject]:
    """WorkloadPriorityClasses, then a ClusterQueue and a LocalQueue per tenant.

    Flavors are per node group (`infra.k8s.topology`), and each tenant's quota is placed on
    the groups by `infra.topology.tenant_quota.shares`.
    """
    objects = [
        kube_object(
            KUEUE_API,
            "WorkloadPriorityClass",
            priority_class_name(spec, p),
            spec,
            value=PRIORITY_VALUES[p],
            description=f"railplan tenant priority {p!r}.",
        )
        for p in used_priorities(spec)
    ]
    groups = group_gpus(spec, plan)
    hosts = host_resources(spec, plan, catalog)
    placed = shares(spec, groups)
    for tenant in spec.scheduler.tenants:
        body = _resource_groups(spec, placed[tenant.name], groups, hosts)
        objects.append(_cluster_queue(spec, tenant, body))
    objects += [_local_queue(spec, t) for t in spec.scheduler.tenants]
    return objects


def _resource_groups(
    spec: Spec,
    placed: Sequence[Share],
    groups: Sequence[GroupGpus],
    hosts: Sequence[dict[str, int]],
) -> list[dict[str, Any]]:
    """One resource group: every resource a pod asks for, on one flavor per node group.

    Kueue admits a workload only if its ClusterQueue covers every resource the pods request,
    and counts each resource in exactly one resource group, picking a flavor per group. So
    CPUs, memory, whole GPUs, the RDMA shared device and the `nvidia.com/mig-*` slices share
    one group whose flavors are the node groups: a pod's resources are all counted on the
    group it runs on (a resource a group never has gets 0 there). Quotas are what the
    tenant's GPUs of the group give of each (`infra.k8s.quota.amount`): whole GPUs in the
    group's whole-GPU hours, slices in its MIG hours, CPUs and memory in proportion to GPUs
    (`infra.k8s.quota.host_resources`); limits likewise.
    """
    cohort = borrowing(spec)
    rdma = [RDMA_QUOTA_RESOURCE] if any(RDMA_QUOTA_RESOURCE in h for h in hosts) else []
    covered = [CPU_RESOURCE, MEMORY_RESOURCE, GPU_RESOURCE, *rdma, *mig_resources(groups)]
    flavors = [
        {
            "name": flavor_name(spec, g.name),
            "resources": [_quota(r, s, g, host, cohort) for r in covered],
        }
        for s, g, host in zip(placed, groups, hosts, strict=True)
    ]
    return [{"coveredResources": covered, "flavors": flavors}]


def _quota(
    resource: str, share: Share, group: GroupGpus, host: dict[str, int], cohort: bool
) -> dict[str, Any]:
    per = host.get(resource, 0) if resource in _HOST_RESOURCES else per_group(resource, group)
    borrow, lend = (
        None if limit is None else amount(limit, per, group) for limit in (share.borrow, share.lend)
    )
    found = kueue_resource(amount(share.nominal, per, group), borrow, lend, cohort, resource)
    if resource == MEMORY_RESOURCE:
        found.update({k: f"{v}Gi" for k, v in found.items() if k != "name"})
    return found


def _cluster_queue(spec: Spec, tenant: Tenant, resource_groups: list[dict[str, Any]]) -> KubeObject:
    # Without a cohort a ClusterQueue is hard-isolated: the nominal quotas add up to the
    # tenant's GPUs, so Kueue never admits a workload whose pods the namespace's
    # ResourceQuota would then reject. When some tenant borrows, every ClusterQueue joins the
    # cluster's cohort: idle nominal quota (up to each lender's lendingLimit) is lent within
    # the cohort, up to each borrower's borrowingLimit, and the ResourceQuota is raised to
    # quota + borrowing limit (`quota_ceiling`) so admitted pods are not refused.
    body: dict[str, Any] = {}
    if borrowing(spec):
        body["cohortName"] = cohort_name(spec)
    body["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: tenant.name}}
    body["resourceGroups"] = resource_groups
    body["preemption"] = kueue_preemption(spec)
    return kube_object(
        KUEUE_API, "ClusterQueue", tenant.name, spec, labels=_tenant_labels(tenant), spec=body
    )


def _local_queue(spec: Spec, tenant: Tenant) -> KubeObject:
    return kube_object(
        KUEUE_API,
        "LocalQueue",
        tenant.name,
        spec,
        namespace=tenant.name,
        labels=_tenant_labels(tenant),
        spec={"clusterQueue": tenant.name},
    )
