"""Drive the Kubernetes twin by hand: ``python -m tests.k8s_twin VERB [--workdir DIR]``.

``build`` builds (or finds cached) the pinned binaries, then the controllers (Kueue, kwok),
then Volcano's scheduler and controller manager; ``up`` starts the control plane and
leaves it running (``kubectl --kubeconfig DIR/admin.kubeconfig`` reaches it); ``crds``
installs the controllers' CRDs; ``apply SPEC...`` renders each spec and applies its
manifests; ``down`` stops what ``up`` started; ``all SPEC...`` does build, up, crds, apply
and down in one go, one fresh control plane per spec (each apply starts from an empty
cluster); ``gomod`` rewrites ``gomod/go.mod`` and ``go.sum`` after a bump in
``versions.py``. Each verb prints one JSON document; exit 1 when an object was refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.k8s_twin import apply, build, crds, versions
from tests.k8s_twin.control_plane import ControlPlane

DEFAULT_WORKDIR = Path("/var/tmp/railplan-k8s-twin/run")


def apply_specs(kubeconfig: Path, specs: list[Path]) -> dict[str, dict[str, object]]:
    """Render and apply each spec into the running twin; a summary per spec."""
    out: dict[str, dict[str, object]] = {}
    for spec in specs:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="k8s-twin-render-") as tmp:
            k8s_dir = apply.render(apply.materialise(spec, Path(tmp)), Path(tmp) / "root")
            results = apply.apply_tree(kubeconfig, k8s_dir)
            skipped = apply.skipped_helm_releases(k8s_dir)
        out[str(spec)] = {
            "objects": len(results),
            "accepted": sum(r.accepted for r in results),
            "refused": [r.as_dict() for r in results if not r.accepted],
            "skipped": skipped,
            "seconds": round(time.monotonic() - started, 1),
        }
    return out


def run_all(workdir: Path, specs: list[Path]) -> dict[str, object]:
    """Build, then per spec a fresh control plane: up, CRDs, apply, down."""
    per_spec: dict[str, object] = {}
    report: dict[str, object] = {"build": build.build(), "specs": per_spec}
    for i, spec in enumerate(specs):
        plane = ControlPlane(workdir / f"spec{i}")
        plane.up()
        try:
            started = time.monotonic()
            table = crds.install(plane.kubeconfig)
            crd_s = round(time.monotonic() - started, 1)
            applied = apply_specs(plane.kubeconfig, [spec])
            footprint = plane.footprint()
        finally:
            left = plane.down()
        per_spec[str(spec)] = {
            "up": plane.timings,
            "crds": len(table),
            "crds_s": crd_s,
            **applied[str(spec)],
            "footprint": footprint,
            "left_running": left,
        }
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.k8s_twin", description=__doc__.splitlines()[0]
    )
    parser.add_argument("verb", choices=["build", "up", "crds", "apply", "down", "all", "gomod"])
    parser.add_argument("specs", nargs="*", type=Path)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    args.specs = args.specs or list(apply.DEFAULT_SPECS)
    report: dict[str, object]
    if args.verb == "build":
        report = {
            "control_plane": build.build(),
            "controllers": build.build_controllers(),
            "volcano": build.build_volcano(),
        }
    elif args.verb == "gomod":
        build.regenerate_gomod(versions.cache_root() / "regen")
        report = {"written": [str(build.GOMOD_DIR / "go.mod"), str(build.GOMOD_DIR / "go.sum")]}
    elif args.verb == "up":
        plane = ControlPlane(args.workdir)
        plane.up()
        report = {
            "kubeconfig": str(plane.kubeconfig),
            "timings": plane.timings,
            "ports": plane.ports,
        }
    elif args.verb == "crds":
        report = dict(crds.install(ControlPlane.load(args.workdir).kubeconfig))
    elif args.verb == "apply":
        report = dict(apply_specs(ControlPlane.load(args.workdir).kubeconfig, args.specs))
    elif args.verb == "down":
        report = {"left_running": ControlPlane.load(args.workdir).down()}
    else:
        report = run_all(args.workdir, args.specs)
    print(json.dumps(report, indent=2))
    return 1 if _failed(report) else 0


def _failed(report: object) -> bool:
    """Any refused object or process left running, anywhere in the report."""
    if isinstance(report, dict):
        if report.get("refused") or report.get("left_running"):
            return True
        return any(_failed(v) for v in report.values())
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
