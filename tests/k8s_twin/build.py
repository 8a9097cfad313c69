"""Build the twin's control plane from Go modules and cache the binaries by version.

A small wrapper module (``tests/k8s_twin/gomod/go.mod`` and its ``go.sum``, committed)
requires ``k8s.io/kubernetes`` at the pinned tag and replaces each staging module kubernetes
points at ``./staging`` with its published ``v0.x`` release; one ``go build`` then compiles
``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``, ``kubectl`` and ``etcd``
(kubernetes' own go.mod pins etcd's server module), sharing every package they have in
common. Modules and the compile cache live beside the binaries under the cache root, outside
the checkout, so a second run finds the binaries and takes no time. Go is only this test
set-up's build tool: nothing in ``infra/`` imports or runs it. Builds run under ``nice -n
19`` so a build never starves other work on the machine.

The controllers the scheduling scenarios run (Kueue, kwok) are built apart, each by ``go
install PACKAGE@RELEASE`` in its own module's dependency graph (their client-go releases differ
from the control plane's), into ``<name>-<release>/bin`` under the same cache root. Volcano
cannot be built that way: its go.mod has a replace directive (``volcano.sh/apis`` =>
``./staging/...``), which ``go install PKG@VERSION`` refuses. `build_volcano` copies the
module the proxy serves into ``volcano-<release>/src``, lays the vendored ``volcano.sh/apis``
where that directive points, and runs ``go build`` there, under the module's own go.mod.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from tests.k8s_twin import versions

GOMOD_DIR = Path(__file__).resolve().parent / "gomod"
VENDOR_DIR = Path(__file__).resolve().parent / "vendor"
WRAPPER_MODULE = "railplan.dev/k8s-twin-build"


def go_env() -> dict[str, str]:
    """The go command's environment: module and build caches under the twin's cache root."""
    root = versions.cache_root()
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(root / "gomod"),
        GOCACHE=str(root / "gocache"),
        GOFLAGS="-buildvcs=false",
        CGO_ENABLED="0",
        GOTOOLCHAIN="local",
    )
    return env


def _go(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> str:
    """Run one go command niced; its stdout, or TwinBuildError with its stderr's tail."""
    proc = subprocess.run(
        ["nice", "-n", "19", "go", *args],
        cwd=cwd,
        env={**go_env(), **(extra_env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise TwinBuildError(f"go {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


class TwinBuildError(RuntimeError):
    """A go command failed; the message carries its command and the end of its stderr."""


def staging_modules() -> list[str]:
    """The k8s.io modules that kubernetes' go.mod replaces with ``./staging`` paths."""
    out = _go(
        ["mod", "download", "-json", f"k8s.io/kubernetes@{versions.KUBERNETES_VERSION}"], Path("/")
    )
    gomod = Path(json.loads(out)["GoMod"]).read_text()
    names = []
    for line in gomod.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "=>" and parts[2].startswith("./staging/"):
            names.append(parts[0])
    return names


def wrapper_go_mod(staging: list[str], required: set[str]) -> str:
    """The wrapper go.mod: kubernetes at its tag, each staging module it requires pinned."""
    lines = [
        f"module {WRAPPER_MODULE}",
        "",
        "go 1.26.0",
        "",
        "godebug default=go1.26",
        "",
        f"require k8s.io/kubernetes {versions.KUBERNETES_VERSION}",
        "",
        "replace (",
    ]
    lines += [f"\t{m} => {m} {versions.STAGING_VERSION}" for m in staging if m in required]
    lines += [")", ""]
    return "\n".join(lines)


def regenerate_gomod(workdir: Path) -> None:
    """Write a fresh wrapper go.mod and go.sum into `GOMOD_DIR` (after a version bump)."""
    staging = staging_modules()
    out = _go(
        ["mod", "download", "-json", f"k8s.io/kubernetes@{versions.KUBERNETES_VERSION}"], Path("/")
    )
    text = Path(json.loads(out)["GoMod"]).read_text()
    # Only staging modules kubernetes requires at v0.0.0 are replaced: the sample ones it
    # does not require are not all published.
    required = {m for m in staging if f"\t{m} v0.0.0" in text}
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "go.mod").write_text(wrapper_go_mod(staging, required))
    (workdir / "go.sum").unlink(missing_ok=True)
    # Loading every package the binaries import records each module's sum, no compiling.
    _go(
        ["list", "-mod=mod", "-deps", "-f", "{{.ImportPath}}", *versions.BINARIES.values()], workdir
    )
    GOMOD_DIR.mkdir(exist_ok=True)
    for name in ("go.mod", "go.sum"):
        shutil.copy(workdir / name, GOMOD_DIR / name)


def ldflags() -> str:
    """Stamp the release into the binaries, as kubernetes' own build does."""
    major, minor = versions.KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    stamps = {
        "gitVersion": versions.KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = " ".join(f"-X {pkg}.{k}={v}" for k, v in stamps.items())
    return f"-s -w {flags}"


def go_binary_name(pkg: str) -> str:
    """The file ``go build -o DIR`` writes for main package `pkg`: its last path element,
    or the one before when that is a major-version suffix (etcd's ``server/v3`` is ``server``).
    """
    parts = pkg.split("/")
    last = parts[-1]
    if len(parts) > 1 and last.startswith("v") and last[1:].isdigit():
        return parts[-2]
    return last


def build(force: bool = False) -> dict[str, object]:
    """Build the pinned binaries into the cache unless all are there; a summary dict."""
    out_dir = versions.bin_dir()
    missing = versions.BINARIES if force else versions.missing_binaries()
    if not missing:
        return {"bin_dir": str(out_dir), "built": [], "seconds": 0.0}
    if shutil.which("go") is None:
        raise TwinBuildError("the Go toolchain (`go`) is needed to build the twin's binaries")
    started = time.monotonic()
    src = versions.cache_root() / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name in ("go.mod", "go.sum"):
        shutil.copy(GOMOD_DIR / name, src / name)
    staging_dir = out_dir.with_name("bin.partial")
    shutil.rmtree(staging_dir, ignore_errors=True)
    staging_dir.mkdir(parents=True)
    pkgs = list(versions.BINARIES.values())
    _go(
        [
            "build",
            "-mod=readonly",
            "-trimpath",
            "-ldflags",
            ldflags(),
            "-o",
            str(staging_dir),
            *pkgs,
        ],
        src,
    )
    for name, pkg in versions.BINARIES.items():
        if go_binary_name(pkg) != name:
            (staging_dir / go_binary_name(pkg)).rename(staging_dir / name)
    shutil.rmtree(out_dir, ignore_errors=True)
    staging_dir.rename(out_dir)
    return {
        "bin_dir": str(out_dir),
        "built": list(versions.BINARIES),
        "seconds": round(time.monotonic() - started, 1),
    }


def build_controller(name: str, force: bool = False) -> dict[str, object]:
    """Build controller `name` of `versions.CONTROLLERS` into the cache unless it is there."""
    target = versions.controller_bin(name)
    if target.is_file() and not force:
        return {"binary": str(target), "built": False, "seconds": 0.0}
    if shutil.which("go") is None:
        raise TwinBuildError("the Go toolchain (`go`) is needed to build the twin's controllers")
    module, release, pkg, version_var = versions.CONTROLLERS[name]
    started = time.monotonic()
    partial = target.parent.with_name("bin.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    flags = f"-s -w -X {version_var}={release}"
    _go(
        ["install", "-trimpath", "-ldflags", flags, f"{pkg}@{release}"],
        Path("/"),
        {"GOBIN": str(partial)},
    )
    built = partial / go_binary_name(pkg)
    if built.name != name:
        built.rename(partial / name)
    shutil.rmtree(target.parent, ignore_errors=True)
    partial.rename(target.parent)
    return {
        "binary": str(target),
        "module": f"{module}@{release}",
        "built": True,
        "seconds": round(time.monotonic() - started, 1),
    }


def build_controllers(force: bool = False) -> dict[str, dict[str, object]]:
    """Every controller of `versions.CONTROLLERS`, built or found cached."""
    return {name: build_controller(name, force) for name in versions.CONTROLLERS}


def _volcano_source(src: Path) -> None:
    """Volcano's module at its release in `src`, with ``volcano.sh/apis`` where its go.mod's
    replace directive points (the module zip leaves that nested module out)."""
    module = f"volcano.sh/volcano@{versions.VOLCANO_VERSION}"
    info = json.loads(_go(["mod", "download", "-json", module], Path("/")))
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(info["Dir"], src)
    for path in [src, *src.rglob("*")]:  # the module cache's copy is read-only
        path.chmod(path.stat().st_mode | 0o200)
    tarball = VENDOR_DIR / versions.VOLCANO_APIS_TARBALL
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != versions.VOLCANO_APIS_SHA256:
        raise TwinBuildError(f"{tarball}: sha256 {digest}, not {versions.VOLCANO_APIS_SHA256}")
    with tarfile.open(tarball) as tar:
        tar.extractall(src, filter="data")
    if not (src / "staging/src/volcano.sh/apis/go.mod").is_file():
        raise TwinBuildError(f"{tarball} holds no staging/src/volcano.sh/apis/go.mod")


def build_volcano(force: bool = False) -> dict[str, object]:
    """Build `versions.VOLCANO_BINARIES` into the cache unless all are there."""
    target = versions.volcano_bin("vc-scheduler").parent
    if not versions.missing_volcano() and not force:
        return {"bin_dir": str(target), "built": [], "seconds": 0.0}
    if shutil.which("go") is None:
        raise TwinBuildError("the Go toolchain (`go`) is needed to build Volcano")
    started = time.monotonic()
    src = target.with_name("src")
    _volcano_source(src)
    partial = target.with_name("bin.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    pkg = "volcano.sh/volcano/pkg/version"
    flags = (
        f"-s -w -X {pkg}.Version={versions.VOLCANO_VERSION} "
        f"-X {pkg}.GitSHA={versions.VOLCANO_COMMIT}"
    )
    pkgs = list(versions.VOLCANO_BINARIES.values())
    _go(["build", "-mod=readonly", "-trimpath", "-ldflags", flags, "-o", str(partial), *pkgs], src)
    for name, main in versions.VOLCANO_BINARIES.items():
        (partial / go_binary_name(main)).rename(partial / name)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return {
        "bin_dir": str(target),
        "module": f"volcano.sh/volcano@{versions.VOLCANO_VERSION}",
        "built": list(versions.VOLCANO_BINARIES),
        "seconds": round(time.monotonic() - started, 1),
    }
