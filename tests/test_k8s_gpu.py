"""GPU/RDMA operators, monitoring and checkpoint storage (infra.k8s.gpu, infra.k8s.monitoring).

Every object is validated strictly (tests/schemas/validate_crs.py: CRD schemas with unknown
fields rejected, built-in kinds through kubernetes_validate strict), and the GPU Operator's
values are checked against the ClusterPolicy CRD they become. Properties, not snapshots.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog, load_catalog
from infra.errors import SpecError
from infra.k8s import HelmRelease, KubeObject
from infra.k8s.gpu import (
    COUNTERS_CONFIGMAP,
    COUNTERS_KEY,
    DEVICE_PLUGIN_CONFIGMAP,
    DEVICE_PLUGIN_DEFAULT,
    GPU_NAMESPACE,
    MIG_CONFIGMAP,
    RDMA_NAMESPACE,
    counters_path,
    device_plugin_configmap,
    gpu_stack,
    uses_mig,
)
from infra.k8s.monitoring import checkpoint_storage, exported_metrics, monitoring
from infra.render.ansible import ansible_files
from infra.spec import Spec, load_spec, load_spec_text
from infra.topology import Plan, expand
from infra.topology.migconfig import mig_parted_configs

ROOT = Path(__file__).resolve().parents[1]
VALIDATOR = ROOT / "tests" / "schemas" / "validate_crs.py"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
RDMA_SELECTORS = {"vendors", "deviceIDs", "drivers", "ifNames", "linkTypes"}  # plugin README


@cache
def _catalog() -> Catalog:
    return load_catalog()


def _example(path: Path) -> tuple[Spec, Plan]:
    spec = load_spec(path).spec
    return spec, expand(spec, _catalog())


def _lab_dict() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "a100-lab-mig.yaml").read_text())
    return data


def _from_dict(data: dict[str, Any]) -> tuple[Spec, Plan]:
    spec = load_spec_text(yaml.safe_dump(data)).spec
    return spec, expand(spec, _catalog())


def _everything(spec: Spec, plan: Plan) -> tuple[list[HelmRelease], list[KubeObject]]:
    releases, objects = gpu_stack(spec, plan)
    return releases, objects + monitoring(spec) + checkpoint_storage(spec)


def _validate(objects: list[KubeObject], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=True), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(VALIDATOR), str(manifest)],
        capture_output=True,
        text=True,
        check=False,  # the return code is what the tests assert on
    )


def _release(releases: list[HelmRelease], name: str) -> HelmRelease:
    return next(r for r in releases if r.name == name)


def _object(objects: list[KubeObject], kind: str, name: str) -> KubeObject:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _cluster_policy(values: dict[str, Any]) -> KubeObject:
    """The ClusterPolicy the chart renders from ``values`` (chart-only keys dropped)."""
    spec = {k: copy.deepcopy(v) for k, v in values.items() if k != "nfd"}  # nfd: subchart
    for required in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd"):
        spec.setdefault(required, {})
    for required in ("nodeStatusExporter", "operator", "toolkit"):
        spec.setdefault(required, {})
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


def _mig_schedule_spec() -> dict[str, Any]:
    data = _lab_dict()
    infer = next(g for g in data["node_groups"] if g["name"] == "infer")
    infer["mig_schedule"] = {
        "timezone": "Europe/Berlin",
        "changes": [
            {"at": "0 20 * * *", "mig": "infer-large"},
            {
                "at": "0 8 * * 1-5",
                "mig": [
                    {"gpus": [0, 1], "layout": "infer-small"},
                    {"gpus": [2, 3, 4, 5, 6, 7], "layout": "disabled"},
                ],
            },
        ],
    }
    return data


# --- strict validation ----------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_objects_validate_strictly(path: Path, tmp_path: Path) -> None:
    releases, objects = _everything(*_example(path))
    gpu = _release(releases, "gpu-operator")
    result = _validate([*objects, _cluster_policy(gpu.values)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_scheduled_mig_and_checkpoint_objects_validate_strictly(tmp_path: Path) -> None:
    data = _mig_schedule_spec()
    data["scheduler"]["checkpoint_storage"] = {
        "provisioner": "fsx.csi.aws.com",
        "parameters": {"subnetId": "subnet-0abc", "deploymentType": "PERSISTENT_2"},
        "mount_options": ["flock"],
    }
    releases, objects = _everything(*_from_dict(data))
    assert any(o["kind"] == "StorageClass" for o in objects)
    gpu = _release(releases, "gpu-operator")
    result = _validate([*objects, _cluster_policy(gpu.values)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("kind", "path", "typo"),
    [
        ("ServiceMonitor", ("spec", "endpoints", 0), "intervall"),
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0), "expresion"),
        ("ConfigMap", (), "dataa"),
        ("ClusterPolicy", ("spec", "migManager"), "enabeld"),
    ],
)
def test_validator_rejects_a_misspelled_field(
    kind: str, path: tuple[Any, ...], typo: str, tmp_path: Path
) -> None:
    releases, objects = _everything(*_example(ROOT / "examples" / "a100-lab-mig.yaml"))
    candidates = [*objects, _cluster_policy(_release(releases, "gpu-operator").values)]
    obj = copy.deepcopy(next(o for o in candidates if o["kind"] == kind))
    node: Any = obj
    for key in path:
        node = node[key]
    node[typo] = "x"
    result = _validate([obj], tmp_path)
    assert result.returncode == 1
    assert typo in result.stdout


# --- GPU Operator ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_gpu_operator_leaves_driver_to_ansible(path: Path) -> None:
    spec, plan = _example(path)
    releases, objects = gpu_stack(spec, plan)
    gpu = _release(releases, "gpu-operator")
    assert gpu.version == "v26.7.0"
    assert gpu.namespace == GPU_NAMESPACE
    assert gpu.values["driver"] == {"enabled": False}
    assert gpu.values["mig"]["strategy"] == spec.scheduler.mig_strategy
    assert gpu.values["dcgmExporter"]["config"]["name"] == COUNTERS_CONFIGMAP
    assert gpu.values["dcgmExporter"]["serviceMonitor"]["enabled"] is False
    names = [o["metadata"]["name"] for o in objects]
    assert names.index(GPU_NAMESPACE) < names.index(COUNTERS_CONFIGMAP)


def test_counters_configmap_is_the_roles_file_byte_for_byte() -> None:
    spec, plan = _example(ROOT / "examples" / "dgx-h100-superpod.yaml")
    _, objects = gpu_stack(spec, plan)
    cm = _object(objects, "ConfigMap", COUNTERS_CONFIGMAP)
    assert cm["data"][COUNTERS_KEY].encode("utf-8") == counters_path().read_bytes()


def test_mig_configmap_names_the_specs_layouts() -> None:
    spec, plan = _example(ROOT / "examples" / "a100-lab-mig.yaml")
    releases, objects = gpu_stack(spec, plan)
    manager = _release(releases, "gpu-operator").values["migManager"]
    assert manager["enabled"] is True
    assert manager["config"] == {"name": MIG_CONFIGMAP, "default": "all-disabled"}
    assert {"name": "WITH_REBOOT", "value": "false"} in manager["env"]
    document = yaml.safe_load(_object(objects, "ConfigMap", MIG_CONFIGMAP)["data"]["config.yaml"])
    assert document == mig_parted_configs(spec, schedules=True)
    assert document["version"] == "v1"


def test_mig_configmap_covers_scheduled_changes() -> None:
    spec, plan = _from_dict(_mig_schedule_spec())
    _, objects = gpu_stack(spec, plan)
    configs = yaml.safe_load(_object(objects, "ConfigMap", MIG_CONFIGMAP)["data"]["config.yaml"])
    names = set(configs["mig-configs"])
    # the group's per-GPU list, the layout it changes to, and the per-GPU change
    assert {"group-infer", "infer-large", "group-infer-change2", "all-disabled"} <= names
    large = configs["mig-configs"]["infer-large"][0]
    assert large["mig-devices"] == spec.mig_layouts["infer-large"].profiles


def test_mig_only_by_schedule_still_enables_the_manager() -> None:
    data = _lab_dict()
    data["node_groups"] = [g for g in data["node_groups"] if g["name"] == "train"]
    data["node_groups"][0]["mig_schedule"] = {"changes": [{"at": "@daily", "mig": "infer-small"}]}
    spec, plan = _from_dict(data)
    assert uses_mig(plan)
    releases, objects = gpu_stack(spec, plan)
    assert _release(releases, "gpu-operator").values["migManager"]["enabled"] is True
    assert any(o["metadata"]["name"] == MIG_CONFIGMAP for o in objects)


def test_no_mig_no_mig_configmap() -> None:
    spec, plan = _example(ROOT / "examples" / "dgx-h100-superpod.yaml")
    releases, objects = gpu_stack(spec, plan)
    assert _release(releases, "gpu-operator").values["migManager"] == {"enabled": False}
    assert all(o["metadata"]["name"] != MIG_CONFIGMAP for o in objects)


# --- GPU sharing ----------------------------------------------------------------------------


def test_sharing_groups_get_a_device_plugin_config_each_and_validate(tmp_path: Path) -> None:
    data = _lab_dict()
    data["node_groups"][0]["sharing"] = {"strategy": "time-slicing", "replicas": 4}
    spec, plan = _from_dict(data)
    releases, objects = gpu_stack(spec, plan)
    values = _release(releases, "gpu-operator").values
    assert values["devicePlugin"] == {
        "config": {"name": DEVICE_PLUGIN_CONFIGMAP, "default": DEVICE_PLUGIN_DEFAULT}
    }
    configs = _object(objects, "ConfigMap", DEVICE_PLUGIN_CONFIGMAP)["data"]
    assert set(configs) == {DEVICE_PLUGIN_DEFAULT, "train"}
    train = yaml.safe_load(configs["train"])
    assert train["sharing"] == {
        "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    }
    assert train["flags"] == {"migStrategy": "mixed"} and train["version"] == "v1"
    assert "sharing" not in yaml.safe_load(configs[DEVICE_PLUGIN_DEFAULT])
    result = _validate([*objects, _cluster_policy(values)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_sharing_groups_servers_are_labelled_with_its_device_plugin_config() -> None:
    data = _lab_dict()
    data["node_groups"][0]["sharing"] = {"strategy": "time-slicing", "replicas": 4}
    spec, plan = _from_dict(data)
    files = ansible_files(spec, _catalog(), plan)
    train = yaml.safe_load(files[f"inventories/{spec.name}/group_vars/train.yml"])
    assert train["topology_labels_kubernetes_extra"] == {"nvidia.com/device-plugin.config": "train"}
    infer = yaml.safe_load(files[f"inventories/{spec.name}/group_vars/infer.yml"])
    assert "nvidia.com/device-plugin.config" not in infer["topology_labels_kubernetes_extra"]


def test_mps_sharing_and_no_sharing_no_device_plugin_config() -> None:
    data = _lab_dict()
    data["node_groups"][0]["sharing"] = {"strategy": "mps", "replicas": 2}
    spec, _ = _from_dict(data)
    configs = device_plugin_configmap(spec)["data"]
    assert yaml.safe_load(configs["train"])["sharing"] == {
        "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}
    }
    releases, objects = gpu_stack(*_example(ROOT / "examples" / "a100-lab-mig.yaml"))
    assert "devicePlugin" not in _release(releases, "gpu-operator").values
    assert all(o["metadata"]["name"] != DEVICE_PLUGIN_CONFIGMAP for o in objects)


def test_sharing_refused_with_mig_or_slurm() -> None:
    data = _lab_dict()
    data["node_groups"][1]["sharing"] = {"strategy": "mps", "replicas": 2}
    with pytest.raises(SpecError, match="sharing` and MIG"):
        _from_dict(data)
    data = _lab_dict()
    data["node_groups"][0]["sharing"] = {"strategy": "mps", "replicas": 1}
    with pytest.raises(SpecError, match="at least 2"):
        _from_dict(data)
    data = _lab_dict()
    data["node_groups"][0]["sharing"] = {"strategy": "mps", "replicas": 2}
    data["scheduler"] = {"kind": "slurm"}
    with pytest.raises(SpecError, match=r"device plugin's; with `scheduler\.kind: slurm`"):
        _from_dict(data)


# --- RDMA shared device plugin ---------------------------------------------------------------


def test_infiniband_brings_the_rdma_device_plugin() -> None:
    spec, plan = _example(ROOT / "examples" / "dgx-h100-superpod.yaml")
    releases, objects = gpu_stack(spec, plan)
    assert [r.name for r in releases] == ["gpu-operator"]  # no Network Operator needed
    names = [o["metadata"]["name"] for o in objects]
    assert names.index(RDMA_NAMESPACE) < names.index("rdma-devices")
    config = _object(objects, "ConfigMap", "rdma-devices")
    daemonset = _object(objects, "DaemonSet", "rdma-shared-device-plugin")
    assert config["metadata"]["namespace"] == daemonset["metadata"]["namespace"] == RDMA_NAMESPACE
    hcas = daemonset["metadata"]["annotations"]["railplan.dev/compute-hcas"].split(",")
    assert set(hcas) == {h for s in plan.servers for h in s.hcas}
    pod = daemonset["spec"]["template"]["spec"]
    mounted = {v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    assert mounted == {"rdma-devices"} and pod["hostNetwork"] is True
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"][0]["values"] == sorted({s.group for s in plan.servers})


def _dgx_a100_sysfs(root: Path, missing: str = "") -> dict[str, str]:
    """A DGX A100's RDMA devices and their netdevs: 8 compute rails, 4 storage/in-band ports."""
    netdevs = {
        "mlx5_0": "ibp12s0", "mlx5_1": "ibp18s0", "mlx5_2": "ibp75s0", "mlx5_3": "ibp84s0",
        "mlx5_4": "enp97s0f0", "mlx5_5": "enp97s0f1", "mlx5_6": "ibp141s0", "mlx5_7": "ibp148s0",
        "mlx5_8": "ibp186s0", "mlx5_9": "ibp204s0", "mlx5_10": "enp225s0f0",
        "mlx5_11": "enp225s0f1",
    }  # fmt: skip
    for hca, netdev in netdevs.items():
        if hca != missing:
            (root / "class" / "infiniband" / hca / "device" / "net" / netdev).mkdir(parents=True)
    return netdevs


def _run_rdma_config(objects: list[KubeObject], sysfs: Path, out: Path) -> tuple[int, str]:
    daemonset = _object(objects, "DaemonSet", "rdma-shared-device-plugin")
    (init,) = daemonset["spec"]["template"]["spec"]["initContainers"]
    env = {e["name"]: e["value"] for e in init["env"]}
    env.update(SYSFS=str(sysfs), OUT=str(out))
    script = _object(objects, "ConfigMap", "rdma-devices")["data"]["rdma-config.sh"]
    done = subprocess.run(
        ["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    return done.returncode, done.stderr


def test_rdma_plugin_offers_only_the_compute_hcas(tmp_path: Path) -> None:
    """The config the node writes names the compute rails' netdevs; storage ports never."""
    spec, plan = _example(ROOT / "examples" / "dgx-a100-superpod.yaml")
    objects = gpu_stack(spec, plan)[1]
    netdevs = _dgx_a100_sysfs(tmp_path / "sys")
    code, err = _run_rdma_config(objects, tmp_path / "sys", tmp_path / "config.json")
    assert code == 0, err
    (resource,) = json.loads((tmp_path / "config.json").read_text())["configList"]
    assert set(resource["selectors"]) <= RDMA_SELECTORS
    assert resource["resourceName"] == "rdma_shared_device_ib" and resource["rdmaHcaMax"] == 63
    compute = {netdevs[h] for s in plan.servers for h in s.hcas}
    assert set(resource["selectors"]["ifNames"]) == compute and len(compute) == 8
    assert not {"enp97s0f0", "enp97s0f1", "enp225s0f0", "enp225s0f1"} & compute


def test_a_node_missing_a_compute_rail_offers_no_rdma(tmp_path: Path) -> None:
    spec, plan = _example(ROOT / "examples" / "dgx-a100-superpod.yaml")
    _dgx_a100_sysfs(tmp_path / "sys", missing="mlx5_6")
    code, err = _run_rdma_config(gpu_stack(spec, plan)[1], tmp_path / "sys", tmp_path / "c.json")
    assert code == 1 and "mlx5_6" in err
    assert not (tmp_path / "c.json").exists()


def test_node_models_with_other_hcas_get_their_own_plugin() -> None:
    data = yaml.safe_load((ROOT / "examples" / "dgx-h100-superpod.yaml").read_text())
    first = data["node_groups"][0]
    data["node_groups"].append({**first, "name": "old", "node": "dgx-a100-640gb", "count": 4})
    data["node_groups"][-1].pop("hostname", None)
    data["node_groups"][-1]["hostname"] = "old{index:03d}"
    spec, plan = _from_dict(data)
    daemonsets = [o for o in gpu_stack(spec, plan)[1] if o["kind"] == "DaemonSet"]
    hcas = {d["metadata"]["annotations"]["railplan.dev/compute-hcas"] for d in daemonsets}
    assert len(daemonsets) == 2 and len(hcas) == 2


def test_no_infiniband_no_rdma_device_plugin() -> None:
    spec, plan = _example(ROOT / "examples" / "aws-p4d.yaml")  # EFA, no mlx5 HCAs
    assert not any(s.hcas for s in plan.servers)
    releases, objects = gpu_stack(spec, plan)
    assert [r.name for r in releases] == ["gpu-operator"]
    assert all(o["metadata"]["name"] != RDMA_NAMESPACE for o in objects)
    assert all(o["kind"] != "DaemonSet" for o in objects)


# --- monitoring -----------------------------------------------------------------------------


def _rules(spec: Spec) -> dict[str, dict[str, Any]]:
    objects = monitoring(spec)
    rule = _object(objects, "PrometheusRule", "railplan-gpu-alerts")
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def test_rules_follow_the_specs_thresholds() -> None:
    data = _lab_dict()
    defaults = _rules(_from_dict(data)[0])
    data["scheduler"]["monitoring"] = {
        "scrape_interval": "30s",
        "idle_gpu_util_pct": 12.5,
        "idle_for": "45m",
        "throttle_for": "7m",
        "error_window": "11m",
    }
    spec, _ = _from_dict(data)
    rules = _rules(spec)
    assert "< 12.5" in rules["GPUIdle"]["expr"] and rules["GPUIdle"]["for"] == "45m"
    for name in ("GPUNVLinkErrors", "GPUDoubleBitECC"):
        assert "[11m]" in rules[name]["expr"] and "[5m]" in defaults[name]["expr"]
    for name in ("GPUXidError", "GPUNVLinkErrors", "GPUDoubleBitECC"):
        assert "for" not in rules[name]  # a single error alerts at once
    for name in ("GPUThermalThrottling", "GPUPowerThrottling"):
        assert rules[name]["for"] == "7m" and defaults[name]["for"] == "15m"
    assert "< 5" in defaults["GPUIdle"]["expr"] and defaults["GPUIdle"]["for"] == "1h"
    monitor = _object(monitoring(spec), "ServiceMonitor", "nvidia-dcgm-exporter")
    assert monitor["spec"]["endpoints"][0]["interval"] == "30s"


def test_rules_only_read_metrics_the_counters_file_exports() -> None:
    rules = _rules(_example(ROOT / "examples" / "a100-lab-mig.yaml")[0])
    used = {m for r in rules.values() for m in re.findall(r"DCGM_(?:FI|EXP)_[A-Z0-9_]+", r["expr"])}
    assert used and used <= exported_metrics()


def test_every_rule_names_node_gpu_and_severity() -> None:
    for rule in _rules(_example(ROOT / "examples" / "dgx-a100-superpod.yaml")[0]).values():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert "{{ $labels.Hostname }}" in rule["annotations"]["summary"]
        assert "{{ $labels.gpu }}" in rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_throttle_rules_test_the_documented_bits() -> None:
    rules = _rules(_example(ROOT / "examples" / "a100-lab-mig.yaml")[0])
    thermal, power = rules["GPUThermalThrottling"]["expr"], rules["GPUPowerThrottling"]["expr"]
    assert "/ 32)" in thermal and "/ 64)" in thermal  # SW and HW thermal slowdown
    assert "/ 8)" in power and "/ 128)" in power  # HW slowdown and HW power brake
    assert "/ 4)" not in thermal + power  # SW power cap: a busy GPU at its limit


def test_service_monitor_selects_the_dcgm_exporter_service() -> None:
    spec, _ = _example(ROOT / "examples" / "aws-p4d.yaml")
    monitor = _object(monitoring(spec), "ServiceMonitor", "nvidia-dcgm-exporter")
    assert monitor["metadata"]["namespace"] == GPU_NAMESPACE
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "nvidia-dcgm-exporter"}}
    assert monitor["spec"]["endpoints"][0]["port"] == "gpu-metrics"


# --- checkpoint storage ---------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_no_storage_class_without_checkpoint_storage(path: Path) -> None:
    spec, _ = _example(path)
    if spec.scheduler.checkpoint_storage is None:
        assert checkpoint_storage(spec) == []


def test_storage_class_from_checkpoint_storage() -> None:
    data = _lab_dict()
    data["scheduler"]["checkpoint_storage"] = {
        "name": "ckpt",
        "provisioner": "lustre.csi.hpe.com",
        "parameters": {"fsName": "scratch"},
        "reclaim_policy": "Delete",
        "mount_options": ["flock", "noatime"],
    }
    spec, _ = _from_dict(data)
    (sc,) = checkpoint_storage(spec)
    assert sc["apiVersion"] == "storage.k8s.io/v1" and sc["kind"] == "StorageClass"
    assert sc["metadata"]["name"] == "ckpt" and "namespace" not in sc["metadata"]
    assert sc["provisioner"] == "lustre.csi.hpe.com"
    assert sc["parameters"] == {"fsName": "scratch"}
    assert sc["reclaimPolicy"] == "Delete"
    assert sc["mountOptions"] == ["flock", "noatime"]
    assert sc["volumeBindingMode"] == "Immediate" and sc["allowVolumeExpansion"] is True
