"""Monitoring objects as a default kube-prometheus-stack reads them, and what the idle alert sees.

kube-prometheus-stack's chart defaults (``prometheus.prometheusSpec.
serviceMonitorSelectorNilUsesHelmValues``, ``podMonitorSelectorNilUsesHelmValues`` and
``ruleSelectorNilUsesHelmValues``, all true) give its Prometheus the selector
``matchLabels: {release: <helm release>}``: an object without that label is never loaded, so
no alert fires and KEDA's queries see nothing. These tests select the built objects the way
that Prometheus does.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import Catalog, load_catalog
from infra.errors import SpecError
from infra.k8s import KubeObject
from infra.k8s.build import build_kubernetes
from infra.spec import Spec, load_spec, load_spec_text
from infra.topology import expand

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES_EXAMPLES = [
    p
    for p in sorted((ROOT / "examples").glob("*.yaml"))
    if load_spec(p).spec.scheduler.kind == "kubernetes"
]
PROMETHEUS_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


@cache
def _catalog() -> Catalog:
    return load_catalog()


def _objects(spec: Spec) -> list[KubeObject]:
    catalog = _catalog()
    return build_kubernetes(spec, expand(spec, catalog), catalog).objects


def _selected(objects: list[KubeObject], release: str) -> set[tuple[str, str]]:
    """(kind, name) of the operator's objects a chart-default Prometheus of ``release`` loads."""
    return {
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if o["kind"] in PROMETHEUS_KINDS
        and o["metadata"].get("labels", {}).get("release") == release
    }


def _operator_objects(objects: list[KubeObject]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in PROMETHEUS_KINDS}


@pytest.mark.parametrize("path", KUBERNETES_EXAMPLES, ids=lambda p: p.stem)
def test_a_chart_default_kube_prometheus_stack_loads_every_monitor_and_rule(path: Path) -> None:
    objects = _objects(load_spec(path).spec)
    ours = _operator_objects(objects)
    assert ("ServiceMonitor", "nvidia-dcgm-exporter") in ours
    assert ("PrometheusRule", "railplan-gpu-alerts") in ours
    assert _selected(objects, "kube-prometheus-stack") == ours


def test_the_release_label_follows_the_specs_release_name() -> None:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "k8s-tenants.yaml").read_text())
    data["scheduler"]["monitoring"]["prometheus_release"] = "prom"
    objects = _objects(load_spec_text(yaml.safe_dump(data)).spec)
    ours = _operator_objects(objects)
    assert ("PrometheusRule", "railplan-mig-schedule") in ours
    assert _selected(objects, "prom") == ours
    assert _selected(objects, "kube-prometheus-stack") == set()


def test_a_release_name_that_is_no_label_value_is_refused() -> None:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "a100-lab-mig.yaml").read_text())
    data["scheduler"]["monitoring"] = {"prometheus_release": "kube prometheus"}
    with pytest.raises(SpecError) as refused:
        load_spec_text(yaml.safe_dump(data))
    assert refused.value.path == "scheduler.monitoring.prometheus_release"


def _object(objects: list[KubeObject], kind: str, name: str) -> KubeObject:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_only_the_exporters_labels_say_which_pod_holds_a_gpu() -> None:
    """The scrape target's pod labels are dropped, the exporter's kept (honorLabels)."""
    objects = _objects(load_spec(ROOT / "examples" / "a100-lab-mig.yaml").spec)
    (endpoint,) = _object(objects, "ServiceMonitor", "nvidia-dcgm-exporter")["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True
    dropped = [r for r in endpoint["relabelings"] if r["action"] == "labeldrop"]
    assert {"pod", "namespace", "container"} <= set(dropped[0]["regex"].split("|"))


def test_dcgm_exporter_maps_gpus_to_pods() -> None:
    spec = load_spec(ROOT / "examples" / "a100-lab-mig.yaml").spec
    catalog = _catalog()
    (operator,) = [
        r
        for r in build_kubernetes(spec, expand(spec, catalog), catalog).releases
        if r.name == "gpu-operator"
    ]
    env = {e["name"]: e["value"] for e in operator.values["dcgmExporter"]["env"]}
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"


@pytest.mark.parametrize("path", KUBERNETES_EXAMPLES, ids=lambda p: p.stem)
def test_gpu_idle_reads_only_gpus_something_holds(path: Path) -> None:
    rules = _object(_objects(load_spec(path).spec), "PrometheusRule", "railplan-gpu-alerts")
    (idle,) = [r for r in rules["spec"]["groups"][0]["rules"] if r["alert"] == "GPUIdle"]
    selectors = idle["expr"].count("{")
    assert selectors == 2 and idle["expr"].count('pod!=""') == selectors
