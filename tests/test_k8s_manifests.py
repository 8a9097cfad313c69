"""`files/k8s/` as `railplan render` writes it: strict, ordered, self-contained, repeatable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog import load_catalog
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

from .k8s_validation import manifest_problems
from .test_pulumi_program import K8S_EXAMPLES


def k8s_tree(spec_file: str) -> dict[str, bytes]:
    spec = load_spec(spec_file).spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    prefix = f"inventories/{spec.name}/files/"
    return {
        p.removeprefix(prefix): d
        for p, d in tree.items()
        if p.startswith((f"{prefix}k8s/", f"{prefix}helm/"))
    }


def applied(files: dict[str, bytes]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(file, objects) of the files `kubectl apply -f .` reads, in its (name) order."""
    return [
        (name.removeprefix("k8s/"), [d for d in yaml.safe_load_all(data) if d])
        for name, data in sorted(files.items())
        if name.startswith("k8s/") and name.count("/") == 1 and name.endswith(".yaml")
    ]


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_manifests_are_strict_one_kind_per_file_and_alias_free(example: str) -> None:
    files = k8s_tree(example)
    for name, docs in applied(files):
        assert manifest_problems(docs) == [], name
        assert len({d["kind"] for d in docs}) == 1, f"{name} mixes kinds"
        assert name.endswith(f"-{docs[0]['kind'].lower()}.yaml"), name
    examples = [
        d
        for n, data in files.items()
        if n.startswith("k8s/examples/")
        for d in yaml.safe_load_all(data)
        if d
    ]
    assert manifest_problems(examples) == []
    assert not any(b"&id0" in data or b"*id0" in data for data in files.values())


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_every_namespace_used_is_created_before_it_is_used(example: str) -> None:
    created: set[str] = set()
    for name, docs in applied(k8s_tree(example)):
        for doc in docs:
            namespace = doc["metadata"].get("namespace")
            assert namespace is None or namespace in created, f"{name}: {namespace} not yet made"
            if doc["kind"] == "Namespace":
                created.add(doc["metadata"]["name"])


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_rendering_twice_gives_the_same_bytes(example: str) -> None:
    assert k8s_tree(example) == k8s_tree(example)


def test_helm_releases_list_every_values_file() -> None:
    files = k8s_tree(K8S_EXAMPLES[0])
    listed = yaml.safe_load(files["helm/releases.yaml"])["releases"]
    assert {f"helm/{r['values']}" for r in listed} == {
        n for n in files if n.startswith("helm/") and n != "helm/releases.yaml"
    }
    assert all(r["version"] and r["repository"].startswith("https://") for r in listed)


def test_slurm_specs_get_no_kubernetes_manifests() -> None:
    root = Path(__file__).resolve().parent.parent
    assert k8s_tree(str(root / "examples" / "dgx-h100-superpod.yaml")) == {}


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_every_yaml_under_k8s_is_a_manifest_the_shared_validator_accepts(
    example: str, tmp_path: Path
) -> None:
    # validate_crs.py reads every YAML file it is given: values files would not be manifests.
    files = {n: d for n, d in k8s_tree(example).items() if n.startswith("k8s/")}
    paths = []
    for name, data in files.items():
        if name.endswith(".yaml"):
            path = tmp_path / name.replace("/", "_")
            path.write_bytes(data)
            paths.append(str(path))
    validator = Path(__file__).resolve().parent / "schemas" / "validate_crs.py"
    done = subprocess.run(
        [sys.executable, str(validator), *paths], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
