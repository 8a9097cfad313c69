"""What each target OS's own Slurm packages can do, and which cgroup hierarchy the OS boots.

The slurm role installs the distribution's Slurm (munge, slurmd, slurmctld from the OS
archive). Two of its build choices decide whether the rendered configuration can work:

- the cgroup plugins: Slurm 21.08 has only ``cgroup/v1``; ``cgroup/v2`` arrived in 22.05.
  On an OS that boots the unified (v2) hierarchy, slurmd 21.08 with ``CgroupPlugin=autodetect``
  stops with "cannot create cgroup context for cgroup/v2", so such a node must boot the legacy
  hierarchy (``systemd.unified_cgroup_hierarchy=0``);
- ``SuspendExcStates`` (Slurm 23.02 and later): without it, power saving powers off a node
  that is drained, as a rolling update drains it, once it has been idle for SuspendTime
  (power_save.c: IDLE or DOWN, whatever the DRAIN flag says);
- NVML: ``AutoDetect=nvml`` in gres.conf (what SchedMD documents for MIG) needs the
  ``gpu/nvml`` plugin, built only against NVIDIA's NVML headers. Neither Ubuntu release builds
  it, so slurmd stops with "We were configured to autodetect nvml functionality, but we
  weren't able to find that lib when Slurm was configured".

Read off the packages themselves: the file lists of ``slurm-wlm-basic-plugins`` in the Ubuntu
archive (checked on this project's cluster twin, which installs them).

>>> distro_slurm("ubuntu-22.04").cgroup_v2, distro_slurm("ubuntu-24.04").cgroup_v2
(False, True)
>>> needs_legacy_cgroups("ubuntu-22.04"), needs_legacy_cgroups("ubuntu-24.04")
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DISTRO_SLURM",
    "DistroSlurm",
    "distro_slurm",
    "has_suspend_exc_states",
    "needs_legacy_cgroups",
]

_ARCHIVE = "http://archive.ubuntu.com/ubuntu/pool/universe/s/slurm-wlm/"


@dataclass(frozen=True)
class DistroSlurm:
    """The Slurm an OS ships, and the cgroup hierarchy the OS boots by default."""

    os: str
    version: str
    cgroup_v2: bool  # has the cgroup/v2 plugin
    nvml: bool  # has the gpu/nvml plugin (gres.conf AutoDetect=nvml)
    boots_unified: bool  # systemd mounts cgroup v2 only, unless told otherwise
    source: str


DISTRO_SLURM: Final[dict[str, DistroSlurm]] = {
    d.os: d
    for d in (
        DistroSlurm(
            "ubuntu-22.04", "21.08.5", cgroup_v2=False, nvml=False, boots_unified=True,
            source=f"{_ARCHIVE} slurm-wlm-basic-plugins_21.08.5-2ubuntu1_amd64.deb: "
            "slurm-wlm/cgroup_v1.so and gpu_generic.so, no cgroup_v2.so, no gpu_nvml.so; "
            "Ubuntu 21.10 release notes: unified cgroup hierarchy (v2) by default",
        ),
        DistroSlurm(
            "ubuntu-24.04", "23.11.4", cgroup_v2=True, nvml=False, boots_unified=True,
            source=f"{_ARCHIVE} slurm-wlm-basic-plugins_23.11.4-1.2ubuntu5_amd64.deb: "
            "cgroup_v1.so, cgroup_v2.so, gpu_generic.so, gpu_nrt.so, no gpu_nvml.so",
        ),
    )
}  # fmt: skip


def distro_slurm(os_name: str) -> DistroSlurm | None:
    """The OS's own Slurm, or None where railplan has not read its packages (RHEL: EPEL)."""
    return DISTRO_SLURM.get(os_name)


def has_suspend_exc_states(os_name: str) -> bool:
    """Whether the OS's Slurm knows SuspendExcStates (23.02 and later; slurm.conf(5))."""
    found = distro_slurm(os_name)
    return found is not None and tuple(int(p) for p in found.version.split(".")[:2]) >= (23, 2)


def needs_legacy_cgroups(os_name: str) -> bool:
    """Whether the OS boots cgroup v2 but its Slurm has no cgroup/v2 plugin."""
    found = distro_slurm(os_name)
    return found is not None and found.boots_unified and not found.cgroup_v2
