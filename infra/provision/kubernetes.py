"""Pulumi ComponentResources that put railplan's Kubernetes services on a cluster.

The objects and Helm releases come from `infra.k8s.build_kubernetes` as plain data — the same
data `railplan render` writes under ``files/k8s/`` — so this module only declares them: one
`ServiceSetComponent` per concern (GPU stack, scheduler topology, tenants, monitoring, MIG
schedule) under one `ClusterServices`. Built-in kinds become their typed pulumi_kubernetes
resources and custom resources `apiextensions.CustomResource`s, each named after the object
(``namespace/name``) with its explicit ``metadata.name``, so Pulumi never auto-names (and a
rename is a visible replace). Secrets (an NGC API key for nvcr.io pulls) arrive as Pulumi
secrets and become a Secret object only here: they never reach rendered files.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s import HelmRelease, KubeObject, KubernetesObjects, ServiceSet

__all__ = [
    "ClusterServices",
    "ClusterServicesArgs",
    "ServiceSetComponent",
    "declare_object",
    "resource_name",
]

# apiVersion of a built-in kind -> the pulumi_kubernetes module holding its typed resource.
_BUILTIN_MODULES: dict[str, Any] = {
    "v1": k8s.core.v1,
    "admissionregistration.k8s.io/v1": k8s.admissionregistration.v1,
    "apps/v1": k8s.apps.v1,
    "batch/v1": k8s.batch.v1,
    "policy/v1": k8s.policy.v1,
    "networking.k8s.io/v1": k8s.networking.v1,
    "rbac.authorization.k8s.io/v1": k8s.rbac.v1,
    "scheduling.k8s.io/v1": k8s.scheduling.v1,
    "storage.k8s.io/v1": k8s.storage.v1,
}
NGC_PULL_SECRET = "ngc-registry"  # in the GPU Operator's namespace, for nvcr.io images
# GPU Operator chart sections whose images take imagePullSecrets (the ClusterPolicy CRD has
# the field on each operand; `operator` is the chart's own deployment).
PULL_SECRET_SECTIONS = (
    "operator",
    "validator",
    "toolkit",
    "devicePlugin",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
)


def resource_name(obj: KubeObject) -> str:
    """The Pulumi name of an object: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def declare_object(obj: KubeObject, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Declare one plain object as its pulumi_kubernetes resource (inputs passed unchanged)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    module = _BUILTIN_MODULES.get(api_version)
    name = f"{kind.lower()}:{resource_name(obj)}"  # unique across kinds sharing a name
    if module is None:
        custom: pulumi.CustomResource = k8s.apiextensions.CustomResource(
            name, api_version=api_version, kind=kind, opts=opts, **fields
        )
        return custom
    resource_class = getattr(module, kind)
    # Top-level keys are constructor arguments (snake_case); nested values pass as written.
    return resource_class(name, opts=opts, **{_snake(k): v for k, v in fields.items()})  # type: ignore[no-any-return]


def _declare_release(release: HelmRelease, opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        release.name,
        k8s.helm.v3.ReleaseArgs(
            name=release.name,  # explicit, so Pulumi does not add a random suffix
            chart=release.chart,
            version=release.version,
            namespace=release.namespace,
            create_namespace=False,  # the set declares its namespace (with railplan's labels)
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=release.repository),
            values=release.values,
            description=release.description or None,
            atomic=True,  # a failed upgrade rolls back instead of leaving a half-applied chart
        ),
        opts=opts,
    )


class ServiceSetComponent(pulumi.ComponentResource):
    """One concern's releases and objects; objects wait for the releases (their CRDs)."""

    releases: list[k8s.helm.v3.Release]
    resources: list[pulumi.CustomResource]

    def __init__(self, service_set: ServiceSet, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("railplan:kubernetes:ServiceSet", service_set.name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespaces = [o for o in service_set.objects if o["kind"] == "Namespace"]
        declared_ns = [declare_object(o, child) for o in namespaces]
        after_ns = pulumi.ResourceOptions(parent=self, depends_on=declared_ns)
        self.releases = [_declare_release(r, after_ns) for r in service_set.releases]
        after = pulumi.ResourceOptions(parent=self, depends_on=[*declared_ns, *self.releases])
        others = [o for o in service_set.objects if o["kind"] != "Namespace"]
        self.resources = declared_ns + [declare_object(o, after) for o in others]
        self.register_outputs({"objects": len(self.resources), "releases": len(self.releases)})


@dataclass
class ClusterServicesArgs:
    """What `ClusterServices` declares.

    objects: the output of `infra.k8s.build_kubernetes`.
    ngc_api_key: an NGC API key (a Pulumi secret) for nvcr.io pulls, or None for public images.
    provider: a Kubernetes provider (kubeconfig/context); default the ambient one.
    """

    objects: KubernetesObjects
    ngc_api_key: pulumi.Input[str] | None = None
    provider: k8s.Provider | None = None


class ClusterServices(pulumi.ComponentResource):
    """railplan's Kubernetes cluster services: one `ServiceSetComponent` per concern."""

    sets: list[ServiceSetComponent]
    pull_secret: k8s.core.v1.Secret | None

    def __init__(
        self, name: str, args: ClusterServicesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("railplan:kubernetes:ClusterServices", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        sets = args.objects.sets
        if args.ngc_api_key is not None:
            sets = tuple(_with_pull_secret(s) for s in sets)
        self.sets = []
        for service_set in sets:
            # Sets apply in order: a later one may use an earlier one's namespace or CRDs
            # (monitoring selects the GPU Operator's exporter in its namespace).
            after = pulumi.ResourceOptions(depends_on=self.sets[-1:]) if self.sets else None
            opts = pulumi.ResourceOptions.merge(child, after)
            self.sets.append(ServiceSetComponent(service_set, opts))
        self.pull_secret = _pull_secret(args, self.sets, child)
        self.register_outputs(
            {"sets": [s.name for s in args.objects.sets], "objects": len(args.objects.objects)}
        )


def _pull_secret(
    args: ClusterServicesArgs, sets: Sequence[ServiceSetComponent], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret | None:
    """An image pull Secret for nvcr.io in the GPU Operator's namespace, from the NGC key."""
    namespaces = {o["metadata"]["name"] for o in args.objects.objects if o["kind"] == "Namespace"}
    if args.ngc_api_key is None or "gpu-operator" not in namespaces:
        return None
    config = pulumi.Output.secret(args.ngc_api_key).apply(_docker_config)
    return k8s.core.v1.Secret(
        f"secret:gpu-operator/{NGC_PULL_SECRET}",
        metadata={"name": NGC_PULL_SECRET, "namespace": "gpu-operator"},
        type="kubernetes.io/dockerconfigjson",
        string_data={".dockerconfigjson": config},
        # After the sets (its namespace is in the first); operator pods that start before it
        # retry their image pulls until it exists.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(sets))),
    )


def _with_pull_secret(service_set: ServiceSet) -> ServiceSet:
    """The set with the GPU Operator's images pulled with the NGC secret.

    Only the Pulumi program knows a key was given, so only its release values name the
    Secret; a GitOps user who creates the Secret adds the same values to the values file.
    """
    releases = tuple(
        dataclasses.replace(r, values=_pull_secret_values(r.values))
        if r.chart == "gpu-operator"
        else r
        for r in service_set.releases
    )
    return dataclasses.replace(service_set, releases=releases)


def _pull_secret_values(values: dict[str, Any]) -> dict[str, Any]:
    merged = dict(values)
    for section in PULL_SECRET_SECTIONS:
        merged[section] = {**merged.get(section, {}), "imagePullSecrets": [NGC_PULL_SECRET]}
    return merged


def _docker_config(key: str) -> str:
    # nvcr.io takes the literal user name "$oauthtoken" with the NGC API key as password.
    auth = base64.b64encode(f"$oauthtoken:{key}".encode()).decode()
    return json.dumps({"auths": {"nvcr.io": {"auth": auth}}}, sort_keys=True)
