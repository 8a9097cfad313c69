"""Scheduler topology and tenant objects: strictly schema-valid, and shaped like the plan.

Every object is written to YAML and checked by the vendored `tests/schemas/validate_crs.py`
(custom resources against their strict CRD schemas, built-in kinds through
kubernetes-validate). Properties: every SU sits in exactly one tier-1 HyperNode and the
higher tiers form one tree over them; Kueue levels end with the hostname; one queue per
tenant; priorities ordered; deny-all in every tenant namespace; names unique per kind and
namespace. The CEL rules the schema files cannot enforce are checked here by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog
from infra.k8s.objects import topology_label
from infra.k8s.tenants import (
    PRIORITY_VALUES,
    mig_quota,
    podgroup_examples,
    tenants,
)
from infra.k8s.topology import HOSTNAME_LABEL, scheduler_topology
from infra.spec import Spec, load_spec_text
from infra.topology import Plan, expand
from infra.topology.tenant_quota import split_quota

from .conftest import TESTS

VALIDATE = TESTS / "schemas" / "validate_crs.py"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

SITE = "site: {management_cidr: 10.0.0.0/12, bmc_cidr: 10.32.0.0/12}\n"
TENANTS = """\
  tenants:
    - {name: research, gpus: 448, priority: high}
    - {name: serving, gpus: 64, priority: critical}
    - {name: interns, gpus: 4, priority: low}
"""
# Two-tier (up to 256 DGX H100 on QM9700 with SUs of 32); group names with `_` (and one with
# `__`, which names may hold inside but not at the end); a cloud group without compute HCAs,
# so its servers have no SU.
TWO_TIER = """\
name: lab
{site}node_groups:
  - {{name: train_a, node: dgx-h100, count: 56}}
  - {{name: infer__b, node: dgx-h100, count: 8, mig: small}}
  - {{name: burst, node: aws-p5.48xlarge, count: 4}}
fabrics: {{compute: {{switch: qm9700, su_size: 32}}}}
scheduler:
  batch: {batch}
  mig_strategy: mixed
{tenants}mig_layouts:
  small: {{profiles: {{"1g.10gb": 7}}}}
  mixed: {{profiles: {{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2, "1g.10gb+me": 1}}}}
"""
# Three-tier: 512 DGX H100 in 16 SUs of 32 make pods of spines (and a small second group).
THREE_TIER = """\
name: big
{site}node_groups:
  - {{name: train, node: dgx-h100, count: 480}}
  - {{name: dev_pool, node: dgx-h100, count: 40}}
fabrics: {{compute: {{switch: qm9700, su_size: 32}}}}
scheduler:
  batch: {batch}
{tenants}"""
# No compute fabric at all: no SU, so no HyperNode and no Topology.
NO_FABRIC = """\
name: cloud
node_groups:
  - {{name: p5, node: aws-p5.48xlarge, count: 16}}
scheduler:
  batch: {batch}
{tenants}"""
LAYOUTS = {"two-tier": TWO_TIER, "three-tier": THREE_TIER, "no-fabric": NO_FABRIC}


_plans: dict[str, Plan] = {}


def build(
    catalog: Catalog, layout: str, batch: str, with_tenants: bool = True
) -> tuple[Spec, Plan]:
    """Spec and plan of one layout (the plan, which the scheduler settings do not change, is
    cached per layout: the three-tier one takes a moment)."""
    tenants_text = TENANTS if with_tenants else ""
    spec = load_spec_text(LAYOUTS[layout].format(site=SITE, batch=batch, tenants=tenants_text)).spec
    if layout not in _plans:
        _plans[layout] = expand(spec, catalog)
    return spec, _plans[layout]


def all_objects(spec: Spec, plan: Plan, catalog: Catalog) -> list[dict[str, Any]]:
    return [
        *scheduler_topology(spec, plan),
        *tenants(spec, plan, catalog),
        *podgroup_examples(spec, plan, catalog),
    ]


def validate(tmp_path: Path, objects: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return subprocess.run(
        [sys.executable, str(VALIDATE), str(path)], capture_output=True, text=True, check=False
    )


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


CASES = [(layout, batch) for layout in LAYOUTS for batch in ("volcano", "kueue", "none")]


# --- strict schema validation ------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "batch"), CASES)
def test_every_object_validates_strictly(
    catalog: Catalog, tmp_path: Path, layout: str, batch: str
) -> None:
    spec, plan = build(catalog, layout, batch)
    objects = all_objects(spec, plan, catalog)
    assert objects
    result = validate(tmp_path, objects)
    assert result.returncode == 0, result.stdout + result.stderr


def test_validate_crs_catches_a_misspelled_field(catalog: Catalog, tmp_path: Path) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    queue = of_kind(tenants(spec, plan, catalog), "Queue")[0]
    queue["spec"]["reclaimabel"] = queue["spec"].pop("reclaimable")
    hypernode = scheduler_topology(spec, plan)[0]
    hypernode["spec"]["members"][0]["selector"]["labelMatch"]["matchLabel"] = {"a": "b"}
    result = validate(tmp_path, [queue, hypernode])
    assert result.returncode == 1
    assert "reclaimabel" in result.stdout and "matchLabel" in result.stdout


def test_validate_crs_catches_a_misspelled_builtin_field(catalog: Catalog, tmp_path: Path) -> None:
    spec, plan = build(catalog, "two-tier", "kueue")
    policy = of_kind(tenants(spec, plan, catalog), "NetworkPolicy")[0]
    policy["spec"]["policyType"] = policy["spec"].pop("policyTypes")
    assert validate(tmp_path, [policy]).returncode == 1


# --- Volcano HyperNodes ------------------------------------------------------------------------


def hypernode_tree(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o["spec"] for o in of_kind(objects, "HyperNode")}


@pytest.mark.parametrize("layout", ["two-tier", "three-tier"])
def test_every_su_is_in_exactly_one_tier1_hypernode(catalog: Catalog, layout: str) -> None:
    spec, plan = build(catalog, layout, "volcano")
    tree = hypernode_tree(scheduler_topology(spec, plan))
    selected: Counter[str] = Counter()
    for node in tree.values():
        if node["tier"] == 1:
            (member,) = node["members"]  # one selector per SU, never one entry per server
            assert member["type"] == "Node"
            labels = member["selector"]["labelMatch"]["matchLabels"]
            assert list(labels) == [topology_label("su")]
            selected[labels[topology_label("su")]] += 1
        else:
            assert all(m["type"] == "HyperNode" for m in node["members"])
    on_fabric = {s.su for s in plan.servers if s.su is not None}
    assert set(selected) == on_fabric == {su.name for su in plan.sus}
    assert set(selected.values()) == {1}
    # Servers without an SU (the cloud group) are selected by no HyperNode.
    assert any(s.su is None for s in plan.servers) == (layout == "two-tier")


@pytest.mark.parametrize("layout", ["two-tier", "three-tier"])
def test_hypernodes_form_one_tree_over_the_tier1_nodes(catalog: Catalog, layout: str) -> None:
    spec, plan = build(catalog, layout, "volcano")
    tree = hypernode_tree(scheduler_topology(spec, plan))
    parent: dict[str, str] = {}
    for name, node in tree.items():
        for member in node["members"]:
            if member["type"] == "HyperNode":
                child = member["selector"]["exactMatch"]["name"]
                assert child in tree, child
                assert child not in parent, f"{child} has two parents"
                assert tree[child]["tier"] < node["tier"]
                parent[child] = name
    roots = [n for n in tree if n not in parent]
    assert len(roots) == 1
    three_tier = plan.fabrics["compute"].tiers == 3
    assert tree[roots[0]]["tier"] == (3 if three_tier else 2)
    assert three_tier == (layout == "three-tier")
    for start in tree:  # every HyperNode reaches the root
        name, hops = start, 0
        while name in parent:
            name, hops = parent[name], hops + 1
        assert name == roots[0]
        assert hops <= 2
    if three_tier:
        pods = {su.pod for su in plan.sus}
        assert sum(n["tier"] == 2 for n in tree.values()) == len(pods) > 1


def test_hypernode_names_are_dns_safe_and_stable(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    names = list(hypernode_tree(scheduler_topology(spec, plan)))
    assert all(DNS_SUBDOMAIN.match(n) and len(n) <= 253 for n in names)
    assert "lab-train-a-su01" in names and "lab-infer--b-su01" in names
    assert names == list(hypernode_tree(scheduler_topology(spec, plan)))


@pytest.mark.parametrize("batch", ["volcano", "kueue"])
def test_no_compute_fabric_means_no_topology(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, "no-fabric", batch)
    objects = scheduler_topology(spec, plan)
    assert not of_kind(objects, "HyperNode") and not of_kind(objects, "Topology")
    if batch == "kueue":  # the flavor is still there, without a topology
        (flavor,) = of_kind(objects, "ResourceFlavor")
        assert "topologyName" not in flavor["spec"]


def test_batch_none_builds_no_scheduler_objects(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "none")
    assert scheduler_topology(spec, plan) == []
    assert podgroup_examples(spec, plan, catalog) == []
    kinds = {o["kind"] for o in tenants(spec, plan, catalog)}
    # kube-scheduler preempts by the pods' PriorityClass: the policy holding a tenant's pods
    # to its class is there whatever the batch scheduler.
    policy = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert kinds == {"PriorityClass", "Namespace", "ResourceQuota", "NetworkPolicy", *policy}


# --- Kueue Topology and flavors ----------------------------------------------------------------


@pytest.mark.parametrize("layout", ["two-tier", "three-tier"])
def test_kueue_topology_levels_run_coarse_to_fine(catalog: Catalog, layout: str) -> None:
    spec, plan = build(catalog, layout, "kueue")
    objects = scheduler_topology(spec, plan)
    (topology,) = of_kind(objects, "Topology")
    levels = [lvl["nodeLabel"] for lvl in topology["spec"]["levels"]]
    pod = [topology_label("pod")] if layout == "three-tier" else []
    assert levels == [*pod, topology_label("su"), HOSTNAME_LABEL]
    # CEL rules of the CRD (not in the JSON schema): unique, hostname only last.
    assert len(set(levels)) == len(levels) and HOSTNAME_LABEL not in levels[:-1]
    flavors = of_kind(objects, "ResourceFlavor")
    # a flavor per group, MIG groups too (infer__b: always 7 x 1g.10gb): its slices are
    # counted on the same flavor as the CPUs and memory of its nodes
    assert len(flavors) == len(spec.node_groups)
    on_fabric = {s.group for s in plan.servers if s.su is not None}
    names = [f["metadata"]["name"] for f in flavors]
    assert all(n.endswith("-flavor") for n in names)
    for group, flavor in zip(spec.node_groups, flavors, strict=True):
        body = flavor["spec"]
        assert body["nodeLabels"] == {topology_label("node-group"): group.name}
        assert ("topologyName" in body) == (group.name in on_fabric)
        if "topologyName" in body:
            assert body["topologyName"] == topology["metadata"]["name"]
        assert DNS_SUBDOMAIN.match(flavor["metadata"]["name"])


# --- tenants -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("layout", "batch"), CASES)
def test_object_names_do_not_repeat(catalog: Catalog, layout: str, batch: str) -> None:
    spec, plan = build(catalog, layout, batch)
    keys = Counter(
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in all_objects(spec, plan, catalog)
    )
    assert [k for k, n in keys.items() if n > 1] == []


@pytest.mark.parametrize("batch", ["volcano", "kueue"])
def test_one_queue_per_tenant(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    objects = tenants(spec, plan, catalog)
    names = [t.name for t in spec.scheduler.tenants]
    if batch == "volcano":
        queues = of_kind(objects, "Queue")
        assert [q["metadata"]["name"] for q in queues] == names
        # research's quota split 369 : 53 : 26 over train_a, infer__b, burst; infer__b is always MIG-split
        # (7 x 1g.10gb), so its share is capped as slices, not whole GPUs (which it has none of)
        assert [q["spec"]["capability"] for q in queues] == [
            {"nvidia.com/gpu": "395", "nvidia.com/mig-1g.10gb": "371"},
            {"nvidia.com/gpu": "57", "nvidia.com/mig-1g.10gb": "49"},  # 53 : 7 : 4
            {"nvidia.com/gpu": "3", "nvidia.com/mig-1g.10gb": "7"},  # 3 : 1 : 0
        ]
        assert all(q["spec"]["reclaimable"] is True for q in queues)
        assert all(1 <= q["spec"]["weight"] <= 65535 for q in queues)
    else:
        cluster_queues = of_kind(objects, "ClusterQueue")
        local_queues = of_kind(objects, "LocalQueue")
        assert [q["metadata"]["name"] for q in cluster_queues] == names
        assert [(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in local_queues] == [
            (n, n) for n in names
        ]


def test_kueue_nominal_quota_adds_up_to_the_tenant_gpus(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "kueue")
    flavors = {
        f["metadata"]["name"] for f in of_kind(scheduler_topology(spec, plan), "ResourceFlavor")
    }
    for tenant, queue in zip(
        spec.scheduler.tenants, of_kind(tenants(spec, plan, catalog), "ClusterQueue"), strict=True
    ):
        body = queue["spec"]
        assert body["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": tenant.name}
        }
        (group,) = body["resourceGroups"]
        covered = group["coveredResources"]
        assert covered[:3] == ["cpu", "memory", "nvidia.com/gpu"]
        assert covered[-1] == "nvidia.com/mig-1g.10gb"
        # every flavor in the one resource group (Kueue's webhook refuses a repeat)
        assert sorted(f["name"] for f in group["flavors"]) == sorted(flavors)
        # CEL rule: each flavor lists as many resources as the group covers.
        assert all(len(f["resources"]) == len(covered) for f in group["flavors"])
        # whole GPUs on train_a and burst, 1g.10gb slices (7 a GPU) on always-MIG infer__b:
        # together exactly the tenant's GPUs
        quota = [
            {r["name"]: int(r["nominalQuota"].removesuffix("Gi")) for r in f["resources"]}
            for f in group["flavors"]
        ]
        gpus = sum(q["nvidia.com/gpu"] for q in quota)
        assert gpus + sum(q["nvidia.com/mig-1g.10gb"] for q in quota) // 7 == tenant.gpus
        assert "cohortName" not in body


@pytest.mark.parametrize(
    ("total", "capacities", "parts"),
    [
        (448, [448, 64, 32], [369, 53, 26]),
        (4, [448, 64, 32], [3, 1, 0]),
        (0, [8, 8], [0, 0]),
        (7, [0, 0], [7, 0]),
        (10, [1, 1, 1], [4, 3, 3]),
    ],
)
def test_split_quota_is_exact_and_proportional(
    total: int, capacities: list[int], parts: list[int]
) -> None:
    assert split_quota(total, capacities) == parts
    assert sum(parts) == total


@pytest.mark.parametrize("batch", ["volcano", "kueue", "none"])
def test_priority_classes_are_ordered_and_only_those_used(catalog: Catalog, batch: str) -> None:
    spec, plan = build(catalog, "two-tier", batch)
    objects = tenants(spec, plan, catalog)
    classes = of_kind(objects, "PriorityClass")
    assert [c["metadata"]["name"] for c in classes] == ["lab-low", "lab-high", "lab-critical"]
    values = [c["value"] for c in classes]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert max(values) < 2_000_000_000 // 100  # far below system-cluster-critical
    assert all(c["preemptionPolicy"] == "PreemptLowerPriority" for c in classes)
    assert all(c["globalDefault"] is False for c in classes)
    order = list(PRIORITY_VALUES)
    assert [PRIORITY_VALUES[p] for p in order] == sorted(PRIORITY_VALUES.values())
    workload_classes = of_kind(objects, "WorkloadPriorityClass")
    if batch == "kueue":
        assert [(w["metadata"]["name"], w["value"]) for w in workload_classes] == [
            (c["metadata"]["name"], c["value"]) for c in classes
        ]
    else:
        assert workload_classes == []


def test_network_policies_deny_by_default(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    objects = tenants(spec, plan, catalog)
    for tenant in spec.scheduler.tenants:
        policies = {
            p["metadata"]["name"]: p["spec"]
            for p in of_kind(objects, "NetworkPolicy")
            if p["metadata"]["namespace"] == tenant.name
        }
        deny = policies["default-deny"]
        assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        same = policies["allow-same-namespace"]
        assert same["ingress"] == [{"from": [{"podSelector": {}}]}]
        assert same["egress"] == [{"to": [{"podSelector": {}}]}]
        (dns,) = policies["allow-dns"]["egress"]
        assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
        assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
        monitoring = policies["allow-monitoring"]["ingress"][0]["from"][0]
        assert monitoring["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "monitoring"
        }


def test_resource_quota_caps_gpus_and_mixed_mig_slices(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    quotas = {
        q["metadata"]["namespace"]: q["spec"]["hard"]
        for q in of_kind(tenants(spec, plan, catalog), "ResourceQuota")
    }
    # 1g.10gb: 7 per GPU in the densest layout; 3g.40gb and 2g.20gb once; 1g.10gb+me skipped.
    assert quotas["interns"] == {
        "requests.nvidia.com/gpu": "4",
        "requests.nvidia.com/mig-1g.10gb": "28",
        "requests.nvidia.com/mig-2g.20gb": "4",
        "requests.nvidia.com/mig-3g.40gb": "4",
    }
    three, _ = build(catalog, "three-tier", "volcano")  # mig_strategy none: GPUs only
    assert mig_quota(three, 10) == {}


def test_podgroup_examples_fit_one_su(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "volcano")
    examples = {p["metadata"]["namespace"]: p for p in podgroup_examples(spec, plan, catalog)}
    # interns (4 GPUs) cannot fill one 8-GPU node: no example.
    assert set(examples) == {"research", "serving"}
    research = examples["research"]["spec"]
    assert research["minMember"] == 32  # the largest SU: 32 servers
    assert research["minResources"] == {"nvidia.com/gpu": "256"}
    assert research["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert research["priorityClassName"] == "lab-high" and research["queue"] == "research"
    assert examples["serving"]["spec"]["minMember"] == 8
    assert examples["research"]["metadata"]["name"] == "research-example-gang"
    cloud, cloud_plan = build(catalog, "no-fabric", "volcano")
    for example in podgroup_examples(cloud, cloud_plan, catalog):
        assert "networkTopology" not in example["spec"]


def test_no_tenants_means_no_tenant_objects(catalog: Catalog) -> None:
    for batch in ("volcano", "kueue", "none"):
        spec, plan = build(catalog, "two-tier", batch, with_tenants=False)
        assert tenants(spec, plan, catalog) == []
        assert podgroup_examples(spec, plan, catalog) == []


def test_tenant_names_are_dns_labels_in_every_object(catalog: Catalog) -> None:
    spec, plan = build(catalog, "two-tier", "kueue")
    for obj in tenants(spec, plan, catalog):
        assert DNS_SUBDOMAIN.match(obj["metadata"]["name"])
        if "namespace" in obj["metadata"]:
            assert DNS_LABEL.match(obj["metadata"]["namespace"])
