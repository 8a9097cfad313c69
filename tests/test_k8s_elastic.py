"""Tenant elasticity: Kueue cohort and limits, Volcano queues and scheduler conf, KEDA objects.

Objects are validated strictly against the vendored schemas (Kueue, Volcano, and KEDA's
ScaledObject CRD, tests/schemas/keda.sh_scaledobject_v1alpha1.json); the volcano-scheduler
configuration is parsed back as YAML. No cluster runs here (no Kueue, Volcano, KEDA or
Prometheus): what they would do with the objects is what their docs say, cited in
infra/k8s/elastic.py. Specs without borrowing must build exactly what they built before.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog
from infra.k8s import build_kubernetes
from infra.k8s.elastic import (
    PROMETHEUS_ADDRESS,
    elastic_objects,
    scaled_objects,
    volcano_scheduler_conf,
)
from infra.k8s.monitoring import exported_metrics
from infra.k8s.tenants import tenants
from infra.lint import lint_loaded
from infra.render.k8s_manifests import k8s_files
from infra.spec import Spec, load_spec_text
from infra.spec.scheduling import Preemption
from infra.topology import Plan, expand

from .k8s_validation import manifest_problems

SITE = "site: {management_cidr: 10.0.0.0/12, bmc_cidr: 10.32.0.0/12}\n"
# 32 DGX H100 for training, 4 for MIG inference (256 + 32 GPUs), one SU each.
SPEC = """\
name: lab
{site}node_groups:
  - {{name: train, node: dgx-h100, count: 32}}
  - {{name: infer, node: dgx-h100, count: 4, mig: small}}
fabrics: {{compute: {{switch: qm9700, su_size: 32}}}}
scheduler:
  batch: {batch}
  mig_strategy: mixed
{preemption}  tenants:
{tenants}mig_layouts:
  small: {{profiles: {{"1g.10gb": 7}}}}
"""
PLAIN = """\
    - {name: research, gpus: 200, priority: high}
    - {name: serving, gpus: 64, priority: critical}
"""
ELASTIC = """\
    - {name: research, gpus: 200, priority: high, borrowing_limit: 40}
    - {name: serving, gpus: 64, priority: critical, lending_limit: 24,
       autoscale: {deployment: llm, group: infer, max_replicas: 30, target_pct: 60}}
    - {name: batch, gpus: 16, borrowing_limit: null,
       autoscale: {deployment: embed, group: train, min_replicas: 0, max_replicas: 8}}
"""

_plans: dict[str, Plan] = {}


def build(
    catalog: Catalog, batch: str, tenant_text: str, preemption: str = ""
) -> tuple[Spec, Plan]:
    text = SPEC.format(site=SITE, batch=batch, tenants=tenant_text, preemption=preemption)
    spec = load_spec_text(text).spec
    if "plan" not in _plans:  # the scheduler settings do not change the plan
        _plans["plan"] = expand(spec, catalog)
    return spec, _plans["plan"]


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


# --- no borrowing: nothing changes ----------------------------------------------------------------


@pytest.mark.parametrize("batch", ["kueue", "volcano"])
def test_without_borrowing_queues_are_as_before(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, batch, PLAIN)
    objects = tenants(spec, plan, catalog)
    if batch == "kueue":
        for queue in of_kind(objects, "ClusterQueue").values():
            assert "cohortName" not in queue["spec"]
            assert queue["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
            for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
                assert set(flavor["resources"][0]) == {"name", "nominalQuota"}
    else:
        for queue in of_kind(objects, "Queue").values():
            assert set(queue["spec"]) == {"weight", "reclaimable", "capability"}
            assert queue["spec"]["reclaimable"] is True
    quotas = {q["metadata"]["namespace"]: q for q in objects if q["kind"] == "ResourceQuota"}
    assert quotas["research"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "200"
    assert not of_kind(elastic_objects(spec, plan), "ScaledObject")  # no tenant autoscales


MIG_1G = "nvidia.com/mig-1g.10gb"


# --- Kueue ---------------------------------------------------------------------------------------


def test_kueue_cohort_limits_and_preemption(catalog: Catalog) -> None:
    spec, plan = build(catalog, "kueue", ELASTIC)
    queues = of_kind(tenants(spec, plan, catalog), "ClusterQueue")
    assert {q["spec"]["cohortName"] for q in queues.values()} == {"lab"}

    def limits(name: str, key: str) -> list[str | None]:
        # whole GPUs on train and infer, then infer's 1g.10gb slices (one resource group)
        (group,) = queues[name]["spec"]["resourceGroups"]
        gpu, mig = (group["coveredResources"].index(r) for r in ("nvidia.com/gpu", MIG_1G))
        train, infer = (f["resources"] for f in group["flavors"])
        return [train[gpu].get(key), infer[gpu].get(key), infer[mig].get(key)]

    # quota placed: serving's on infer (its autoscale group) as far as it reaches (32), batch's
    # on train; the rest on train, where the GPUs are left. infer is always MIG-split: whole
    # GPUs 0 there, 7 slices a GPU. A lending limit splits like the quota (serving: 12 + 12),
    # a borrowing limit over what the others lend per group (research: 28 on train, 12 on
    # infer: 84 slices)
    assert limits("research", "nominalQuota") == ["200", "0", "0"]
    assert limits("research", "borrowingLimit") == ["28", "0", "84"]
    assert limits("research", "lendingLimit") == [None, None, None]  # lends all of it
    assert limits("serving", "nominalQuota") == ["32", "0", "224"]
    assert limits("serving", "borrowingLimit") == ["0", "0", "0"]  # 0 stays 0: never borrows
    assert limits("serving", "lendingLimit") == ["12", "0", "84"]
    assert limits("batch", "nominalQuota") == ["16", "0", "0"]
    assert limits("batch", "borrowingLimit") == [None, None, None]  # unlimited: omitted
    for queue in queues.values():
        assert queue["spec"]["preemption"] == {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
        }
    assert manifest_problems(list(queues.values())) == []


@pytest.mark.parametrize(
    ("reclaim", "within", "expected"),
    [
        ("lower_priority", "never", ("LowerPriority", "Never")),
        ("never", "lower_priority", ("Never", "LowerPriority")),
        ("any", "never", ("Any", "Never")),
    ],
)
def test_kueue_preemption_follows_the_spec(
    catalog: Catalog, reclaim: str, within: str, expected: tuple[str, str]
) -> None:
    preemption = f"  preemption: {{reclaim: {reclaim}, within_tenant: {within}}}\n"
    spec, plan = build(catalog, "kueue", ELASTIC, preemption)
    for queue in of_kind(tenants(spec, plan, catalog), "ClusterQueue").values():
        body = queue["spec"]["preemption"]
        assert (body["reclaimWithinCohort"], body["withinClusterQueue"]) == expected


def test_borrowing_raises_the_resource_quota_to_what_may_be_held(catalog: Catalog) -> None:
    spec, plan = build(catalog, "kueue", ELASTIC)
    hard = {
        q["metadata"]["namespace"]: q["spec"]["hard"]
        for q in tenants(spec, plan, catalog)
        if q["kind"] == "ResourceQuota"
    }
    assert hard["research"]["requests.nvidia.com/gpu"] == "240"  # 200 + 40
    assert hard["serving"]["requests.nvidia.com/gpu"] == "64"
    assert hard["batch"]["requests.nvidia.com/gpu"] == "288"  # unlimited: the cluster's GPUs
    assert hard["research"]["requests.nvidia.com/mig-1g.10gb"] == str(240 * 7)


# --- Volcano -------------------------------------------------------------------------------------


def test_volcano_queues_guarantee_deserve_and_cap(catalog: Catalog) -> None:
    spec, plan = build(catalog, "volcano", ELASTIC)
    queues = {n: q["spec"] for n, q in of_kind(tenants(spec, plan, catalog), "Queue").items()}
    # per resource: whole GPUs and the 1g.10gb slices of always-MIG infer (7 a GPU), from the
    # quota placed per group as Kueue's flavors have it (test_kueue_cohort_limits_and_preemption)
    assert queues["research"] == {
        "weight": 200,
        "reclaimable": True,
        "deserved": {"nvidia.com/gpu": "200", "nvidia.com/mig-1g.10gb": "0"},
        # 200 + 28 borrowed on train, 12 borrowed on infer as 84 slices
        "capability": {"nvidia.com/gpu": "228", "nvidia.com/mig-1g.10gb": "84"},
    }
    assert queues["serving"] == {
        "weight": 64,
        "reclaimable": False,  # never borrows: nothing of it is ever reclaimed
        "deserved": {"nvidia.com/gpu": "32", "nvidia.com/mig-1g.10gb": "224"},
        # 64 minus 24 lent, 20 kept on each group: 20 GPUs on train, 140 slices on infer
        "guarantee": {"resource": {"nvidia.com/gpu": "20", "nvidia.com/mig-1g.10gb": "140"}},
        "capability": {"nvidia.com/gpu": "32", "nvidia.com/mig-1g.10gb": "224"},
    }
    assert "capability" not in queues["batch"]  # unlimited borrowing: no cap
    assert manifest_problems(list(of_kind(tenants(spec, plan, catalog), "Queue").values())) == []


def _conf(spec: Spec, plan: Plan) -> dict[str, Any]:
    (configmap,) = of_kind(elastic_objects(spec, plan), "ConfigMap").values()
    assert configmap["metadata"] == {**configmap["metadata"], "namespace": "volcano-system"}
    assert configmap["metadata"]["name"] == "volcano-scheduler-configmap"
    assert manifest_problems([configmap]) == []
    parsed: dict[str, Any] = yaml.safe_load(configmap["data"]["volcano-scheduler.conf"])
    assert parsed == volcano_scheduler_conf(spec, plan)
    return parsed


def _plugins(conf: dict[str, Any]) -> list[str]:
    return [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]


@pytest.mark.parametrize(
    ("preemption", "actions"),
    [
        # unset, both follow Volcano's own default under HyperNodes: nothing evicts
        ("", ["enqueue", "allocate", "backfill"]),
        (
            "  preemption: {reclaim: any, within_tenant: lower_priority}\n",
            ["enqueue", "allocate", "preempt", "reclaim", "backfill"],
        ),
        (
            "  preemption: {within_tenant: lower_priority}\n",
            ["enqueue", "allocate", "preempt", "backfill"],
        ),
        ("  preemption: {reclaim: any}\n", ["enqueue", "allocate", "reclaim", "backfill"]),
        (
            "  preemption: {reclaim: never, within_tenant: never}\n",
            ["enqueue", "allocate", "backfill"],
        ),
    ],
)
def test_volcano_scheduler_conf_actions(
    catalog: Catalog, preemption: str, actions: list[str]
) -> None:
    spec, plan = build(catalog, "volcano", ELASTIC, preemption)
    conf = _conf(spec, plan)
    assert [a.strip() for a in conf["actions"].split(",")] == actions
    plugins = _plugins(conf)
    assert plugins[:3] == ["priority", "gang", "conformance"]
    assert "capacity" in plugins and "proportion" not in plugins  # they conflict
    assert "network-topology-aware" in plugins  # the plan has SUs
    # lint's RP076 fires exactly when the rendered conf evicts under HyperNode placement
    evicts = {"preempt", "reclaim"} & set(actions)
    findings = {f.rule for f in lint_loaded(load_spec_text(_text(preemption)), catalog)}
    assert ("RP076" in findings) == bool(evicts)


def _text(preemption: str) -> str:
    return SPEC.format(site=SITE, batch="volcano", tenants=ELASTIC, preemption=preemption)


def test_volcano_without_borrowing_keeps_proportion(catalog: Catalog) -> None:
    spec, plan = build(catalog, "volcano", PLAIN)
    plugins = _plugins(_conf(spec, plan))
    assert "proportion" in plugins and "capacity" not in plugins


# --- KEDA ----------------------------------------------------------------------------------------


def test_scaled_objects_validate_strictly_and_pick_the_mig_safe_metric(catalog: Catalog) -> None:
    spec, plan = build(catalog, "kueue", ELASTIC)
    objects = of_kind(scaled_objects(spec, plan), "ScaledObject")
    assert set(objects) == {"llm", "embed"}
    assert manifest_problems(list(objects.values())) == []
    llm, embed = objects["llm"], objects["embed"]
    assert llm["metadata"]["namespace"] == "serving"
    assert llm["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "llm",
    }
    assert (llm["spec"]["minReplicaCount"], llm["spec"]["maxReplicaCount"]) == (1, 30)
    assert (embed["spec"]["minReplicaCount"], embed["spec"]["maxReplicaCount"]) == (0, 8)
    (mig,) = llm["spec"]["triggers"]
    (whole,) = embed["spec"]["triggers"]
    assert plan.groups["infer"].mig_split and not plan.groups["train"].mig_split
    assert mig["type"] == whole["type"] == "prometheus"
    assert mig["metricType"] == "Value"  # the query is already a mean over the pods
    assert mig["metadata"]["serverAddress"] == PROMETHEUS_ADDRESS
    assert mig["metadata"]["query"].startswith("avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{")
    assert 'namespace="serving"' in mig["metadata"]["query"]
    assert mig["metadata"]["threshold"] == "0.6"  # a 0-1 ratio
    assert whole["metadata"]["query"].startswith("avg(DCGM_FI_DEV_GPU_UTIL{")
    assert whole["metadata"]["threshold"] == "70"  # percent, the default target
    for metric in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"):
        assert metric in exported_metrics()  # the exporter's counters file exports it


def test_keda_schema_rejects_a_misspelled_field(catalog: Catalog) -> None:
    spec, plan = build(catalog, "kueue", ELASTIC)
    bad = copy.deepcopy(scaled_objects(spec, plan)[0])
    bad["spec"]["maxReplicas"] = bad["spec"].pop("maxReplicaCount")
    assert any("maxReplicas" in p for p in manifest_problems([bad]))


def test_the_builder_carries_the_elastic_objects(catalog: Catalog) -> None:
    spec, plan = build(catalog, "volcano", ELASTIC)
    built = build_kubernetes(spec, plan, catalog)
    (tenant_set,) = [s for s in built.sets if s.name == "tenants"]
    kinds = [o["kind"] for o in tenant_set.objects]
    assert kinds.count("ScaledObject") == 2 and "ConfigMap" in kinds
    # the namespace of the scheduler's ConfigMap is declared before it
    names = [(o["kind"], o["metadata"]["name"]) for o in tenant_set.objects]
    assert names.index(("Namespace", "volcano-system")) < names.index(
        ("ConfigMap", "volcano-scheduler-configmap")
    )
    assert manifest_problems(built.objects) == []


def test_rendered_readme_names_keda_only_when_a_tenant_autoscales(catalog: Catalog) -> None:
    spec, plan = build(catalog, "volcano", ELASTIC)
    assert "KEDA" in k8s_files(build_kubernetes(spec, plan, catalog))["k8s/README.md"]
    spec, plan = build(catalog, "volcano", PLAIN)
    assert "KEDA" not in k8s_files(build_kubernetes(spec, plan, catalog))["k8s/README.md"]


@pytest.mark.parametrize(
    ("batch", "by_hypernode", "expected"),
    [
        ("volcano", True, ("never", "never")),  # Volcano's own default under HyperNodes
        ("volcano", False, ("any", "lower_priority")),
        ("kueue", True, ("any", "lower_priority")),  # Kueue's TAS and preemption work together
    ],
)
def test_unset_preemption_takes_the_batch_schedulers_default(
    batch: str, by_hypernode: bool, expected: tuple[str, str]
) -> None:
    spec = load_spec_text(_text("").replace("batch: volcano", f"batch: {batch}")).spec
    in_effect = spec.scheduler.preemption_in_effect(by_hypernode=by_hypernode)
    assert (in_effect.reclaim, in_effect.within_tenant) == expected
    stated = spec.model_copy(
        update={
            "scheduler": spec.scheduler.model_copy(
                update={"preemption": Preemption(reclaim="never", within_tenant="lower_priority")}
            )
        }
    )
    kept = stated.scheduler.preemption_in_effect(by_hypernode=by_hypernode)
    assert (kept.reclaim, kept.within_tenant) == ("never", "lower_priority")
