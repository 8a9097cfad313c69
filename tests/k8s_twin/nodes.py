"""The planned servers as Node objects, labelled and sized as the real cluster would show them.

One Node per server of railplan's plan (`infra.topology.expand`), with the labels each source
would put there: the kubelet's own (``kubernetes.io/hostname``, ``/os``, ``/arch``); the
``railplan.dev/*`` topology labels and the group's extra labels (``nvidia.com/mig.config`` on
a MIG group) that the Ansible ``topology_labels`` role registers through ``--node-labels``,
taken from the same plan facts the renderer writes into host and group vars; Node Feature
Discovery's PCI vendor labels; and the GPU Operator's (GPU feature discovery) GPU and MIG
labels. Capacity follows the device plugins: whole GPUs as ``nvidia.com/gpu``, and under the
``mixed`` MIG strategy each MIG-split GPU's instances as ``nvidia.com/mig-<profile>`` (the
GPU itself no longer counted), per the group's MIG state now; the RDMA shared device plugin's
``rdma/rdma_shared_device_ib`` as its ``rdmaHcaMax``; CPUs, memory and the kubelet's default of
110 pods from the catalog's host. Allocatable equals capacity (no kubelet reservations are
modelled). Each Node carries kwok's annotation, so kwok, not a kubelet, keeps it Ready and
runs the pods bound to it. Railplan renders no taints, so none are set.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.catalog import Catalog, catalog_for
from infra.k8s.gpu import RDMA_HCA_MAX, RDMA_RESOURCE
from infra.k8s.objects import topology_label
from infra.spec import Spec, load_spec
from infra.topology import Plan, expand
from infra.topology.model import Server

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KUBELET_MAX_PODS = 110  # the kubelet's default --max-pods
# GPU feature discovery's MIG labels say whether every MIG-capable GPU got its config.
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"


@dataclass(frozen=True)
class Planned:
    """A spec and its plan, loaded the way `railplan plan` loads them."""

    spec: Spec
    catalog: Catalog
    plan: Plan

    @classmethod
    def load(cls, path: Path) -> Planned:
        spec = load_spec(path).spec
        catalog = catalog_for(spec)
        return cls(spec, catalog, expand(spec, catalog))


def _gfd_product(gpu_name: str) -> str:
    """GPU feature discovery's ``nvidia.com/gpu.product``: the NVML name, spaces as dashes."""
    return gpu_name.replace(" ", "-")


def gpu_resources(planned: Planned, server: Server) -> dict[str, int]:
    """The GPU device plugin's resources on `server` under the spec's MIG strategy.

    ``mixed``: a GPU without a MIG layout is one ``nvidia.com/gpu``; a split GPU contributes
    its layout's instances as ``nvidia.com/mig-<profile>``. ``single`` (every GPU of a node
    alike): the instances are advertised as ``nvidia.com/gpu``.
    """
    layouts = planned.spec.mig_layouts
    whole = sum(1 for layout in server.mig if layout is None)
    slices: Counter[str] = Counter()
    for layout in server.mig:
        if layout is not None:
            slices.update(layouts[layout].profiles)
    if planned.spec.scheduler.mig_strategy == "single":
        return {"nvidia.com/gpu": whole + sum(slices.values())}
    out = {"nvidia.com/gpu": whole}
    out.update({f"nvidia.com/mig-{p}": n for p, n in sorted(slices.items())})
    return out


def node_labels(planned: Planned, server: Server) -> dict[str, str]:
    """Every label the Node of `server` carries once registered and discovered."""
    plan, spec = planned.plan, planned.spec
    catalog_node = planned.catalog.nodes[server.node]
    gpu = planned.catalog.gpus[catalog_node.gpu]
    group = plan.groups[server.group]
    pods = {su.name: su.pod for su in plan.sus}
    topology = {
        "rack": server.rack,
        "su": server.su,
        "pod": pods.get(server.su) if server.su else None,
        "node-group": server.group,
        "cluster": spec.name,
    }
    labels = {
        "kubernetes.io/hostname": server.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **{topology_label(k): str(v) for k, v in topology.items() if v is not None},
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/pci-15b3.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": _gfd_product(gpu.name),
        "nvidia.com/gpu.count": str(catalog_node.gpus),
    }
    if group.mig_split:
        labels["nvidia.com/mig.config"] = group.mig.now.config
        labels["nvidia.com/mig.capable"] = "true"
        labels["nvidia.com/mig.strategy"] = spec.scheduler.mig_strategy
        labels[MIG_CONFIG_STATE] = "success"
        for resource, count in gpu_resources(planned, server).items():
            if resource.startswith("nvidia.com/mig-"):
                labels[f"{resource}.count"] = str(count)
    return labels


def node_object(planned: Planned, server: Server) -> dict[str, Any]:
    """The Node of `server`, with its status's capacity and allocatable."""
    host = planned.catalog.nodes[server.node].host
    capacity = {
        "cpu": str(host.sockets * host.cores_per_socket * host.threads_per_core),
        "memory": f"{host.memory_gib}Gi",
        "pods": str(KUBELET_MAX_PODS),
        "ephemeral-storage": "1Ti",
        **{k: str(v) for k, v in gpu_resources(planned, server).items()},
        f"rdma/{RDMA_RESOURCE}": str(RDMA_HCA_MAX),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": server.name,
            "labels": node_labels(planned, server),
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def node_objects(planned: Planned) -> list[dict[str, Any]]:
    """A Node per planned server, in plan order."""
    return [node_object(planned, server) for server in planned.plan.servers]
