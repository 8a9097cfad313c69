"""Run the Kueue controller against the twin, with its webhooks, as its release installs it.

Kueue's release (``config/default`` of ``sigs.k8s.io/kueue`` at the built version) is its
controller configuration, its admission webhooks (the Job webhook is what suspends a new Job
until Kueue admits it), conversion webhooks on five CRDs and a Secret its internal cert
management fills. The twin takes each from the module's own ``config/components`` and changes
only what running outside a pod on loopback needs: the manager listens on 127.0.0.1 on free
ports, without leader election, its certificates in the work directory, and the visibility
API server (an aggregated API the scenarios do not use) off. The webhooks keep their
``service`` reference: ``kueue-webhook-service`` is an ExternalName Service naming
``localhost`` and the webhook's port, which the API server's service resolver dials directly,
checking the certificate Kueue's cert rotator issued for ``kueue-webhook-service.kueue-system.svc``
against the CA bundle the rotator injected. In a pod the kubelet projects the rotator's Secret
into the manager's certificate folder, and the rotator waits for those files before it
reports ready; here `_project_secret` does the kubelet's part.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_twin import crds, versions
from tests.k8s_twin.control_plane import ControlPlane, ControlPlaneError, free_port
from tests.k8s_twin.kubectl import kubectl

NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
# The CRDs the release patches with a conversion webhook (config/components/crd/kustomization.yaml).
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
# The release's namespaceSelector on the pod, deployment and statefulset webhooks.
_SKIP_SYSTEM = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", NAMESPACE],
        }
    ]
}
_SELECTED = {f"{v}{k}.kb.io" for v in "mv" for k in ("pod", "deployment", "statefulset")}


def module_dir() -> Path:
    """Kueue's module at the built release (its zip holds the release's config)."""
    return crds.source_dir(crds.CrdSource("kueue", "sigs.k8s.io/kueue", versions.KUEUE_VERSION, ""))


def configuration(workdir: Path, ports: dict[str, int]) -> dict[str, Any]:
    """The release's controller configuration with the loopback changes."""
    path = module_dir() / "config/components/manager/controller_manager_config.yaml"
    cfg: dict[str, Any] = yaml.safe_load(path.read_text())
    cfg["namespace"] = NAMESPACE
    cfg["health"] = {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"}
    cfg["metrics"] = {"bindAddress": f"127.0.0.1:{ports['metrics']}"}
    cfg["webhook"] = {
        "host": "127.0.0.1",
        "port": ports["webhook"],
        "certDir": str(workdir / "kueue-certs"),
    }
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["internalCertManagement"] = {
        "enable": True,
        "webhookServiceName": SERVICE,
        "webhookSecretName": SECRET,
    }
    return cfg


def _service_ref(port: int, path: str) -> dict[str, Any]:
    return {"name": SERVICE, "namespace": NAMESPACE, "port": port, "path": path}


def webhook_objects(port: int) -> list[dict[str, Any]]:
    """The release's webhook configurations, named and pointed as its kustomization does."""
    path = module_dir() / "config/components/webhook/manifests.yaml"
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        doc["metadata"]["name"] = f"kueue-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            ref = hook["clientConfig"]["service"]
            hook["clientConfig"]["service"] = _service_ref(port, ref["path"])
            if hook["name"] in _SELECTED:
                hook["namespaceSelector"] = _SKIP_SYSTEM
        out.append(doc)
    return out


def support_objects(port: int) -> list[dict[str, Any]]:
    """The namespace, the (empty) Secret the cert rotator fills, and the webhook Service."""
    meta = {"namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, **meta}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, **meta},
            "spec": {
                "type": "ExternalName",
                "externalName": "localhost",
                "ports": [{"port": port, "protocol": "TCP"}],
            },
        },
    ]


def conversion_patch(port: int) -> dict[str, Any]:
    """The release's patch that turns on a CRD's conversion webhook (served by the manager)."""
    return {
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": _service_ref(port, "/convert")},
                    "conversionReviewVersions": ["v1"],
                },
            }
        }
    }


def install(plane: ControlPlane, port: int) -> None:
    """Everything of the release but the manager's Deployment (the twin runs it itself)."""
    docs = [*support_objects(port), *webhook_objects(port)]
    text = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    kubectl(plane.kubeconfig, ["apply", "--server-side", "-f", "-"], stdin=text)
    patch = json.dumps(conversion_patch(port))
    for crd in CONVERTED:
        kubectl(
            plane.kubeconfig,
            ["patch", "crd", f"{crd}.kueue.x-k8s.io", "--type=merge", "-p", patch],
        )


def start(plane: ControlPlane, timeout_s: float = 300.0) -> float:
    """Install the release's objects, run the manager, wait until it is ready; seconds."""
    started = time.monotonic()
    ports = {name: free_port() for name in ("health", "metrics", "webhook", "visibility")}
    install(plane, ports["webhook"])
    config = plane.workdir / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(configuration(plane.workdir, ports)))
    cmd = [
        str(versions.controller_bin("kueue")),
        f"--config={config}",
        f"--kubeconfig={plane.kubeconfig}",
        "--feature-gates=VisibilityOnDemand=false",
        f"--visibility-server-port={ports['visibility']}",
    ]
    plane.start_process("kueue", cmd)
    url = f"http://127.0.0.1:{ports['health']}/readyz"
    while time.monotonic() - started < timeout_s:
        _project_secret(plane)
        if http_ok(url) and _webhook_serving(plane):
            return round(time.monotonic() - started, 1)
        if not plane._ours("kueue"):
            tail = (plane.workdir / "kueue.log").read_text(errors="replace")[-3000:]
            raise ControlPlaneError(f"kueue exited:\n{tail}")
        time.sleep(1.0)
    raise ControlPlaneError(f"kueue not ready within {timeout_s:.0f} s (see kueue.log)")


def _project_secret(plane: ControlPlane) -> None:
    """Write the cert Secret's keys into the manager's certificate folder once it has them
    (what the Secret volume of the release's Deployment does)."""
    folder = plane.workdir / "kueue-certs"
    if (folder / "tls.crt").is_file():
        return
    secret = json.loads(
        kubectl(plane.kubeconfig, ["get", "secret", SECRET, "-n", NAMESPACE, "-o", "json"])
    )
    data = secret.get("data") or {}
    if "tls.crt" not in data:
        return
    folder.mkdir(exist_ok=True)
    for key in sorted(data, key=lambda k: k == "tls.crt"):  # tls.crt last: it says "ready"
        path = folder / key
        path.write_bytes(base64.b64decode(data[key]))
        path.chmod(0o600)


def http_ok(url: str) -> bool:
    """Whether `url` answers 200 within 5 s (a controller's health or metrics endpoint)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _webhook_serving(plane: ControlPlane) -> bool:
    """The API server reaches the webhooks: a dry-run ResourceFlavor passes them."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "twin-webhook-probe"},
    }
    try:
        kubectl(
            plane.kubeconfig,
            ["create", "--dry-run=server", "-f", "-"],
            stdin=json.dumps(flavor),
        )
    except RuntimeError:
        return False
    return True
