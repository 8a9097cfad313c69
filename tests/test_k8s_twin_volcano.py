"""Volcano on the planned nodes: gangs placed by vc-scheduler with railplan's configuration.

On one control plane (tests/k8s_twin): every CRD (Volcano's from its release's module); the
rendered manifests of examples/k8s-tenants.yaml (``batch: volcano``) applied in the README's
order, among them the HyperNodes (one per SU, one over them), the tenants' Queues and the
``volcano-scheduler-configmap``; a Node per planned server kept Ready by kwok; then Volcano's
scheduler, built from ``volcano.sh/volcano`` at its release, on the configuration read back
from that ConfigMap, and its queue controller (tests/k8s_twin/volcano.py). Gangs are
PodGroups copied from the rendered example (``networkTopology: hard, highestTierAllowed:
1``) with their pods (tests/k8s_twin/gangs.py). Then the tenants' priorities at admission: a
Pod, PodGroup or Volcano Job in a tenant's namespace must name the tenant's PriorityClass or a
lower one (tests/k8s_twin/priorities.py). ``make k8s-twin`` runs this module
(RAILPLAN_K8S_TWIN=1); elsewhere it skips, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.k8s_twin import apply, gangs, jobs, priorities, versions, volcano
from tests.k8s_twin.kubectl import kubectl
from tests.k8s_twin.scenario import Cluster

CI_MINUTES = 8  # what the module needs in CI, set-up included (tests/conftest.py)
_missing = versions.skip_module_unless_runnable("k8s-twin", controllers=True, volcano=True)

SPEC = apply.TENANTS_SPEC
TENANTS = ["research", "serving"]
MIG = "nvidia.com/mig-1g.10gb"
GANG = 20  # pods of a node's GPUs each: 160 GPUs on the reference spec's DGX H100s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert not _missing, f"binaries not built: {_missing}"
    with volcano.started(SPEC, tmp_path_factory.mktemp("k8s-twin-volcano")) as running:
        yield running


@pytest.fixture
def clean(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with no gang and no other work before and after the test."""
    gangs.delete(cluster.kubeconfig, TENANTS)
    yield cluster
    gangs.delete(cluster.kubeconfig, TENANTS)


def train_sus(cluster: Cluster) -> dict[str, list[str]]:
    """SU -> its training nodes, largest SU first."""
    out: dict[str, list[str]] = {}
    for name, node in sorted(cluster.nodes.items()):
        labels = node["metadata"]["labels"]
        if labels["railplan.dev/node-group"] == "train":
            out.setdefault(labels[gangs.SU_LABEL], []).append(name)
    return dict(sorted(out.items(), key=lambda kv: -len(kv[1])))


def fill_so_only_the_smaller_su_fits(cluster: Cluster) -> tuple[str, int]:
    """Other work on the SUs' nodes so that the larger SU keeps GANG - 2 nodes free and the
    smaller GANG + 2: the gang fits in one SU only, and the one with more nodes (first by
    name, too) is not it. The SU that fits and the free training nodes in all."""
    (_, big_nodes), (small, small_nodes) = train_sus(cluster).items()
    taken = big_nodes[: len(big_nodes) - (GANG - 2)] + small_nodes[: len(small_nodes) - (GANG + 2)]
    gangs.occupy(cluster, taken, cluster.gpus_per_node("train"))
    return small, len(big_nodes) + len(small_nodes) - len(taken)


# --- the set-up --------------------------------------------------------------------------------


def test_volcano_runs_on_the_rendered_configuration_with_the_queues_open(cluster: Cluster) -> None:
    conf = volcano.scheduler_conf(cluster.kubeconfig)
    assert "network-topology-aware" in conf and "capacity" in conf
    assert (cluster.plane.workdir / volcano.CONF_KEY).read_text() == conf
    states = volcano.queue_states(cluster.kubeconfig)
    assert states["research"] == states["serving"] == "Open", states
    assert set(train_sus(cluster)) == {"train-su01", "train-su02"}


# --- gangs within one SU -----------------------------------------------------------------------


def test_a_160_gpu_gang_is_placed_whole_within_the_one_su_it_fits(clean: Cluster) -> None:
    """20 pods x 8 GPUs, the rendered PodGroup's ``networkTopology: hard, tier 1``: with 18
    nodes free on SU 1 and 22 on SU 2, vc-scheduler places all 20 on SU 2's nodes."""
    fits, _ = fill_so_only_the_smaller_su_fits(clean)
    gpus = clean.gpus_per_node("train")
    gangs.submit(clean.kubeconfig, gangs.gang(clean, "gang160", "research", GANG, gpus))
    placed = gangs.wait_placed(clean, "research", "gang160", GANG)
    where = gangs.sus_of(clean, placed)
    print("research/gang160 placed:", dict(where))
    assert where == {fits: GANG}
    assert len({p["spec"]["nodeName"] for p in placed}) == GANG


def test_without_network_topology_the_same_gang_straddles_the_sus(clean: Cluster) -> None:
    """The variant that shows the scenario above can fail: the same gang without the
    rendered ``networkTopology`` is placed across both SUs (what the HyperNodes prevent)."""
    fill_so_only_the_smaller_su_fits(clean)
    gpus = clean.gpus_per_node("train")
    objects = gangs.gang(clean, "spread160", "research", GANG, gpus, topology=False)
    gangs.submit(clean.kubeconfig, objects)
    placed = gangs.wait_placed(clean, "research", "spread160", GANG)
    where = gangs.sus_of(clean, placed)
    print("research/spread160 placed:", dict(where))
    assert len(where) == 2, where


def test_a_gang_larger_than_the_free_nodes_places_nothing_and_says_why(clean: Cluster) -> None:
    """One pod more than there are free training nodes: no pod is bound (all or nothing),
    and the PodGroup's Unschedulable condition and the pods' own condition say why."""
    _, free = fill_so_only_the_smaller_su_fits(clean)
    gpus = clean.gpus_per_node("train")
    members = free + 1
    gangs.submit(clean.kubeconfig, gangs.gang(clean, "toobig", "research", members, gpus))
    message = gangs.unschedulable(clean.kubeconfig, "research", "toobig", seen=f"{members} Pending")
    print("research/toobig:", message)
    pods = gangs.pods(clean.kubeconfig, "research", "toobig")
    assert len(pods) == members and all(p["status"].get("phase") == "Pending" for p in pods)
    assert gangs.bound(clean.kubeconfig, "research", "toobig") == []
    assert f"{members}/{members} tasks in gang unschedulable" in message, message
    said = jobs.wait_for(
        "the pod's PodScheduled condition",
        lambda: gangs.pod_condition(
            gangs.pods(clean.kubeconfig, "research", "toobig")[0], "PodScheduled"
        ),
    )
    print("research/toobig pod:", said)
    assert said.startswith("False Unschedulable") and f"{members} minAvailable" in said, said


# --- the Queues' guarantee ----------------------------------------------------------------------


def test_research_leaves_servings_guaranteed_mig_slices_free(clean: Cluster) -> None:
    """serving's Queue guarantees 224 1g.10gb slices: research may use the others (224 of
    the 448 the inference nodes have by day) and no more, though all are idle. (Whole GPUs
    are bounded first by the namespaces' ResourceQuotas, which equal the Queues' capability:
    a ninth 8-GPU pod of serving is refused at creation, before Volcano sees it.)"""
    fits, per_node = _research_mig_room(clean)
    gangs.submit(clean.kubeconfig, _mig_gang(clean, "mig-fits", fits, per_node))
    gangs.wait_placed(clean, "research", "mig-fits", fits)
    gangs.delete(clean.kubeconfig, TENANTS)
    gangs.submit(clean.kubeconfig, _mig_gang(clean, "mig-over", fits + 1, per_node))
    message = gangs.unschedulable(clean.kubeconfig, "research", "mig-over")
    print("research/mig-over:", message)
    assert gangs.bound(clean.kubeconfig, "research", "mig-over") == []


def test_without_servings_guarantee_research_takes_more_slices(clean: Cluster) -> None:
    """The variant that shows the scenario above can fail: with serving's Queue applied
    without its ``guarantee``, the same research gang of one pod more is placed."""
    fits, per_node = _research_mig_room(clean)
    queue = clean.rendered("Queue")["serving"]
    variant = {**queue, "spec": {k: v for k, v in queue["spec"].items() if k != "guarantee"}}
    try:
        volcano.apply_objects(clean.kubeconfig, [variant])
        gangs.submit(clean.kubeconfig, _mig_gang(clean, "mig-more", fits + 1, per_node))
        gangs.wait_placed(clean, "research", "mig-more", fits + 1)
    finally:
        volcano.apply_objects(clean.kubeconfig, [queue])


def _research_mig_room(cluster: Cluster) -> tuple[int, int]:
    """How many whole inference nodes' slices research may take beside serving's guarantee,
    and the slices per node."""
    guaranteed = int(cluster.rendered("Queue")["serving"]["spec"]["guarantee"]["resource"][MIG])
    infer = _infer_nodes(cluster)
    per_node = int(next(iter(infer.values()))["status"]["allocatable"][MIG])
    return (per_node * len(infer) - guaranteed) // per_node, per_node


def _infer_nodes(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {
        n: o
        for n, o in cluster.nodes.items()
        if o["metadata"]["labels"]["railplan.dev/node-group"] == "infer"
    }


def _mig_gang(cluster: Cluster, name: str, members: int, slices: int) -> list[dict[str, Any]]:
    """A research gang of `members` pods of `slices` 1g.10gb slices each."""
    objects = gangs.gang(cluster, name, "research", members, 0)
    objects[0]["spec"]["minResources"] = {MIG: str(members * slices)}
    for pod in objects[1:]:
        request = {MIG: str(slices)}
        pod["spec"]["containers"][0]["resources"] = {"requests": request, "limits": request}
    return objects


# --- tenants' priorities ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pod", "podgroup", "vcjob", "vcjob-task"])
def test_a_tenants_workloads_name_its_priority_class_and_no_higher(
    cluster: Cluster, kind: str
) -> None:
    """Volcano orders and preempts by the PodGroup's and pods' PriorityClass (a Volcano Job
    gives its own to both, a task's template may name another): with none the workload runs
    at 0, below every tenant, and nothing stopped a user naming the highest tenant's class.
    In research's namespace each kind naming no class or serving's higher one is refused with
    the server's message naming the class to use; at research's own class it is accepted."""
    print(priorities.wait_in_effect(cluster, "research"))
    try:
        wrong = priorities.check(cluster, [kind], "research", "serving")
    finally:
        priorities.delete(cluster.kubeconfig, TENANTS, [kind])
    assert wrong == [], "\n".join(wrong)


# --- last: the HyperNodes taken away and put back -----------------------------------------------


def test_without_the_hypernodes_the_topology_gang_straddles_the_sus(clean: Cluster) -> None:
    """The other variant of the first scenario: the gang keeps the rendered
    ``networkTopology``, but with the HyperNodes deleted vc-scheduler places it across both
    SUs without a word, so what keeps a gang within an SU is railplan's HyperNodes."""
    hypernodes = list(clean.rendered("HyperNode").values())
    kubectl(clean.kubeconfig, ["delete", "hypernodes.topology.volcano.sh", "--all"])
    try:
        fill_so_only_the_smaller_su_fits(clean)
        gpus = clean.gpus_per_node("train")
        gangs.submit(clean.kubeconfig, gangs.gang(clean, "nohn160", "research", GANG, gpus))
        placed = gangs.wait_placed(clean, "research", "nohn160", GANG)
        where = gangs.sus_of(clean, placed)
        print("research/nohn160 placed:", dict(where))
        assert len(where) == 2, where
    finally:
        volcano.apply_objects(clean.kubeconfig, hypernodes)
