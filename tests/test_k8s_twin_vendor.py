"""The Kubernetes twin's vendored Go source is what its SOURCES.md says, without Go or a cluster.

`build.build_volcano` unpacks ``tests/k8s_twin/vendor/volcano-apis-v1.15.1.tar.gz`` where
Volcano's go.mod points its ``volcano.sh/apis`` replace directive; a wrong or changed tarball
would fail only in ``make k8s-twin``, after a long build. These checks run in ``make test``.
"""

from __future__ import annotations

import hashlib
import tarfile

from tests.k8s_twin import build, versions

TARBALL = build.VENDOR_DIR / versions.VOLCANO_APIS_TARBALL
PREFIX = "staging/src/volcano.sh/apis/"


def test_the_vendored_apis_tarball_has_the_pinned_digest() -> None:
    digest = hashlib.sha256(TARBALL.read_bytes()).hexdigest()
    assert digest == versions.VOLCANO_APIS_SHA256
    sources = (build.VENDOR_DIR / "SOURCES.md").read_text()
    assert digest in sources and versions.VOLCANO_COMMIT in sources


def test_the_tarball_holds_the_apis_module_where_the_replace_points() -> None:
    with tarfile.open(TARBALL) as tar:
        members = tar.getmembers()
        gomod = tar.extractfile(PREFIX + "go.mod")
        assert gomod is not None
        first = gomod.read().decode().splitlines()[0]
    assert first == "module volcano.sh/apis"
    files = [m for m in members if m.isfile()]
    assert files and all(m.name.startswith(PREFIX) for m in files)
    # nothing that would land outside the build's source folder, no links
    assert not any(m.issym() or m.islnk() or ".." in m.name.split("/") for m in members)
    assert any(m.name.endswith("pkg/apis/topology/v1alpha1/hypernode_types.go") for m in files)


def test_volcano_binaries_are_named_as_its_makefile_names_them() -> None:
    built = {build.go_binary_name(pkg) for pkg in versions.VOLCANO_BINARIES.values()}
    assert built == {"scheduler", "controller-manager"}
    assert set(versions.VOLCANO_BINARIES) == {"vc-scheduler", "vc-controller-manager"}
