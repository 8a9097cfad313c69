"""The tenant-priority admission policy (infra.k8s.admission), read without a cluster.

What the policy decides is exercised by the Kubernetes twin against a real API server
(tests/test_k8s_twin_tenants.py: a Job without the label, or above its tenant, is refused;
one at its tenant's class is admitted at that priority). Here: it is rendered exactly with
Kueue and tenants, its literal maps agree with the WorkloadPriorityClasses rendered beside it,
it matches only the tenants' namespaces and top-level queued objects, and its binding denies.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.catalog import Catalog
from infra.k8s.admission import ADMISSION_API, PRIORITY_LABEL, QUEUE_LABEL, policy_name
from infra.k8s.tenants import tenants

from .test_k8s_tenants import build, of_kind


def _policy(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (policy,) = of_kind(objects, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(objects, "ValidatingAdmissionPolicyBinding")
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
    policy, binding = _policy(objects)
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
    policy, _ = _policy(tenants(spec, plan, catalog))
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
def test_no_policy_without_kueue(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    objects = tenants(spec, plan, catalog)
    assert of_kind(objects, "ValidatingAdmissionPolicy") == []
    assert of_kind(objects, "ValidatingAdmissionPolicyBinding") == []


def test_no_policy_without_tenants(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "kueue", with_tenants=False)
    assert tenants(spec, plan, catalog) == []
