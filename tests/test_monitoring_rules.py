"""One alert builder, two outputs; the k8s README installs in an order a fresh cluster takes."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.catalog import load_catalog
from infra.k8s.monitoring import ALERTS_NAME
from infra.k8s.objects import HelmRelease, KubernetesObjects, ServiceSet
from infra.render.k8s_manifests import k8s_files
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

ROOT = Path(__file__).resolve().parent.parent


def _tree(name: str) -> dict[str, str]:
    loaded = load_spec(ROOT / name)
    catalog = load_catalog()
    tree = render_tree(loaded.spec, catalog, expand(loaded.spec, catalog))
    return {path: data.decode() for path, data in tree.items()}


def test_the_rules_file_is_the_prometheusrule_group() -> None:
    tree = _tree("examples/a100-lab-mig.yaml")
    rules = yaml.safe_load(tree["inventories/a100-lab/files/monitoring/railplan-gpu.rules.yml"])
    (rule,) = [
        d
        for d in yaml.safe_load_all(tree["inventories/a100-lab/files/k8s/20-prometheusrule.yaml"])
        if d["metadata"]["name"] == ALERTS_NAME
    ]
    assert rules == {"groups": rule["spec"]["groups"]}


def test_slurm_clusters_get_the_rules_file_too() -> None:
    tree = _tree("tests/golden/inputs/h100-slurm-opensm.yaml")
    text = tree["inventories/h100-slurm/files/monitoring/railplan-gpu.rules.yml"]
    alerts = [r["alert"] for r in yaml.safe_load(text)["groups"][0]["rules"]]
    assert {"GPUIdle", "GPUXidError"} <= set(alerts)
    assert not any("/k8s/" in p for p in tree)


def test_the_readme_creates_namespaces_before_helm_installs_into_them() -> None:
    readme = _tree("examples/a100-lab-mig.yaml")["inventories/a100-lab/files/k8s/README.md"]
    namespaces = readme.index("kubectl apply -f 00-namespace.yaml")
    helm = readme.index("helm upgrade --install gpu-operator")
    rest = readme.index("`kubectl apply -f .`")
    assert namespaces < helm < rest
    # gpu-operator is declared in 00-namespace.yaml, so helm needs no --create-namespace
    assert "--namespace gpu-operator \\" in readme and "--create-namespace" not in readme


def test_helm_creates_a_namespace_no_manifest_declares() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}
    releases = tuple(
        HelmRelease(name, namespace, name, "https://charts.example", "1.0", {})
        for name, namespace in (("gpu-operator", "gpu-operator"), ("extra", "extra-system"))
    )
    k8s = KubernetesObjects(sets=(ServiceSet("gpu", releases, (ns,)),))  # type: ignore[arg-type]
    readme = k8s_files(k8s)["k8s/README.md"]
    assert "--namespace gpu-operator \\" in readme
    assert "--namespace extra-system --create-namespace \\" in readme
