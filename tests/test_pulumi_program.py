"""The Pulumi program (``__main__.py``) under Pulumi's mock runtime, for every example.

No Pulumi CLI, cluster or cloud account exists here: `tests.pulumi_mocks` answers each
registration with its inputs (Pulumi's documented unit-test pattern). The Kubernetes target
must declare exactly the objects `railplan render` writes under ``files/k8s/``, object for
object; the AWS target one instance per planned server. A spec the program cannot provision
stops it with one clear line (a Pulumi RunError: no stack trace), not a half-declared stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from infra.catalog import load_catalog
from infra.render.tree import render_tree
from infra.spec import load_spec
from infra.topology import expand

from .k8s_validation import manifest_problems
from .pulumi_mocks import ROOT, RecordingMocks, run_program

EXAMPLES = ROOT / "examples"
# Every Kubernetes example, and the design document's sketch (Volcano, tenants, MIG schedule).
K8S_EXAMPLES = [
    str(p)
    for p in [*sorted(EXAMPLES.glob("*.yaml")), ROOT / "tests" / "data" / "design-sketch.yaml"]
    if load_spec(p).spec.scheduler.kind == "kubernetes"
]


def _numbers_as_floats(value: Any) -> Any:
    """Mock outputs turn integers into floats; compare both sides that way."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict):
        return {k: _numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    return value


def _type_token(obj: dict[str, Any]) -> str:
    api = "core/v1" if obj["apiVersion"] == "v1" else obj["apiVersion"]
    return f"kubernetes:{api}:{obj['kind']}"


def _rendered_manifests(spec_file: Path) -> list[dict[str, Any]]:
    spec = load_spec(spec_file).spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    prefix = f"inventories/{spec.name}/files/k8s/"
    docs: list[dict[str, Any]] = []
    for path, data in tree.items():
        name = path.removeprefix(prefix)
        if path.startswith(prefix) and "/" not in name and name.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(data) if d]
    return docs


def _declared_objects(mocks: RecordingMocks) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for r in mocks.resources:
        if r.typ.startswith("kubernetes:") and r.typ != "kubernetes:helm.sh/v3:Release":
            meta = r.inputs["metadata"]
            out[(r.typ, meta.get("namespace", ""), meta["name"])] = r.inputs
    return out


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_kubernetes_target_declares_what_render_writes(example: str) -> None:
    mocks = run_program({"railplan:spec": example, "railplan:target": "kubernetes"})
    rendered = _rendered_manifests(Path(example))
    assert rendered and manifest_problems(rendered) == []
    declared = _declared_objects(mocks)
    keys = [
        (_type_token(o), o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in rendered
    ]
    assert len(keys) == len(set(keys)), "two rendered objects share kind, namespace and name"
    assert sorted(declared) == sorted(keys)
    for key, obj in zip(keys, rendered, strict=True):
        assert _numbers_as_floats(declared[key]) == _numbers_as_floats(obj), key


@pytest.mark.parametrize("example", K8S_EXAMPLES, ids=lambda p: Path(p).stem)
def test_releases_leave_the_driver_to_ansible(example: str) -> None:
    mocks = run_program({"railplan:spec": example, "railplan:target": "kubernetes"})
    releases = {r.inputs["name"]: r for r in mocks.of_type("kubernetes:helm.sh/v3:Release")}
    assert "gpu-operator" in releases
    gpu = releases["gpu-operator"]
    assert gpu.inputs["values"]["driver"]["enabled"] is False, gpu.name
    assert gpu.inputs["repositoryOpts"]["repo"].startswith("https://"), gpu.name


def test_tenants_example_gets_cronjobs_hypernodes_queues_and_no_wildcard_rbac() -> None:
    spec = load_spec(EXAMPLES / "k8s-tenants.yaml").spec
    plan = expand(spec, load_catalog())
    mocks = run_program({"railplan:spec": str(EXAMPLES / "k8s-tenants.yaml")})
    cronjobs = mocks.of_type("kubernetes:batch/v1:CronJob")
    schedule = spec.node_groups[1].mig_schedule
    assert schedule is not None and len(cronjobs) == len(schedule.changes)
    assert {c.inputs["spec"]["timeZone"] for c in cronjobs} == {"Europe/Berlin"}
    hypernodes = mocks.of_type("kubernetes:topology.volcano.sh/v1alpha1:HyperNode")
    tier1 = [h for h in hypernodes if h.inputs["spec"]["tier"] == 1]
    selected = [
        m["selector"]["labelMatch"]["matchLabels"]["railplan.dev/su"]
        for h in tier1
        for m in h.inputs["spec"]["members"]
    ]
    assert sorted(selected) == sorted({s.su for s in plan.servers if s.su})
    queues = mocks.of_type("kubernetes:scheduling.volcano.sh/v1beta1:Queue")
    assert sorted(q.inputs["metadata"]["name"] for q in queues) == ["research", "serving"]
    for role in mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"):
        for rule in role.inputs["rules"]:
            assert "*" not in repr(rule), role.name


def test_an_ngc_key_is_a_pulumi_secret_and_never_rendered() -> None:
    key = "nvapi-0123-not-a-real-key"
    config = {
        "railplan:spec": str(EXAMPLES / "a100-lab-mig.yaml"),
        "railplan:ngcApiKey": key,
    }
    mocks = run_program(config, secrets=("railplan:ngcApiKey",))
    (secret,) = mocks.of_type("kubernetes:core/v1:Secret")
    assert secret.inputs["metadata"]["namespace"] == "gpu-operator", secret.name
    releases = {r.inputs["name"]: r for r in mocks.of_type("kubernetes:helm.sh/v3:Release")}
    values = releases["gpu-operator"].inputs["values"]
    assert values["operator"]["imagePullSecrets"] == ["ngc-registry"]
    assert values["validator"]["imagePullSecrets"] == ["ngc-registry"]
    assert values["driver"] == {"enabled": False}  # the rest of the values untouched
    without = run_program({"railplan:spec": config["railplan:spec"]})
    plain = {r.inputs["name"]: r for r in without.of_type("kubernetes:helm.sh/v3:Release")}
    assert "operator" not in plain["gpu-operator"].inputs["values"]
    spec = load_spec(EXAMPLES / "a100-lab-mig.yaml").spec
    catalog = load_catalog()
    tree = render_tree(spec, catalog, expand(spec, catalog))
    assert not any(key.encode() in data for data in tree.values())


def test_aws_target_declares_one_instance_per_planned_server() -> None:
    spec_file = EXAMPLES / "aws-p4d.yaml"
    config = {
        "railplan:spec": str(spec_file),
        "railplan:target": "aws",
        "railplan:availabilityZone": "us-east-1a",
        "railplan:amiId": "ami-0123456789abcdef0",
    }
    mocks = run_program(config)
    plan = expand(load_spec(spec_file).spec, load_catalog())
    instances = mocks.of_type("aws:ec2/instance:Instance")
    assert sorted(i.inputs["tags"]["Name"] for i in instances) == sorted(
        s.name for s in plan.servers
    )
    (template,) = mocks.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    interfaces = template.inputs["networkInterfaces"]
    assert len(interfaces) == 4 and {i["interfaceType"] for i in interfaces} == {"efa"}


AWS_CONFIG = {
    "railplan:spec": str(EXAMPLES / "aws-p4d.yaml"),
    "railplan:target": "aws",
    "railplan:availabilityZone": "us-east-1a",
    "railplan:amiId": "ami-0123456789abcdef0",
}


def test_aws_target_routes_out_through_a_nat_and_builds_no_bastion_unasked() -> None:
    mocks = run_program(AWS_CONFIG)
    assert len(mocks.of_type("aws:ec2/internetGateway:InternetGateway")) == 1
    (nat,) = mocks.of_type("aws:ec2/natGateway:NatGateway")
    (public,) = [r for r in mocks.of_type("aws:ec2/subnet:Subnet") if r.name.endswith("-public")]
    assert nat.inputs["subnetId"] == f"{public.name}_id", nat.name
    groups = [r.name for r in mocks.of_type("aws:ec2/securityGroup:SecurityGroup")]
    assert not any("bastion" in g or g.endswith("-ssh") for g in groups), groups


def test_aws_target_bastion_from_config() -> None:
    cidrs = ["203.0.113.7/32", "198.51.100.0/24"]
    mocks = run_program({**AWS_CONFIG, "railplan:bastionCidrs": json.dumps(cidrs)})
    plan = expand(load_spec(EXAMPLES / "aws-p4d.yaml").spec, load_catalog())
    instances = mocks.of_type("aws:ec2/instance:Instance")
    (bastion,) = [i for i in instances if i.inputs["tags"].get("railplan:role") == "bastion"]
    assert len(instances) == len(plan.servers) + 1
    assert bastion.inputs["associatePublicIpAddress"] is True, bastion.name
    groups = {r.name: r for r in mocks.of_type("aws:ec2/securityGroup:SecurityGroup")}
    (rule,) = groups[f"{plan.name}-bastion"].inputs["ingress"]
    assert rule["cidrBlocks"] == cidrs, rule


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"railplan:spec": "examples/dgx-h100-superpod.yaml"}, "scheduler.kind is slurm"),
        ({"railplan:spec": "examples/aws-p4d.yaml", "railplan:target": "gcp"}, "railplan:target"),
        ({"railplan:spec": "tests/corpus/lint/mig-4g-4g.yaml"}, "fails railplan lint"),
        ({"railplan:spec": "no/such/spec.yaml"}, "cannot read file"),
        (
            {
                "railplan:spec": "examples/dgx-h100-superpod.yaml",
                "railplan:target": "aws",
                "railplan:availabilityZone": "us-east-1a",
                "railplan:amiId": "ami-0123456789abcdef0",
            },
            "is not an AWS instance type",
        ),
        (
            {
                "railplan:spec": "examples/aws-p4d.yaml",
                "railplan:target": "aws",
                "railplan:availabilityZone": "us-east-1a",
                "railplan:amiId": "ami-0123456789abcdef0",
                "railplan:bastionCidrs": '["0.0.0.0/0"]',
            },
            "whole internet",
        ),
        (
            {
                "railplan:spec": "examples/aws-p4d.yaml",
                "railplan:target": "aws",
                "railplan:availabilityZone": "us-east-1a",
                "railplan:amiId": "ami-0123456789abcdef0",
                "railplan:bastionCidrs": '"203.0.113.7/32"',
            },
            "must be a list of CIDR strings",
        ),
    ],
)
def test_specs_the_program_cannot_provision_stop_it_with_one_clear_error(
    config: dict[str, str], message: str
) -> None:
    absolute = {**config, "railplan:spec": str(ROOT / config["railplan:spec"])}
    with pytest.raises(pulumi.RunError, match=message):
        run_program(absolute)
