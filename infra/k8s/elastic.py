"""Elasticity of tenants: borrowing idle quota, reclaiming it, and autoscaling on GPU load.

What `scheduler.tenants[].borrowing_limit`/`lending_limit`/`autoscale` and
`scheduler.preemption` turn into: the Kueue cohort, per-flavor limits and preemption policy
(used by `infra.k8s.tenants`), the Volcano Queue fields and the volcano-scheduler
configuration (its actions and plugins), and a KEDA ``ScaledObject`` per autoscaled tenant
whose Prometheus query reads a MIG-safe DCGM metric. With no tenant borrowing, nothing here
changes the tenants' objects: no cohort, Queues and ClusterQueues exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from infra.k8s.objects import LABEL_PREFIX, KubeObject, kube_object
from infra.k8s.quota import GroupGpus, totals
from infra.namespaces import MONITORING_NAMESPACE, VOLCANO_NAMESPACE
from infra.spec import Spec
from infra.spec.scheduling import Tenant, TenantAutoscale
from infra.topology import Plan
from infra.topology.tenant_quota import Share

__all__ = [
    "KEDA_API",
    "MONITORING_NAMESPACE",
    "PROMETHEUS_ADDRESS",
    "VOLCANO_NAMESPACE",
    "VOLCANO_SCHEDULER_CONFIGMAP",
    "borrowing",
    "cohort_name",
    "deployment_pods",
    "elastic_objects",
    "gpu_load_query",
    "kueue_preemption",
    "kueue_resource",
    "owned_by_deployment",
    "quota_ceiling",
    "scaled_objects",
    "volcano_actions",
    "volcano_queue_body",
    "volcano_scheduler_conf",
]

GPU_RESOURCE = "nvidia.com/gpu"
KEDA_API = "keda.sh/v1alpha1"
# KEDA's Prometheus scaler queries this address. railplan renders only the ServiceMonitor and
# PrometheusRule; the Prometheus itself is the operator's, in MONITORING_NAMESPACE, and the
# Prometheus operator gives every Prometheus it runs the governing Service
# `prometheus-operated` (port 9090, `web`) whatever the release is called
# (prometheus-operator pkg/prometheus: governingServiceName = "prometheus-operated").
PROMETHEUS_ADDRESS = f"http://prometheus-operated.{MONITORING_NAMESPACE}.svc:9090"
# The scheduler reads this ConfigMap's `volcano-scheduler.conf` (volcano-sh/volcano
# docs/user-guide/how_to_configure_scheduler.md; the capacity plugin guide edits the same).
VOLCANO_SCHEDULER_CONFIGMAP = "volcano-scheduler-configmap"
TENANT_LABEL = f"{LABEL_PREFIX}/tenant"
# Kueue's reclaimWithinCohort / withinClusterQueue values of the spec's preemption settings.
_KUEUE_POLICY = {"any": "Any", "lower_priority": "LowerPriority", "never": "Never"}
# KEDA polls every 30 s by default; an inference tenant should not flap on one busy scrape,
# so scale-in waits 5 minutes (KEDA's default cooldownPeriod) after the last active trigger.
_POLLING_S = 30
_COOLDOWN_S = 300


def borrowing(spec: Spec) -> bool:
    """Whether some tenant may borrow: then every tenant's queue shares one cohort."""
    return any(t.borrows for t in spec.scheduler.tenants)


def cohort_name(spec: Spec) -> str:
    """The Kueue cohort of a cluster's ClusterQueues: the cluster's name."""
    return spec.name


def quota_ceiling(tenant: Tenant, cluster_gpus: int) -> int:
    """The most GPUs a tenant may hold at once: its quota plus what it may borrow.

    Unlimited borrowing is capped by the cluster's GPUs (no tenant can hold more). The
    namespace's ResourceQuota uses it (and Volcano's capability, when the limit is stated),
    so a workload Kueue or Volcano admits on borrowed GPUs is not then refused at creation.
    """
    if tenant.borrowing_limit is None:
        return max(tenant.gpus, cluster_gpus)
    return tenant.gpus + tenant.borrowing_limit


# --- Kueue -------------------------------------------------------------------------------------


def kueue_preemption(spec: Spec) -> dict[str, Any]:
    """ClusterQueue `preemption` from `scheduler.preemption`.

    ``reclaimWithinCohort`` only with a cohort (there is nothing to reclaim without one).
    ``borrowWithinCohort`` stays Kueue's default (Never): a workload that borrows never
    preempts another tenant's running workload to do it, only idle quota is lent.
    """
    # Only Volcano's defaults depend on HyperNodes; Kueue's preemption and TAS work together.
    preemption = spec.scheduler.preemption_in_effect(by_hypernode=False)
    body: dict[str, Any] = {}
    if borrowing(spec):
        body["reclaimWithinCohort"] = _KUEUE_POLICY[preemption.reclaim]
    body["withinClusterQueue"] = _KUEUE_POLICY[preemption.within_tenant]
    return body


def kueue_resource(
    nominal: int, borrow: int | None, lend: int | None, cohort: bool, name: str = GPU_RESOURCE
) -> dict[str, Any]:
    """One flavor's quota of ``name``; limits only in a cohort (None: no limit)."""
    resource: dict[str, Any] = {"name": name, "nominalQuota": str(nominal)}
    if cohort:
        if borrow is not None:
            resource["borrowingLimit"] = str(borrow)
        if lend is not None:
            resource["lendingLimit"] = str(min(lend, nominal))  # Kueue: never above nominal
    return resource


# --- Volcano -----------------------------------------------------------------------------------


def volcano_queue_body(
    tenant: Tenant,
    weight: int,
    cohort: bool,
    placed: Sequence[Share],
    groups: Sequence[GroupGpus],
) -> dict[str, Any]:
    """A tenant's Queue spec, per resource: `nvidia.com/gpu` and each `nvidia.com/mig-*`.

    ``placed`` is the tenant's share of each of ``groups`` (`infra.topology.tenant_quota.shares`); each
    field counts what those GPUs give of every resource (`infra.k8s.quota.totals`), so MIG
    slices are bounded like whole GPUs (a resource a Queue leaves out is not bounded at all).
    Without borrowing anywhere: capped at its quota, reclaimable (as always). With borrowing
    (the capacity plugin): ``deserved`` is its quota, ``capability`` quota plus
    ``borrowing_limit`` (no cap when unlimited), ``reclaimable`` only for a tenant that
    borrows, and ``guarantee`` the part it never lends (quota minus ``lending_limit``) in
    what exists at every hour. Volcano reserves a guarantee cluster-wide per resource, not per
    node group: whole GPUs a group has only by night, guaranteed, would hold as many of
    another group's GPUs idle by day, so those count as slices only (which exist only in
    the group's MIG hours, and no other group's time is taken by reserving them).
    """
    nominal = [s.nominal for s in placed]
    if not cohort:
        return {
            "weight": weight,
            "reclaimable": True,
            "capability": _quantities(totals(nominal, groups)),
        }
    body: dict[str, Any] = {"weight": weight, "reclaimable": tenant.borrows}
    body["deserved"] = _quantities(totals(nominal, groups))
    kept = totals([s.kept for s in placed], groups, fewest=True)
    if any(kept.values()):
        body["guarantee"] = {"resource": _quantities({r: n for r, n in kept.items() if n})}
    if tenant.borrowing_limit is not None:
        reach = [
            min(g.gpus, s.nominal + (s.borrow or 0)) for s, g in zip(placed, groups, strict=True)
        ]
        body["capability"] = _quantities(totals(reach, groups))
    return body


def _quantities(amounts: dict[str, int]) -> dict[str, str]:
    return {resource: str(n) for resource, n in amounts.items()}


def volcano_actions(spec: Spec, plan: Plan) -> list[str]:
    """The scheduler's actions, in Volcano's order (evicting ones: `volcano_evictions`)."""
    preemption = spec.scheduler.preemption_in_effect(by_hypernode=bool(plan.sus))
    return ["enqueue", "allocate", *preemption.volcano_evictions(), "backfill"]


def volcano_scheduler_conf(spec: Spec, plan: Plan) -> dict[str, Any]:
    """`volcano-scheduler.conf` as data: actions and two tiers of plugins.

    The tiers are Volcano's default configuration (installer chart: priority, gang,
    conformance; drf, predicates, proportion, nodeorder, binpack) with ``capacity`` in
    place of ``proportion`` when tenants borrow (the two conflict; capacity reads each
    Queue's ``deserved``), and ``network-topology-aware`` when the plan has SUs, so the
    HyperNodes railplan renders are used (docs/user-guide/
    how_to_use_network_topology_aware_scheduling.md; binpack across HyperNodes on GPUs).
    """
    queue_plugin = "capacity" if borrowing(spec) else "proportion"
    second: list[dict[str, Any]] = [
        {"name": "drf"},
        {"name": "predicates"},
        {"name": queue_plugin},
        {"name": "nodeorder"},
        {"name": "binpack"},
    ]
    if plan.sus:
        second.append(
            {
                "name": "network-topology-aware",
                "arguments": {
                    "weight": 10,
                    "hypernode.binpack.resources": GPU_RESOURCE,
                    f"hypernode.binpack.resources.{GPU_RESOURCE}": 10,
                },
            }
        )
    first = [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]
    return {
        "actions": ", ".join(volcano_actions(spec, plan)),
        "tiers": [{"plugins": first}, {"plugins": second}],
    }


def _volcano_configmap(spec: Spec, plan: Plan) -> list[KubeObject]:
    conf = yaml.safe_dump(volcano_scheduler_conf(spec, plan), sort_keys=False)
    # Volcano's chart creates this ConfigMap; ours replaces its data. Under Pulumi (server-
    # side apply) the chart's field manager owns `data`: patchForce takes it over.
    return [
        kube_object("v1", "Namespace", VOLCANO_NAMESPACE, spec),
        kube_object(
            "v1",
            "ConfigMap",
            VOLCANO_SCHEDULER_CONFIGMAP,
            spec,
            namespace=VOLCANO_NAMESPACE,
            annotations={"pulumi.com/patchForce": "true"},
            data={"volcano-scheduler.conf": conf},
        ),
    ]


# --- KEDA --------------------------------------------------------------------------------------


# A Deployment's pods are named <deployment>-<pod-template-hash>-<5 characters>: the
# ReplicaSet is <deployment>-<hash>, the hash the template's FNV-32a value in decimal, each
# digit encoded by SafeEncodeString (so 1-10 characters), and the pod's generateName suffix
# 5 random characters of the same alphabet (k8s.io/apimachinery/pkg/util/rand: alphanums,
# no vowels and no 0, 1 or 3, so no word is ever spelt).
_POD_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def deployment_pods(deployment: str) -> str:
    """PromQL regex of the pod names a pod of Deployment ``deployment`` can have.

    A prefilter, not the whole selector: ``llm-server-.*`` would also take the pods of
    ``llm-server-canary``; this allows after the name only a ReplicaSet hash and a pod
    suffix, neither of which holds a ``-``. Other owners' pods can still have such names (a
    Job ``llm-server-2``, a CronJob's Job ``llm-server-28976542``, an indexed Job's pod
    ``llm-server-2-x7k2p``, a StatefulSet ``llm-server-bcd`` at ordinal 24567): the name
    alone cannot tell them apart, so `owned_by_deployment` decides. A DNS label needs no
    escaping: ``-`` and alphanumerics are literal in a regex.

    >>> deployment_pods("llm")
    'llm-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}'
    """
    chars = f"[{_POD_NAME_ALPHABET}]"
    return f"{deployment}-{chars}{{1,10}}-{chars}{{5}}"


def owned_by_deployment(namespace: str, deployment: str) -> str:
    """PromQL vector of one series per pod of Deployment ``deployment`` (labels namespace, pod).

    kube-state-metrics' ownership series joined: the pods a ReplicaSet owns
    (``kube_pod_owner``) whose ReplicaSet the Deployment owns (``kube_replicaset_owner``,
    its ``replicaset`` label copied to ``owner_name`` to match). Only set operations
    (``and``), so duplicate series (two kube-state-metrics replicas) never make the join
    many-to-many. The MIG-change alerts rely on kube-state-metrics the same way.
    """
    scope = f'namespace="{namespace}"'
    replicasets = (
        f'label_replace(kube_replicaset_owner{{{scope},owner_kind="Deployment",'
        f'owner_name="{deployment}"}}, "owner_name", "$1", "replicaset", "(.*)")'
    )
    return (
        f'kube_pod_owner{{{scope},owner_kind="ReplicaSet"}}'
        f" and on (namespace, owner_name) {replicasets}"
    )


def gpu_load_query(tenant: Tenant, autoscale: TenantAutoscale, mig: bool) -> tuple[str, str]:
    """(PromQL, threshold) of a tenant's mean GPU load, MIG-safe.

    dcgm-exporter reports no ``DCGM_FI_DEV_GPU_UTIL`` for MIG instances (NVIDIA/
    dcgm-exporter#50, #430); ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (graphics-engine activity, a
    0-1 ratio) is measured per instance and for whole GPUs alike, so a group that is
    MIG-split at any time (day/night schedules too) scales on it, threshold target/100.
    Whole-GPU groups scale on ``DCGM_FI_DEV_GPU_UTIL`` (0-100), threshold the target.
    Series carry the pod using the GPU (the ServiceMonitor honours its labels); only those
    of pods the Deployment owns count (`owned_by_deployment`; `deployment_pods` prefilters
    by name), so another Deployment's, a Job's or a StatefulSet's pods never do.
    """
    selector = f'namespace="{tenant.name}",pod=~"{deployment_pods(autoscale.deployment)}"'
    owned = owned_by_deployment(tenant.name, autoscale.deployment)
    metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE" if mig else "DCGM_FI_DEV_GPU_UTIL"
    query = f"avg({metric}{{{selector}}} and on (namespace, pod) ({owned}))"
    threshold = autoscale.target_pct / 100 if mig else autoscale.target_pct
    return query, f"{threshold:g}"


def scaled_objects(spec: Spec, plan: Plan) -> list[KubeObject]:
    """A KEDA ScaledObject per tenant with `autoscale`, in the tenant's namespace.

    The query is a mean over the tenant's pods, so the trigger's metricType is ``Value``:
    the HPA then scales replicas by mean/threshold (``AverageValue``, KEDA's default for
    Prometheus, would divide a total by the replicas, which a mean already is).
    """
    objects = []
    for tenant in spec.scheduler.tenants:
        autoscale = tenant.autoscale
        if autoscale is None or autoscale.group not in plan.groups:
            continue  # an unknown group is lint's error (RP077)
        query, threshold = gpu_load_query(tenant, autoscale, plan.groups[autoscale.group].mig_split)
        trigger = {
            "type": "prometheus",
            "metricType": "Value",
            "metadata": {
                "serverAddress": PROMETHEUS_ADDRESS,
                "query": query,
                "threshold": threshold,
            },
        }
        body = {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": autoscale.deployment,
            },
            "pollingInterval": _POLLING_S,
            "cooldownPeriod": _COOLDOWN_S,
            "minReplicaCount": autoscale.min_replicas,
            "maxReplicaCount": autoscale.max_replicas,
            "triggers": [trigger],
        }
        objects.append(
            kube_object(
                KEDA_API,
                "ScaledObject",
                autoscale.deployment,
                spec,
                namespace=tenant.name,
                labels={TENANT_LABEL: tenant.name},
                spec=body,
            )
        )
    return objects


def elastic_objects(spec: Spec, plan: Plan) -> list[KubeObject]:
    """The volcano-scheduler configuration (Volcano with tenants) and the ScaledObjects."""
    objects: list[KubeObject] = []
    if spec.scheduler.batch == "volcano" and spec.scheduler.tenants:
        objects += _volcano_configmap(spec, plan)
    return objects + scaled_objects(spec, plan)
