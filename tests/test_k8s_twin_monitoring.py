"""Monitoring and elasticity wiring: kube-prometheus-stack's selection, and the loop closed.

(1) A kube-prometheus-stack installed with its chart's defaults makes a Prometheus CR whose
``serviceMonitorSelector`` and ``ruleSelector`` are ``matchLabels: {release: <release>}`` (its
values.yaml: ``serviceMonitorSelectorNilUsesHelmValues: true``, ``ruleSelectorNilUsesHelmValues:
true``; templates/prometheus/prometheus.yaml; chart 88.5.3, prometheus-community/helm-charts
cf408a29) and empty namespace selectors (every namespace). The test creates that CR on the
twin's API server, applies the rendered tree, and lists ServiceMonitors and PrometheusRules
with the CR's own selectors, the API server doing the selection: every rendered one must be
listed; with the ``release`` label taken off one, it is not (the check can fail).

(2) Debian's Prometheus scrapes a stand-in dcgm-exporter (the hardware boundary) and
kube-state-metrics, loads the rendered rules, evaluates the rendered ScaledObject's query
through its HTTP API, and the replica count the HPA KEDA makes would set is computed from the
value (`tests/k8s_twin/promloop.py`): it follows the serving pods' load up and down within the
rendered bounds; the rendered alerts go pending, fire or stay quiet as their series say.

``make k8s-twin`` runs this module (RAILPLAN_K8S_TWIN=1); elsewhere it skips, saying why.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s_twin import apply, promloop, versions
from tests.k8s_twin.control_plane import ControlPlane
from tests.k8s_twin.kubectl import kubectl
from tests.k8s_twin.promloop import series
from tests.k8s_twin.scenario import plane_with_crds

CI_MINUTES = 3  # what the module needs in CI, set-up included (tests/conftest.py)
_missing = versions.skip_module_unless_runnable("k8s-twin", controllers=False)

RELEASE = "kube-prometheus-stack"  # the spec's monitoring.prometheus_release default
KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


def chart_default_prometheus(release: str) -> dict[str, Any]:
    """The Prometheus CR kube-prometheus-stack's chart renders with its default values."""
    by_release = {"matchLabels": {"release": release}}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {
            "name": f"{release}-prometheus",
            "namespace": "monitoring",
            "labels": {"app": f"{release}-prometheus", "release": release},
        },
        "spec": {
            "serviceMonitorSelector": by_release,
            "serviceMonitorNamespaceSelector": {},
            "podMonitorSelector": by_release,
            "podMonitorNamespaceSelector": {},
            "ruleSelector": by_release,
            "ruleNamespaceSelector": {},
        },
    }


def _selector(sel: dict[str, Any]) -> str:
    assert set(sel) <= {"matchLabels"}, sel  # what the chart's defaults give
    return ",".join(f"{k}={v}" for k, v in sorted(sel.get("matchLabels", {}).items()))


def selected(kubeconfig: Path, prometheus: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) the API server lists with the CR's selectors (all namespaces,
    as its empty namespace selectors say)."""
    spec = prometheus["spec"]
    out = set()
    for kind, field in (("ServiceMonitor", "serviceMonitor"), ("PrometheusRule", "rule")):
        assert spec[f"{field}NamespaceSelector"] == {}
        listed = kubectl(
            kubeconfig,
            ["get", KINDS[kind], "-A", "-l", _selector(spec[f"{field}Selector"]), "-o", "json"],
        )
        for item in json.loads(listed)["items"]:
            out.add((kind, item["metadata"]["namespace"], item["metadata"]["name"]))
    return out


def rendered_monitoring(k8s_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for path in sorted(k8s_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                meta = doc["metadata"]
                out[(doc["kind"], meta["namespace"], meta["name"])] = doc
    return out


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane with every CRD installed, stopped (and checked gone) afterwards."""
    assert not _missing, f"binaries not built in {versions.bin_dir()}: {_missing}"
    with plane_with_crds(tmp_path_factory.mktemp("k8s-twin-monitoring")) as cp:
        yield cp


def test_a_chart_default_kube_prometheus_stack_selects_the_rendered_objects(
    plane: ControlPlane, tmp_path: Path
) -> None:
    k8s_dir = apply.render(apply.TENANTS_SPEC, tmp_path / "root")
    refused = [r.as_dict() for r in apply.apply_tree(plane.kubeconfig, k8s_dir) if not r.accepted]
    assert refused == [], refused
    kubectl(plane.kubeconfig, ["create", "namespace", "monitoring"])
    cr = chart_default_prometheus(RELEASE)
    kubectl(plane.kubeconfig, ["apply", "--server-side", "-f", "-"], stdin=json.dumps(cr))
    served = json.loads(
        kubectl(
            plane.kubeconfig,
            ["get", "prometheus", cr["metadata"]["name"], "-n", "monitoring", "-o", "json"],
        )
    )
    ours = set(rendered_monitoring(k8s_dir))
    assert ("ServiceMonitor", "gpu-operator", "nvidia-dcgm-exporter") in ours
    assert ("PrometheusRule", "gpu-operator", "railplan-gpu-alerts") in ours
    got = selected(plane.kubeconfig, served)
    print("selected by the chart-default Prometheus:", sorted(got))
    assert ours <= got, sorted(ours - got)

    # Without the label the same selection misses it: the check can fail.
    kubectl(
        plane.kubeconfig,
        ["label", "servicemonitor", "nvidia-dcgm-exporter", "-n", "gpu-operator", "release-"],
    )
    kubectl(
        plane.kubeconfig,
        ["label", "prometheusrule", "railplan-gpu-alerts", "-n", "gpu-operator", "release-"],
    )
    missed = ours - selected(plane.kubeconfig, served)
    print("without the release label, not selected:", sorted(missed))
    assert missed == {
        ("ServiceMonitor", "gpu-operator", "nvidia-dcgm-exporter"),
        ("PrometheusRule", "gpu-operator", "railplan-gpu-alerts"),
    }


# --- (2) the loop: a real Prometheus, the rendered rules and the ScaledObject's query -----------

DEPLOYMENT_RS = "llm-server-7d9c5b8f6"  # a ReplicaSet of Deployment llm-server (hash alphabet)
SUFFIXES = [f"{a}{b}x2k" for a in "bcdfghjklm" for b in "npqrstvwxz"]  # pod name suffixes


def _serving_pods(
    replicas: int, load: float, decoy: float = 0.0
) -> tuple[promloop.Series, promloop.Series]:
    """dcgm-exporter's and kube-state-metrics' series for `replicas` pods at `load` each
    (one 1g.10gb MIG instance a pod), plus a decoy: a Job's pod named like the Deployment's."""
    dcgm: promloop.Series = {}
    ksm: promloop.Series = {}
    pods = [(f"{DEPLOYMENT_RS}-{SUFFIXES[i]}", load) for i in range(replicas)]
    for i, (pod, value) in enumerate([*pods, ("llm-server-2-bcdfg", decoy)]):
        dcgm |= series(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            value,
            gpu=str(i % 8),
            GPU_I_ID=str(i // 8 + 7),
            GPU_I_PROFILE="1g.10gb",
            Hostname=f"infer{i // 56 + 1:03d}",
            namespace="serving",
            pod=pod,
            container="main",
        )
    for pod, _ in pods:
        ksm |= series(
            "kube_pod_owner",
            1,
            namespace="serving",
            pod=pod,
            owner_kind="ReplicaSet",
            owner_name=DEPLOYMENT_RS,
        )
    ksm |= series(
        "kube_pod_owner",
        1,
        namespace="serving",
        pod="llm-server-2-bcdfg",
        owner_kind="Job",
        owner_name="llm-server-2",
    )
    ksm |= series(
        "kube_replicaset_owner",
        1,
        namespace="serving",
        replicaset=DEPLOYMENT_RS,
        owner_kind="Deployment",
        owner_name="llm-server",
    )
    return dcgm, ksm


def _training_gpus(util: float, xid: bool) -> promloop.Series:
    """A research pod's whole GPU at `util` %, an unallocated GPU at 0 %, and an XID."""
    out = series(
        "DCGM_FI_DEV_GPU_UTIL",
        util,
        gpu="0",
        Hostname="train001",
        namespace="research",
        pod="train-0",
        container="main",
    )
    out |= series("DCGM_FI_DEV_GPU_UTIL", 0.0, gpu="1", Hostname="train001")
    if xid:
        out |= series("DCGM_EXP_XID_ERRORS_COUNT", 1.0, gpu="1", Hostname="train001", xid="79")
    return out


def _wait_value(prom: promloop.Prometheus, expr: str, want: float, timeout_s: float = 30.0) -> None:
    deadline, got = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        got = prom.value(expr)
        if got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            return
        time.sleep(0.5)
    raise AssertionError(f"{expr} did not become {want} within {timeout_s:.0f} s (last {got})")


def test_the_scaled_object_follows_the_load_and_the_alerts_fire(tmp_path: Path) -> None:
    k8s_dir = apply.render(apply.TENANTS_SPEC, tmp_path / "root")
    objects = rendered_monitoring(k8s_dir)
    (scaled,) = [
        d
        for p in sorted(k8s_dir.glob("*scaledobject*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d
    ]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["metricType"] == "Value"
    query, target = trigger["metadata"]["query"], float(trigger["metadata"]["threshold"])
    low, high = scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]
    monitor = objects[("ServiceMonitor", "gpu-operator", "nvidia-dcgm-exporter")]
    (endpoint,) = monitor["spec"]["endpoints"]
    groups = [
        g
        for (kind, _, _), o in objects.items()
        if kind == "PrometheusRule"
        for g in o["spec"]["groups"]
    ]
    dcgm, ksm = promloop.Exporter(), promloop.Exporter()
    jobs = [
        promloop.scrape_job(
            "serviceMonitor/gpu-operator/nvidia-dcgm-exporter/0", dcgm.port, endpoint
        ),
        promloop.scrape_job("kube-state-metrics", ksm.port, {"honorLabels": True}),
    ]
    trace: list[str] = []
    try:
        with promloop.running(tmp_path / "prom", jobs, groups) as prom:
            replicas = low
            for load in (6.0,) * 4 + (40.0,) * 4 + (1.5,) * 3:
                per_pod = min(1.0, load / replicas)  # the load spread over the running pods
                dcgm.data, ksm.data = _serving_pods(replicas, per_pod)
                dcgm.data |= _training_gpus(3.0, xid=False)
                _wait_value(prom, query, per_pod)
                value = prom.value(query)
                assert value is not None
                if not trace:  # the pod-name regex alone would count the Job's pod too
                    alone = prom.value(query.split(" and on ")[0] + ")")
                    print(f"without the ownership join: {alone:.3f} instead of {value:.3f}")
                    assert alone is not None and alone < value
                new = promloop.hpa_replicas(replicas, value, target, low, high)
                trace.append(
                    f"load {load:4.1f}: {replicas:2d} pods at {value:.3f} -> {new:2d} replicas"
                )
                replicas = new
            print("\n".join(trace))
            health = {r["name"]: r["health"] for r in prom.rules()}  # evaluated by now
            assert len(health) == 8 and set(health.values()) == {"ok"}, health
            steps = [int(t.split("-> ")[1].split()[0]) for t in trace]
            assert steps[3] == 10  # 6 engines' load settles at 10 pods of 0.6
            assert steps[7] == high  # 40 engines' load wants more than the rendered maximum
            assert steps[-1] == 3  # and back down: 1.5 engines' load on 3 pods of 0.5
            # The alerts on the rendered rules: the held GPU at 3 % and the Job pod's idle
            # slice are pending (for: 2h), the unallocated GPU is not; an XID error fires at
            # once; every GPU busy is quiet.
            states = _wait_states(prom, {"GPUIdle": "pending"})
            idle = _wait_idle(prom, {"train-0", "llm-server-2-bcdfg"})
            print("GPUIdle pending for:", idle)
            assert states["GPUXidError"] == "inactive"
            dcgm.data, ksm.data = _serving_pods(3, 0.9, decoy=0.9)
            dcgm.data |= _training_gpus(90.0, xid=True)
            states = _wait_states(prom, {"GPUIdle": "inactive", "GPUXidError": "firing"})
            print("alert states:", json.dumps(states, sort_keys=True))
            quiet = {k for k, v in states.items() if k not in ("GPUXidError",) and v != "inactive"}
            assert quiet == set(), states
    finally:
        dcgm.close()
        ksm.close()


def _wait_states(
    prom: promloop.Prometheus, want: dict[str, str], timeout_s: float = 30.0
) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        states = prom.alert_states()
        if all(states.get(k) == v for k, v in want.items()):
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"alert states {states}, wanted {want}")
        time.sleep(0.5)


def _wait_idle(prom: promloop.Prometheus, want: set[str], timeout_s: float = 30.0) -> list[str]:
    """The pods GPUIdle is active for (the rules API), once they are `want`."""
    deadline = time.monotonic() + timeout_s
    while True:
        (rule,) = [r for r in prom.rules() if r["name"] == "GPUIdle"]
        pods = sorted(a["labels"].get("pod", "") for a in rule.get("alerts", []))
        if set(pods) == want and all(a["state"] == "pending" for a in rule["alerts"]):
            return pods
        if time.monotonic() > deadline:
            raise AssertionError(f"GPUIdle active for {pods}, wanted {sorted(want)}")
        time.sleep(0.5)
