"""Jobs as a tenant's user submits them, and what Kueue and the scheduler made of them.

A scenario submits plain ``batch/v1`` Jobs labelled ``kueue.x-k8s.io/queue-name`` (Kueue's
Job webhook suspends each on creation; Kueue unsuspends it once admitted), then reads the
Job's Workload (its admission: ClusterQueue, flavor per resource; its conditions: why it waits,
why it was evicted) and the Job's pods (the node each is bound to). Every wait polls with a
deadline and, on timeout, says what it last saw.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.k8s_twin.kubectl import kubectl

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# kwok runs no image: any name does; this is the image a pod's sandbox would be.
IMAGE = "registry.k8s.io/pause:3.10"
T = TypeVar("T")


def job(
    name: str,
    tenant: str,
    pods: int,
    requests: dict[str, str],
    *,
    node_selector: dict[str, str] | None = None,
    priority: str | None = None,
    pod_priority: str | None = None,
) -> dict[str, Any]:
    """A Job of `pods` parallel pods, each requesting `requests` (as limits too: extended
    resources must be equal), in the tenant's namespace and LocalQueue (both named after it),
    labelled with WorkloadPriorityClass `priority` and its pods at PriorityClass
    `pod_priority` (none where None)."""
    labels = {QUEUE_LABEL: tenant, **({PRIORITY_LABEL: priority} if priority else {})}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "resources": {"requests": dict(requests), "limits": dict(requests)},
            }
        ],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if pod_priority:
        pod_spec["priorityClassName"] = pod_priority
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": tenant, "labels": labels},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": {"job": name}}, "spec": pod_spec},
        },
    }


def submit(kubeconfig: Path, obj: dict[str, Any]) -> None:
    kubectl(kubeconfig, ["create", "-f", "-"], stdin=yaml.safe_dump(obj))


def _items(kubeconfig: Path, args: list[str]) -> list[dict[str, Any]]:
    return list(json.loads(kubectl(kubeconfig, ["get", *args, "-o", "json"]))["items"])


def workload(kubeconfig: Path, tenant: str, job_name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for Job `job_name` (None before it exists)."""
    for wl in _items(kubeconfig, ["workloads.kueue.x-k8s.io", "-n", tenant]):
        owners = wl["metadata"].get("ownerReferences", [])
        if any(o["kind"] == "Job" and o["name"] == job_name for o in owners):
            return wl
    return None


def condition(wl: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in (wl or {}).get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return dict(cond)
    return None


def admitted(wl: dict[str, Any] | None) -> bool:
    cond = condition(wl, "Admitted")
    return cond is not None and cond["status"] == "True"


def flavors(wl: dict[str, Any]) -> dict[str, str]:
    """Resource -> ResourceFlavor of the Workload's admission (its one pod set)."""
    (assignment,) = wl["status"]["admission"]["podSetAssignments"]
    return dict(assignment["flavors"])


def why_waiting(wl: dict[str, Any] | None) -> str:
    """Kueue's own words for a Workload it has not admitted (its QuotaReserved message)."""
    cond = condition(wl, "QuotaReserved")
    if wl is None:
        return "no Workload yet"
    return cond["message"] if cond else "no QuotaReserved condition yet"


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 180.0) -> T:
    """Poll `probe` until it returns something truthy; that value, or AssertionError."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(1.0)


def wait_admitted(kubeconfig: Path, tenant: str, name: str, timeout_s: float = 180.0) -> dict:
    """The Job's Workload once admitted; on timeout, why Kueue said it waits."""
    try:
        return wait_for(
            f"{tenant}/{name} admitted",
            lambda: _if(workload(kubeconfig, tenant, name), admitted),
            timeout_s,
        )
    except AssertionError as err:
        wl = workload(kubeconfig, tenant, name)
        raise AssertionError(f"{err}; Kueue says: {why_waiting(wl)}") from None


def wait_pending(kubeconfig: Path, tenant: str, name: str, timeout_s: float = 120.0) -> str:
    """Kueue's message once it has tried and not admitted the Job's Workload."""

    def probe() -> str | None:
        wl = workload(kubeconfig, tenant, name)
        cond = condition(wl, "QuotaReserved")
        if admitted(wl):
            raise AssertionError(f"{tenant}/{name} was admitted: {flavors(wl or {})}")
        return cond["message"] if cond and cond["status"] == "False" else None

    return wait_for(f"{tenant}/{name} judged by Kueue", probe, timeout_s)


def _if(value: T | None, test: Callable[[T], bool]) -> T | None:
    return value if value is not None and test(value) else None


def running_pods(kubeconfig: Path, tenant: str, name: str) -> list[dict[str, Any]]:
    """The Job's pods that are bound to a node and Running."""
    pods = _items(kubeconfig, ["pods", "-n", tenant, "-l", f"job={name}"])
    return [p for p in pods if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"]


def delete_all(kubeconfig: Path, tenants: list[str], timeout_s: float = 180.0) -> None:
    """Delete every Job of `tenants` and wait until their Workloads and pods are gone."""
    for tenant in tenants:
        kubectl(kubeconfig, ["delete", "jobs", "--all", "-n", tenant, "--wait=false"])

    def gone() -> bool:
        return all(
            not _items(kubeconfig, ["workloads.kueue.x-k8s.io", "-n", t])
            and not _items(kubeconfig, ["pods", "-n", t, "-l", "job"])
            for t in tenants
        )

    wait_for(f"the jobs of {tenants} gone", gone, timeout_s)
