"""Kueue and kube-scheduler on the planned nodes: the Kubernetes twin's scheduling scenarios.

On one control plane (tests/k8s_twin): the CRDs; Kueue's controller with its release's
webhooks (the README's prerequisite, installed first); the rendered manifests of the Kueue
variant of examples/k8s-tenants.yaml applied in the README's order; a Node per planned server,
labelled and sized as NFD, the GPU Operator and railplan's Ansible would leave it, kept Ready
by kwok, which also runs the pods bound to them. Then Jobs as the tenants' users submit them
(``batch/v1`` with ``kueue.x-k8s.io/queue-name``) and what Kueue admitted, on which flavor, and
where the twin's kube-scheduler put the pods. ``make k8s-twin-sched`` runs this module
(RAILPLAN_K8S_TWIN=1); elsewhere it skips, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.k8s_twin import apply, jobs, kwok, scenario, versions
from tests.k8s_twin.kubectl import kubectl
from tests.k8s_twin.scenario import GPU, RDMA, Cluster, use_cluster_queues

CI_MINUTES = 4  # what the module needs in CI, set-up included (tests/conftest.py)
_missing = versions.skip_module_unless_runnable("k8s-twin-sched", controllers=True)

SPEC = Path("kueue:examples/k8s-tenants.yaml")
TENANTS = ["research", "serving"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert not _missing, f"binaries not built: {_missing}"
    with scenario.started(SPEC, tmp_path_factory.mktemp("k8s-twin-sched")) as running:
        yield running


@pytest.fixture
def clean(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with no tenant Job before and after the test, and the rendered queues."""
    jobs.delete_all(cluster.kubeconfig, TENANTS)
    use_cluster_queues(cluster, cluster.k8s_dir)
    yield cluster
    jobs.delete_all(cluster.kubeconfig, TENANTS)


_quota = scenario.quota


def _gpus_per_node(cluster: Cluster, group: str) -> int:
    return cluster.gpus_per_node(group)


def _node_of(cluster: Cluster, pod: dict[str, Any]) -> dict[str, Any]:
    return cluster.node_of(pod)


# --- the nodes ---------------------------------------------------------------------------------


def test_planned_nodes_are_ready_with_their_labels_and_capacity(cluster: Cluster) -> None:
    ready = kwok.ready_nodes(cluster.plane)
    assert set(ready) == {s.name for s in cluster.planned.plan.servers}
    train, infer = ready["train001"], ready["infer001"]
    assert train["metadata"]["labels"]["railplan.dev/node-group"] == "train"
    assert train["metadata"]["labels"]["railplan.dev/su"] == "train-su01"
    assert train["status"]["allocatable"][GPU] == "8"
    assert train["status"]["allocatable"]["rdma/rdma_shared_device_ib"] == "63"
    # The inference group is MIG-split now (infer-day: seven 1g.10gb per GPU), mixed strategy.
    assert infer["metadata"]["labels"]["nvidia.com/mig.config"] == "infer-day"
    assert infer["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "56"
    assert infer["status"]["allocatable"][GPU] == "0"
    # kwok renews each node's Lease, as a kubelet does.
    leases = kubectl(cluster.kubeconfig, ["get", "leases", "-n", "kube-node-lease", "-o", "name"])
    assert len(leases.split()) == len(ready)


# --- Kueue: flavors -----------------------------------------------------------------------------


def test_kueue_admits_a_whole_gpu_training_job_on_the_gpu_flavor(clean: Cluster) -> None:
    gpus = _gpus_per_node(clean, "train")
    jobs.submit(clean.kubeconfig, clean.job("train-1", "research", 1, {GPU: str(gpus)}))
    wl = jobs.wait_admitted(clean.kubeconfig, "research", "train-1")
    assert wl["status"]["admission"]["clusterQueue"] == "research"
    assert jobs.flavors(wl) == {GPU: clean.flavor_of("train")}
    (pod,) = jobs.wait_for(
        "its pod running", lambda: jobs.running_pods(clean.kubeconfig, "research", "train-1")
    )
    assert _node_of(clean, pod)["metadata"]["labels"]["railplan.dev/node-group"] == "train"


def test_kueue_admits_a_training_job_that_asks_for_cpu_memory_and_rdma(clean: Cluster) -> None:
    """A real NCCL training pod asks for its node's GPUs and also CPUs, memory and the RDMA
    shared device (docs/kubernetes.md): Kueue admits a workload only if its ClusterQueue
    covers every resource it requests, so all of them must be on the GPU's flavor."""
    gpus = _gpus_per_node(clean, "train")
    request = {GPU: str(gpus), "cpu": "96", "memory": "1024Gi", RDMA: "1"}
    jobs.submit(clean.kubeconfig, clean.job("nccl-1", "research", 2, request))
    try:
        wl = jobs.wait_admitted(clean.kubeconfig, "research", "nccl-1", timeout_s=90)
    finally:
        print(
            "research/nccl-1:",
            jobs.why_waiting(jobs.workload(clean.kubeconfig, "research", "nccl-1")),
        )
    flavor = clean.flavor_of("train")
    assert jobs.flavors(wl) == {r: flavor for r in request}

    def two_running() -> list[dict[str, Any]] | None:
        pods = jobs.running_pods(clean.kubeconfig, "research", "nccl-1")
        return pods if len(pods) == 2 else None

    for pod in jobs.wait_for("2 pods running", two_running):
        assert _node_of(clean, pod)["metadata"]["labels"]["railplan.dev/node-group"] == "train"


def test_kueue_admits_a_mig_inference_job_on_the_mig_flavor(clean: Cluster) -> None:
    """A serving pod asking for one 1g.10gb slice (the group's layout now) is admitted on
    the inference group's flavor and runs on an inference node."""
    profile = "nvidia.com/mig-1g.10gb"
    jobs.submit(clean.kubeconfig, clean.job("infer-1", "serving", 1, {profile: "1"}))
    wl = jobs.wait_admitted(clean.kubeconfig, "serving", "infer-1", timeout_s=90)
    assert jobs.flavors(wl) == {profile: clean.flavor_of("infer", profile)}
    (pod,) = jobs.wait_for(
        "its pod running", lambda: jobs.running_pods(clean.kubeconfig, "serving", "infer-1")
    )
    assert _node_of(clean, pod)["metadata"]["labels"]["railplan.dev/node-group"] == "infer"


def test_kueue_counts_a_mig_pods_cpu_and_memory_on_its_mig_groups_flavor(clean: Cluster) -> None:
    """A serving pod asking for a 1g.10gb slice with CPUs and memory: every resource it asks
    for is counted on the inference group's flavor, and the pod runs on an inference node
    (CPUs counted on another group's flavor would pin it to two node groups at once)."""
    profile = "nvidia.com/mig-1g.10gb"
    request = {profile: "1", "cpu": "4", "memory": "32Gi"}
    jobs.submit(clean.kubeconfig, clean.job("infer-cpu", "serving", 1, request))
    try:
        wl = jobs.wait_admitted(clean.kubeconfig, "serving", "infer-cpu", timeout_s=90)
    finally:
        print(
            "serving/infer-cpu:",
            jobs.why_waiting(jobs.workload(clean.kubeconfig, "serving", "infer-cpu")),
        )
    assert set(jobs.flavors(wl).values()) == {clean.flavor_of("infer", profile)}
    (pod,) = jobs.wait_for(
        "its pod running", lambda: jobs.running_pods(clean.kubeconfig, "serving", "infer-cpu")
    )
    assert _node_of(clean, pod)["metadata"]["labels"]["railplan.dev/node-group"] == "infer"


# --- Kueue: borrowing and reclaim ---------------------------------------------------------------


def test_borrowing_is_bounded_and_kept_when_reclaim_is_never(clean: Cluster) -> None:
    """The reference spec says `reclaim: never` (reclaimWithinCohort: Never): the lender waits
    for research's borrowed GPUs to come back by themselves; nothing is evicted."""
    queues = clean.rendered("ClusterQueue")
    assert queues["research"]["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    got = scenario.borrow_up_to_the_limit(clean)
    scenario.lender_submits(clean, got)
    message = jobs.wait_pending(clean.kubeconfig, "serving", "lender")
    print("serving/lender:", message)
    borrow = jobs.workload(clean.kubeconfig, "research", "borrow")
    assert jobs.admitted(borrow) and jobs.condition(borrow, "Evicted") is None


def test_the_lender_reclaims_borrowed_gpus_when_reclaim_is_any(
    clean: Cluster, tmp_path: Path
) -> None:
    """With `reclaim: any` (reclaimWithinCohort: Any) the lender's Job evicts research's
    borrowing Job and is admitted on its own quota; research's nominal Job keeps running."""
    variant = tmp_path / "reclaim-any.yaml"
    variant.write_text(clean.spec.read_text().replace("reclaim: never", "reclaim: any"))
    k8s_dir = apply.render(variant, tmp_path / "root")
    queues = clean.rendered("ClusterQueue", k8s_dir)
    assert queues["research"]["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    use_cluster_queues(clean, k8s_dir)
    got = scenario.borrow_up_to_the_limit(clean)
    scenario.lender_submits(clean, got)
    jobs.wait_admitted(clean.kubeconfig, "serving", "lender")
    borrow = jobs.workload(clean.kubeconfig, "research", "borrow")
    evicted = jobs.condition(borrow, "Evicted")
    assert evicted is not None and evicted["status"] == "True", borrow
    print("research/borrow evicted:", evicted["reason"], evicted["message"])
    if got["research"]:
        assert jobs.admitted(jobs.workload(clean.kubeconfig, "research", "fill"))


# --- kube-scheduler ------------------------------------------------------------------------------


def test_the_scheduler_places_an_admitted_jobs_pods_on_fitting_nodes(clean: Cluster) -> None:
    """A 4-node training Job (a node's GPUs per pod): Kueue admits it, the twin's
    kube-scheduler binds each pod to its own train node, kwok runs it."""
    per_pod = _gpus_per_node(clean, "train")
    jobs.submit(clean.kubeconfig, clean.job("gang", "research", 4, {GPU: str(per_pod)}))
    jobs.wait_admitted(clean.kubeconfig, "research", "gang")

    def four_running() -> list[dict[str, Any]] | None:
        pods = jobs.running_pods(clean.kubeconfig, "research", "gang")
        return pods if len(pods) == 4 else None

    placed = [_node_of(clean, p) for p in jobs.wait_for("4 pods running", four_running)]
    assert len({n["metadata"]["name"] for n in placed}) == 4
    for node in placed:
        assert node["metadata"]["labels"]["railplan.dev/node-group"] == "train"
        assert int(node["status"]["allocatable"][GPU]) >= per_pod
