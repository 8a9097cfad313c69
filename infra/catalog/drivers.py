"""The NVIDIA driver a CUDA toolkit needs: the minimum per CUDA major release, with sources.

Since CUDA 11 an application built with any toolkit of a major release family runs, through
minor-version compatibility, on the family's minimum driver (Linux x86_64); older drivers
cannot run it at all. One small table, shared by lint (a spec whose driver is below its
CUDA's minimum) and anything else that has to pick a driver for a CUDA version. Versions
compare numerically with `infra.catalog.nccl.version_key`.

>>> cuda_min_driver("12.4").driver
'525.60.13'
>>> cuda_min_driver("14.0") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

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


__all__ = [
    "CUDA_DRIVER_MINIMUMS",
    "MAX_COMPONENT_DIGITS",
    "CudaDriverMinimum",
    "comparable",
    "cuda_major",
    "cuda_min_driver",
]
