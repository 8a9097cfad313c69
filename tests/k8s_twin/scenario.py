"""One twin cluster for the scheduling scenarios: control plane, Kueue, the rendered tenants, nodes.

`started` brings up what the scenario modules share (tests/test_k8s_twin_sched.py,
tests/test_k8s_twin_tenants.py): a control plane with every CRD, Kueue's controller with its
release's webhooks (the README's prerequisite), the rendered manifests of a spec applied in
the README's order, a Node per planned server kept Ready by kwok. `Cluster` reads back what
was rendered (flavors, quotas, each tenant's priority class) and submits Jobs as the tenants'
users do: in the tenant's namespace and LocalQueue, labelled with the tenant's priority class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_twin import apply, crds, jobs, kueue, kwok, nodes
from tests.k8s_twin.control_plane import ControlPlane
from tests.k8s_twin.kubectl import kubectl

GPU = "nvidia.com/gpu"
RDMA = "rdma/rdma_shared_device_ib"
GROUP_LABEL = "railplan.dev/node-group"


@dataclass
class Cluster:
    plane: ControlPlane
    spec: Path  # the materialised spec
    k8s_dir: Path
    planned: nodes.Planned
    nodes: dict[str, dict[str, Any]]  # name -> the Node as created

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def rendered(self, kind: str, k8s_dir: Path | None = None) -> dict[str, dict[str, Any]]:
        """Name -> rendered object of `kind`, from the tree applied (or `k8s_dir`)."""
        out = {}
        for path in sorted((k8s_dir or self.k8s_dir).glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == kind:
                    out[doc["metadata"]["name"]] = doc
        return out

    def flavor_of(self, group: str, resource: str = GPU) -> str:
        """The rendered ResourceFlavor of node group `group` a ClusterQueue covers `resource` on."""
        on_group = {
            n
            for n, f in self.rendered("ResourceFlavor").items()
            if f["spec"].get("nodeLabels", {}).get(GROUP_LABEL) == group
        }
        (name,) = {
            fl["name"]
            for cq in self.rendered("ClusterQueue").values()
            for rg in cq["spec"]["resourceGroups"]
            for fl in rg["flavors"]
            if fl["name"] in on_group and resource in rg["coveredResources"]
        }
        return str(name)

    def priority_class(self, tenant: str) -> str:
        """The rendered (Workload)PriorityClass of `tenant`'s priority."""
        (found,) = (t.priority for t in self.planned.spec.scheduler.tenants if t.name == tenant)
        return f"{self.planned.spec.name}-{found}"

    def job(
        self, name: str, tenant: str, pods: int, requests: dict[str, str], **kw: Any
    ) -> dict[str, Any]:
        """`jobs.job` as the tenant's user submits it: at the tenant's priority class, both
        the Workload's (label) and the pods' (``priorityClassName``)."""
        kw.setdefault("priority", self.priority_class(tenant))
        kw.setdefault("pod_priority", self.priority_class(tenant))
        return jobs.job(name, tenant, pods, requests, **kw)

    def gpus_per_node(self, group: str) -> int:
        return self.planned.catalog.nodes[self.planned.plan.groups[group].node].gpus

    def node_of(self, pod: dict[str, Any]) -> dict[str, Any]:
        return self.nodes[pod["spec"]["nodeName"]]


@contextmanager
def plane_with_crds(workdir: Path) -> Iterator[ControlPlane]:
    """A control plane in `workdir` with every CRD installed, stopped and checked gone after."""
    plane = ControlPlane(workdir)
    plane.up()
    try:
        crds.install(plane.kubeconfig)
        yield plane
    finally:
        left = plane.down()
    assert left == [], f"still running after down: {left}"


def applied(plane: ControlPlane, spec: Path, workdir: Path) -> Cluster:
    """`spec` rendered and applied whole (every object accepted), its planned Nodes Ready."""
    k8s_dir = apply.render(spec, workdir / "root")
    refused = [r.as_dict() for r in apply.apply_tree(plane.kubeconfig, k8s_dir) if not r.accepted]
    assert refused == [], refused
    planned = nodes.Planned.load(spec)
    objects = nodes.node_objects(planned)
    kwok.start(plane)
    kwok.create_nodes(plane, objects)
    kwok.wait_ready(plane, [o["metadata"]["name"] for o in objects])
    return Cluster(plane, spec, k8s_dir, planned, {o["metadata"]["name"]: o for o in objects})


@contextmanager
def started(spec_arg: Path, workdir: Path) -> Iterator[Cluster]:
    """The cluster of `spec_arg` (``kueue:PATH`` allowed), stopped and checked gone after."""
    with plane_with_crds(workdir / "plane") as plane:
        kueue.start(plane)
        yield applied(plane, apply.materialise(spec_arg, workdir), workdir)


def use_cluster_queues(cluster: Cluster, k8s_dir: Path) -> None:
    """Server-side apply the ClusterQueues rendered into `k8s_dir` (railplan's field manager)."""
    (path,) = k8s_dir.glob("*-clusterqueue.yaml")
    kubectl(
        cluster.kubeconfig,
        ["apply", "--server-side", f"--field-manager={apply.FIELD_MANAGER}", "-f", str(path)],
    )


def quota(cq: dict[str, Any], flavor: str, resource: str = GPU) -> dict[str, int]:
    """nominalQuota / borrowingLimit / lendingLimit of `resource` on `flavor` in a ClusterQueue."""
    for group in cq["spec"]["resourceGroups"]:
        for fl in group["flavors"]:
            if fl["name"] == flavor:
                for res in fl["resources"]:
                    if res["name"] == resource:
                        return {k: int(v) for k, v in res.items() if k != "name"}
    raise KeyError(f"{cq['metadata']['name']}: no {resource} on {flavor}")


# --- borrowing and reclaim ---------------------------------------------------------------------


def lendable(cluster: Cluster) -> dict[str, Any]:
    """Where research may borrow from serving: the first (flavor, GPU or MIG resource) of
    research's queue with a borrowingLimit, which serving lends and whose nodes have now;
    pods of a whole node's worth of that resource each."""
    queues, flavors = cluster.rendered("ClusterQueue"), cluster.rendered("ResourceFlavor")
    for rg in queues["research"]["spec"]["resourceGroups"]:
        for fl in rg["flavors"]:
            group = flavors[fl["name"]]["spec"]["nodeLabels"]["railplan.dev/node-group"]
            node = next(
                n
                for n in cluster.nodes.values()
                if n["metadata"]["labels"]["railplan.dev/node-group"] == group
            )
            # GPUs and slices only: the CPUs, memory and RDMA devices on the same flavors
            # follow them in proportion
            for resource in (r for r in rg["coveredResources"] if r.startswith("nvidia.com/")):
                research = quota(queues["research"], fl["name"], resource)
                serving = quota(queues["serving"], fl["name"], resource)
                lends = serving.get("lendingLimit", serving["nominalQuota"])
                per_pod = int(node["status"]["allocatable"].get(resource, "0"))
                borrowable = min(research.get("borrowingLimit", lends), lends)
                if per_pod and borrowable >= per_pod:
                    return {
                        "flavor": fl["name"],
                        "resource": resource,
                        "group": group,
                        "per_pod": per_pod,
                        "research": research["nominalQuota"],
                        "borrowable": borrowable,
                        "serving": serving["nominalQuota"],
                    }
    raise AssertionError("research can borrow nothing its nodes have now")


def borrow_up_to_the_limit(cluster: Cluster) -> dict[str, Any]:
    """Research fills its own quota on that flavor, then borrows serving's idle quota up to
    what it may borrow (its borrowingLimit, and no more than serving lends); one pod more
    waits. Pods are pinned to the flavor's node group so no other flavor is in play."""
    got = lendable(cluster)
    on_group = {"railplan.dev/node-group": got["group"]}
    request = {got["resource"]: str(got["per_pod"])}
    fill, borrow = got["research"] // got["per_pod"], got["borrowable"] // got["per_pod"]
    for name, pods in (("fill", fill), ("borrow", borrow)):
        if pods == 0:
            continue
        jobs.submit(
            cluster.kubeconfig, cluster.job(name, "research", pods, request, node_selector=on_group)
        )
        wl = jobs.wait_admitted(cluster.kubeconfig, "research", name)
        assert jobs.flavors(wl) == {got["resource"]: got["flavor"]}
    jobs.submit(
        cluster.kubeconfig, cluster.job("over", "research", 1, request, node_selector=on_group)
    )
    message = jobs.wait_pending(cluster.kubeconfig, "research", "over")
    print("research/over:", message)
    assert "insufficient" in message.lower() or "borrow" in message.lower(), message
    return got


def lender_submits(cluster: Cluster, got: dict[str, Any]) -> None:
    """Serving asks for its whole quota on that flavor (at its own priority)."""
    job = cluster.job(
        "lender",
        "serving",
        got["serving"] // got["per_pod"],
        {got["resource"]: str(got["per_pod"])},
        node_selector={"railplan.dev/node-group": got["group"]},
    )
    jobs.submit(cluster.kubeconfig, job)
