"""The tenant-priority admission policy (infra.k8s.admission), read without a cluster.

What the policy decides is exercised by the Kubernetes twin against a real API server
(tests/test_k8s_twin_tenants.py: a Job without the label, or above its tenant, is refused;
one at its tenant's class is admitted at that priority). Here: it is rendered exactly with
Kueue and tenants, its literal maps agree with the WorkloadPriorityClasses rendered beside it,
it matches only the tenants' namespaces and top-level queued objects, and its binding denies.

The PriorityClass policy (`tenant_class_policy`; on the twin: tests/test_k8s_twin_tenants.py
for a Pod and a Job's template under Kueue, tests/test_k8s_twin_volcano.py for a Pod,
PodGroup and Volcano Job under Volcano): rendered with tenants whatever the batch scheduler,
strictly schema-valid, its classes and ceilings those of the PriorityClasses rendered beside
it, the Volcano kinds checked only under Volcano, and each checked resource named in the
refusal.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.catalog import Catalog
from infra.k8s.admission import (
    ADMISSION_API,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    class_policy_name,
    policy_name,
)
from infra.k8s.tenants import tenants

from .k8s_validation import manifest_problems
from .test_k8s_tenants import build, of_kind


def _policy(objects: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy and the binding called `name`."""
    (policy,) = (
        o for o in of_kind(objects, "ValidatingAdmissionPolicy") if o["metadata"]["name"] == name
    )
    (binding,) = (
        o
        for o in of_kind(objects, "ValidatingAdmissionPolicyBinding")
        if o["metadata"]["name"] == name
    )
    return policy, binding


def _variables(policy: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def _literal(expression: str) -> Any:
    """The JSON literal a CEL expression starts with (`{...}` or `{...}[index]`)."""
    return json.JSONDecoder().raw_decode(expression)[0]


def test_kueue_tenants_get_one_policy_whose_classes_are_the_rendered_ones(
    catalog: Catalog,
) -> None:
    spec, plan = build(catalog, "two-tier", "kueue")
    objects = tenants(spec, plan, catalog)
    policy, binding = _policy(objects, policy_name(spec))
    assert policy["apiVersion"] == binding["apiVersion"] == ADMISSION_API
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == policy_name(spec)
    assert binding["spec"] == {"policyName": policy_name(spec), "validationActions": ["Deny"]}
    rendered = {
        o["metadata"]["name"]: o["value"] for o in of_kind(objects, "WorkloadPriorityClass")
    }
    variables = _variables(policy)
    assert _literal(variables["classes"]) == rendered
    ceiling = _literal(variables["ceiling"])
    for tenant in spec.scheduler.tenants:
        assert ceiling[tenant.name] == rendered[f"{spec.name}-{tenant.priority}"]
    (selector,) = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert selector["operator"] == "In"
    assert selector["values"] == [t.name for t in spec.scheduler.tenants]
    assert policy["spec"]["failurePolicy"] == "Fail"


def test_the_policy_matches_top_level_queued_objects_and_names_the_label(
    catalog: Catalog,
) -> None:
    spec, plan = build(catalog, "two-tier", "kueue")
    policy, _ = _policy(tenants(spec, plan, catalog), policy_name(spec))
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert QUEUE_LABEL in conditions["queued"]
    assert "ownerReferences" in conditions["top-level"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CREATE", "UPDATE"] and rule["scope"] == "Namespaced"
    (validation,) = policy["spec"]["validations"]
    assert "variables.kept" in validation["expression"]
    message = validation["messageExpression"]
    assert f"{PRIORITY_LABEL}: " in message
    own = _literal(message[message.index("{") :])
    assert own == {t.name: f"{spec.name}-{t.priority}" for t in spec.scheduler.tenants}
    # Balanced quotes: every CEL string literal is closed (an odd count would not compile).
    assert len(re.findall(r"(?<!\\)'", message)) % 2 == 0


@pytest.mark.parametrize("batch", ["volcano", "none"])
def test_no_label_policy_without_kueue(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    objects = tenants(spec, plan, catalog)
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        assert [o["metadata"]["name"] for o in of_kind(objects, kind)] == [class_policy_name(spec)]


def test_no_policy_without_tenants(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "kueue", with_tenants=False)
    assert tenants(spec, plan, catalog) == []


# --- the PriorityClass policy -------------------------------------------------------------------

VOLCANO_RESOURCES = {"scheduling.volcano.sh/podgroups", "batch.volcano.sh/jobs"}
EVERY_BATCH = ["volcano", "kueue", "none"]


def _listed(expression: str) -> list[str]:
    """The JSON list literal after `in ` in a CEL expression."""
    return list(_literal(expression[expression.index(" in ") + 4 :]))


@pytest.mark.parametrize("batch", EVERY_BATCH)
def test_the_class_policy_is_rendered_with_tenants_and_validates_strictly(
    catalog: Catalog, batch: str
) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    objects = tenants(spec, plan, catalog)
    policy, binding = _policy(objects, class_policy_name(spec))
    assert manifest_problems([policy, binding]) == []
    assert policy["apiVersion"] == binding["apiVersion"] == ADMISSION_API
    assert binding["spec"] == {"policyName": class_policy_name(spec), "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    rendered = {o["metadata"]["name"]: o["value"] for o in of_kind(objects, "PriorityClass")}
    variables = _variables(policy)
    assert _literal(variables["classes"]) == rendered
    ceiling = _literal(variables["ceiling"])
    assert ceiling == {
        t.name: rendered[f"{spec.name}-{t.priority}"] for t in spec.scheduler.tenants
    }
    (selector,) = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert (selector["operator"], selector["values"]) == (
        "In",
        [t.name for t in spec.scheduler.tenants],
    )


@pytest.mark.parametrize("batch", EVERY_BATCH)
def test_the_class_policy_checks_pods_everywhere_and_volcano_kinds_under_volcano(
    catalog: Catalog, batch: str
) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    policy, _ = _policy(tenants(spec, plan, catalog), class_policy_name(spec))
    (condition,) = policy["spec"]["matchConditions"]
    checked = set(_listed(condition["expression"]))
    assert {"/pods", "batch/jobs", "apps/deployments"} <= checked
    assert checked & VOLCANO_RESOURCES == (VOLCANO_RESOURCES if batch == "volcano" else set())
    variables = _variables(policy)
    # Every checked resource has its words in the refusal, and no other.
    assert set(_literal(variables["field"])) == checked
    assert variables["resource"] == "request.resource.group + '/' + request.resource.resource"
    # A pod, PodGroup or Volcano Job names its class in its spec, the others in their template.
    named = variables["named"]
    assert set(_listed(named[1:])) == {"/pods"} | VOLCANO_RESOURCES
    assert "?spec.?template.?spec" in named and "spec.?tasks" in named
    assert variables["kept"].startswith("request.operation == 'UPDATE' && ")
    assert variables["kept"].endswith(" == variables.named")
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CREATE", "UPDATE"] and rule["resources"] == ["*"]


def test_the_class_policys_refusal_names_the_tenants_class(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    policy, _ = _policy(tenants(spec, plan, catalog), class_policy_name(spec))
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"].startswith("variables.kept || variables.named.all(c, ")
    message = validation["messageExpression"]
    own = _literal(message[message.index("{") :])
    assert own == {t.name: f"{spec.name}-{t.priority}" for t in spec.scheduler.tenants}
    assert "' (the tenant priority) or a lower PriorityClass" in message
    assert len(re.findall(r"(?<!\\)'", message)) % 2 == 0
    for expression in (*_variables(policy).values(), message, validation["expression"]):
        assert expression.count("(") == expression.count(")"), expression
        assert expression.count("[") == expression.count("]"), expression


def test_no_class_policy_without_tenants(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano", with_tenants=False)
    assert tenants(spec, plan, catalog) == []


def test_strict_validation_catches_a_misspelled_field_of_the_policy(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    policy, _ = _policy(tenants(spec, plan, catalog), class_policy_name(spec))
    policy["spec"]["matchCondition"] = policy["spec"].pop("matchConditions")
    assert any("matchCondition" in p for p in manifest_problems([policy]))
