"""The Kubernetes ComponentResources under Pulumi's mock runtime (no cluster, no Pulumi CLI).

Component-level tests use a small hand-built object set; the program-level tests run the real
``__main__.py`` for the examples and compare what it declares with what `railplan render`
writes under ``files/k8s/``, object for object.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from infra.k8s import HelmRelease, KubernetesObjects, ServiceSet
from infra.spec import load_spec_text

from .pulumi_mocks import RecordingMocks

SPEC = load_spec_text("name: lab\nnode_groups: [{name: gpu, node: dgx-h100, count: 2}]\n").spec


def small_set() -> KubernetesObjects:
    from infra.k8s import kube_object

    objects = (
        kube_object("v1", "Namespace", "gpu-operator", SPEC),
        kube_object(
            "v1", "ConfigMap", "counters", SPEC, namespace="gpu-operator", data={"a.csv": "x\n"}
        ),
        kube_object(
            "scheduling.volcano.sh/v1beta1",
            "Queue",
            "research",
            SPEC,
            spec={"capability": {"nvidia.com/gpu": 8}},
        ),
    )
    release = HelmRelease(
        "gpu-operator",
        "gpu-operator",
        "gpu-operator",
        "https://helm.ngc.nvidia.com/nvidia",
        "v26.7.0",
        {"driver": {"enabled": False}},
    )
    return KubernetesObjects((ServiceSet("gpu", (release,), objects),))


def declare(objects: KubernetesObjects, **kwargs: Any) -> RecordingMocks:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="railplan", stack="test", preview=False)
    from infra.provision.kubernetes import ClusterServices, ClusterServicesArgs

    @pulumi.runtime.test  # type: ignore[misc]
    def run() -> None:
        ClusterServices("lab", ClusterServicesArgs(objects=objects, **kwargs))

    run()
    return mocks


def test_each_object_is_declared_once_as_its_typed_resource() -> None:
    mocks = declare(small_set())
    types = sorted(r.typ for r in mocks.resources)
    assert types == [
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:core/v1:Namespace",
        "kubernetes:helm.sh/v3:Release",
        "kubernetes:scheduling.volcano.sh/v1beta1:Queue",
        "railplan:kubernetes:ClusterServices",
        "railplan:kubernetes:ServiceSet",
    ]
    (config_map,) = mocks.of_type("kubernetes:core/v1:ConfigMap")
    assert config_map.name == "configmap:gpu-operator/counters"
    assert config_map.inputs["metadata"]["name"] == "counters", config_map.name
    assert config_map.inputs["data"] == {"a.csv": "x\n"}
    (release,) = mocks.of_type("kubernetes:helm.sh/v3:Release")
    assert release.inputs["name"] == "gpu-operator" and release.inputs["version"] == "v26.7.0"
    assert release.inputs["values"] == {"driver": {"enabled": False}}
    assert release.inputs["createNamespace"] is False


def test_an_ngc_key_becomes_a_secret_object_and_nothing_else() -> None:
    mocks = declare(small_set(), ngc_api_key=pulumi.Output.secret("nvapi-not-a-real-key"))
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    assert secret.inputs["type"] == "kubernetes.io/dockerconfigjson", secret.name
    others = [r for r in mocks.resources if r is not secret]
    assert "nvapi-not-a-real-key" not in repr([r.inputs for r in others])


def test_no_pull_secret_without_a_key() -> None:
    assert declare(small_set()).of_type("kubernetes:core/v1:Secret") == []


@pytest.mark.parametrize("kind", ["Namespace", "ConfigMap"])
def test_resource_names_are_kind_and_namespace_qualified(kind: str) -> None:
    from infra.provision.kubernetes import resource_name

    obj = next(o for o in small_set().objects if o["kind"] == kind)
    expected = "gpu-operator" if kind == "Namespace" else "gpu-operator/counters"
    assert resource_name(obj) == expected
