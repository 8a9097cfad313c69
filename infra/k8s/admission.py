"""A tenant's Kueue workloads run at its priority: a ValidatingAdmissionPolicy that says so.

Kueue takes a workload's priority from its ``kueue.x-k8s.io/priority-class`` label (a
WorkloadPriorityClass), else from its pods' ``priorityClassName``, else the cluster's
``globalDefault`` PriorityClass, else 0. Nothing ties one to the tenant's namespace: a Job
submitted with only its LocalQueue label runs at priority 0 whatever the tenant's
``priority``, so ``reclaim: lower_priority`` never lets a ``critical`` tenant take back what a
``high`` one borrowed (both 0; the Kubernetes twin showed it), and a user of a ``high``
tenant may label a Job with the ``critical`` class and outrank every other tenant.

`tenant_priority_policy` renders, with ``batch: kueue``, one `ValidatingAdmissionPolicy`
(``admissionregistration.k8s.io/v1``, GA since Kubernetes 1.30) and its binding: in a
tenant's namespace, a top-level object (no owner) that names a LocalQueue must carry the
priority-class label of a WorkloadPriorityClass railplan renders whose value is at most the
tenant's own. A workload without the label, or one above its tenant, is refused at creation
with a message naming the label and value to use. An update passes when it keeps the label
as it was (objects created before the policy, and Kueue's own updates of them). Objects a
workload owns (a Job's pods, a Deployment's ReplicaSets) are not matched: Kueue reads the
label of the top-level object, and its webhooks copy it to a Deployment's pod template.
"""

from __future__ import annotations

import json

from infra import namespaces
from infra.k8s.objects import KubeObject, kube_object
from infra.spec import Spec
from infra.spec.scheduling import PRIORITIES

__all__ = [
    "ADMISSION_API",
    "PRIORITY_LABEL",
    "PRIORITY_VALUES",
    "QUEUE_LABEL",
    "policy_name",
    "tenant_priority_policy",
]

ADMISSION_API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Steps of ten, so an operator can slot a class in between; the highest is 500x below
# system-cluster-critical, so no tenant job ever preempts cluster services.
PRIORITY_VALUES = {"low": 1_000, "normal": 10_000, "high": 100_000, "critical": 1_000_000}


def policy_name(spec: Spec) -> str:
    """The policy's (and its binding's) name: one per cluster."""
    return f"{spec.name}-tenant-priority"


def used_priorities(spec: Spec) -> list[str]:
    """The priorities some tenant has, lowest first (a class is rendered for each)."""
    used = {t.priority for t in spec.scheduler.tenants}
    return [p for p in PRIORITIES if p in used]


def _cel(value: object) -> str:
    """A CEL literal of a map or list of strings and ints (JSON's syntax is CEL's)."""
    return json.dumps(value, sort_keys=True)


def _label_of(obj: str) -> str:
    return (
        f"has({obj}.metadata.labels) && '{PRIORITY_LABEL}' in {obj}.metadata.labels"
        f" ? {obj}.metadata.labels['{PRIORITY_LABEL}'] : ''"
    )


def tenant_priority_policy(spec: Spec) -> list[KubeObject]:
    """The policy and its binding, with Kueue and tenants; [] otherwise."""
    tenants = spec.scheduler.tenants
    if spec.scheduler.batch != "kueue" or not tenants:
        return []
    name = policy_name(spec)
    classes = {
        namespaces.priority_class_name(spec.name, p): PRIORITY_VALUES[p]
        for p in used_priorities(spec)
    }
    ceiling = {t.name: PRIORITY_VALUES[t.priority] for t in tenants}
    own = {t.name: namespaces.priority_class_name(spec.name, t.priority) for t in tenants}
    namespace = "namespaceObject.metadata.name"
    policy = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": NAMESPACE_NAME_LABEL,
                        "operator": "In",
                        "values": [t.name for t in tenants],
                    }
                ]
            },
            "resourceRules": [
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced",
                }
            ],
        },
        "matchConditions": [
            {
                "name": "queued",
                "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in "
                "object.metadata.labels",
            },
            {
                "name": "top-level",
                "expression": "!has(object.metadata.ownerReferences) || "
                "size(object.metadata.ownerReferences) == 0",
            },
        ],
        "variables": [
            {"name": "label", "expression": _label_of("object")},
            {
                "name": "kept",
                "expression": f"request.operation == 'UPDATE' && ({_label_of('oldObject')})"
                " == variables.label",
            },
            {"name": "classes", "expression": _cel(classes)},
            {"name": "ceiling", "expression": f"{_cel(ceiling)}[{namespace}]"},
        ],
        "validations": [
            {
                "expression": "variables.kept || (variables.label in variables.classes && "
                "variables.classes[variables.label] <= variables.ceiling)",
                "messageExpression": f"'a workload queued in namespace ' + {namespace} + "
                f"' must carry the label {PRIORITY_LABEL}: ' + {_cel(own)}[{namespace}] + "
                "' (the tenant priority) or a lower class of this cluster "
                f"{_cel(sorted(classes, key=classes.__getitem__))}; it has ' + "
                "(variables.label == '' ? 'none' : variables.label)",
                "reason": "Forbidden",
            }
        ],
    }
    binding = {"policyName": name, "validationActions": ["Deny"]}
    return [
        kube_object(ADMISSION_API, "ValidatingAdmissionPolicy", name, spec, spec=policy),
        kube_object(ADMISSION_API, "ValidatingAdmissionPolicyBinding", name, spec, spec=binding),
    ]
