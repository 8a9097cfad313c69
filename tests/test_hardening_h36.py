"""Hardening of names, references and layouts: one regression test per break.

1. ``train --tp 8 --pp 1 --virtual 4`` was timed as "PP 1 (x4 interleaved)": Megatron-LM
   refuses interleaved stages without pipeline parallelism (`check_layout` lacked the rule).
2. A Slurm node group named ``default`` rendered ``PartitionName=default``, slurm.conf's
   template line: lint RP006.
3. Hostnames with text after the index rendered ``dgx[001-002]-ib``, which slurmctld refuses
   (tests/test_render_files.py and tests/test_slurmctld.py).
4. Tenants named like a system namespace got a default-deny NetworkPolicy and a GPU quota
   there (lint RP074, one list in `infra.namespaces`); the KEDA query's ``llm-server-.*``
   also averaged another Deployment's pods.
5. ``rack_class: liqiud`` made lint, render and report exit 3 (KeyError): the reference was
   checked only by planning, which plan and budget do first; ``dgx-a100`` was offered
   ``dgx-h100`` rather than the ids it starts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.train_job import Layout
from infra.budget.train_model import PRESETS
from infra.budget.train_plan import build_job, train
from infra.budget.train_request import TrainRequest
from infra.budget.train_rules import check_layout
from infra.catalog import Catalog
from infra.errors import InputError, spelling_hint
from infra.k8s import build_kubernetes
from infra.lint.engine import all_rules
from infra.lint.finding import Severity
from infra.namespaces import (
    DEPENDENCY_NAMESPACES,
    INGRESS_NAMESPACE,
    KUBERNETES_NAMESPACES,
    RAILPLAN_NAMESPACES,
    reserved_namespace,
)
from infra.spec import SpecValidationError, load_spec_text
from infra.spec.base import DNS_LABEL, GROUP_NAME
from infra.topology import expand

from .conftest import ROOT, lint_text
from .test_cli import railplan
from .test_k8s_keda_query import Pod, mean_seen_by_keda

CLUSTER = "name: t\nnode_groups: [{name: gpu, node: dgx-h100, count: 16}]\n"
LLAMA = PRESETS["llama2-70b"]


# --- 1. interleaving needs a pipeline -----------------------------------------------------------


def test_interleaving_without_a_pipeline_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    spec = load_spec_text(CLUSTER).spec
    request = TrainRequest(128, LLAMA, 256, tp=8, pp=1, virtual=4)
    with pytest.raises(InputError) as caught:
        train(spec, catalog, request)
    assert caught.value.path == "--virtual" and "pipeline parallelism" in caught.value.message
    job = build_job(spec, catalog, request)[0]
    with pytest.raises(InputError, match="PP 1 has a single stage"):
        check_layout(job, Layout(8, 1, 16, 1, virtual=4))  # no search may time it either
    # the same interleaving on a pipeline is Megatron's and stays
    piped = train(spec, catalog, TrainRequest(128, LLAMA, 256, tp=8, pp=2, virtual=2))
    assert (piped.result.layout.pp, piped.result.layout.virtual) == (2, 2)
    (tmp_path / "s.yaml").write_text(CLUSTER)
    args = ["--gpus", "128", "--model", "llama2-70b", "--global-batch", "256"]
    cli = railplan("train", str(tmp_path / "s.yaml"), *args, "--tp", "8", "--pp", "1",
                   "--virtual", "4")  # fmt: skip
    assert cli.returncode == 2 and cli.stdout == "", cli
    assert cli.stderr.count("\n") == 1 and "[--virtual]" in cli.stderr and "hint:" in cli.stderr


# --- 2. the name `default`: Slurm's DEFAULT template and the fabric's default partition ----------

SLURM = "name: lab\nscheduler: {kind: slurm}\nsoftware: {dcgm: 4.2.3}\nnode_groups:\n"


def test_a_slurm_group_named_default_is_refused() -> None:
    text = SLURM + "  - {name: default, node: dgx-h100, count: 2}\n"
    (finding,) = [f for f in lint_text(text) if f.severity is Severity.ERROR]
    assert (finding.rule, finding.path, finding.line) == ("RP006", "node_groups[0].name", 5)
    assert "rename the group" in finding.hint and "DEFAULT template" in finding.message
    renamed = [f for f in lint_text(text.replace("default", "gpu")) if f.rule == "RP006"]
    assert renamed == []


def test_a_group_named_default_is_refused_on_kubernetes_too() -> None:
    """The plan names the fabric's default partition (P_Key 0x7fff) `default`; a group of that
    name took its key, and the partitions file lost the default partition."""
    text = "name: lab\nnode_groups:\n  - {name: default, node: dgx-h100, count: 2}\n"
    (finding,) = [f for f in lint_text(text) if f.rule == "RP006"]
    assert "0x7fff" in finding.message and "Slurm" not in finding.message


@settings(max_examples=200, deadline=None)
@given(name=st.from_regex(GROUP_NAME, fullmatch=True) | st.just("default"))
def test_rp006_fires_for_default_and_only_for_it(name: str) -> None:
    text = SLURM + f"  - {{name: {name}, node: dgx-h100, count: 2}}\n"
    fired = [f.path for f in lint_text(text, select=("RP006",))]
    assert fired == (["node_groups[0].name"] if name == "default" else [])


# --- 4. tenants and system namespaces -----------------------------------------------------------

TENANTS = (
    "name: lab\nnode_groups:\n  - {name: gpu, node: dgx-h100, count: 4}\n"
    "fabrics: {compute: {switch: qm9700}}\nscheduler:\n  batch: kueue\n  tenants:\n"
    "    - {name: %s, gpus: 8}\n"
)
BRIEF = [
    "kube-system", "default", "gpu-operator", "monitoring", "railplan-system", "kube-public",
    "kube-node-lease", "kube-flannel", "rdma-device-plugin", "volcano-system",
]  # fmt: skip


@pytest.mark.parametrize("name", BRIEF)
def test_a_tenant_named_like_a_system_namespace_is_refused(name: str) -> None:
    (finding,) = [f for f in lint_text(TENANTS % name) if f.severity is Severity.ERROR]
    assert (finding.rule, finding.path) == ("RP074", "scheduler.tenants[0].name")
    assert finding.line == 8 and "rename the tenant" in finding.hint


def test_a_reserved_tenant_renders_nothing(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(TENANTS % "kube-system")
    result = railplan("render", str(tmp_path / "s.yaml"), "--root", str(tmp_path / "out"))
    assert result.returncode == 1 and "RP074" in result.stderr, result
    assert not (tmp_path / "out").exists()


@settings(max_examples=200, deadline=None)
@given(
    name=st.from_regex(DNS_LABEL, fullmatch=True)
    | st.sampled_from([*RAILPLAN_NAMESPACES, *DEPENDENCY_NAMESPACES, *KUBERNETES_NAMESPACES])
    | st.from_regex(r"kube-[a-z0-9]{1,8}", fullmatch=True)
)
def test_no_reserved_namespace_is_ever_a_tenant(name: str) -> None:
    fired = [f.path for f in lint_text(TENANTS % name, select=("RP074",))]
    names = {*RAILPLAN_NAMESPACES, *DEPENDENCY_NAMESPACES, *KUBERNETES_NAMESPACES}
    reserved = name in names or name.startswith("kube-")
    assert fired == (["scheduler.tenants[0].name"] if reserved else [])
    assert (reserved_namespace(name) is not None) == reserved


def test_every_namespace_railplan_renders_into_is_reserved(catalog: Catalog) -> None:
    # the one list (infra.namespaces) is the builders' own: nothing renders outside it, and
    # the policies' peers outside it are the cluster's (kube-system's DNS)
    base = yaml.safe_load((ROOT / "examples" / "k8s-tenants.yaml").read_text())
    used: set[str] = set()
    for batch in ("kueue", "volcano"):
        data = {**base, "scheduler": {**base["scheduler"], "batch": batch}}
        spec = load_spec_text(yaml.safe_dump(data)).spec
        built = build_kubernetes(spec, expand(spec, catalog), catalog)
        used |= {r.namespace for r in built.releases}
        used |= {o["metadata"].get("namespace") or "" for o in built.objects} - {""}
        used |= {o["metadata"]["name"] for o in built.objects if o["kind"] == "Namespace"}
        used |= set(_namespace_peers(built.objects))
        used |= set(_named_in_text(built.objects))
        used -= {t.name for t in spec.scheduler.tenants}
    assert used - set(KUBERNETES_NAMESPACES) == {*RAILPLAN_NAMESPACES, INGRESS_NAMESPACE}
    (rule,) = [r for r in all_rules() if r.id == "RP074"]
    assert all(
        n in rule.doc
        for n in (*RAILPLAN_NAMESPACES, *DEPENDENCY_NAMESPACES, *KUBERNETES_NAMESPACES)
    )


@pytest.mark.parametrize(
    ("batch", "name", "refused"),
    [
        ("kueue", "kueue-system", True),
        ("volcano", "kueue-system", True),
        ("kueue", "keda", True),
        ("volcano", "root", True),
        ("volcano", "default", True),
        ("kueue", "root", False),  # a Kueue ClusterQueue or namespace named root harms nothing
        ("volcano", "kueue", False),
        ("volcano", "research", False),
    ],
)
def test_controller_namespaces_and_volcano_queues_are_refused(
    batch: str, name: str, refused: bool
) -> None:
    text = (TENANTS % name).replace("batch: kueue", f"batch: {batch}")
    found = [f for f in lint_text(text) if f.rule == "RP074"]
    assert [(f.path, f.line) for f in found] == (
        [("scheduler.tenants[0].name", 8)] if refused else []
    )
    if refused and name == "root":
        assert "Volcano" in found[0].message and "root" in found[0].hint


# A namespace named inside a value: a PromQL matcher or a Service's DNS name.
_NAMED = re.compile(r'namespace="([a-z0-9-]+)"|[a-z0-9-]+\.([a-z0-9-]+)\.svc\b')


def _named_in_text(tree: object) -> list[str]:
    """Every namespace a string anywhere in ``tree`` names (queries, addresses, scripts)."""
    if isinstance(tree, str):
        return [a or b for a, b in _NAMED.findall(tree)]
    if isinstance(tree, dict):
        return [n for v in tree.values() for n in _named_in_text(v)]
    if isinstance(tree, list):
        return [n for v in tree for n in _named_in_text(v)]
    return []


def _namespace_peers(tree: object) -> list[str]:
    """Every namespace a NetworkPolicy selects by name, anywhere in ``tree``."""
    if isinstance(tree, dict):
        found = [v for k, v in tree.items() if k == "kubernetes.io/metadata.name"]
        return found + [n for v in tree.values() for n in _namespace_peers(v)]
    if isinstance(tree, list):
        return [n for v in tree for n in _namespace_peers(v)]
    return []


# --- 4. the KEDA query takes the Deployment's own pods only ------------------------------------


def test_the_keda_query_averages_only_the_deployments_pods(tmp_path: Path) -> None:
    """Prometheus itself evaluates the rendered query (promtool's rule unit tests).

    Pods of ``llm-server`` load their GPUs at 80 and 60; ``llm-server-canary`` (a name the
    old ``llm-server-.*`` took in) idles at 0. The mean KEDA sees must be 70.
    """
    pods = [
        Pod("llm-server-7c9f5d7b96-x2k4p", 80, "ReplicaSet", "llm-server-7c9f5d7b96"),
        Pod("llm-server-7c9f5d7b96-q9w8z", 60, "ReplicaSet", "llm-server-7c9f5d7b96"),
        Pod("llm-server-canary-5d4f8b9c6-bcdfg", 0, "ReplicaSet", "llm-server-canary-5d4f8b9c6"),
        Pod("llm-server-canary-5d4f8b9c6-hjklm", 0, "ReplicaSet", "llm-server-canary-5d4f8b9c6"),
    ]
    owners = {
        "llm-server-7c9f5d7b96": "llm-server",
        "llm-server-canary-5d4f8b9c6": "llm-server-canary",
    }
    mean_seen_by_keda(tmp_path, pods, owners, 70, mig=False)


# --- 5. references and suggestions --------------------------------------------------------------

TYPO = """\
name: t
site:
  rack_classes:
    liquid: {power_kw: 80, units: 48, cooling: liquid}
node_groups:
  - {name: gpu, node: dgx-h100, count: 4, rack_class: liqiud}
"""


def test_an_unknown_rack_class_is_a_located_spec_error() -> None:
    with pytest.raises(SpecValidationError) as caught:
        load_spec_text(TYPO, "s.yaml")
    (error,) = caught.value.errors
    assert error.path == "node_groups[0].rack_class" and error.rule == "RP000"
    assert error.position is not None and (error.position.line, error.position.column) == (6, 43)
    assert error.hint == "did you mean 'liquid'?"


@pytest.mark.parametrize("command", ["lint", "plan", "budget", "render", "report"])
def test_every_command_refuses_an_unknown_rack_class_alike(command: str, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(TYPO)
    extra = {
        "render": ["--root", str(tmp_path / "out")],
        "report": ["-o", str(tmp_path / "r.html")],
    }
    result = railplan(command, str(spec), *extra.get(command, []))
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "internal error" not in result.stderr
    assert re.search(r"s\.yaml:6:43: error\S*: unknown rack class 'liqiud'", result.stderr)
    assert "did you mean 'liquid'?" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # nothing written


def test_a_truncated_catalog_id_suggests_the_ids_it_starts(tmp_path: Path) -> None:
    text = "name: t\nnode_groups:\n  - {name: gpu, node: dgx-a100, count: 4}\n"
    (finding,) = lint_text(text)
    assert finding.rule == "RP001"
    assert finding.hint == "did you mean 'dgx-a100-320gb' or 'dgx-a100-640gb'?"
    (tmp_path / "s.yaml").write_text(text)
    planned = railplan("plan", str(tmp_path / "s.yaml"))
    assert "did you mean 'dgx-a100-320gb' or 'dgx-a100-640gb'?" in planned.stderr
    # a prefix of several ids names them all; a typo that starts none gets the closest id;
    # a prefix of more than four ids says too little: difflib's one closest id, as before
    assert spelling_hint("dgx-h", ["dgx-h100", "dgx-h200"]) == (
        "did you mean 'dgx-h100' or 'dgx-h200'?"
    )
    assert spelling_hint("dgx-h1000", ["dgx-h100", "dgx-h200"]) == "did you mean 'dgx-h100'?"
    assert spelling_hint("d", ["d1", "d2", "d3", "d4", "d5"]).count(" or ") == 0
