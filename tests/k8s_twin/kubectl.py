"""Run the twin's own ``kubectl`` (the one built with the control plane) against it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.k8s_twin import versions


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message carries its command line and stderr."""

    def __init__(self, args: list[str], proc: subprocess.CompletedProcess[str]) -> None:
        super().__init__(
            f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.strip()}"
        )
        self.proc = proc


def kubectl_run(
    kubeconfig: Path, args: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run kubectl with `args`; the completed process, whatever its exit code."""
    return subprocess.run(
        [str(versions.bin_dir() / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def kubectl(kubeconfig: Path, args: list[str], stdin: str | None = None) -> str:
    """Run kubectl with `args`; its stdout, or KubectlError when it fails."""
    proc = kubectl_run(kubeconfig, args, stdin)
    if proc.returncode != 0:
        raise KubectlError(args, proc)
    return proc.stdout
