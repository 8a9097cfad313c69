"""`build_kubernetes`: every Kubernetes object railplan builds for a cluster, set by set.

One `ServiceSet` per concern, in the order they must be applied: the GPU stack (the GPU
Operator, the mig-parted and DCGM counters ConfigMaps, the RDMA shared device plugin),
checkpoint storage, the batch scheduler's view of the fabric (Volcano HyperNodes or
a Kueue Topology and flavors), tenants (with the volcano-scheduler configuration and the
KEDA ScaledObjects of autoscaled tenants, `infra.k8s.elastic`), monitoring (it selects the GPU Operator's exporter),
and the MIG schedule (CronJobs and their least-privilege RBAC). A set that has nothing to do
for the spec is left out. Only a Kubernetes spec has any: a Slurm spec is refused.
"""

from __future__ import annotations

from infra.catalog import Catalog
from infra.errors import RailplanError
from infra.k8s.elastic import elastic_objects
from infra.k8s.gpu import gpu_stack
from infra.k8s.mig_schedule import mig_schedule
from infra.k8s.monitoring import checkpoint_storage, monitoring
from infra.k8s.objects import KubeObject, KubernetesObjects, ServiceSet
from infra.k8s.tenants import podgroup_examples, tenants
from infra.k8s.topology import scheduler_topology
from infra.spec import Spec
from infra.topology.model import Plan

__all__ = ["build_kubernetes"]


def _unique(objects: list[KubeObject], seen: set[tuple[str, str, str]]) -> tuple[KubeObject, ...]:
    """Objects not already built by an earlier set.

    Each set may declare the namespaces it needs; a shared one stays where it first appears.
    """
    kept = []
    for obj in objects:
        key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if key not in seen:
            seen.add(key)
            kept.append(obj)
    return tuple(kept)


def build_kubernetes(spec: Spec, plan: Plan, catalog: Catalog) -> KubernetesObjects:
    """The cluster services of a Kubernetes spec.

    Raises:
        RailplanError: the spec's scheduler is not Kubernetes.
    """
    if spec.scheduler.kind != "kubernetes":
        raise RailplanError(
            f"scheduler.kind is {spec.scheduler.kind}: Kubernetes services need kind: kubernetes",
            path="scheduler.kind",
            hint="render the Slurm files with `railplan render`, or pick the aws target",
        )
    releases, gpu_objects = gpu_stack(spec, plan)
    seen: set[tuple[str, str, str]] = set()
    sets = [
        ServiceSet("gpu", tuple(releases), _unique(gpu_objects, seen)),
        ServiceSet("storage", objects=_unique(checkpoint_storage(spec), seen)),
        ServiceSet("topology", objects=_unique(scheduler_topology(spec, plan), seen)),
        ServiceSet(
            "tenants",
            objects=_unique([*tenants(spec, plan, catalog), *elastic_objects(spec, plan)], seen),
            examples=tuple(podgroup_examples(spec, plan, catalog)),
        ),
        ServiceSet("monitoring", objects=_unique(monitoring(spec), seen)),
        ServiceSet("mig-schedule", objects=_unique(mig_schedule(spec, plan), seen)),
    ]
    return KubernetesObjects(tuple(s for s in sets if s.releases or s.objects or s.examples))
