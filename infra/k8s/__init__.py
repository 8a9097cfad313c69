"""Kubernetes cluster services built from the spec and plan as plain data (no Pulumi import).

`build_kubernetes` is the one builder: the Pulumi program declares its objects and releases,
and `railplan render` writes the same objects under ``files/k8s/``.
"""

from infra.k8s.build import build_kubernetes
from infra.k8s.objects import (
    LABEL_PREFIX,
    SYSTEM_NAMESPACE,
    HelmRelease,
    KubeObject,
    KubernetesObjects,
    ServiceSet,
    common_labels,
    kube_object,
    topology_label,
)

__all__ = [
    "LABEL_PREFIX",
    "SYSTEM_NAMESPACE",
    "HelmRelease",
    "KubeObject",
    "KubernetesObjects",
    "ServiceSet",
    "build_kubernetes",
    "common_labels",
    "kube_object",
    "topology_label",
]
