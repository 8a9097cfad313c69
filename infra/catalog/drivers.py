"""The NVIDIA driver a CUDA toolkit needs, and which kernel-module flavour a GPU should run.

Since CUDA 11 an application built with any toolkit of a major release family runs, through
minor-version compatibility, on the family's minimum driver (Linux x86_64); older drivers
cannot run it at all. One small table, shared by lint (a spec whose driver is below its
CUDA's minimum) and anything else that has to pick a driver for a CUDA version. Versions
compare numerically with `infra.catalog.nccl.version_key`. The kernel-module flavour (open or
proprietary, NVIDIA driver installation guide "Kernel Modules") follows the GPU's catalog
``open_kernel_modules`` and the driver branch: `kernel_modules_for`.

>>> cuda_min_driver("12.4").driver
'525.60.13'
>>> cuda_min_driver("14.0") is None
True
>>> kernel_modules_for("supported", 550), kernel_modules_for("recommended", 550)
('proprietary', 'open')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

_RELEASE_NOTES = (
    "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html, table 'CUDA Toolkit "
    "and Corresponding Driver Versions' (minimum required driver for minor version "
    "compatibility)"
)
_COMPAT_GUIDE = (
    "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html "
    "(table 'CUDA Toolkit 11.x, 12.x, and 13.x Minimum and Maximum Required Driver Versions')"
)


@dataclass(frozen=True)
class CudaDriverMinimum:
    """The oldest Linux driver that runs a CUDA major release family, and where it is stated."""

    cuda_major: int
    driver: str
    source: str


CUDA_DRIVER_MINIMUMS: Final[dict[int, CudaDriverMinimum]] = {
    m.cuda_major: m
    for m in (
        CudaDriverMinimum(
            11,
            "450.80.02",
            f"{_RELEASE_NOTES}: CUDA 11.x >= 450.80.02; {_COMPAT_GUIDE}: 'CUDA 11.0 was "
            "released with an earlier driver version, but by upgrading to Tesla Recommended "
            "Drivers 450.80.02 (Linux) ... minor version compatibility is possible across the "
            "CUDA 11.x family'",
        ),
        CudaDriverMinimum(12, "525.60.13", f"{_RELEASE_NOTES}: CUDA 12.x >= 525.60.13"),
        CudaDriverMinimum(
            13,
            "580",
            f"{_COMPAT_GUIDE}: CUDA 13.x '>= 580' (branch only: the exact first 580 driver "
            "was not read here, so any R580 driver passes)",
        ),
    )
}


MAX_COMPONENT_DIGITS = 9
"""No NVIDIA release has a version component longer than this; longer ones are not compared
(Python refuses to parse integers past 4,300 digits, and such a version is no release)."""


def comparable(*versions: str) -> bool:
    """Whether every dotted version is short enough to compare as numbers."""
    return all(
        len(part) <= MAX_COMPONENT_DIGITS for version in versions for part in version.split(".")
    )


def cuda_major(cuda: str) -> int:
    """The major release of a CUDA version (``12`` for ``12.4``)."""
    return int(cuda.split(".")[0])


def cuda_min_driver(cuda: str) -> CudaDriverMinimum | None:
    """The minimum driver for CUDA ``cuda``, or None for a major release railplan does not know."""
    return CUDA_DRIVER_MINIMUMS.get(cuda_major(cuda))


KernelModules = Literal["open", "proprietary"]
OpenModulesPolicy = Literal["required", "recommended", "supported"]

OPEN_MODULES_FIRST_BRANCH: Final = 515
"""First branch with the open kernel modules (NVIDIA driver installation guide, "Kernel
Modules", docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html,
catalog reference `driver-kernel-modules`): "Starting in the 515 driver release series, two
'flavors' of these kernel modules are provided"."""
OPEN_MODULES_DEFAULT_BRANCH: Final = 560
"""First branch whose default flavour is open: "Starting in the 560 driver release series, the
open kernel module flavor is the default and suggested installation" (same page)."""


def kernel_modules_for(policy: OpenModulesPolicy, branch: int) -> KernelModules:
    """The flavour NVIDIA recommends for a GPU with catalog ``policy`` on driver ``branch``.

    Open where the GPU needs or is recommended them (Hopper; Grace Hopper and Blackwell
    need them), and for every Turing+ GPU from R560, where open is NVIDIA's default;
    proprietary before R515 (no open flavour) and for `supported` GPUs (A100) before R560.
    A `required` GPU gets open on any branch: such GPUs (Grace Hopper, Blackwell) are newer
    than R515, so an older driver cannot drive them at all (lint RP033).
    """
    if policy == "required":
        return "open"
    if branch < OPEN_MODULES_FIRST_BRANCH:
        return "proprietary"
    if policy == "recommended" or branch >= OPEN_MODULES_DEFAULT_BRANCH:
        return "open"
    return "proprietary"


__all__ = [
    "CUDA_DRIVER_MINIMUMS",
    "MAX_COMPONENT_DIGITS",
    "OPEN_MODULES_DEFAULT_BRANCH",
    "OPEN_MODULES_FIRST_BRANCH",
    "CudaDriverMinimum",
    "KernelModules",
    "OpenModulesPolicy",
    "comparable",
    "cuda_major",
    "cuda_min_driver",
    "kernel_modules_for",
]
