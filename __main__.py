"""railplan's Pulumi program: stack config -> spec -> plan -> components (see Pulumi.yaml)."""

from __future__ import annotations

import pulumi

from infra.catalog import load_catalog
from infra.errors import RailplanError
from infra.lint import lint_loaded
from infra.lint.finding import Severity
from infra.spec import LoadedSpec, load_spec
from infra.topology import expand

config = pulumi.Config("railplan")
target = config.get("target") or "kubernetes"
catalog = load_catalog()


def _checked_spec(path: str) -> LoadedSpec:
    """The spec, refused (one line per error, no stack trace) when it fails to load or lint."""
    try:
        loaded = load_spec(path)
    except RailplanError as exc:
        raise pulumi.RunError(exc.one_line()) from None
    errors = [f for f in lint_loaded(loaded, catalog) if f.severity == Severity.ERROR]
    if errors:
        lines = [f"{f.file}:{f.line}:{f.column}: error[{f.rule}] {f.message}" for f in errors]
        raise pulumi.RunError("the spec fails railplan lint:\n" + "\n".join(lines))
    return loaded


spec = _checked_spec(config.require("spec")).spec


def _bastion_cidrs() -> tuple[str, ...]:
    """``railplan:bastionCidrs``: a JSON list of CIDRs SSH to the bastion comes from, or ()."""
    value = config.get_object("bastionCidrs")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise RailplanError(
            'railplan:bastionCidrs must be a list of CIDR strings, e.g. ["203.0.113.7/32"]',
            path="railplan:bastionCidrs",
        )
    return tuple(value)


def _declare() -> None:
    """Declare the target's components (a refusal is a RailplanError, reported below)."""
    plan = expand(spec, catalog)
    if target == "kubernetes":
        from infra.k8s import build_kubernetes
        from infra.provision.kubernetes import ClusterServices, ClusterServicesArgs

        objects = build_kubernetes(spec, plan, catalog)
        ClusterServices(
            spec.name,
            ClusterServicesArgs(objects=objects, ngc_api_key=config.get_secret("ngcApiKey")),
        )
        pulumi.export("sets", [s.name for s in objects.sets])
        pulumi.export("objects", len(objects.objects))
    elif target == "aws":
        from infra.provision.aws import AwsClusterArgs, AwsGpuCluster

        cluster = AwsGpuCluster(
            spec.name,
            AwsClusterArgs(
                spec=spec,
                plan=plan,
                catalog=catalog,
                availability_zone=config.require("availabilityZone"),
                ami_id=config.require("amiId"),
                key_name=config.get("keyName"),
                bastion_cidrs=_bastion_cidrs(),
            ),
        )
        pulumi.export("hosts", cluster.hosts)  # for `railplan render --addresses`
        pulumi.export("vpc_id", cluster.vpc_id)
        if cluster.bastion_public_ip is not None:
            pulumi.export("bastion_public_ip", cluster.bastion_public_ip)  # SSH jump host
    else:
        raise RailplanError(
            f"railplan:target is {target!r}; expected kubernetes or aws", path="railplan:target"
        )


try:
    _declare()
except RailplanError as exc:
    raise pulumi.RunError(exc.one_line()) from None
