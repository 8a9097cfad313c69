"""Scheduled MIG re-partitioning on Kubernetes: one CronJob per change of a `mig_schedule`.

Each change of a node group's `mig_schedule` becomes a CronJob ``mig-<group>-<N>`` (N counts
changes from 1, like mig-parted's ``-change<N>`` configs) in `SYSTEM_NAMESPACE`. Its Job runs
``scripts/mig-change.sh`` (a static file beside this module, mounted from a ConfigMap) with
kubectl: batch by batch (``rolling_batch_sus`` SUs at a time, default one), the script
cordons the group's nodes, evicts their GPU pods through the Eviction API
(PodDisruptionBudgets hold), sets ``nvidia.com/mig.config`` for the GPU Operator's MIG
manager, waits for ``nvidia.com/mig.config.state=success`` and uncordons. A node that fails
stays cordoned with ``railplan.dev/mig-change=failed``; the job stops after that batch and
fails. A PrometheusRule alerts on both.

Spec values reach the script only through environment variables, never through its text, and
each is a validated name (group, config, SU) or a number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.k8s.monitoring import prometheus_labels
from infra.k8s.objects import SYSTEM_NAMESPACE, KubeObject, kube_object, topology_label
from infra.spec import Spec
from infra.topology.groups import MIG_TIMEOUT_S
from infra.topology.model import GroupPlan, Plan

__all__ = [
    "FAILED_LABEL",
    "KUBECTL_IMAGE",
    "MIG_TIMEOUT_S",
    "SCRIPT_PATH",
    "SERVICE_ACCOUNT",
    "cronjob_name",
    "mig_schedule",
]

SERVICE_ACCOUNT = "railplan-mig-scheduler"
SCRIPT_PATH = Path(__file__).resolve().parent / "scripts" / "mig-change.sh"
SCRIPT_KEY = "mig-change.sh"
FAILED_LABEL = topology_label("mig-change")  # set to "failed" on a node the script gave up on
RULE_NAME = "railplan-mig-schedule"

# The Job needs kubectl *and* a POSIX shell. registry.k8s.io/kubectl and rancher/kubectl are
# shell-less (distroless/scratch), and Bitnami stopped publishing versioned bitnami/kubectl
# tags in 2025, so this is alpine/k8s (Alpine with sh, bash and kubectl; its tags follow the
# kubectl version). How sure: the tag is seen in public manifests, not pulled from here (no
# registry access); mirror and pin by digest for production.
KUBECTL_IMAGE = "docker.io/alpine/k8s:1.33.4"
STARTING_DEADLINE_S = 900  # a change missed by more than 15 min waits for its next time
NOBODY = 65534

_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # cordon/uncordon/label/annotate read the Node, then patch it; the script lists a group's
    # nodes by label. No update, no delete.
    ("nodes", ("get", "list", "patch")),
    # The GPU pods of a node, found by a field selector (spec.nodeName): list only; the script
    # never reads one pod by name, so no get.
    ("pods", ("list",)),
    # Evictions (POST .../pods/<pod>/eviction), which the API server checks against PDBs.
    ("pods/eviction", ("create",)),
)


def _with_spec(
    api_version: str, kind: str, name: str, spec: Spec, *, body: dict[str, Any], **kw: Any
) -> KubeObject:
    """`kube_object` with a ``spec`` field (its own ``spec`` parameter is the railplan Spec)."""
    obj = kube_object(api_version, kind, name, spec, **kw)
    obj["spec"] = body
    return obj


def cronjob_name(group: GroupPlan, change: int) -> str:
    """The CronJob of change ``change`` (0-based) of ``group``: DNS-safe, at most 52 chars.

    Group names are ``[a-z][a-z0-9_]{0,31}`` and never hold ``-``, so replacing ``_`` keeps
    names distinct; ``mig-`` + 32 + ``-48`` is 39 characters (CronJob names allow 52).
    """
    return f"mig-{group.name.replace('_', '-')}-{change + 1}"


def mig_schedule(spec: Spec, plan: Plan) -> list[KubeObject]:
    """The objects that run every node group's MIG schedule (none without a schedule).

    The plan's groups carry everything they need: config names, SUs and times.
    """
    groups = [g for g in plan.groups.values() if g.mig.schedule is not None]
    if spec.scheduler.kind != "kubernetes" or not groups:
        return []
    objects = _shared_objects(spec)
    for group in groups:
        objects += _cronjobs(spec, group)
    objects.append(_alerts(spec))
    return objects


def _shared_objects(spec: Spec) -> list[KubeObject]:
    ns = SYSTEM_NAMESPACE
    script = SCRIPT_PATH.read_text(encoding="utf-8")
    return [
        kube_object("v1", "Namespace", ns, spec),
        kube_object("v1", "ServiceAccount", SERVICE_ACCOUNT, spec, namespace=ns),
        kube_object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            SERVICE_ACCOUNT,
            spec,
            rules=[
                {
                    "apiGroups": [""],
                    "resources": [resource],
                    "verbs": list(verbs),
                }
                for resource, verbs in _RULES
            ],
        ),
        kube_object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            SERVICE_ACCOUNT,
            spec,
            roleRef={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": SERVICE_ACCOUNT,
            },
            subjects=[{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}],
        ),
        kube_object(
            "v1", "ConfigMap", SERVICE_ACCOUNT, spec, namespace=ns, data={SCRIPT_KEY: script}
        ),
    ]


def _cronjobs(spec: Spec, group: GroupPlan) -> list[KubeObject]:
    schedule = group.mig.schedule
    assert schedule is not None
    objects = []
    for k, change in enumerate(group.mig.changes):
        config = change.config
        env = {
            "GROUP": group.name,
            "CONFIG": config,
            "SUS": " ".join(group.sus),
            "ROLLING_BATCH_SUS": str(schedule.rolling_batch_sus),
            "DRAIN_TIMEOUT": str(schedule.drain_s),
            "MIG_TIMEOUT": str(MIG_TIMEOUT_S),
            "POLL_SECONDS": "10",
            "HOME": "/tmp",  # kubectl's discovery cache; the root filesystem is read-only
        }
        labels = {topology_label("node-group"): group.name, "app.kubernetes.io/name": "mig-change"}
        job_spec = {
            "backoffLimit": 0,
            "activeDeadlineSeconds": group.job_deadline_s,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": _pod_spec(group, env),
            },
        }
        objects.append(
            _with_spec(
                "batch/v1",
                "CronJob",
                cronjob_name(group, k),
                spec,
                namespace=SYSTEM_NAMESPACE,
                labels=labels,
                annotations={"railplan.dev/mig-config": config},
                body={
                    "schedule": change.at,
                    "timeZone": schedule.timezone,
                    "concurrencyPolicy": "Forbid",
                    "startingDeadlineSeconds": STARTING_DEADLINE_S,
                    "successfulJobsHistoryLimit": 3,
                    "failedJobsHistoryLimit": 3,
                    "jobTemplate": {"metadata": {"labels": dict(labels)}, "spec": job_spec},
                },
            )
        )
    return objects


def _pod_spec(group: GroupPlan, env: dict[str, str]) -> dict[str, object]:
    return {
        "serviceAccountName": SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        # Not on a node of the group it changes: cordoning and a MIG reboot would kill it.
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": topology_label("node-group"),
                                    "operator": "NotIn",
                                    "values": [group.name],
                                }
                            ]
                        }
                    ]
                }
            }
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NOBODY,
            "runAsGroup": NOBODY,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "mig-change",
                "image": KUBECTL_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", f"/scripts/{SCRIPT_KEY}"],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "resources": {
                    "requests": {"cpu": "50m", "memory": "64Mi"},
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "script", "mountPath": "/scripts", "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": SERVICE_ACCOUNT, "defaultMode": 0o555}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }


# The newest Job of each railplan CronJob: start times joined to their owning CronJob
# (kube-state-metrics kube_job_owner). Written against the PromQL grammar; not run through
# promtool or a Prometheus here (neither is installed).
_JOB_START = (
    f'kube_job_status_start_time{{namespace="{SYSTEM_NAMESPACE}"}}'
    " * on (namespace, job_name) group_left (owner_name)"
    f' kube_job_owner{{namespace="{SYSTEM_NAMESPACE}", owner_kind="CronJob"}}'
)
_LATEST_JOB = (
    f"({_JOB_START}) == on (namespace, owner_name) group_left ()"
    f" max by (namespace, owner_name) ({_JOB_START})"
)


def _alerts(spec: Spec) -> KubeObject:
    """Alerts on a failed node and on a failed newest Job of a MIG-change CronJob.

    kube-state-metrics exports node labels only when allow-listed: run it with
    ``--metric-labels-allowlist=nodes=[railplan.dev/mig-change]`` (kube-prometheus-stack:
    ``kube-state-metrics.metricLabelsAllowlist``), or the first alert never fires. The Job
    alert counts only each CronJob's newest Job, so a later successful run clears it although
    failed Jobs stay in the history.
    """
    label = "label_" + FAILED_LABEL.replace(".", "_").replace("/", "_").replace("-", "_")
    rules = [
        {
            "alert": "RailplanMigChangeFailed",
            "expr": f'kube_node_labels{{{label}="failed"}} == 1',
            "for": "1m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A scheduled MIG change failed on node {{ $labels.node }}",
                "description": (
                    "Node {{ $labels.node }} carries railplan.dev/mig-change=failed and stays "
                    "cordoned; its annotation railplan.dev/mig-change-reason says why. Fix it, "
                    "then uncordon it and remove the label."
                ),
            },
        },
        {
            "alert": "RailplanMigScheduleJobFailed",
            "expr": (
                f'(kube_job_status_failed{{namespace="{SYSTEM_NAMESPACE}"}} > 0)'
                f" and on (namespace, job_name) ({_LATEST_JOB})"
            ),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "MIG schedule Job {{ $labels.job_name }} failed",
                "description": (
                    "Job {{ $labels.job_name }} in "
                    f"{SYSTEM_NAMESPACE} failed; later SUs of the group were not changed. "
                    "See the Job's log and nodes labelled railplan.dev/mig-change=failed."
                ),
            },
        },
    ]
    return _with_spec(
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        RULE_NAME,
        spec,
        namespace=SYSTEM_NAMESPACE,
        labels=prometheus_labels(spec),
        body={"groups": [{"name": RULE_NAME, "rules": rules}]},
    )
