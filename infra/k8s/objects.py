"""Kubernetes objects as plain data: the shapes every builder in `infra.k8s` returns.

An object is a plain ``dict`` exactly as it would be written to a manifest (camelCase keys,
``apiVersion``, ``kind``, ``metadata.name`` always set, ``metadata.namespace`` for namespaced
kinds). A Helm release is a `HelmRelease` record (chart, repository, pinned version, values).
Nothing here imports Pulumi: `infra.provision.kubernetes` declares these objects as Pulumi
resources and `infra.render` writes them under ``files/k8s/``, so both are one builder's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.namespaces import SYSTEM_NAMESPACE
from infra.spec import Spec

__all__ = [
    "LABEL_PREFIX",
    "MANAGED_BY",
    "SYSTEM_NAMESPACE",
    "HelmRelease",
    "KubeObject",
    "KubernetesObjects",
    "ServiceSet",
    "common_labels",
    "kube_object",
    "topology_label",
]

KubeObject = dict[str, Any]

# Node labels the Ansible `topology_labels` role sets through the kubelet (railplan.dev/rack,
# /su, /pod, /node-group, /cluster): the scheduler objects select nodes by them.
LABEL_PREFIX = "railplan.dev"
MANAGED_BY = "railplan"


def topology_label(fact: str) -> str:
    """The node label key of a topology fact (``su`` -> ``railplan.dev/su``)."""
    return f"{LABEL_PREFIX}/{fact}"


def common_labels(spec: Spec) -> dict[str, str]:
    """Labels every object railplan builds carries (so a selector finds all of them)."""
    return {"app.kubernetes.io/managed-by": MANAGED_BY, topology_label("cluster"): spec.name}


def kube_object(
    api_version: str,
    kind: str,
    name: str,
    cluster: Spec,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **fields: Any,
) -> KubeObject:
    """One object: ``apiVersion``, ``kind``, ``metadata`` (common labels added), ``fields``.

    ``fields`` become top-level keys (``spec``, ``data``, ``rules``, ...), written camelCase;
    ``cluster`` is the railplan spec (named so the object's own ``spec=`` stays free).
    """
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = {**common_labels(cluster), **(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


@dataclass(frozen=True)
class HelmRelease:
    """A Helm chart release: where the chart comes from, its pinned version and its values."""

    name: str
    namespace: str
    chart: str
    repository: str
    version: str
    values: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class ServiceSet:
    """One concern's releases and objects (GPU stack, scheduler topology, tenants, ...).

    ``examples`` are written to files for users to copy (job templates) and never applied.
    """

    name: str  # DNS-safe: names the Pulumi component of this set
    releases: tuple[HelmRelease, ...] = ()
    objects: tuple[KubeObject, ...] = ()
    examples: tuple[KubeObject, ...] = ()


@dataclass(frozen=True)
class KubernetesObjects:
    """Everything railplan puts on a Kubernetes cluster, one `ServiceSet` per concern.

    Within a set, releases come first (they install the CRDs its objects use) and namespaces
    before the objects in them.
    """

    sets: tuple[ServiceSet, ...] = field(default_factory=tuple)

    @property
    def objects(self) -> list[KubeObject]:
        """Every object to apply, set by set."""
        return [o for s in self.sets for o in s.objects]

    @property
    def releases(self) -> list[HelmRelease]:
        """Every Helm release, set by set."""
        return [r for s in self.sets for r in s.releases]
