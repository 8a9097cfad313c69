"""kwok as the planned nodes' kubelet: it keeps the Nodes Ready and runs the pods bound to them.

kwok (``sigs.k8s.io/kwok``, built by `build.build_controller`) manages only the Nodes that carry
`nodes.KWOK_ANNOTATION`, and moves them and their pods through the Stages it is given. The
twin gives it four of kwok's own Stages, read from its module at the built release
(``kustomize/stage``): ``node-initialize`` (Ready, addresses, the Node's own capacity kept),
``node-heartbeat-with-lease`` (with ``--node-lease-duration-seconds``, kwok renews each Node's
Lease as a kubelet does), ``pod-ready`` (a bound pod runs) and ``pod-delete`` (a deleted pod
goes, as a kubelet confirms it). Not ``pod-complete``: a scenario's Job runs until the test
deletes it or Kueue evicts it, so its quota stays in use.
"""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from tests.k8s_twin import crds, nodes, versions
from tests.k8s_twin.control_plane import ControlPlane, ControlPlaneError, free_port
from tests.k8s_twin.kubectl import kubectl

STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-delete.yaml",
)
LEASE_S = 40  # a kubelet's default node lease duration


def stages_config() -> str:
    """kwok's ``--config`` file: the chosen Stages, from kwok's module at its release."""
    src = crds.CrdSource("kwok", "sigs.k8s.io/kwok", versions.KWOK_VERSION, "kustomize/stage")
    folder = crds.source_dir(src)
    return "---\n".join((folder / stage).read_text() for stage in STAGES)


def start(plane: ControlPlane) -> None:
    """Run kwok against `plane` (stopped by the plane's `down`)."""
    config = plane.workdir / "kwok-stages.yaml"
    config.write_text(stages_config())
    plane.start_process(
        "kwok",
        [
            str(versions.controller_bin("kwok")),
            f"--kubeconfig={plane.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}=fake",
            f"--node-lease-duration-seconds={LEASE_S}",
            "--cidr=10.244.0.1/16",
            "--node-ip=127.0.0.1",
            # kwok's kubelet-like server (logs, exec) is not needed: bind it to loopback.
            f"--server-address=127.0.0.1:{free_port()}",
        ],
    )


def create_nodes(plane: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """Create the Nodes, status included (the API server keeps a new Node's status); any
    Node that came back without its capacity gets it through the status subresource."""
    docs = "\n---\n".join(yaml.safe_dump(o) for o in objects)
    kubectl(plane.kubeconfig, ["create", "-f", "-"], stdin=docs)
    items = json.loads(kubectl(plane.kubeconfig, ["get", "nodes", "-o", "json"]))["items"]
    kept = {n["metadata"]["name"] for n in items if n.get("status", {}).get("capacity")}
    for obj in objects:
        if obj["metadata"]["name"] in kept:
            continue
        status = {"status": {k: obj["status"][k] for k in ("capacity", "allocatable")}}
        args = ["patch", "node", obj["metadata"]["name"], "--subresource=status"]
        kubectl(plane.kubeconfig, [*args, "--type=merge", "-p", json.dumps(status)])


def ready_nodes(plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """Name -> Node, for every Node whose Ready condition is True."""
    items = json.loads(kubectl(plane.kubeconfig, ["get", "nodes", "-o", "json"]))["items"]
    return {
        n["metadata"]["name"]: n
        for n in items
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions", [])
        )
    }


def wait_ready(plane: ControlPlane, names: list[str], timeout_s: float = 300.0) -> float:
    """Wait until every Node of `names` is Ready; the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if set(names) <= set(ready_nodes(plane)):
            return round(time.monotonic() - started, 1)
        if not plane._ours("kwok"):
            tail = (plane.workdir / "kwok.log").read_text(errors="replace")[-2000:]
            raise ControlPlaneError(f"kwok exited:\n{tail}")
        time.sleep(1.0)
    missing = sorted(set(names) - set(ready_nodes(plane)))
    raise ControlPlaneError(f"{len(missing)} nodes not Ready in {timeout_s:.0f} s: {missing[:5]}")
