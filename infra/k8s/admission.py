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

`tenant_class_policy` renders, whatever the batch scheduler, a second policy and binding for
the PriorityClass a tenant's workloads name (``priorityClassName``): the priority of a pod
(kube-scheduler's preemption, and Kueue's fallback), of a Volcano PodGroup (vc-scheduler's
job order and preemption) and of a Volcano Job (its PodGroup's and, unless a task's template
names one, its pods'). Without a class each runs at priority 0, below every tenant, and a
user may name any class, the highest tenant's included. In a tenant's namespace every pod,
PodGroup and Volcano Job, and the pod template of a Job, Deployment or StatefulSet, must name
a PriorityClass railplan renders whose value is at most the tenant's; a Volcano Job's tasks
may name one too (else they take the Job's). The template is checked so that a user hears of
it when creating the Job, not in a controller's events when its pods are refused (for a Kueue
Job, after it was admitted and holds quota). Updates pass when they keep the classes as they
were. A mutating policy (defaulting the class) is not used: ``MutatingAdmissionPolicy`` is
served only from Kubernetes 1.36 (beta and off by default in 1.34 and 1.35), while the
rendered tree holds to 1.33's API; and the per-tenant default would still need this check
against a class chosen above the tenant's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from infra import namespaces
from infra.k8s.objects import KubeObject, kube_object
from infra.spec import Spec
from infra.spec.scheduling import PRIORITIES

__all__ = [
    "ADMISSION_API",
    "PRIORITY_LABEL",
    "PRIORITY_VALUES",
    "QUEUE_LABEL",
    "class_policy_name",
    "policy_name",
    "tenant_class_policy",
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
    classes, _, own = _classes(spec)
    namespace = "namespaceObject.metadata.name"
    policy = {
        "failurePolicy": "Fail",
        "matchConstraints": _in_tenant_namespaces(spec),
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
            *_kept_classes_ceiling(f"({_label_of('oldObject')}) == variables.label", spec),
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
    return _denying(spec, name, policy)


# --- the PriorityClass of pods, PodGroups and Volcano Jobs ---------------------------------------

# What each checked resource (`group/resource` of the request) is called in the refusal, and
# where it names its class. A Volcano Job's tasks may name a class of their own as well.
_TEMPLATE_FIELD = "spec.template.spec.priorityClassName"
_CLASS_OWNERS = {
    "/pods": "a pod: spec.priorityClassName",
    "batch/jobs": f"a Job: {_TEMPLATE_FIELD}",
    "apps/deployments": f"a Deployment: {_TEMPLATE_FIELD}",
    "apps/statefulsets": f"a StatefulSet: {_TEMPLATE_FIELD}",
}
_VOLCANO_CLASS_OWNERS = {
    "scheduling.volcano.sh/podgroups": "a PodGroup: spec.priorityClassName",
    "batch.volcano.sh/jobs": "a Volcano Job: spec.priorityClassName (and its tasks')",
}
# The resources whose own spec names the class; the others name it in their pod template.
_SPEC_CLASS = ("/pods", *_VOLCANO_CLASS_OWNERS)
_RESOURCE = "request.resource.group + '/' + request.resource.resource"


def class_policy_name(spec: Spec) -> str:
    """The PriorityClass policy's (and its binding's) name: one per cluster."""
    return f"{spec.name}-tenant-priority-class"


def _named(obj: str) -> str:
    """The classes `obj` names, as a CEL list: its own ('' for none), then its tasks'.

    Of the resources checked only a Volcano Job has ``spec.tasks``; a task naming no class
    takes the Job's. Optional fields (``.?``, CEL's optional types, Kubernetes 1.28) read what
    is not there as '', so no expression fails on an object that lacks a field.
    """
    spec_class = _cel(list(_SPEC_CLASS))
    holder = f"(variables.resource in {spec_class} ? {obj}.?spec : {obj}.?spec.?template.?spec)"
    tasks = (
        f"{obj}.?spec.?tasks.orValue([])"
        ".map(t, t.?template.?spec.?priorityClassName.orValue('')).filter(c, c != '')"
    )
    return f"[{holder}.?priorityClassName.orValue('')] + {tasks}"


def tenant_class_policy(spec: Spec) -> list[KubeObject]:
    """The PriorityClass policy and its binding, with tenants; [] otherwise."""
    tenants = spec.scheduler.tenants
    if not tenants:
        return []
    name = class_policy_name(spec)
    owners = dict(_CLASS_OWNERS)
    if spec.scheduler.batch == "volcano":
        owners.update(_VOLCANO_CLASS_OWNERS)
    classes, _, own = _classes(spec)
    namespace = "namespaceObject.metadata.name"
    allowed = "c in variables.classes && variables.classes[c] <= variables.ceiling"
    policy = {
        "failurePolicy": "Fail",
        "matchConstraints": _in_tenant_namespaces(spec),
        "matchConditions": [
            {"name": "names-a-priority-class", "expression": f"{_RESOURCE} in {_cel(list(owners))}"}
        ],
        "variables": [
            {"name": "resource", "expression": _RESOURCE},
            {"name": "named", "expression": _named("object")},
            *_kept_classes_ceiling(f"{_named('oldObject')} == variables.named", spec),
            {"name": "field", "expression": f"{_cel(owners)}[variables.resource]"},
        ],
        "validations": [
            {
                "expression": f"variables.kept || variables.named.all(c, {allowed})",
                "messageExpression": f"variables.field + ' in namespace ' + {namespace} + "
                f"' must be ' + {_cel(own)}[{namespace}] + "
                "' (the tenant priority) or a lower PriorityClass of this cluster "
                f"{_cel(sorted(classes, key=classes.__getitem__))}; it names ' + "
                f"variables.named.filter(c, !({allowed}))"
                ".map(c, c == '' ? 'none' : c).join(', ')",
                "reason": "Forbidden",
            }
        ],
    }
    return _denying(spec, name, policy)


def _kept_classes_ceiling(unchanged: str, spec: Spec) -> list[dict[str, str]]:
    """The variables both policies share: ``kept``, ``classes`` and ``ceiling``.

    ``kept``: an update that leaves the checked value as it was (``unchanged``); ``classes``:
    the cluster's PriorityClasses and their values; ``ceiling``: the namespace's tenant's.
    """
    classes, ceiling, _ = _classes(spec)
    return [
        {"name": "kept", "expression": f"request.operation == 'UPDATE' && {unchanged}"},
        {"name": "classes", "expression": _cel(classes)},
        {"name": "ceiling", "expression": f"{_cel(ceiling)}[namespaceObject.metadata.name]"},
    ]


def _denying(spec: Spec, name: str, policy: Mapping[str, object]) -> list[KubeObject]:
    """The policy and the binding that makes its failed validations refusals."""
    binding = {"policyName": name, "validationActions": ["Deny"]}
    return [
        kube_object(ADMISSION_API, "ValidatingAdmissionPolicy", name, spec, spec=policy),
        kube_object(ADMISSION_API, "ValidatingAdmissionPolicyBinding", name, spec, spec=binding),
    ]


def _in_tenant_namespaces(spec: Spec) -> dict[str, object]:
    """Both policies' match: every namespaced create and update in the tenants' namespaces.

    The resource wildcard also keeps the API server from type-checking the expressions against
    each kind's schema (one kind's field is another's unknown); they read fields with ``has``
    or as optionals instead.
    """
    selector = {
        "matchExpressions": [
            {
                "key": NAMESPACE_NAME_LABEL,
                "operator": "In",
                "values": [t.name for t in spec.scheduler.tenants],
            }
        ]
    }
    rule = {
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    }
    return {"namespaceSelector": selector, "resourceRules": [rule]}


def _classes(spec: Spec) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """The rendered classes (name -> value), each tenant's ceiling (value) and own class."""
    tenants = spec.scheduler.tenants
    classes = {
        namespaces.priority_class_name(spec.name, p): PRIORITY_VALUES[p]
        for p in used_priorities(spec)
    }
    ceiling = {t.name: PRIORITY_VALUES[t.priority] for t in tenants}
    own = {t.name: namespaces.priority_class_name(spec.name, t.priority) for t in tenants}
    return classes, ceiling, own
