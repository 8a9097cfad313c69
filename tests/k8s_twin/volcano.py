"""Run Volcano against the twin: its scheduler with railplan's rendered configuration.

The README's prerequisite "Volcano with HyperNode support", as its release runs it, less the
webhooks: ``vc-scheduler`` reads ``volcano-scheduler.conf`` from the ConfigMap railplan
renders (``volcano-scheduler-configmap`` in ``volcano-system``, read back from the API
server after the apply, as the chart's Deployment mounts it), and ``vc-controller-manager``
runs only its queue controller, which opens the Queues (the scheduler's capacity and
proportion plugins skip a Queue whose status is not ``Open``). Both are built from
``volcano.sh/volcano`` at `versions.VOLCANO_VERSION` (`build.build_volcano`), listen on
loopback only and run with leader election off. The CRDs are the release's own, from the
same module (``config/crd/volcano/bases``): the queue controller watches ``Command``\\ s and
the scheduler the node and sharding CRDs besides the three railplan uses.

`started` is the Volcano twin cluster the scenarios share: the control plane, every CRD, the
rendered manifests of a ``batch: volcano`` spec applied in the README's order, the planned
nodes kept Ready by kwok, then Volcano.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.k8s_twin import apply, crds, versions
from tests.k8s_twin.control_plane import ControlPlane, ControlPlaneError, free_port
from tests.k8s_twin.kubectl import kubectl, kubectl_run
from tests.k8s_twin.kueue import http_ok
from tests.k8s_twin.scenario import Cluster, applied, plane_with_crds

CONFIGMAP = "volcano-scheduler-configmap"
NAMESPACE = "volcano-system"
CONF_KEY = "volcano-scheduler.conf"
SCHEDULER_NAME = "volcano"
CRDS = crds.CrdSource(
    "volcano", "volcano.sh/volcano", versions.VOLCANO_VERSION, "config/crd/volcano/bases"
)


def install_crds(kubeconfig: Path, timeout_s: int = 120) -> list[str]:
    """Apply every CRD of Volcano's release and wait until each is Established; their names."""
    files = crds.crd_files(CRDS)
    args = ["apply", "--server-side", "--field-manager=railplan-k8s-twin"]
    for path in sorted(set(files.values())):
        args += ["-f", str(path)]
    kubectl(kubeconfig, args)
    names = sorted(files)
    # A CRD created a moment ago may have no status yet, which `kubectl wait` reports as an
    # error rather than waiting: ask again until the deadline.
    deadline = time.monotonic() + timeout_s
    while True:
        proc = kubectl_run(
            kubeconfig,
            ["wait", "--for=condition=Established", "--timeout=30s", *[f"crd/{n}" for n in names]],
        )
        if proc.returncode == 0:
            return names
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"Volcano's CRDs not Established: {proc.stderr.strip()}")
        time.sleep(1.0)


def scheduler_conf(kubeconfig: Path) -> str:
    """``volcano-scheduler.conf`` as the API server holds the rendered ConfigMap."""
    cm = json.loads(
        kubectl(kubeconfig, ["get", "configmap", CONFIGMAP, "-n", NAMESPACE, "-o", "json"])
    )
    return str(cm["data"][CONF_KEY])


def queue_states(kubeconfig: Path) -> dict[str, str]:
    """Queue name -> its status's state ("" before the queue controller sets one)."""
    items = json.loads(kubectl(kubeconfig, ["get", "queues.scheduling.volcano.sh", "-o", "json"]))
    return {q["metadata"]["name"]: q.get("status", {}).get("state", "") for q in items["items"]}


def _start_one(plane: ControlPlane, name: str, args: list[str], timeout_s: float) -> None:
    """Start Volcano binary `name` with its health endpoint on loopback; wait until it answers."""
    health, metrics = free_port(), free_port()
    cmd = [
        str(versions.volcano_bin(name)),
        f"--kubeconfig={plane.kubeconfig}",
        "--leader-elect=false",
        "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{health}",
        f"--listen-address=127.0.0.1:{metrics}",
        *args,
    ]
    plane.start_process(name, cmd)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if http_ok(f"http://127.0.0.1:{health}/healthz"):
            return
        if not plane._ours(name):
            tail = (plane.workdir / f"{name}.log").read_text(errors="replace")[-3000:]
            raise ControlPlaneError(f"{name} exited:\n{tail}")
        time.sleep(0.5)
    raise ControlPlaneError(f"{name} not healthy within {timeout_s:.0f} s (see {name}.log)")


def start(plane: ControlPlane, queues: list[str], timeout_s: float = 180.0) -> float:
    """The queue controller, then the scheduler on the rendered configuration; seconds until
    both answer and every Queue of `queues` is Open."""
    started = time.monotonic()
    _start_one(plane, "vc-controller-manager", ["--controllers=queue-controller"], timeout_s)
    conf = plane.workdir / CONF_KEY
    conf.write_text(scheduler_conf(plane.kubeconfig))
    _start_one(
        plane,
        "vc-scheduler",
        [f"--scheduler-conf={conf}", f"--scheduler-name={SCHEDULER_NAME}", "--cache-dumper=false"],
        timeout_s,
    )
    while time.monotonic() - started < timeout_s:
        states = queue_states(plane.kubeconfig)
        if all(states.get(q) == "Open" for q in queues):
            return round(time.monotonic() - started, 1)
        time.sleep(1.0)
    raise ControlPlaneError(
        f"queues not Open within {timeout_s:.0f} s: {queue_states(plane.kubeconfig)}"
    )


@contextmanager
def started(spec: Path, workdir: Path) -> Iterator[Cluster]:
    """The Volcano cluster of `spec` (``batch: volcano``), stopped and checked gone after."""
    with plane_with_crds(workdir / "plane") as plane:
        install_crds(plane.kubeconfig)
        cluster = applied(plane, spec, workdir)
        start(plane, [t.name for t in cluster.planned.spec.scheduler.tenants])
        yield cluster


def apply_objects(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    """Server-side apply `objects` as railplan's field manager (a rendered object or a
    variant of it), taking over fields another manager set."""
    text = "\n---\n".join(json.dumps(o) for o in objects)
    args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={apply.FIELD_MANAGER}"]
    kubectl(kubeconfig, [*args, "-f", "-"], stdin=text)
