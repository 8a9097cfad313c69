"""The KEDA query of an autoscaled tenant, evaluated by Prometheus itself (promtool).

The query averages the GPU load of exactly the pods of the tenant's Deployment: the pod-name
regex alone also takes pods of a Job ``llm-server-2`` or ``llm-server-v2`` and of a
StatefulSet ``llm-server-bcd`` (their names fit ``<name>-<hash>-<suffix>``), so the rendered
query joins kube-state-metrics' ownership series. `mean_seen_by_keda` runs promtool's rule
unit tests on series shaped like dcgm-exporter's and kube-state-metrics'.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from infra.k8s.elastic import deployment_pods, gpu_load_query
from infra.spec import load_spec_text
from infra.spec.scheduling import Tenant, TenantAutoscale

from .conftest import ROOT

# kube-state-metrics scraped twice (two replicas): the join must not become many-to-many.
_KSM_INSTANCES = ("10.0.0.5:8080", "10.0.0.6:8080")


@dataclass(frozen=True)
class Pod:
    """A pod using one GPU at ``load``, owned by ``owner_kind`` ``owner_name``."""

    name: str
    load: float
    owner_kind: str
    owner_name: str


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is not installed (Debian: `make tools` as root)")
        pytest.skip("promtool is not installed (Debian: `make tools` as root)")
    return path


def autoscaled_tenant() -> tuple[Tenant, TenantAutoscale]:
    """The example's autoscaled tenant (Deployment ``llm-server`` in ``serving``)."""
    spec = load_spec_text((ROOT / "examples" / "k8s-tenants.yaml").read_text()).spec
    (tenant,) = [t for t in spec.scheduler.tenants if t.autoscale is not None]
    assert tenant.autoscale is not None and tenant.autoscale.deployment == "llm-server"
    return tenant, tenant.autoscale


def _ksm(metric: str, labels: dict[str, str]) -> list[dict[str, str]]:
    rows = []
    for instance in _KSM_INSTANCES:
        pairs = {**labels, "job": "kube-state-metrics", "instance": instance}
        text = ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))
        rows.append({"series": f"{metric}{{{text}}}", "values": "1x5"})
    return rows


def _series(namespace: str, metric: str, pods: list[Pod], deployments: dict[str, str]) -> list:
    """dcgm-exporter's series per pod, kube_pod_owner per pod, kube_replicaset_owner per RS."""
    rows: list[dict[str, str]] = []
    for gpu, pod in enumerate(pods):
        labels = f'gpu="{gpu}",Hostname="node{gpu}",namespace="{namespace}",pod="{pod.name}"'
        rows.append({"series": f"{metric}{{{labels}}}", "values": f"{pod.load:g}x5"})
        owner = {"owner_kind": pod.owner_kind, "owner_name": pod.owner_name}
        rows += _ksm("kube_pod_owner", {"namespace": namespace, "pod": pod.name, **owner})
    for replicaset, deployment in deployments.items():
        owner = {"owner_kind": "Deployment", "owner_name": deployment}
        rows += _ksm(
            "kube_replicaset_owner", {"namespace": namespace, "replicaset": replicaset, **owner}
        )
    return rows


def mean_seen_by_keda(
    tmp_path: Path, pods: list[Pod], deployments: dict[str, str], expected: float, mig: bool
) -> None:
    """Assert that Prometheus evaluates the tenant's query to ``expected`` on these series.

    ``deployments`` maps each ReplicaSet to the Deployment that owns it.
    """
    promtool = _promtool()
    tenant, autoscale = autoscaled_tenant()
    query, _ = gpu_load_query(tenant, autoscale, mig=mig)
    metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE" if mig else "DCGM_FI_DEV_GPU_UTIL"
    rules = {"groups": [{"name": "keda", "rules": [{"record": "keda:load", "expr": query}]}]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    case = {
        "interval": "1m",
        "input_series": _series(tenant.name, metric, pods, deployments),
        "promql_expr_test": [
            {
                "expr": "keda:load",
                "eval_time": "2m",
                "exp_samples": [{"labels": "keda:load", "value": expected}],
            }
        ],
    }
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [case]}
    (tmp_path / "test.yml").write_text(json.dumps(test))
    done = subprocess.run(
        [promtool, "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# The trial's four names: the Deployment's pod, then pods of a Job llm-server-2, a Job
# llm-server-v2 and a StatefulSet llm-server-bcd at ordinal 24567, all in the namespace.
TRIAL_PODS = [
    Pod("llm-server-7c9d8b5f4-x2x4z", 80, "ReplicaSet", "llm-server-7c9d8b5f4"),
    Pod("llm-server-2-x7k2p", 0, "Job", "llm-server-2"),
    Pod("llm-server-v2-b7k2q", 0, "Job", "llm-server-v2"),
    Pod("llm-server-bcd-24567", 0, "StatefulSet", "llm-server-bcd"),
]


def test_the_trial_names_all_fit_the_pod_name_regex() -> None:
    """Why the name cannot decide: all four are valid names of a Deployment's pods."""
    pattern = re.compile(deployment_pods("llm-server"))
    assert all(pattern.fullmatch(p.name) for p in TRIAL_PODS)


@pytest.mark.parametrize("mig", [False, True], ids=["whole-gpu", "mig"])
def test_keda_averages_only_the_deployments_pods_not_a_jobs_or_statefulsets(
    tmp_path: Path, mig: bool
) -> None:
    scale = 0.01 if mig else 1.0  # the MIG metric is a 0-1 ratio
    pods = [Pod(p.name, p.load * scale, p.owner_kind, p.owner_name) for p in TRIAL_PODS]
    mean_seen_by_keda(tmp_path, pods, {"llm-server-7c9d8b5f4": "llm-server"}, 80 * scale, mig)


def test_every_replicaset_of_the_deployment_counts_a_bare_one_does_not(tmp_path: Path) -> None:
    """Mid-rollout both ReplicaSets' pods count; a ReplicaSet made by hand whose name fits
    (``llm-server-bcdfg``, owned by no Deployment) does not."""
    pods = [
        Pod("llm-server-7c9d8b5f4-x2x4z", 80, "ReplicaSet", "llm-server-7c9d8b5f4"),
        Pod("llm-server-5d4f8b9c6-q9w8z", 40, "ReplicaSet", "llm-server-5d4f8b9c6"),
        Pod("llm-server-bcdfg-hjklm", 0, "ReplicaSet", "llm-server-bcdfg"),
    ]
    owners = {"llm-server-7c9d8b5f4": "llm-server", "llm-server-5d4f8b9c6": "llm-server"}
    mean_seen_by_keda(tmp_path, pods, owners, 60, mig=False)
