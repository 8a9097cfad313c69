"""Kubernetes manifests for `files/k8s/` (one file per kind, apply order) and `files/helm/`.

The objects come from `infra.k8s.build_kubernetes`, the builder the Pulumi program declares
too, so a GitOps user (``kubectl apply -f files/k8s/``) and a ``pulumi up`` user get the same
objects. File names carry a two-digit prefix so ``kubectl apply -f`` (which reads a
directory in name order) creates namespaces, RBAC and priority classes before what uses them.
Helm releases are written beside it, under ``files/helm/``, as their values files plus
``releases.yaml`` (chart, repository, version, namespace): values are not manifests, so
``files/k8s/`` holds nothing a manifest validator or ``kubectl apply`` would trip on. Job
templates that are examples, never applied, go to ``k8s/examples/``. YAML is block style with
multi-line strings as literal blocks, keys in the builder's order, so the same spec gives the
same bytes, and as yamllint (ansible-lint's production profile, run on the whole tree) wants it:
lists indented under their key, no line over 160 characters.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

import yaml

from infra.k8s import KubeObject, KubernetesObjects
from infra.k8s.monitoring import rules_document
from infra.spec import Spec

__all__ = ["k8s_files", "manifest_yaml", "rules_file"]

# Apply order: what others refer to first; custom resources after their prerequisites.
_KIND_ORDER = (
    "Namespace",
    "PriorityClass",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "DaemonSet",
    "ResourceQuota",
    "NetworkPolicy",
    "StorageClass",
    "HyperNode",
    "Queue",
    "Topology",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "ClusterQueue",
    "LocalQueue",
    "ServiceMonitor",
    "PrometheusRule",
    "CronJob",
    "ScaledObject",  # KEDA's CRD, and its target Deployment is the tenant's own
    # Kueue tenants' priorities: after the classes they name, and numbered after every kind
    # that was here before them (a new kind at the end renumbers no file).
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)


# A literal block keeps its lines as they are; yamllint stops at 160 characters, and a
# ConfigMap's data value (the scripts and files railplan embeds) sits 4 columns deep.
_LITERAL_MAX = 156


class _BlockDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings as literal blocks (scripts, embedded configs).

    Never anchors and aliases: a builder may share one dict between two places, and a
    manifest reader (or reviewer) should see each value written out. Sequences are indented
    under their key (yamllint's ``indent-sequences``), which PyYAML does not do by itself.
    """

    def ignore_aliases(self, data: object) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    """Multi-line text as a literal block, or folded if a line is too long for yamllint.

    A folded block reads back as the same text: PyYAML breaks only the long lines, at spaces,
    and writes each kept line break as a blank line.
    """
    style = None
    if "\n" in value:
        long = any(len(line) > _LITERAL_MAX for line in value.splitlines())
        style = ">" if long else "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def _dump(document: Any, *, sort_keys: bool = False) -> str:
    return yaml.dump(
        document, Dumper=_BlockDumper, sort_keys=sort_keys, default_flow_style=False, width=100
    )


def manifest_yaml(objects: Iterable[Any]) -> str:
    """Objects as one multi-document YAML text."""
    return "---\n" + "---\n".join(_dump(o) for o in objects)


def rules_file(spec: Spec) -> str:
    """The GPU alert rules as a Prometheus rule file (every cluster's ``files/monitoring/``)."""
    header = (
        f"# GPU alert rules of {spec.name}, rendered by railplan: the same rules as the\n"
        "# PrometheusRule railplan-gpu-alerts. Load with Prometheus's `rule_files:`; check\n"
        "# with `promtool check rules`.\n"
    )
    return header + _dump(rules_document(spec))


def _file_name(kind: str) -> str:
    rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
    return f"{rank:02d}-{kind.lower()}.yaml"


def _by_kind(objects: Iterable[KubeObject]) -> dict[str, list[KubeObject]]:
    kinds: dict[str, list[KubeObject]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds


def _releases_yaml(k8s: KubernetesObjects) -> str:
    rows = [
        {
            "name": r.name,
            "namespace": r.namespace,
            "chart": r.chart,
            "repository": r.repository,
            "version": r.version,
            "values": f"{r.name}.values.yaml",
            **({"description": r.description} if r.description else {}),
        }
        for r in k8s.releases
    ]
    header = "# helm upgrade --install NAME CHART --repo REPOSITORY --version VERSION \\\n"
    header += "#   --namespace NAMESPACE --values VALUES   (for each release below, in order)\n"
    return header + _dump({"releases": rows})


def _readme(k8s: KubernetesObjects) -> str:
    sets = ", ".join(s.name for s in k8s.sets)
    return f"""# Kubernetes cluster services (rendered by railplan)

The same objects `pulumi up` declares (Pulumi.yaml, `railplan:target: kubernetes`), for a
GitOps repository or `kubectl`. Sets: {sets}.

Apply in this order (on a fresh cluster each step needs the one before):
1. Prerequisites railplan does not install: the batch scheduler the spec names (Volcano with
   HyperNode support, or Kueue serving kueue.x-k8s.io/v1beta2) and the Prometheus operator
   CRDs (ServiceMonitor, PrometheusRule){_keda(k8s)}.
2. The namespaces: `kubectl apply -f {_file_name("Namespace")}`.
{_helm_steps(k8s)}
4. `kubectl apply -f .` here: file names are numbered so namespaces, priority classes and
   RBAC come before what uses them.

`examples/` holds job templates (gang-scheduled PodGroups) to copy; they are not applied.
Secrets (an NGC API key) are not here: Pulumi takes them as config secrets.
{_tenant_priority(k8s)}"""


def _tenant_priority(k8s: KubernetesObjects) -> str:
    """What the tenants' users set on their workloads, a paragraph for each policy rendered."""
    paragraphs = []
    for policy in (o for o in k8s.objects if o["kind"] == "ValidatingAdmissionPolicy"):
        name = policy["metadata"]["name"]
        if name.endswith("-tenant-priority"):
            paragraphs.append(
                "A workload submitted to a tenant's LocalQueue (label `kueue.x-k8s.io/queue-name`)"
                " also carries `kueue.x-k8s.io/priority-class`: the WorkloadPriorityClass of its"
                " tenant's `priority` (`<cluster>-<priority>`) or a lower one. Without it, or above"
                f" it, the API server refuses the workload (ValidatingAdmissionPolicy `{name}`),"
                " saying which class to use."
            )
        elif name.endswith("-tenant-priority-class"):
            paragraphs.append(
                "In a tenant's namespace every pod, and the pod template of a Job, Deployment or"
                f" StatefulSet,{_volcano_kinds(policy)} names `priorityClassName`: the"
                " PriorityClass of its tenant's `priority` (`<cluster>-<priority>`) or a lower"
                " one. Without it, or above it, the API server refuses the object"
                f" (ValidatingAdmissionPolicy `{name}`), saying which class to use."
            )
    return "".join(f"\n{textwrap.fill(p, 92)}\n" for p in paragraphs)


def _volcano_kinds(policy: KubeObject) -> str:
    """The Volcano kinds the PriorityClass policy checks too, when it does."""
    if "scheduling.volcano.sh/podgroups" not in str(policy["spec"]["matchConditions"]):
        return ""
    return " every Volcano PodGroup and Volcano Job (whose tasks take the Job's class unless they name one)"


def _keda(k8s: KubernetesObjects) -> str:
    """The README's KEDA prerequisite, when some tenant autoscales (ScaledObjects)."""
    if not any(o["kind"] == "ScaledObject" for o in k8s.objects):
        return ""
    return (
        ",\n   KEDA (its ScaledObjects scale the autoscaled tenants' Deployments) and"
        "\n   kube-state-metrics (their queries count only the pods each Deployment owns)"
    )


def _helm_steps(k8s: KubernetesObjects) -> str:
    """Step 3: each release's helm command; --create-namespace where no manifest makes it."""
    if not k8s.releases:
        return "3. No Helm releases."
    declared = {o["metadata"]["name"] for o in k8s.objects if o["kind"] == "Namespace"}
    lines = [
        "3. The Helm releases of `../helm/releases.yaml`, in this order (the GPU Operator",
        "   brings CRDs the manifests use):",
        "",
        "   ```sh",
    ]
    for r in k8s.releases:
        create = "" if r.namespace in declared else " --create-namespace"
        lines += [
            f"   helm upgrade --install {r.name} {r.chart} --repo {r.repository} \\",
            f"     --version {r.version} --namespace {r.namespace}{create} \\",
            f"     --values ../helm/{r.name}.values.yaml",
        ]
    return "\n".join([*lines, "   ```", ""])


def k8s_files(k8s: KubernetesObjects) -> dict[str, str]:
    """``k8s/...`` and ``helm/...`` (relative to ``files/``) as name -> text."""
    files = {
        f"k8s/{_file_name(kind)}": manifest_yaml(objs)
        for kind, objs in _by_kind(k8s.objects).items()
    }
    for kind, objs in _by_kind(o for s in k8s.sets for o in s.examples).items():
        files[f"k8s/examples/{kind.lower()}.yaml"] = manifest_yaml(objs)
    files["k8s/README.md"] = _readme(k8s)
    if k8s.releases:
        files["helm/releases.yaml"] = _releases_yaml(k8s)
        for release in k8s.releases:
            files[f"helm/{release.name}.values.yaml"] = _dump(release.values, sort_keys=True)
    return dict(sorted(files.items()))
