"""Tenants' quotas on MIG node groups: Kueue's flavors (CPUs and memory too), Volcano's per-resource queue fields.

The example `examples/k8s-tenants.yaml` (Volcano, and its Kueue variant as the Kubernetes twin
builds it: ``batch: kueue`` in place of ``batch: volcano``) has 56 training nodes and 8
inference nodes that are 7 x 1g.10gb per GPU on weekdays from 07:00 and whole GPUs from 21:00;
serving (64 GPUs, lends at most 32) autoscales there. What Kueue and Volcano would do with the
quotas is worked out here from their documented rules (Kueue: a pod's every resource must be
covered by a flavor with quota; Volcano's capacity plugin: a queue may use at most
min(capability, cluster total - all guarantees + its own guarantee) of each resource).
"""

from __future__ import annotations

from typing import Any

from infra.catalog import Catalog
from infra.k8s.quota import GroupGpus, group_gpus, host_resources
from infra.k8s.tenants import tenants
from infra.k8s.topology import scheduler_topology
from infra.spec import Spec, load_spec_text
from infra.topology import Plan, expand
from infra.topology.tenant_quota import shares

from .conftest import ROOT
from .k8s_validation import manifest_problems

EXAMPLE = (ROOT / "examples" / "k8s-tenants.yaml").read_text(encoding="utf-8")
MIG = "nvidia.com/mig-1g.10gb"
GPU = "nvidia.com/gpu"
RDMA = "rdma/rdma_shared_device_ib"
_plans: dict[str, Plan] = {}


def example(catalog: Catalog, batch: str) -> tuple[Spec, Plan]:
    spec = load_spec_text(EXAMPLE.replace("batch: volcano", f"batch: {batch}")).spec
    if "plan" not in _plans:
        _plans["plan"] = expand(spec, catalog)
    return spec, _plans["plan"]


def by_name(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


# --- what each group offers, and where the quota goes -------------------------------------------


def test_a_scheduled_group_offers_whole_gpus_and_slices(catalog: Catalog) -> None:
    spec, plan = example(catalog, "volcano")
    train, infer = group_gpus(spec, plan)
    assert train == GroupGpus("train", 448, 448, 448, {})
    # 8 DGX H100: all 64 GPUs whole by night, none by day; 7 slices a GPU by day
    assert infer == GroupGpus("infer", 64, 64, 0, {MIG: 448})


def test_the_autoscaling_tenant_is_placed_on_its_group(catalog: Catalog) -> None:
    spec, plan = example(catalog, "volcano")
    placed = shares(spec, group_gpus(spec, plan))
    # before: in proportion to the groups' GPUs, serving 56 on train and 8 on infer
    assert [s.nominal for s in placed["serving"]] == [0, 64]
    assert [s.lend for s in placed["serving"]] == [0, 32]
    assert [s.nominal for s in placed["research"]] == [448, 0]
    # research borrows where somebody lends: serving's infer GPUs
    assert [s.borrow for s in placed["research"]] == [0, 64]


# --- Kueue ----------------------------------------------------------------------------------------


def _flavor_for(queue: dict[str, Any], resource: str) -> list[tuple[str, int]]:
    """(flavor, nominal quota) of every flavor of the queue that covers ``resource``."""
    found = []
    for group in queue["spec"]["resourceGroups"]:
        if resource in group["coveredResources"]:
            at = group["coveredResources"].index(resource)
            for flavor in group["flavors"]:
                found.append((flavor["name"], int(flavor["resources"][at]["nominalQuota"])))
    return found


def test_kueue_admits_mig_slices_on_the_mig_groups_flavor(catalog: Catalog) -> None:
    spec, plan = example(catalog, "kueue")
    objects = tenants(spec, plan, catalog)
    queues = by_name(objects, "ClusterQueue")
    # a pod asking for a 1g.10gb slice has a flavor with quota in serving's queue (before:
    # no resource group covered it, so Kueue never admitted it)
    assert _flavor_for(queues["serving"], MIG) == [
        ("h100-shared-train-flavor", 0),
        ("h100-shared-infer-flavor", 448),
    ]
    # whole GPUs by night on the inference group, all 64 of serving's quota (before: 8)
    assert _flavor_for(queues["serving"], GPU) == [
        ("h100-shared-train-flavor", 0),
        ("h100-shared-infer-flavor", 64),
    ]
    assert _flavor_for(queues["research"], GPU) == [
        ("h100-shared-train-flavor", 448),
        ("h100-shared-infer-flavor", 0),
    ]
    assert _flavor_for(queues["research"], MIG)[1] == ("h100-shared-infer-flavor", 0)
    # serving lends at most 32 GPUs: 32 whole by night, their 224 slices by day
    (group,) = queues["serving"]["spec"]["resourceGroups"]
    infer = group["flavors"][1]["resources"]
    assert infer[group["coveredResources"].index(MIG)]["lendingLimit"] == "224"
    assert infer[group["coveredResources"].index(GPU)]["lendingLimit"] == "32"
    flavors = by_name(scheduler_topology(spec, plan), "ResourceFlavor")
    assert sorted(flavors) == ["h100-shared-infer-flavor", "h100-shared-train-flavor"]
    assert manifest_problems([*queues.values(), *flavors.values()]) == []


def test_kueue_covers_cpu_memory_and_rdma_in_proportion_to_gpus(catalog: Catalog) -> None:
    """A training pod asks for CPUs, memory and the RDMA device besides GPUs, and Kueue admits
    nothing asking for a resource its ClusterQueue leaves out (before: only GPUs and slices
    were covered). A DGX H100 has 224 logical CPUs and 2048 GiB: pods get 95 %, 212 CPUs and
    1945 GiB a node, and each tenant the share its GPUs hold of each group."""
    spec, plan = example(catalog, "kueue")
    queues = by_name(tenants(spec, plan, catalog), "ClusterQueue")
    for queue in queues.values():
        (group,) = queue["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", GPU, RDMA, MIG]
    # research: all 56 train nodes; serving: the 8 inference nodes
    assert _flavor_for(queues["research"], "cpu") == [
        ("h100-shared-train-flavor", 56 * 212),
        ("h100-shared-infer-flavor", 0),
    ]
    assert _flavor_for(queues["serving"], "cpu") == [
        ("h100-shared-train-flavor", 0),
        ("h100-shared-infer-flavor", 8 * 212),
    ]
    (group,) = queues["research"]["spec"]["resourceGroups"]
    train, infer = ({r["name"]: r for r in f["resources"]} for f in group["flavors"])
    assert train["memory"]["nominalQuota"] == f"{56 * 1945}Gi"
    assert train[RDMA]["nominalQuota"] == str(56 * 63)  # the plugin's rdmaHcaMax per node
    # research may borrow 64 GPUs of serving's infer group: a node's CPUs and memory per 8 GPUs
    assert infer["cpu"]["borrowingLimit"] == str(8 * 212)
    assert infer["memory"]["borrowingLimit"] == f"{8 * 1945}Gi"
    (group,) = queues["serving"]["spec"]["resourceGroups"]
    serving_infer = {r["name"]: r for r in group["flavors"][1]["resources"]}
    assert serving_infer["cpu"]["lendingLimit"] == str(4 * 212)  # 32 of its 64 GPUs


def test_kueue_host_resources_follow_the_catalog(catalog: Catalog) -> None:
    spec, plan = example(catalog, "kueue")
    host = catalog.nodes["dgx-h100"].host
    train, infer = host_resources(spec, plan, catalog)
    assert train == {
        "cpu": 56 * (host.cpus * 95 // 100),
        "memory": 56 * (host.memory_gib * 95 // 100),
        RDMA: 56 * 63,
    }
    assert infer["cpu"] == 8 * (host.cpus * 95 // 100)


def test_every_kueue_flavor_serves_one_resource_group(catalog: Catalog) -> None:
    spec, plan = example(catalog, "kueue")
    for queue in by_name(tenants(spec, plan, catalog), "ClusterQueue").values():
        groups = queue["spec"]["resourceGroups"]
        names = [f["name"] for g in groups for f in g["flavors"]]
        covered = [r for g in groups for r in g["coveredResources"]]
        assert len(names) == len(set(names)) and len(covered) == len(set(covered))
        for group in groups:
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


# --- Volcano --------------------------------------------------------------------------------------

# Node capacity per resource by day (infer MIG-split) and by night (whole GPUs), as the device
# plugin reports it and the capacity plugin sums it.
DAY = {GPU: 448, MIG: 448}
NIGHT = {GPU: 512, MIG: 0}


def _usable(queues: dict[str, dict[str, Any]], name: str, total: dict[str, int]) -> dict[str, int]:
    """Volcano's realCapability: min(capability, total - all guarantees + own guarantee)."""

    def guarantee(q: dict[str, Any]) -> dict[str, int]:
        found = q["spec"].get("guarantee", {}).get("resource", {})
        return {r: int(n) for r, n in found.items()}

    guaranteed = {r: sum(guarantee(q).get(r, 0) for q in queues.values()) for r in total}
    own = guarantee(queues[name])
    capability = queues[name]["spec"].get("capability", {})
    usable = {}
    for r, n in total.items():
        real = max(0, n - guaranteed[r]) + own.get(r, 0)
        usable[r] = min(real, int(capability[r])) if r in capability else real
    return usable


def test_volcano_queues_strand_no_whole_gpu_by_day(catalog: Catalog) -> None:
    spec, plan = example(catalog, "volcano")
    queues = by_name(tenants(spec, plan, catalog), "Queue")
    # by day research may use every training GPU (before: 416, 32 held for serving's guarantee
    # in whole GPUs, which serving's MIG pods cannot use)
    assert _usable(queues, "research", DAY)[GPU] == 448
    # serving keeps 32 GPUs' worth of slices it never lends
    assert queues["serving"]["spec"]["guarantee"] == {"resource": {MIG: "224"}}
    assert _usable(queues, "research", DAY)[MIG] == 448 - 224
    # by night research may take the inference group's whole GPUs up to its borrowing limit
    assert _usable(queues, "research", NIGHT)[GPU] == 512


def test_volcano_queues_bound_mig_pods(catalog: Catalog) -> None:
    spec, plan = example(catalog, "volcano")
    queues = by_name(tenants(spec, plan, catalog), "Queue")
    # before: no queue named a MIG resource, so MIG pods were bounded by none
    for name, cap in (("serving", "448"), ("research", "448")):
        assert queues[name]["spec"]["capability"][MIG] == cap
    assert queues["serving"]["spec"]["deserved"] == {GPU: "64", MIG: "448"}
    assert manifest_problems(list(queues.values())) == []
