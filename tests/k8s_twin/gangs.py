"""Gangs as a tenant's user submits them to Volcano, and what vc-scheduler made of them.

A gang is a ``PodGroup`` copied from the example railplan renders for the tenant
(``files/k8s/examples/podgroup.yaml``: its queue, priority class and ``networkTopology``),
with its own name, ``minMember`` and ``minResources``, plus that many pods naming it in the
``scheduling.k8s.io/group-name`` annotation, ``schedulerName: volcano`` and the tenant's
priority class, each asking for a whole node's GPUs. Other workloads that hold GPUs are
modelled as `occupy` pods bound straight to chosen nodes (``spec.nodeName``, no scheduler):
vc-scheduler counts them on their nodes like any pod. Every wait polls with a deadline and,
on timeout, says what it last saw.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_twin import jobs
from tests.k8s_twin.kubectl import kubectl
from tests.k8s_twin.scenario import GPU, Cluster

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GANG_LABEL = "railplan-twin/gang"
OCCUPY_NAMESPACE = "twin-other-work"
SU_LABEL = "railplan.dev/su"


def example_podgroup(cluster: Cluster, tenant: str) -> dict[str, Any]:
    """The example PodGroup railplan rendered for `tenant`."""
    path = cluster.k8s_dir / "examples" / "podgroup.yaml"
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["metadata"]["namespace"] == tenant:
            return dict(doc)
    raise KeyError(f"{path}: no PodGroup for {tenant}")


def gang(
    cluster: Cluster, name: str, tenant: str, members: int, gpus: int, *, topology: bool = True
) -> list[dict[str, Any]]:
    """The PodGroup and its `members` pods of `gpus` GPUs each; `topology=False` drops the
    rendered ``networkTopology`` (the variant that shows what it is for)."""
    pg = copy.deepcopy(example_podgroup(cluster, tenant))
    pg["metadata"] = {**pg["metadata"], "name": name}
    pg["spec"]["minMember"] = members
    pg["spec"]["minResources"] = {GPU: str(members * gpus)}
    if not topology:
        pg["spec"].pop("networkTopology", None)
    request = {GPU: str(gpus)}
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": tenant,
                "labels": {GANG_LABEL: name},
                "annotations": {GROUP_ANNOTATION: name},
            },
            "spec": {
                "schedulerName": "volcano",
                "priorityClassName": pg["spec"]["priorityClassName"],
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": jobs.IMAGE,
                        "resources": {"requests": request, "limits": request},
                    }
                ],
            },
        }
        for i in range(members)
    ]
    return [pg, *pods]


def submit(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    """Create the objects (the PodGroup first, as a Volcano Job's controller does)."""
    kubectl(
        kubeconfig, ["create", "-f", "-"], stdin="\n---\n".join(yaml.safe_dump(o) for o in objects)
    )


def occupy(cluster: Cluster, nodes: list[str], gpus: int) -> None:
    """Another workload's pods, one per node of `nodes`, each holding `gpus` GPUs, bound
    directly; returns once all run."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OCCUPY_NAMESPACE}}
    kubectl(cluster.kubeconfig, ["apply", "-f", "-"], stdin=json.dumps(namespace))
    request = {GPU: str(gpus)}
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"other-{node}", "namespace": OCCUPY_NAMESPACE},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": jobs.IMAGE,
                        "resources": {"requests": request, "limits": request},
                    }
                ],
            },
        }
        for node in nodes
    ]
    submit(cluster.kubeconfig, pods)

    def all_running() -> bool:
        got = _items(cluster.kubeconfig, ["pods", "-n", OCCUPY_NAMESPACE])
        return len(got) == len(nodes) and all(p["status"].get("phase") == "Running" for p in got)

    jobs.wait_for(f"{len(nodes)} other pods running", all_running)


def _items(kubeconfig: Path, args: list[str]) -> list[dict[str, Any]]:
    return list(json.loads(kubectl(kubeconfig, ["get", *args, "-o", "json"]))["items"])


def pods(kubeconfig: Path, tenant: str, name: str) -> list[dict[str, Any]]:
    return _items(kubeconfig, ["pods", "-n", tenant, "-l", f"{GANG_LABEL}={name}"])


def podgroup(kubeconfig: Path, tenant: str, name: str) -> dict[str, Any]:
    return dict(
        json.loads(
            kubectl(
                kubeconfig,
                ["get", "podgroups.scheduling.volcano.sh", name, "-n", tenant, "-o", "json"],
            )
        )
    )


def bound(kubeconfig: Path, tenant: str, name: str) -> list[dict[str, Any]]:
    """The gang's pods bound to a node."""
    return [p for p in pods(kubeconfig, tenant, name) if p["spec"].get("nodeName")]


def wait_placed(
    cluster: Cluster, tenant: str, name: str, members: int, timeout_s: float = 180.0
) -> list[dict[str, Any]]:
    """The gang's pods once all `members` run; on timeout, what the PodGroup says."""

    def probe() -> list[dict[str, Any]] | None:
        got = pods(cluster.kubeconfig, tenant, name)
        running = [
            p for p in got if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
        ]
        return running if len(running) == members else None

    try:
        return jobs.wait_for(f"{tenant}/{name}: {members} pods running", probe, timeout_s)
    except AssertionError as err:
        raise AssertionError(f"{err}; {why(cluster.kubeconfig, tenant, name)}") from None


def events(kubeconfig: Path, tenant: str, name: str) -> list[str]:
    """ "REASON: message" of each event recorded on the PodGroup, oldest first."""
    selector = f"involvedObject.kind=PodGroup,involvedObject.name={name}"
    got = _items(kubeconfig, ["events", "-n", tenant, "--field-selector", selector])
    got.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [f"{e.get('reason')}: {e.get('message')}" for e in got]


def why(kubeconfig: Path, tenant: str, name: str) -> str:
    """The PodGroup's phase, its conditions' reasons and messages, and its events."""
    pg = podgroup(kubeconfig, tenant, name)
    status = pg.get("status", {})
    conds = [
        f"{c.get('type')}/{c.get('reason')}: {c.get('message')}"
        for c in status.get("conditions", [])
    ]
    return (
        f"PodGroup {tenant}/{name} phase {status.get('phase')}; conditions: {conds}; "
        f"events: {events(kubeconfig, tenant, name)}"
    )


def unschedulable(
    kubeconfig: Path, tenant: str, name: str, *, seen: str = "", timeout_s: float = 120.0
) -> str:
    """vc-scheduler's words once it has tried the gang and given up: the PodGroup's
    Unschedulable condition (the gang plugin, after allocate), or else its Unschedulable
    event (a queue plugin, when the gang is not even enqueued); with `seen`, only words
    that contain it (a cycle that ran before every pod was in the scheduler's cache counts
    fewer)."""

    def probe() -> str | None:
        status = podgroup(kubeconfig, tenant, name).get("status", {})
        for cond in status.get("conditions", []):
            if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
                said = f"condition {cond.get('reason')}: {cond.get('message')}"
                return said if seen in said else None
        told = [e for e in events(kubeconfig, tenant, name) if e.startswith("Unschedulable")]
        return f"event {told[-1]}" if told and seen in told[-1] else None

    try:
        return jobs.wait_for(f"{tenant}/{name} judged unschedulable", probe, timeout_s)
    except AssertionError as err:
        raise AssertionError(f"{err}; {why(kubeconfig, tenant, name)}") from None


def pod_condition(pod: dict[str, Any], kind: str) -> str:
    """ "status reason: message" of the pod's condition `kind` ("" when it has none)."""
    for cond in pod.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return f"{cond.get('status')} {cond.get('reason')}: {cond.get('message')}"
    return ""


def sus_of(cluster: Cluster, placed: list[dict[str, Any]]) -> Counter[str]:
    """SU label -> how many of `placed` pods run on that SU's nodes."""
    return Counter(cluster.node_of(p)["metadata"]["labels"].get(SU_LABEL, "") for p in placed)


def delete(kubeconfig: Path, tenants: list[str], timeout_s: float = 180.0) -> None:
    """Delete every gang of `tenants` and the other workload's pods; wait until gone."""
    for tenant in tenants:
        kubectl(kubeconfig, ["delete", "pods", "-n", tenant, "-l", GANG_LABEL, "--wait=false"])
        kubectl(
            kubeconfig,
            ["delete", "podgroups.scheduling.volcano.sh", "--all", "-n", tenant, "--wait=false"],
        )
    kubectl(kubeconfig, ["delete", "pods", "--all", "-n", OCCUPY_NAMESPACE, "--wait=false"])

    def gone() -> bool:
        return all(
            not _items(kubeconfig, ["pods", "-n", t, "-l", GANG_LABEL])
            and not _items(kubeconfig, ["podgroups.scheduling.volcano.sh", "-n", t])
            for t in tenants
        ) and not _items(kubeconfig, ["pods", "-n", OCCUPY_NAMESPACE])

    jobs.wait_for("gangs and other work gone", gone, timeout_s)
