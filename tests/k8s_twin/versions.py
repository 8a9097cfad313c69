"""The Kubernetes twin's pinned versions and where their build output is cached.

One Kubernetes release (``k8s.io/kubernetes``, its staging modules at the matching ``v0.x``)
and the etcd that release's own integration tests run (``hack/lib/etcd.sh`` of that tag); the
controllers the scheduling scenarios run against it (Kueue, Volcano, and kwok as the nodes'
simulated kubelet), each built from its own module at its release tag with that module's own
go.mod.
Every version the twin uses is named here and nowhere else, so a bump is one edit; the
cache directory is keyed by these versions, so a bump builds afresh and never mixes
binaries of two releases.
"""

from __future__ import annotations

import os
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
# Each staging module (k8s.io/api, k8s.io/apiserver, ...) is published as v0.<minor>.<patch>
# of the release: kubernetes' own go.mod points them at ./staging, which a dependent
# module cannot follow, so the wrapper module pins each to this version.
STAGING_VERSION = "v0.37.2"
# kubernetes v1.37.2's hack/lib/etcd.sh runs etcd 3.7.0, and its go.mod requires
# go.etcd.io/etcd/server/v3 v3.7.0: the same module graph builds etcd at no extra download.
ETCD_VERSION = "v3.7.0"

# The binaries the twin runs: name -> Go package path.
BINARIES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}

# The controllers: name -> (module, release, main package, the variable its release build
# stamps with the version). Each is built by ``go install PACKAGE@RELEASE``, with the module's
# own dependency graph (Kueue v0.17.0 requires k8s.io/api v0.35.3, kwok v0.8.0 v0.36.1: neither
# could share the control plane's v1.37.2 graph, nor needs to).
KUEUE_VERSION = "v0.17.0"
KWOK_VERSION = "v0.8.0"
CONTROLLERS = {
    "kueue": (
        "sigs.k8s.io/kueue",
        KUEUE_VERSION,
        "sigs.k8s.io/kueue/cmd/kueue",
        "sigs.k8s.io/kueue/pkg/version.GitVersion",
    ),
    "kwok": (
        "sigs.k8s.io/kwok",
        KWOK_VERSION,
        "sigs.k8s.io/kwok/cmd/kwok",
        "sigs.k8s.io/kwok/pkg/consts.Version",
    ),
}

# Volcano: its scheduler (vc-scheduler) and controller manager, built from the release's module
# (the proxy serves ``volcano.sh/volcano@v1.15.1`` when asked for exactly that version) inside
# the extracted module folder, so its own go.mod and replace directives apply. That go.mod
# replaces ``volcano.sh/apis`` with ``./staging/src/volcano.sh/apis``, a nested module the
# module zip leaves out and the proxy does not serve: it is vendored from the same tag
# (``vendor/SOURCES.md``), checked against this digest before use.
VOLCANO_VERSION = "v1.15.1"
VOLCANO_COMMIT = "0a56ed331897f5455916a44d3075671376d731d6"
VOLCANO_APIS_TARBALL = "volcano-apis-v1.15.1.tar.gz"
VOLCANO_APIS_SHA256 = "25f668ae8a6c0a6a8c0ae276c4c39bcd980d56ca1497f785445f93b51bcfd253"
# name -> main package inside the module, named as Volcano's own Makefile names the binaries.
VOLCANO_BINARIES = {
    "vc-scheduler": "./cmd/scheduler",
    "vc-controller-manager": "./cmd/controller-manager",
}

DEFAULT_CACHE = Path("/var/cache/railplan-k8s-twin")


def cache_root() -> Path:
    """The cache outside the checkout (``RAILPLAN_K8S_TWIN_CACHE`` overrides it)."""
    return Path(os.environ.get("RAILPLAN_K8S_TWIN_CACHE", str(DEFAULT_CACHE)))


def bin_dir() -> Path:
    """Where the binaries of the pinned versions live once built."""
    return cache_root() / f"kubernetes-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}" / "bin"


def missing_binaries() -> list[str]:
    """The pinned binaries not (yet) in the cache, in `BINARIES` order."""
    return [name for name in BINARIES if not (bin_dir() / name).is_file()]


def controller_bin(name: str) -> Path:
    """The cached binary of controller `name` (a key of `CONTROLLERS`) at its release."""
    version = CONTROLLERS[name][1]
    return cache_root() / f"{name}-{version}" / "bin" / name


def missing_controllers() -> list[str]:
    """The controllers whose binary is not (yet) in the cache, in `CONTROLLERS` order."""
    return [name for name in CONTROLLERS if not controller_bin(name).is_file()]


def volcano_bin(name: str) -> Path:
    """The cached Volcano binary `name` (a key of `VOLCANO_BINARIES`) at its release."""
    return cache_root() / f"volcano-{VOLCANO_VERSION}" / "bin" / name


def missing_volcano() -> list[str]:
    """The Volcano binaries not (yet) in the cache, in `VOLCANO_BINARIES` order."""
    return [name for name in VOLCANO_BINARIES if not volcano_bin(name).is_file()]


def skip_module_unless_runnable(
    target: str, *, controllers: bool, volcano: bool = False
) -> list[str]:
    """Skip the calling test module outside ``make TARGET`` (RAILPLAN_K8S_TWIN=1), and outside
    CI where the binaries are not built; the missing binaries (CI fails on them in a fixture)."""
    import pytest  # test infrastructure only: the builder above runs without pytest

    missing = missing_binaries() + (missing_controllers() if controllers else [])
    missing += missing_volcano() if volcano else []
    if os.environ.get("RAILPLAN_K8S_TWIN") != "1":
        pytest.skip(
            f"the Kubernetes twin runs under `make {target}` (RAILPLAN_K8S_TWIN=1)",
            allow_module_level=True,
        )
    if missing and os.environ.get("CI") != "true":
        pytest.skip(
            f"Kubernetes twin binaries not built in {bin_dir()} ({', '.join(missing)}): "
            "run `make k8s-twin-build`",
            allow_module_level=True,
        )
    return missing
