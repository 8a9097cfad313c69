"""Render a spec and apply its ``files/k8s/`` tree to the twin in the README's order.

The rendered README says: (1) the prerequisites' CRDs (`crds.install`), (2)
``00-namespace.yaml``, (3) the Helm releases of ``../helm/releases.yaml``, (4) ``kubectl
apply -f .`` for the rest. The twin cannot run step 3 (no chart repository is reachable and
no node would run the operator's pods); what the GPU Operator's chart brings that the
manifests need, its CRDs, is installed with the others in step 1, and the step is recorded
as skipped. Every file is applied with ``kubectl apply --server-side``, and each object is
reported accepted or refused with the server's message verbatim. The job templates under
``examples/`` are not applied (the README says to copy them) but sent as a server-side dry
run, which runs the same validation, CEL rules and defaulting.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from tests.k8s_twin.kubectl import kubectl_run

ROOT = Path(__file__).resolve().parents[2]
FIELD_MANAGER = "railplan"
TENANTS_SPEC = ROOT / "examples" / "k8s-tenants.yaml"
# The specs the twin applies by default: Volcano tenants, the same tenants on Kueue, and a
# MIG lab with no tenants (the GPU Operator's objects alone).
DEFAULT_SPECS = (
    TENANTS_SPEC,
    Path("kueue:examples/k8s-tenants.yaml"),
    ROOT / "examples" / "a100-lab-mig.yaml",
)


@dataclass
class ObjectResult:
    """One manifest object and what the API server said to it."""

    step: str
    file: str
    kind: str
    namespace: str
    name: str
    accepted: bool
    message: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def materialise(spec: Path, folder: Path) -> Path:
    """The spec file for `spec`: ``kueue:PATH`` is PATH with ``batch: kueue`` instead of
    ``batch: volcano`` (no example uses Kueue, and its objects need applying too)."""
    text = str(spec)
    if not text.startswith("kueue:"):
        return spec
    source = ROOT / text.removeprefix("kueue:")
    body = source.read_text()
    if "batch: volcano" not in body:
        raise ValueError(f"{source}: no 'batch: volcano' to turn into Kueue")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{source.stem}-kueue.yaml"
    out.write_text(body.replace("batch: volcano", "batch: kueue"))
    return out


def render(spec: Path, root: Path) -> Path:
    """`railplan render SPEC --root ROOT` with this checkout's code; the files/k8s folder."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = "import sys; from infra.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "render", str(spec), "--root", str(root)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"railplan render {spec} exited {proc.returncode}:\n{proc.stderr}")
    (k8s_dir,) = sorted(root.glob("inventories/*/files/k8s"))
    return k8s_dir


def _objects(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _applied_names(stdout: str) -> set[tuple[str, str]]:
    """(resource kind prefix, name) of each ``kind.group/name serverside-applied`` line."""
    found = set()
    for line in stdout.splitlines():
        m = re.match(
            r"^([a-z0-9]+)(?:\.[^/]*)?/(\S+) (?:serverside-applied|created|configured|unchanged)",
            line,
        )
        if m:
            found.add((m.group(1), m.group(2)))
    return found


def _refusal(stderr: str, name: str) -> str:
    """The stderr lines about `name` (the whole stderr when none names it)."""
    lines = [line for line in stderr.splitlines() if f'"{name}"' in line or f"/{name}" in line]
    return "\n".join(lines) if lines else stderr.strip()


def apply_file(
    kubeconfig: Path, path: Path, step: str, dry_run: bool = False
) -> list[ObjectResult]:
    """Server-side apply one file; a result per object it holds."""
    args = ["apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-f", str(path)]
    if dry_run:
        args.append("--dry-run=server")
    proc = kubectl_run(kubeconfig, args)
    applied = _applied_names(proc.stdout)
    results = []
    for obj in _objects(path):
        meta = obj.get("metadata") or {}
        assert isinstance(meta, dict)
        kind, name = str(obj.get("kind", "")), str(meta.get("name", ""))
        ok = (kind.lower(), name) in applied
        message = "" if ok else _refusal(proc.stderr, name)
        results.append(
            ObjectResult(step, path.name, kind, str(meta.get("namespace", "")), name, ok, message)
        )
    return results


def skipped_helm_releases(k8s_dir: Path) -> list[str]:
    """Step 3's releases, which the twin does not install (one line each, saying why)."""
    releases = yaml.safe_load((k8s_dir.parent / "helm" / "releases.yaml").read_text())
    return [
        f"helm release {rel['name']} ({rel['chart']} {rel['version']}, namespace {rel['namespace']}): "
        "not installed, no chart repository is reachable; its CRDs were installed with the others"
        for rel in releases.get("releases", [])
    ]


def apply_tree(kubeconfig: Path, k8s_dir: Path) -> list[ObjectResult]:
    """Steps 2 and 4 of the rendered README (3 is `skipped_helm_releases`), then the
    examples as a server-side dry run."""
    results = apply_file(kubeconfig, k8s_dir / "00-namespace.yaml", "2 namespaces")
    for path in sorted(k8s_dir.glob("*.yaml")):
        if path.name != "00-namespace.yaml":
            results += apply_file(kubeconfig, path, "4 kubectl apply -f .")
    for path in sorted((k8s_dir / "examples").glob("*.yaml")):
        results += apply_file(kubeconfig, path, "examples (dry run)", dry_run=True)
    return results
