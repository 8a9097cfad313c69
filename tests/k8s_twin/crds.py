"""The CRDs of the controllers railplan renders for, from those projects' own sources.

Four come from the projects' Go modules at a pinned version, fetched with ``go mod
download`` into the twin's module cache (a module's zip carries its repository's CRD YAML):
Kueue, the Prometheus operator, KEDA and the GPU Operator. The three Volcano CRDs railplan
uses are vendored from its release tag under ``crds/volcano/`` (``crds/SOURCES.md`` says
exactly which), so the twin's apply phase needs no Volcano build; the proxy does serve
``volcano.sh/volcano@v1.15.1`` when asked for that exact version (its version list is
refused), and the Volcano module (`tests.k8s_twin.volcano`) installs all nine CRDs from it.
`install` server-side-applies every CRD and waits until each is Established.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.k8s_twin import build, versions
from tests.k8s_twin.kubectl import kubectl

VENDORED = Path(__file__).resolve().parent / "crds"


class _CrdLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1's ``=`` (the "value" tag) read as the string it is in the CRDs' enums (the
    Prometheus operator's relabel actions list ``=``), which PyYAML's safe loader refuses."""


_CrdLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: node.value)


@dataclass(frozen=True)
class CrdSource:
    """Where one project's CRDs come from: a Go module's folder, or a vendored folder."""

    project: str
    module: str  # Go module path, or "" for a vendored folder
    version: str
    folder: str  # inside the module's zip, or under VENDORED

    def describe(self) -> str:
        where = (
            f"Go module {self.module}@{self.version}" if self.module else f"vendored {self.version}"
        )
        return f"{where}, {self.folder}"


SOURCES = (
    # The CRDs of the Kueue release the scheduling scenarios run.
    CrdSource("kueue", "sigs.k8s.io/kueue", versions.KUEUE_VERSION, "config/components/crd/bases"),
    CrdSource(
        "prometheus-operator",
        "github.com/prometheus-operator/prometheus-operator",
        "v0.85.0",
        "example/prometheus-operator-crd",
    ),
    # v2.21.1 is served but its go.mod asks for Go 1.27.4, which `go mod download` refuses
    # with this machine's Go 1.26.8: v2.21.0 is the newest it accepts.
    CrdSource("keda", "github.com/kedacore/keda/v2", "v2.21.0", "config/crd/bases"),
    # The module has no tagged version the proxy serves (its v2x.y.z tags lack a /vN module
    # path): @latest resolves to this pseudo-version, the default branch of 2025-09-17.
    CrdSource(
        "gpu-operator",
        "github.com/NVIDIA/gpu-operator",
        "v0.0.0-20250917190837-d73a0086a6ba",
        "deployments/gpu-operator/crds",
    ),
    CrdSource("volcano", "", "volcano-sh/volcano v1.15.1", "volcano"),
)


def source_dir(src: CrdSource) -> Path:
    """The folder holding `src`'s CRD files (downloading its module if needed)."""
    if not src.module:
        return VENDORED / src.folder
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{src.module}@{src.version}"],
        env=build.go_env(),
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or "Dir" not in info:
        raise build.TwinBuildError(
            f"go mod download {src.module}@{src.version}: {info.get('Error', proc.stderr)}"
        )
    return Path(info["Dir"]) / src.folder


def crd_files(src: CrdSource) -> dict[str, Path]:
    """CRD name -> file, for every CustomResourceDefinition in `src`'s folder."""
    found = {}
    for path in sorted(source_dir(src).glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=_CrdLoader):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found[doc["metadata"]["name"]] = path
    return found


def install(kubeconfig: Path, timeout_s: int = 120) -> dict[str, dict[str, str]]:
    """Apply every source's CRDs and wait for Established; CRD name -> project and source."""
    table: dict[str, dict[str, str]] = {}
    files: list[Path] = []
    for src in SOURCES:
        for name, path in crd_files(src).items():
            table[name] = {"project": src.project, "source": f"{src.describe()}/{path.name}"}
            if path not in files:
                files.append(path)
    args = ["apply", "--server-side", "--field-manager=railplan-k8s-twin"]
    for path in files:
        args += ["-f", str(path)]
    kubectl(kubeconfig, args)
    names = [f"crd/{n}" for n in table]
    kubectl(kubeconfig, ["wait", "--for=condition=Established", f"--timeout={timeout_s}s", *names])
    return table
