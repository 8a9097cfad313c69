"""The Kubernetes twin: rendered manifests against a real API server (tests/k8s_twin).

A real etcd, kube-apiserver, kube-controller-manager and kube-scheduler at the pinned release
(built by ``make k8s-twin-build`` into a cache outside the checkout), the CRDs of Volcano,
Kueue, KEDA, the GPU Operator and the Prometheus operator from those projects' sources, and
each default spec's ``files/k8s/`` tree applied server-side in its README's order on an empty
cluster. ``make k8s-twin`` runs this module (RAILPLAN_K8S_TWIN=1); elsewhere it skips, saying
why; with RAILPLAN_K8S_TWIN=1 under CI=true, binaries that are not built fail it instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s_twin import apply, versions
from tests.k8s_twin.control_plane import ControlPlane
from tests.k8s_twin.kubectl import kubectl, kubectl_run
from tests.k8s_twin.scenario import plane_with_crds

CI_MINUTES = 6  # what the module needs in CI, set-up included (tests/conftest.py)
_missing = versions.skip_module_unless_runnable("k8s-twin", controllers=False)

# The refusals today's renderer draws from the real API server: (spec, kind, name) ->
# a piece of the server's message. Listed so the test fails both on a new refusal and when
# one of these is fixed (then delete its entry).
KNOWN_REFUSALS: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane with every CRD installed, stopped (and checked gone) afterwards."""
    assert not _missing, f"binaries not built in {versions.bin_dir()}: {_missing}"
    with plane_with_crds(tmp_path_factory.mktemp("k8s-twin")) as cp:
        yield cp


@pytest.fixture
def fresh_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    """An empty control plane of its own (the install order must work from nothing)."""
    with plane_with_crds(tmp_path / "plane") as cp:
        yield cp


def test_control_plane_is_the_pinned_release(plane: ControlPlane) -> None:
    assert kubectl(plane.kubeconfig, ["get", "--raw", "/readyz"]).strip() == "ok"
    version = json.loads(kubectl(plane.kubeconfig, ["version", "-o", "json"]))
    assert version["serverVersion"]["gitVersion"] == versions.KUBERNETES_VERSION
    # The controller manager and scheduler are up and talking to the API server.
    for name in ("kube-controller-manager", "kube-scheduler"):
        assert plane._ours(name), f"{name} is not running"
    sa = kubectl_run(plane.kubeconfig, ["get", "serviceaccount", "default", "-n", "default"])
    assert sa.returncode == 0 or "NotFound" in sa.stderr


def test_every_rendered_kind_is_served(plane: ControlPlane) -> None:
    served = set(kubectl(plane.kubeconfig, ["api-resources", "-o", "name"]).split())
    wanted = {
        "queues.scheduling.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "hypernodes.topology.volcano.sh",
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "topologies.kueue.x-k8s.io",
        "workloadpriorityclasses.kueue.x-k8s.io",
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
        "scaledobjects.keda.sh",
        "clusterpolicies.nvidia.com",
    }
    assert wanted <= served, f"not served: {sorted(wanted - served)}"


@pytest.mark.parametrize(
    "spec", apply.DEFAULT_SPECS, ids=lambda s: str(s).replace(str(apply.ROOT) + "/", "")
)
def test_rendered_manifests_apply_on_an_empty_cluster(
    fresh_plane: ControlPlane, spec: Path, tmp_path: Path
) -> None:
    k8s_dir = apply.render(apply.materialise(spec, tmp_path), tmp_path / "root")
    results = apply.apply_tree(fresh_plane.kubeconfig, k8s_dir)
    label = str(spec).replace(str(apply.ROOT) + "/", "")
    refused = {(label, r.kind, r.name): r.message for r in results if not r.accepted}
    expected = {k: v for k, v in KNOWN_REFUSALS.items() if k[0] == label}
    assert set(refused) == set(expected), "refusals:\n" + "\n".join(
        f"{k}: {m}" for k, m in refused.items()
    )
    for key, piece in expected.items():
        assert piece in refused[key]
    # Every object of the tree is on the server now (`-f DIR` reads no subfolder: the
    # examples were a dry run).
    on_server = kubectl(fresh_plane.kubeconfig, ["get", "-f", str(k8s_dir), "-o", "name"]).split()
    applied = [r for r in results if r.step != "examples (dry run)"]
    assert len(on_server) == len(applied) > 0


def _first(k8s_dir: Path, filename: str, kind: str) -> dict[str, Any]:
    docs = [
        d for d in yaml.safe_load_all((k8s_dir / filename).read_text()) if d and d["kind"] == kind
    ]
    return dict(docs[0])


def _apply_altered(
    plane: ControlPlane, tmp_path: Path, obj: dict[str, Any], name: str, spec: dict[str, Any]
) -> apply.ObjectResult:
    """Apply ``obj`` renamed to ``name`` with ``spec`` through the twin's kubectl."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**obj, "metadata": {"name": name}, "spec": spec}))
    (result,) = apply.apply_file(plane.kubeconfig, path, "altered")
    print(result.message)  # the server's own words, shown by `make k8s-twin` (-rA)
    return result


@pytest.fixture(scope="module")
def volcano_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("render")
    return apply.render(apply.TENANTS_SPEC, root)


def test_a_broken_queue_is_refused_with_the_servers_message(
    plane: ControlPlane, volcano_tree: Path, tmp_path: Path
) -> None:
    queue = _first(volcano_tree, "13-queue.yaml", "Queue")
    result = _apply_altered(plane, tmp_path, queue, "broken", {**queue["spec"], "weight": 70000})
    assert not result.accepted
    assert "spec.weight" in result.message and "65535" in result.message, result.message


def test_an_unknown_field_is_refused_not_pruned(
    plane: ControlPlane, volcano_tree: Path, tmp_path: Path
) -> None:
    """kubectl's strict field validation: a misspelled field is an error, where the server
    alone would prune it from a custom resource without a word."""
    queue = _first(volcano_tree, "13-queue.yaml", "Queue")
    spec = {**queue["spec"], "reclaimabel": True}
    result = _apply_altered(plane, tmp_path, queue, "misspelled", spec)
    assert not result.accepted
    assert "reclaimabel" in result.message, result.message


def test_a_hypernode_breaking_its_cel_rule_is_refused(
    plane: ControlPlane, volcano_tree: Path, tmp_path: Path
) -> None:
    node = _first(volcano_tree, "12-hypernode.yaml", "HyperNode")
    selector = {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}
    spec = {**node["spec"], "members": [{"type": "Node", "selector": selector}]}
    result = _apply_altered(plane, tmp_path, node, "broken", spec)
    assert not result.accepted
    assert "Only one of ExactMatch, RegexMatch, or LabelMatch" in result.message, result.message


def test_the_server_defaults_what_the_manifest_leaves_out(
    plane: ControlPlane, volcano_tree: Path, tmp_path: Path
) -> None:
    queue = _first(volcano_tree, "13-queue.yaml", "Queue")
    spec = {key: value for key, value in queue["spec"].items() if key != "weight"}
    result = _apply_altered(plane, tmp_path, queue, "defaulted", spec)
    assert result.accepted, result.message
    got = json.loads(kubectl(plane.kubeconfig, ["get", "queue", "defaulted", "-o", "json"]))
    assert got["spec"]["weight"] == 1  # the CRD schema's default, filled in by the server
    assert got["spec"]["deserved"] == spec["deserved"]
