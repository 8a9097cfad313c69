"""The GPU and RDMA operators as plain data: Helm releases, their namespaces and ConfigMaps.

Owns what railplan puts on Kubernetes so pods see GPUs, MIG devices and InfiniBand HCAs:

* the NVIDIA GPU Operator release (``gpu-operator`` namespace) with minimal values: the
  driver stays Ansible's, the MIG manager reads railplan's mig-parted configs, and
  dcgm-exporter exports the same counters file as the Ansible ``dcgm`` role;
* the ConfigMaps those values name (``railplan-mig-parted``, ``railplan-dcgm-counters``);
* the NVIDIA Network Operator release and its ``NicClusterPolicy`` (``network-operator``
  namespace) when the plan has InfiniBand HCAs, deploying only the RDMA shared device plugin.

Every function is a pure function of the spec and plan; nothing here imports Pulumi.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from infra.catalog import Catalog
from infra.k8s.objects import HelmRelease, KubeObject, kube_object
from infra.spec import Spec, assignments_of
from infra.topology.migconfig import DISABLED, mig_parted_configs
from infra.topology.model import Plan

__all__ = [
    "COUNTERS_CONFIGMAP",
    "COUNTERS_KEY",
    "GPU_NAMESPACE",
    "GPU_OPERATOR_VERSION",
    "MIG_CONFIGMAP",
    "NETWORK_NAMESPACE",
    "NETWORK_OPERATOR_VERSION",
    "NVIDIA_HELM_REPO",
    "RDMA_RESOURCE",
    "counters_csv",
    "counters_path",
    "gpu_stack",
    "infiniband_hcas",
    "uses_mig",
]

NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
# The chart tag whose values.yaml /work/shared/facts/peers.md §4.1 documents.
GPU_OPERATOR_VERSION = "v26.7.0"
# NicClusterPolicy is created by us, not by the chart: chart-deployed policies (`deployCR`)
# were deprecated and removed in 24.10 (the chart's NOTES.txt says so). v26.4.0 is the
# release whose docs give componentVersion `network-operator-v26.4.0` for its images.
NETWORK_OPERATOR_VERSION = "v26.4.0"
NETWORK_COMPONENT_REPOSITORY = "nvcr.io/nvidia/mellanox"
NETWORK_COMPONENT_VERSION = f"network-operator-{NETWORK_OPERATOR_VERSION}"

GPU_NAMESPACE = "gpu-operator"
NETWORK_NAMESPACE = "network-operator"
MIG_CONFIGMAP = "railplan-mig-parted"
MIG_CONFIG_KEY = "config.yaml"  # the key the MIG manager reads (peers.md §4.1)
COUNTERS_CONFIGMAP = "railplan-dcgm-counters"
# The ClusterPolicy CRD describes dcgmExporter.config.name as "ConfigMap name with file
# dcgm-metrics.csv", and the operator then sets DCGM_EXPORTER_COLLECTORS to
# /etc/dcgm-exporter/dcgm-metrics.csv (gpu-operator's DCGM exporter state tests).
COUNTERS_KEY = "dcgm-metrics.csv"
RDMA_RESOURCE = "rdma_shared_device_ib"  # pods request rdma/rdma_shared_device_ib
MELLANOX_VENDOR = "15b3"  # PCI vendor ID of NVIDIA (Mellanox) NICs
# How many pods may share the resource on one node: the documented default.
RDMA_HCA_MAX = 63


def counters_path() -> Path:
    """The Ansible dcgm role's counters file, found from the repository root."""
    root = Path(__file__).resolve().parents[2]
    return root / "playbooks" / "roles" / "dcgm" / "files" / "railplan-counters.csv"


def counters_csv() -> str:
    """The counters file's text, exactly as the role copies it to the hosts."""
    # Decoding the bytes (not read_text) keeps line endings as they are in the file.
    return counters_path().read_bytes().decode("utf-8")


def uses_mig(spec: Spec) -> bool:
    """Whether any GPU is MIG-partitioned, now or after a scheduled change."""
    return any(
        assignment.layout != "disabled"
        for group in spec.node_groups
        for _, value in group.mig_values()
        for assignment in assignments_of(value)
    )


def infiniband_hcas(plan: Plan) -> list[str]:
    """The compute-fabric HCA devices (``mlx5_N``) of the plan's servers, sorted, distinct."""
    names = {hca for server in plan.servers for hca in server.hcas}
    return sorted(names, key=lambda n: (len(n), n))


def gpu_stack(
    spec: Spec, plan: Plan, catalog: Catalog
) -> tuple[list[HelmRelease], list[KubeObject]]:
    """The GPU Operator (and, with InfiniBand, the Network Operator) and their objects.

    Objects come in apply order: each namespace before the objects in it.
    """
    del catalog  # the plan already names each server's HCAs; kept for a uniform signature
    releases = [gpu_operator(spec)]
    objects = [_namespace(GPU_NAMESPACE, spec)]
    if uses_mig(spec):
        objects.append(mig_configmap(spec))
    objects.append(counters_configmap(spec))
    if infiniband_hcas(plan):
        releases.append(network_operator())
        objects += [_namespace(NETWORK_NAMESPACE, spec), nic_cluster_policy(spec, plan)]
    return releases, objects


def _namespace(name: str, spec: Spec) -> KubeObject:
    return kube_object("v1", "Namespace", name, spec)


# --- GPU Operator -------------------------------------------------------------------------


def gpu_operator(spec: Spec) -> HelmRelease:
    """The GPU Operator release with railplan's values."""
    return HelmRelease(
        name="gpu-operator",
        namespace=GPU_NAMESPACE,
        chart="gpu-operator",
        repository=NVIDIA_HELM_REPO,
        version=GPU_OPERATOR_VERSION,
        values=gpu_operator_values(spec),
        description="NVIDIA GPU Operator: container toolkit, device plugin, MIG manager, "
        "dcgm-exporter (driver installed by Ansible)",
    )


def gpu_operator_values(spec: Spec) -> dict[str, Any]:
    """Chart values: only what differs from the chart's defaults or must be pinned."""
    return {
        # The nvidia_driver role installs and holds the driver on the host (with Fabric
        # Manager and the version the plan checked); a driver container would fight it.
        # For the same reason driver.rdma (nvidia-peermem in the driver container) does not
        # apply: the rdma role loads nvidia-peermem or relies on DMA-BUF on the host.
        "driver": {"enabled": False},
        # The operator configures containerd for the NVIDIA runtime on every GPU node.
        "toolkit": {"enabled": True},
        # Node Feature Discovery labels the GPU nodes the operator's daemonsets select;
        # one NFD for the cluster (the Network Operator's is switched off).
        "nfd": {"enabled": True},
        # How MIG devices are advertised (none|single|mixed), as the spec says.
        "mig": {"strategy": spec.scheduler.mig_strategy},
        "migManager": _mig_manager_values(spec),
        # No standalone nv-hostengine pod: dcgm-exporter embeds its own host engine.
        "dcgm": {"enabled": False},
        "dcgmExporter": {
            # The same counters as the Ansible dcgm role exports on the hosts.
            "config": {"name": COUNTERS_CONFIGMAP},
            # railplan builds its own ServiceMonitor (infra.k8s.monitoring) with the
            # spec's scrape interval, so the chart's would be a duplicate scrape.
            "serviceMonitor": {"enabled": False},
        },
    }


def _mig_manager_values(spec: Spec) -> dict[str, Any]:
    if not uses_mig(spec):
        return {"enabled": False}  # nothing to partition; no daemonset on every GPU node
    return {
        "enabled": True,
        "config": {
            # railplan's configs, named as the spec's layouts, so a node's
            # nvidia.com/mig.config label reads the same as the spec.
            "name": MIG_CONFIGMAP,
            # A node without the label stays MIG-disabled.
            "default": DISABLED,
        },
        # Bare-metal GPUs change MIG mode with a GPU reset; no node reboot.
        "env": [{"name": "WITH_REBOOT", "value": "false"}],
    }


def mig_configmap(spec: Spec) -> KubeObject:
    """The mig-parted configs of every `mig` value, including scheduled changes."""
    text = yaml.safe_dump(mig_parted_configs(spec, schedules=True), sort_keys=True)
    return kube_object(
        "v1", "ConfigMap", MIG_CONFIGMAP, spec, namespace=GPU_NAMESPACE, data={MIG_CONFIG_KEY: text}
    )


def counters_configmap(spec: Spec) -> KubeObject:
    """dcgm-exporter's counters: the Ansible role's file, byte for byte."""
    return kube_object(
        "v1",
        "ConfigMap",
        COUNTERS_CONFIGMAP,
        spec,
        namespace=GPU_NAMESPACE,
        data={COUNTERS_KEY: counters_csv()},
    )


# --- Network Operator ---------------------------------------------------------------------


def network_operator() -> HelmRelease:
    """The Network Operator release: the operator and CRDs only; railplan writes the policy."""
    return HelmRelease(
        name="network-operator",
        namespace=NETWORK_NAMESPACE,
        chart="network-operator",
        repository=NVIDIA_HELM_REPO,
        version=NETWORK_OPERATOR_VERSION,
        # The GPU Operator's NFD already labels the nodes; two NFD masters would race.
        values={"nfd": {"enabled": False}},
        description="NVIDIA Network Operator: RDMA shared device plugin for the InfiniBand HCAs",
    )


def nic_cluster_policy(spec: Spec, plan: Plan) -> KubeObject:
    """The cluster's NicClusterPolicy: the RDMA shared device plugin and nothing else.

    There is no ``ofedDriver`` section: the Ansible rdma role installs DOCA-Host on the
    nodes, and an absent section deploys nothing (Mellanox/network-operator
    ``api/v1alpha1/nicclusterpolicy_types.go``: every component is optional).
    """
    plugin = {
        "image": "k8s-rdma-shared-dev-plugin",
        "repository": NETWORK_COMPONENT_REPOSITORY,
        "version": NETWORK_COMPONENT_VERSION,
        "config": rdma_plugin_config(),
    }
    # The plugin cannot select RDMA devices by name (below), so the plan's compute HCAs
    # are recorded for reviewers; NCCL_IB_HCA from the plan picks them inside the pod.
    hcas = ",".join(infiniband_hcas(plan))
    return kube_object(
        "mellanox.com/v1alpha1",
        "NicClusterPolicy",
        "nic-cluster-policy",  # the operator reconciles only this name
        spec,
        spec={"rdmaSharedDevicePlugin": plugin},
        annotations={"railplan.dev/compute-hcas": hcas},
    )


def rdma_plugin_config(hca_max: int = RDMA_HCA_MAX) -> str:
    """k8s-rdma-shared-dev-plugin's ``configList`` JSON: one resource over all IB HCAs.

    Selectors (Mellanox/k8s-rdma-shared-dev-plugin README, "Devices Selectors") are
    vendors, deviceIDs, drivers, ifNames and linkTypes; ifNames match netdev names
    (``ib0``), not RDMA device names (``mlx5_0``), so the plan's HCA names cannot be used.
    The resource takes every NVIDIA NIC, as the documented example does (``vendors:
    ["15b3"]``, ``rdmaHcaMax: 63``); storage or in-band ports it adds are harmless because
    NCCL_IB_HCA names the compute rails.
    """
    resource = {
        "resourceName": RDMA_RESOURCE,
        "rdmaHcaMax": hca_max,
        "selectors": {"vendors": [MELLANOX_VENDOR]},
    }
    return json.dumps({"configList": [resource]}, indent=2, sort_keys=True)
