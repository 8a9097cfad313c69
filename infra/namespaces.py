"""The Kubernetes namespaces railplan renders into or relies on, and those Kubernetes keeps.

A tenant's name is its namespace (`infra.k8s.tenants`): the tenant objects are a Namespace,
a default-deny NetworkPolicy and a GPU ResourceQuota in it. A tenant named like one of these
would cut the cluster's own services (kube-system's DNS, the GPU Operator, Prometheus) off
the network and cap their GPUs. The Kubernetes builders take their namespaces from here and
lint RP074 refuses tenant names from here, so the two lists cannot drift apart. It is a
shared helper, not part of `infra.k8s`, because lint runs before the k8s stage
(tests/test_imports.py).
"""

from __future__ import annotations

__all__ = [
    "DEPENDENCY_NAMESPACES",
    "GPU_NAMESPACE",
    "INGRESS_NAMESPACE",
    "KEDA_NAMESPACE",
    "KUBERNETES_NAMESPACES",
    "KUBERNETES_PREFIX",
    "KUEUE_NAMESPACE",
    "MONITORING_NAMESPACE",
    "RAILPLAN_NAMESPACES",
    "RDMA_NAMESPACE",
    "SYSTEM_NAMESPACE",
    "VOLCANO_NAMESPACE",
    "VOLCANO_QUEUES",
    "priority_class_name",
    "reserved_namespace",
    "reserved_priority_class",
    "reserved_queue",
]

GPU_NAMESPACE = "gpu-operator"  # the GPU Operator release and its ConfigMaps (infra.k8s.gpu)
RDMA_NAMESPACE = "rdma-device-plugin"  # the RDMA shared device plugin (infra.k8s.gpu)
# Where the Prometheus that scrapes tenant pods (dcgm-exporter, training metrics) runs; the
# monitoring stack's release must use this namespace or scrapes are dropped by the policy.
MONITORING_NAMESPACE = "monitoring"
VOLCANO_NAMESPACE = "volcano-system"  # the volcano-scheduler ConfigMap (infra.k8s.elastic)
SYSTEM_NAMESPACE = "railplan-system"  # railplan's own jobs (MIG schedule) and their RBAC

RAILPLAN_NAMESPACES = (
    GPU_NAMESPACE,
    RDMA_NAMESPACE,
    MONITORING_NAMESPACE,
    VOLCANO_NAMESPACE,
    SYSTEM_NAMESPACE,
)
"""Every namespace a railplan builder puts an object in or names as a peer (Prometheus's, which
the tenants' NetworkPolicies admit and KEDA queries), besides the tenants' own."""

# Where the controllers the rendered manifests need run, as their own install puts them: Kueue's
# release manifests create kueue-system (kueue.sigs.k8s.io, "Installation"); KEDA's Helm chart
# installs into keda (`helm install keda kedacore/keda --namespace keda`, keda.sh "Deploying
# KEDA"). Tenant quotas and default-deny policies there would stop admission and scaling.
KUEUE_NAMESPACE = "kueue-system"
KEDA_NAMESPACE = "keda"
# Where an autoscaled tenant's clients come from unless its `clients` says otherwise: the
# namespace ingress-nginx's own manifests and Helm instructions install the controller in.
# A tenant of that name would put the ingress controller under a default-deny policy.
INGRESS_NAMESPACE = "ingress-nginx"
DEPENDENCY_NAMESPACES = (KUEUE_NAMESPACE, KEDA_NAMESPACE, INGRESS_NAMESPACE)
"""Namespaces of the batch scheduler, autoscaler and ingress the rendered objects rely on."""

# Volcano's own queues: `root`, the parent of every queue (hierarchical queues), and `default`,
# where jobs without a queue go. A tenant's Volcano Queue takes the tenant's name.
VOLCANO_QUEUES = ("default", "root")

# The namespaces every cluster starts with (kubernetes.io, "Namespaces": default,
# kube-node-lease, kube-public, kube-system), and the prefix Kubernetes reserves for its own
# ("Avoid creating namespaces with the prefix kube-").
KUBERNETES_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
KUBERNETES_PREFIX = "kube-"


def reserved_namespace(name: str) -> str | None:
    """Why ``name`` cannot be a tenant's namespace, or None when it can.

    >>> reserved_namespace("research") is None, reserved_namespace("kube-flannel")
    (True, 'Kubernetes reserves names starting kube- for its own namespaces')
    """
    if name in RAILPLAN_NAMESPACES:
        return "railplan's cluster services run there"
    if name in DEPENDENCY_NAMESPACES:
        return "the Kueue or KEDA controllers the rendered objects rely on run there"
    if name in KUBERNETES_NAMESPACES:
        return "Kubernetes creates it in every cluster for its own objects"
    if name.startswith(KUBERNETES_PREFIX):
        return f"Kubernetes reserves names starting {KUBERNETES_PREFIX} for its own namespaces"
    return None


# PriorityClass names Kubernetes keeps for its own (system-cluster-critical,
# system-node-critical): the API server refuses any other PriorityClass whose name starts so
# ("priority class names with 'system-' prefix are reserved for system use only").
SYSTEM_PRIORITY_PREFIX = "system-"


def priority_class_name(cluster: str, priority: str) -> str:
    """The PriorityClass (and Kueue WorkloadPriorityClass) railplan renders for a priority."""
    return f"{cluster}-{priority}"


def reserved_priority_class(cluster: str, priority: str) -> str | None:
    """Why the PriorityClass of ``priority`` on cluster ``cluster`` cannot be created, or None.

    >>> reserved_priority_class("system", "high")
    "Kubernetes reserves PriorityClass names starting 'system-'"
    """
    if priority_class_name(cluster, priority).startswith(SYSTEM_PRIORITY_PREFIX):
        return f"Kubernetes reserves PriorityClass names starting {SYSTEM_PRIORITY_PREFIX!r}"
    return None


def reserved_queue(name: str, batch: str) -> str | None:
    """Why ``name`` cannot name a tenant's queue under ``batch``, or None when it can."""
    if batch == "volcano" and name in VOLCANO_QUEUES:
        return f"Volcano keeps a queue {name!r} of its own"
    return None
