"""Tenants' PriorityClasses at admission: a workload created with no class, another's, its own.

The rendered ValidatingAdmissionPolicy ``<cluster>-tenant-priority-class``
(`infra.k8s.admission.tenant_class_policy`) holds what a tenant's workloads name in
``priorityClassName`` to its tenant's class or a lower one. `probe` creates one workload of a
kind (a bare Pod, a ``batch/v1`` Job's pod template, a Volcano PodGroup or Volcano Job) in a
tenant's namespace as its user would, for real (not a dry run), and says whether the API
server accepted it, what it said and how long the create took; `delete` removes what the
probes created. `wait_in_effect` waits until the API server applies the policy (it reads
policies through an informer, so one just applied takes effect a moment later); on a render
without the policy it gives up after its deadline and the probes then show what the server
accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_twin import jobs
from tests.k8s_twin.kubectl import kubectl, kubectl_run
from tests.k8s_twin.scenario import Cluster

PROBE_LABEL = "railplan-twin/priority-probe"
VCJOB_API = "batch.volcano.sh/v1alpha1"
KINDS = ("pod", "job", "podgroup", "vcjob", "vcjob-task")
# The resource each kind of probe creates (`delete` removes those of the kinds probed: the
# Kueue cluster serves no Volcano Job).
RESOURCES = {
    "pod": "pods",
    "job": "jobs.batch",
    "podgroup": "podgroups.scheduling.volcano.sh",
    "vcjob": "jobs.batch.volcano.sh",
    "vcjob-task": "jobs.batch.volcano.sh",
}


@dataclass(frozen=True)
class Outcome:
    """One probe: the object created, whether the API server accepted it, its words, time."""

    kind: str
    tenant: str
    named: str | None
    accepted: bool
    said: str
    seconds: float

    def line(self) -> str:
        verdict = "accepted" if self.accepted else "refused"
        return (
            f"{self.tenant} {self.kind} naming {self.named or 'no class'}: {verdict} "
            f"in {self.seconds:.2f} s{': ' + self.said if self.said else ''}"
        )


def _pod_spec(named: str | None, scheduler: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": jobs.IMAGE}],
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if named:
        spec["priorityClassName"] = named
    return spec


def _meta(name: str, tenant: str) -> dict[str, Any]:
    return {"name": name, "namespace": tenant, "labels": {PROBE_LABEL: "yes"}}


def workload(
    cluster: Cluster, kind: str, name: str, tenant: str, named: str | None
) -> dict[str, Any]:
    """A workload of `kind` (one of KINDS) naming PriorityClass `named` (none where None).

    ``job`` is a Kueue-queued ``batch/v1`` Job at its tenant's WorkloadPriorityClass (the
    label policy's side) whose pod template names `named`; ``vcjob-task`` a Volcano Job at its
    tenant's own class one of whose tasks names `named`."""
    own = cluster.priority_class(tenant)
    if kind == "pod":
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _meta(name, tenant),
            "spec": _pod_spec(named, None),
        }
    if kind == "job":
        job = cluster.job(name, tenant, 1, {"cpu": "1"}, pod_priority=named)
        job["metadata"]["labels"][PROBE_LABEL] = "yes"
        return job
    if kind == "podgroup":
        spec = {"minMember": 1, "queue": tenant, **({"priorityClassName": named} if named else {})}
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": _meta(name, tenant),
            "spec": spec,
        }
    if kind in ("vcjob", "vcjob-task"):
        job_class, task_class = (named, None) if kind == "vcjob" else (own, named)
        task = {
            "name": "main",
            "replicas": 1,
            "template": {"spec": _pod_spec(task_class, "volcano")},
        }
        spec = {"schedulerName": "volcano", "queue": tenant, "minAvailable": 1, "tasks": [task]}
        if job_class:
            spec["priorityClassName"] = job_class
        return {
            "apiVersion": VCJOB_API,
            "kind": "Job",
            "metadata": _meta(name, tenant),
            "spec": spec,
        }
    raise ValueError(f"unknown kind {kind!r}")


def probe(cluster: Cluster, kind: str, tenant: str, named: str | None) -> Outcome:
    """Create the `kind` workload naming `named` in `tenant`'s namespace; what happened."""
    name = f"probe-{kind}-{(named or 'none').rsplit('-', 1)[-1]}"
    text = yaml.safe_dump(workload(cluster, kind, name, tenant, named))
    started = time.monotonic()
    proc = kubectl_run(cluster.kubeconfig, ["create", "-f", "-"], stdin=text)
    seconds = time.monotonic() - started
    return Outcome(kind, tenant, named, proc.returncode == 0, proc.stderr.strip(), seconds)


def wait_in_effect(cluster: Cluster, tenant: str, timeout_s: float = 60.0) -> str:
    """Wait until a server-side dry run of a pod naming no class in `tenant`'s namespace is
    refused by the class policy, at most `timeout_s`; how long it took, or that it never was
    (no policy, or not in effect: the probes that follow then say what the server did)."""
    policy = f"{cluster.planned.spec.name}-tenant-priority-class"
    text = yaml.safe_dump(workload(cluster, "pod", "probe-in-effect", tenant, None))
    started = time.monotonic()
    while True:
        proc = kubectl_run(
            cluster.kubeconfig, ["create", "--dry-run=server", "-f", "-"], stdin=text
        )
        waited = time.monotonic() - started
        if proc.returncode != 0 and policy in proc.stderr:
            return f"the class policy in effect after {waited:.1f} s"
        if waited > timeout_s:
            return (
                f"no ValidatingAdmissionPolicy {policy} in effect after {timeout_s:.0f} s: a pod "
                f"naming no PriorityClass in namespace {tenant} is still "
                f"{'admitted' if proc.returncode == 0 else 'refused otherwise: ' + proc.stderr}"
            )
        time.sleep(1.0)


def delete(kubeconfig: Path, tenants: list[str], kinds: list[str]) -> None:
    """Delete every probe of `kinds` in `tenants`' namespaces (no finalizer holds one here)."""
    resources = ",".join(sorted({RESOURCES[k] for k in kinds}))
    for tenant in tenants:
        kubectl(
            kubeconfig,
            ["delete", resources, "-n", tenant, "-l", f"{PROBE_LABEL}=yes", "--wait=false"],
        )


def cases(
    cluster: Cluster, kind: str, tenant: str, other: str
) -> list[tuple[str, str | None, bool]]:
    """(what, class named, accepted?) for `tenant`: no class and `other`'s higher class are
    refused, the tenant's own accepted; but a Volcano Job's task naming no class takes the
    Job's (the tenant's own here), so it is accepted."""
    own, higher = cluster.priority_class(tenant), cluster.priority_class(other)
    inherits = kind == "vcjob-task"
    return [("no class", None, inherits), (f"{other}'s class", higher, False), ("own", own, True)]


def check(cluster: Cluster, kinds: list[str], tenant: str, other: str) -> list[str]:
    """Probe each of `kinds` with each of `cases`; what went otherwise than wanted (printing
    each outcome)."""
    wrong = []
    own = cluster.priority_class(tenant)
    for kind in kinds:
        for what, named, accept in cases(cluster, kind, tenant, other):
            got = probe(cluster, kind, tenant, named)
            print(got.line())
            if got.accepted != accept:
                wrong.append(
                    f"{tenant} {kind} with {what} {'refused' if accept else 'accepted'}"
                    f"{': ' + got.said if got.said else ''}"
                )
            elif not accept and f"must be {own} (the tenant priority)" not in got.said:
                wrong.append(f"{tenant} {kind} with {what} refused otherwise: {got.said}")
    return wrong
