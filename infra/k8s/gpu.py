"""The GPU and RDMA operators as plain data: Helm releases, their namespaces and ConfigMaps.

Owns what railplan puts on Kubernetes so pods see GPUs, MIG devices and InfiniBand HCAs:

* the NVIDIA GPU Operator release (``gpu-operator`` namespace) with minimal values: the
  driver stays Ansible's, the MIG manager reads railplan's mig-parted configs, and
  dcgm-exporter exports the same counters file as the Ansible ``dcgm`` role;
* the ConfigMaps those values name (``railplan-mig-parted``, ``railplan-dcgm-counters``,
  and with GPU `sharing` ``railplan-device-plugin``: one device-plugin config per sharing
  group, time-slicing or MPS replicas, selected by the node label
  ``nvidia.com/device-plugin.config`` the Ansible inventory gives the group's servers);
* the RDMA shared device plugin (``rdma-device-plugin`` namespace: a ConfigMap and a
  DaemonSet per set of compute HCAs, built-in kinds) when the plan has InfiniBand HCAs, so
  pods get the compute-fabric HCAs, and only those, as ``rdma/rdma_shared_device_ib`` for
  GPUDirect RDMA. Not through the NVIDIA Network
  Operator: its chart no longer deploys the plugin from values (``deployCR`` was removed in
  24.10), and its NicClusterPolicy would be the operator's only job here, since Ansible
  installs DOCA-Host and loads nvidia-peermem.

Every function is a pure function of the spec and plan; nothing here imports Pulumi.
"""

from __future__ import annotations

from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from infra.k8s.objects import HelmRelease, KubeObject, kube_object, topology_label
from infra.namespaces import GPU_NAMESPACE, RDMA_NAMESPACE
from infra.project_data import roles_dir
from infra.spec import GpuSharing, NodeGroup, Spec
from infra.topology.migconfig import DISABLED, mig_parted_configs
from infra.topology.model import Plan

__all__ = [
    "COUNTERS_CONFIGMAP",
    "COUNTERS_KEY",
    "DEVICE_PLUGIN_CONFIGMAP",
    "DEVICE_PLUGIN_DEFAULT",
    "DEVICE_PLUGIN_LABEL",
    "GPU_NAMESPACE",
    "GPU_OPERATOR_VERSION",
    "MIG_CONFIGMAP",
    "NVIDIA_HELM_REPO",
    "RDMA_NAMESPACE",
    "RDMA_RESOURCE",
    "counters_csv",
    "counters_path",
    "device_plugin_configmap",
    "gpu_stack",
    "infiniband_hcas",
    "rdma_hca_sets",
    "uses_mig",
]

NVIDIA_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
# The chart tag whose values.yaml /work/shared/facts/peers.md §4.1 documents.
GPU_OPERATOR_VERSION = "v26.7.0"
# The plugin image NVIDIA ships with Network Operator v26.4.0 (its docs give component
# version `network-operator-v26.4.0`); inferred, not pulled here: pin it by digest.
RDMA_PLUGIN_IMAGE = "nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin:network-operator-v26.4.0"
RDMA_CONFIGMAP = "rdma-devices"
RDMA_CONFIG_DIR = "/k8s-rdma-shared-dev-plugin"  # the plugin reads config.json from here
# The init container's script (beside this module) and image: a shell is all it needs; the
# same pinned image the MIG schedule's Jobs pull (infra.k8s.mig_schedule.KUBECTL_IMAGE).
RDMA_SCRIPT_PATH = Path(__file__).resolve().parent / "scripts" / "rdma-config.sh"
RDMA_SCRIPT_KEY = "rdma-config.sh"
RDMA_CONFIG_IMAGE = "docker.io/alpine/k8s:1.33.4"

MIG_CONFIGMAP = "railplan-mig-parted"
MIG_CONFIG_KEY = "config.yaml"  # the key the MIG manager reads (peers.md §4.1)
COUNTERS_CONFIGMAP = "railplan-dcgm-counters"
DEVICE_PLUGIN_CONFIGMAP = "railplan-device-plugin"
# The config a GPU node without the label below gets (the operator's devicePlugin.config.
# default); the sharing groups' configs are named as the groups, which cannot clash with it
# (group names are lowercase letters, digits and `_`).
DEVICE_PLUGIN_DEFAULT = "default"
# The node label the GPU Operator's device plugin reads its config's name from (NVIDIA GPU
# Operator docs, "Time-Slicing GPUs in Kubernetes").
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
# The ClusterPolicy CRD describes dcgmExporter.config.name as "ConfigMap name with file
# dcgm-metrics.csv", and the operator then sets DCGM_EXPORTER_COLLECTORS to
# /etc/dcgm-exporter/dcgm-metrics.csv (gpu-operator's DCGM exporter state tests).
COUNTERS_KEY = "dcgm-metrics.csv"
RDMA_RESOURCE = "rdma_shared_device_ib"  # pods request rdma/rdma_shared_device_ib
MELLANOX_VENDOR = "15b3"  # PCI vendor ID of NVIDIA (Mellanox) NICs
# How many pods may share the resource on one node: the documented default.
RDMA_HCA_MAX = 63


def counters_path() -> Traversable:
    """The Ansible dcgm role's counters file (the installed copy, or the checkout's)."""
    return roles_dir() / "dcgm" / "files" / "railplan-counters.csv"


def counters_csv() -> str:
    """The counters file's text, exactly as the role copies it to the hosts."""
    # Decoding the bytes (not read_text) keeps line endings as they are in the file.
    return counters_path().read_bytes().decode("utf-8")


def uses_mig(plan: Plan) -> bool:
    """Whether any node group is MIG-split, now or after a scheduled change."""
    return any(group.mig_split for group in plan.groups.values())


def infiniband_hcas(plan: Plan) -> list[str]:
    """The compute-fabric HCA devices (``mlx5_N``) of the plan's servers, sorted, distinct."""
    names = {hca for server in plan.servers for hca in server.hcas}
    return sorted(names, key=lambda n: (len(n), n))


def gpu_stack(spec: Spec, plan: Plan) -> tuple[list[HelmRelease], list[KubeObject]]:
    """The GPU Operator and its ConfigMaps, and with InfiniBand the RDMA device plugin.

    Objects come in apply order: each namespace before the objects in it.
    """
    releases = [gpu_operator(spec, plan)]
    objects = [_namespace(GPU_NAMESPACE, spec)]
    if uses_mig(plan):
        objects.append(mig_configmap(spec))
    objects.append(counters_configmap(spec))
    if _sharing_groups(spec):
        objects.append(device_plugin_configmap(spec))
    if infiniband_hcas(plan):
        objects += rdma_device_plugin(spec, plan)
    return releases, objects


def _namespace(name: str, spec: Spec) -> KubeObject:
    return kube_object("v1", "Namespace", name, spec)


# --- GPU Operator -------------------------------------------------------------------------


def gpu_operator(spec: Spec, plan: Plan) -> HelmRelease:
    """The GPU Operator release with railplan's values."""
    return HelmRelease(
        name="gpu-operator",
        namespace=GPU_NAMESPACE,
        chart="gpu-operator",
        repository=NVIDIA_HELM_REPO,
        version=GPU_OPERATOR_VERSION,
        values=gpu_operator_values(spec, plan),
        description="NVIDIA GPU Operator: container toolkit, device plugin, MIG manager, "
        "dcgm-exporter (driver installed by Ansible)",
    )


def gpu_operator_values(spec: Spec, plan: Plan) -> dict[str, Any]:
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
        "migManager": _mig_manager_values(plan),
        **_device_plugin_values(spec),
        # No standalone nv-hostengine pod: dcgm-exporter embeds its own host engine.
        "dcgm": {"enabled": False},
        "dcgmExporter": {
            # The same counters as the Ansible dcgm role exports on the hosts.
            "config": {"name": COUNTERS_CONFIGMAP},
            # Label each GPU's series with the pod holding it (pod, namespace, container):
            # the KEDA queries and GPUIdle read those. Stated, not left to the image's default.
            "env": [{"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"}],
            # railplan builds its own ServiceMonitor (infra.k8s.monitoring) with the
            # spec's scrape interval, so the chart's would be a duplicate scrape.
            "serviceMonitor": {"enabled": False},
        },
    }


def _mig_manager_values(plan: Plan) -> dict[str, Any]:
    if not uses_mig(plan):
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


def _sharing_groups(spec: Spec) -> list[NodeGroup]:
    return [group for group in spec.node_groups if group.sharing is not None]


def _device_plugin_values(spec: Spec) -> dict[str, Any]:
    """With GPU sharing: the device plugin reads railplan's configs (else its defaults)."""
    if not _sharing_groups(spec):
        return {}
    config = {"name": DEVICE_PLUGIN_CONFIGMAP, "default": DEVICE_PLUGIN_DEFAULT}
    return {"devicePlugin": {"config": config}}


def _device_plugin_config(spec: Spec, sharing: GpuSharing | None) -> str:
    """One device-plugin config file (k8s-device-plugin ``version: v1``)."""
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": spec.scheduler.mig_strategy},
    }
    if sharing is not None:
        kind = "timeSlicing" if sharing.strategy == "time-slicing" else "mps"
        resources = [{"name": "nvidia.com/gpu", "replicas": sharing.replicas}]
        config["sharing"] = {kind: {"resources": resources}}
    return yaml.safe_dump(config, sort_keys=True)


def device_plugin_configmap(spec: Spec) -> KubeObject:
    """The device plugin's configs: unshared GPUs by default, one per sharing group."""
    data = {DEVICE_PLUGIN_DEFAULT: _device_plugin_config(spec, None)}
    for group in _sharing_groups(spec):
        data[group.name] = _device_plugin_config(spec, group.sharing)
    return kube_object(
        "v1", "ConfigMap", DEVICE_PLUGIN_CONFIGMAP, spec, namespace=GPU_NAMESPACE, data=data
    )


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


# --- RDMA shared device plugin ------------------------------------------------------------


def rdma_hca_sets(plan: Plan) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(compute HCAs, node groups) per distinct set of compute HCAs, in plan order.

    Node models number their HCAs differently (``mlx5_4`` is a storage port on a DGX A100
    and a compute rail on a DGX H100), so each set gets its own plugin DaemonSet.
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for server in plan.servers:
        if server.hcas and server.group not in groups.setdefault(server.hcas, []):
            groups[server.hcas].append(server.group)
    return [(hcas, tuple(names)) for hcas, names in groups.items()]


def rdma_device_plugin(spec: Spec, plan: Plan) -> list[KubeObject]:
    """Namespace, script ConfigMap and per HCA set a DaemonSet of the RDMA shared device plugin."""
    script = RDMA_SCRIPT_PATH.read_text(encoding="utf-8")
    config = kube_object(
        "v1",
        "ConfigMap",
        RDMA_CONFIGMAP,
        spec,
        namespace=RDMA_NAMESPACE,
        data={RDMA_SCRIPT_KEY: script},
    )
    sets = rdma_hca_sets(plan)
    daemonsets = [
        _rdma_daemonset(spec, _rdma_name(index), hcas, groups)
        for index, (hcas, groups) in enumerate(sets)
    ]
    return [_namespace(RDMA_NAMESPACE, spec), config, *daemonsets]


def _rdma_name(index: int) -> str:
    return "rdma-shared-device-plugin" + (f"-{index + 1}" if index else "")


def _rdma_config_container(hcas: tuple[str, ...]) -> dict[str, Any]:
    """The init container writing config.json with the node's compute HCAs' netdevs."""
    env = {
        "COMPUTE_HCAS": " ".join(hcas),
        "RESOURCE": RDMA_RESOURCE,
        "HCA_MAX": str(RDMA_HCA_MAX),
        "VENDOR": MELLANOX_VENDOR,
        "OUT": f"{RDMA_CONFIG_DIR}/config.json",
        "SYSFS": "/host/sys",
    }
    return {
        "name": "compute-hcas",
        "image": RDMA_CONFIG_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", f"/scripts/{RDMA_SCRIPT_KEY}"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [
            {"name": "script", "mountPath": "/scripts", "readOnly": True},
            {"name": "sys", "mountPath": "/host/sys", "readOnly": True},
            {"name": "config", "mountPath": RDMA_CONFIG_DIR},
        ],
    }


def _rdma_daemonset(
    spec: Spec, name: str, hcas: tuple[str, ...], groups: tuple[str, ...]
) -> KubeObject:
    labels = {"app.kubernetes.io/name": name}
    host_paths = {  # what a device plugin needs of the node: kubelet's sockets, /dev/infiniband
        "device-plugins": "/var/lib/kubelet/device-plugins",
        "plugins-registry": "/var/lib/kubelet/plugins_registry",
        "dev": "/dev",
    }
    container = {
        "name": "rdma-shared-device-plugin",
        "image": RDMA_PLUGIN_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        # It opens every node's RDMA devices and registers with the kubelet: privileged, as
        # the plugin's own manifest runs it.
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": n, "mountPath": path} for n, path in host_paths.items()]
        + [{"name": "config", "mountPath": RDMA_CONFIG_DIR, "readOnly": True}],
    }
    volumes: list[dict[str, Any]] = [
        {"name": n, "hostPath": {"path": path}}
        for n, path in [*host_paths.items(), ("sys", "/sys")]
    ]
    volumes.append({"name": "config", "emptyDir": {"sizeLimit": "1Mi"}})
    volumes.append({"name": "script", "configMap": {"name": RDMA_CONFIGMAP, "defaultMode": 0o555}})
    on_groups = {"key": topology_label("node-group"), "operator": "In", "values": list(groups)}
    pod = {
        # RDMA devices and their netdevs live in the host's network namespace.
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        # Only on the node groups with these compute HCAs (the label the Ansible
        # topology_labels role gives every server): another model numbers its HCAs otherwise.
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [on_groups]}]
                }
            }
        },
        "initContainers": [_rdma_config_container(hcas)],
        "containers": [container],
        "volumes": volumes,
    }
    return kube_object(
        "apps/v1",
        "DaemonSet",
        name,
        spec,
        namespace=RDMA_NAMESPACE,
        annotations={"railplan.dev/compute-hcas": ",".join(hcas)},
        spec={
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    )
