"""FSx for Lustre facts and the file system railplan provisions for a spec.

An AWS cluster's checkpoint storage is the Amazon FSx for Lustre file system (PERSISTENT_2,
SSD) that the Pulumi program creates. Two stages need the same answer to "which file
system": the checkpoint budget predicts its write time and the AWS target declares it, so
the rule lives here, below both: `provisioned_fsx` takes the spec's `aws.fsx` when the user
fixes size and tier, and otherwise sizes one from the spec's checkpoint budgets
(`fsx_size`: capacity x per-unit throughput meets bytes / max_s and holds two checkpoints).
Facts with their sources:

* per-unit storage throughput of PERSISTENT_2 SSD is 125, 250, 500 or 1000 MB/s per TiB
  ("For Persistent 2 SSD-based deployment types, valid values are 125, 250, 500, and 1000
  MBps/TiB", https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html);
* storage capacity is "1200 GiB, 2400 GiB, and increments of 2400 GiB" (FSx API
  CreateFileSystem StorageCapacity, SCRATCH_2, PERSISTENT_2 and PERSISTENT_1 SSD);
* writes run at the file system's disk throughput: "When you write data to your file system
  ... file system performance is determined by the lower of the network throughput and disk
  throughput" (https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html), and for
  PERSISTENT-125/250/500/1000 the disk throughput per TiB is the tier itself while the
  network baseline is higher (320, 640, 1300, 2600 MB/s per TiB; the SSD table of
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html). So a file system
  writes capacity (TiB) x tier MB/s in all (`FsxLustre.write_GBps`).

What one client instance reaches is a fact of the instance (`Node.fsx_client_gbps`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from infra.spec import Spec
from infra.spec.budgets import CheckpointEntry

__all__ = [
    "FSX_CAPACITY_STEP_GIB",
    "FSX_CHECKPOINTS_KEPT",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_TIERS",
    "FsxLustre",
    "fsx_capacity_and_tier",
    "fsx_size",
    "provisioned_fsx",
    "valid_capacity",
]

# The price weights rank the tiers only: rounded ratios of the list prices per GB-month as a
# third-party table quoted them (ap-northeast-1, September 2022: 0.31, 0.46, 0.77 and 1.39
# USD per hour for 1.2 TiB at 125/250/500/1000), not checked against the AWS pricing page.
# A higher tier costs more per GiB but less per MB/s; the weights are not a cost estimate.
FSX_TIERS: Mapping[int, float] = {125: 1.0, 250: 1.5, 500: 2.5, 1000: 4.5}
FSX_MIN_CAPACITY_GIB = 1200
FSX_CAPACITY_STEP_GIB = 2400
# Keep two checkpoints: the one being written must not overwrite the last good one.
FSX_CHECKPOINTS_KEPT = 2


@dataclass(frozen=True, slots=True)
class FsxLustre:
    """A PERSISTENT_2 SSD file system: capacity (GiB), tier (MB/s per TiB), who chose them.

    ``source`` is ``aws.fsx`` when the spec fixes the size and tier, else
    ``checkpoint budgets`` (sized by `fsx_size`'s rule for the strictest budget).
    """

    capacity_gib: int
    tier: int
    source: Literal["aws.fsx", "checkpoint budgets"]

    @property
    def write_GBps(self) -> float:
        """Aggregate write throughput, GB/s: capacity (TiB) x tier (MB/s per TiB) / 1000.

        >>> FsxLustre(24000, 1000, "aws.fsx").write_GBps
        23.4375
        """
        return self.capacity_gib / 1024 * self.tier / 1000

    @property
    def capacity_bytes(self) -> int:
        """Storage capacity in bytes."""
        return self.capacity_gib * 2**30

    def describe(self) -> str:
        """What a checkpoint lands on, in words.

        >>> FsxLustre(2400, 250, "aws.fsx").describe()
        'the FSx for Lustre file system railplan provisions (PERSISTENT_2, 2,400 GiB at 250 MB/s/TiB, as aws.fsx sets)'
        """
        how = "as aws.fsx sets" if self.source == "aws.fsx" else "sized from the checkpoint budgets"
        return (
            "the FSx for Lustre file system railplan provisions (PERSISTENT_2, "
            f"{self.capacity_gib:,} GiB at {self.tier} MB/s/TiB, {how})"
        )


def provisioned_fsx(spec: Spec, margin: Callable[[str], float] | None = None) -> FsxLustre | None:
    """The FSx file system the AWS target creates for ``spec``, or None when it creates none.

    The spec's ``aws.fsx`` when given (the user's size and tier); otherwise, when the spec
    declares checkpoint budgets, the cheapest file system that writes the largest
    bytes-per-second any of them asks for, times ``margin(budget.bound)`` (the budget stage
    passes its error band's slow edge, so a file system sized for a budget meets the bound the
    budget tests), and holds two of the largest checkpoint.
    """
    fixed = spec.aws.fsx
    if fixed is not None:
        return FsxLustre(fixed.storage_capacity_gib, fixed.throughput_MBps_per_TiB, "aws.fsx")
    budgets = [b.checkpoint for b in spec.budgets if isinstance(b, CheckpointEntry)]
    if not budgets:
        return None
    keep = FSX_CHECKPOINTS_KEPT * max(b.bytes for b in budgets)
    scale = margin or (lambda bound: 1.0)
    mbps = max(b.bytes / b.max_s / 1e6 * scale(b.bound) for b in budgets)
    capacity, tier = fsx_capacity_and_tier(keep, mbps)
    return FsxLustre(capacity, tier, "checkpoint budgets")


def fsx_size(nbytes: int, max_s: float) -> tuple[int, int]:
    """Size a PERSISTENT_2 file system for a checkpoint of ``nbytes`` within ``max_s`` seconds.

    Needs: capacity x tier >= ``nbytes / max_s`` (MB/s; 1 MB = 10**6 bytes, the conservative
    reading of AWS's "MB/s") and capacity >= two checkpoints. Rule: for every tier take the
    smallest valid capacity that meets both, then the cheapest by ``capacity x FSX_TIERS[tier]``;
    on a tie the lower tier (it gives more capacity for the price).

    >>> fsx_size(2_800_000_000_000, 120)
    (24000, 1000)
    >>> fsx_size(10**9, 600)
    (1200, 125)

    Returns:
        ``(storage capacity in GiB, per-unit storage throughput in MB/s/TiB)``.

    Raises:
        ValueError: ``nbytes`` or ``max_s`` is not positive.
    """
    if nbytes <= 0 or max_s <= 0:
        raise ValueError(f"checkpoint bytes and max_s must be positive, got {nbytes}, {max_s}")
    return fsx_capacity_and_tier(FSX_CHECKPOINTS_KEPT * nbytes, nbytes / max_s / 1e6)


def fsx_capacity_and_tier(keep_bytes: int, mbps: float) -> tuple[int, int]:
    """The cheapest (capacity GiB, tier) holding ``keep_bytes`` and writing ``mbps`` MB/s."""
    floor_gib = keep_bytes / 2**30
    options = []
    for tier, weight in FSX_TIERS.items():
        capacity = valid_capacity(max(floor_gib, mbps * 1024 / tier))
        options.append((capacity * weight, tier, capacity))
    _, tier, capacity = min(options)
    return capacity, tier


def valid_capacity(gib: float) -> int:
    """The smallest PERSISTENT_2 SSD capacity of at least ``gib``: 1200, 2400, 4800, ...

    >>> valid_capacity(1300)
    2400
    """
    if gib <= FSX_MIN_CAPACITY_GIB:
        return FSX_MIN_CAPACITY_GIB
    return FSX_CAPACITY_STEP_GIB * max(1, math.ceil(gib / FSX_CAPACITY_STEP_GIB))
