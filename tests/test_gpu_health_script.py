"""The slurm role's GPU health check (Prolog and Epilog) run by bash against stand-ins.

`nvidia-smi` is the hardware boundary and is faked; `scontrol` and `logger` are faked too, so
the test reads what the script asked Slurm to do. The cluster twin runs the same script under
a real slurmd (tests/test_cluster_twin.py, the prolog scenario).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "playbooks/roles/slurm/files/railplan-gpu-health.sh"
LOST = "Unable to determine the device handle for GPU0: 00000000:07:00.0: GPU is lost."


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def _run(
    tmp_path: Path, smi: str, *, context: str = "prolog_slurmd", reason: str = ""
) -> tuple[int, list[str]]:
    """Run the check with ``smi`` as nvidia-smi's body; its exit code and scontrol calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "scontrol.calls"
    _fake(bin_dir, "nvidia-smi", smi)
    _fake(
        bin_dir,
        "scontrol",
        f'printf "%s\\n" "$*" >> {calls}\n'
        f'[ "$1" = show ] && echo "NodeName=gpu01 State=IDLE Reason={reason}"\nexit 0',
    )
    _fake(bin_dir, "logger", "exit 0")
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURMD_NODENAME": "gpu01",
        "SLURM_SCRIPT_CONTEXT": context,
    }
    done = subprocess.run(["bash", str(SCRIPT)], env=env, check=False, timeout=30)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return done.returncode, [line for line in lines if line.startswith("update")]


def test_a_healthy_node_passes_without_touching_slurm(tmp_path: Path) -> None:
    smi = 'echo "0, 00000000:07:00.0, 0, No"; echo "1, 00000000:0F:00.0, [N/A], [N/A]"'
    assert _run(tmp_path, smi) == (0, [])


def test_a_lost_gpu_drains_the_node_with_nvidia_smis_words(tmp_path: Path) -> None:
    code, updates = _run(tmp_path, f'echo "{LOST}"; exit 15')
    assert code == 1
    reason = f"railplan gpu health (prolog): nvidia-smi failed: {LOST}"
    assert updates == [f"update NodeName=gpu01 State=DRAIN Reason={reason}"]


def test_ecc_errors_and_a_pending_remap_are_named_per_gpu(tmp_path: Path) -> None:
    smi = 'echo "0, 00000000:07:00.0, 3, No"; echo "1, 00000000:0F:00.0, 0, Yes"'
    code, updates = _run(tmp_path, smi, context="epilog_slurmd")
    assert code == 1
    reason = (
        "railplan gpu health (epilog): GPU 0 (00000000:07:00.0) 3 uncorrectable ECC errors; "
        "GPU 1 (00000000:0F:00.0) row remap pending"
    )
    assert updates == [f"update NodeName=gpu01 State=DRAIN Reason={reason}"]


def test_the_epilog_keeps_the_reason_the_prolog_drained_with(tmp_path: Path) -> None:
    drained = f"railplan gpu health (prolog): nvidia-smi failed: {LOST}"
    code, updates = _run(tmp_path, "exit 15", context="epilog_slurmd", reason=drained)
    assert code == 1  # still fails: Slurm must know the node is bad
    assert updates == []


def test_a_drain_by_someone_else_is_replaced_by_the_gpu_reason(tmp_path: Path) -> None:
    code, updates = _run(tmp_path, "exit 15", reason="rolling update")
    assert code == 1 and len(updates) == 1 and "railplan gpu health (prolog)" in updates[0]
