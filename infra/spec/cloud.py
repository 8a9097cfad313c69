"""The spec's `aws` section: settings of the AWS target that predictions must see too.

Most of an AWS deployment's settings are the Pulumi stack's (AMI, Availability Zone, key
pair, bastion CIDRs): they change nothing railplan predicts. The checkpoint file system does:
its size and throughput tier set how fast a checkpoint lands, so the checkpoint budget and
the Pulumi program read them from here. Without `aws.fsx` railplan sizes the file system
from the checkpoint budgets itself (`infra.catalog.fsx`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from infra.spec.base import StrictModel

__all__ = ["Aws", "FsxSettings"]

# The valid values as infra.catalog.fsx states them with their sources (a test keeps the two
# in step; the spec cannot import the catalog).
FSX_CAPACITY_FIRST = (1200, 2400)
FSX_CAPACITY_STEP = 2400


class FsxSettings(StrictModel):
    """The FSx for Lustre file system (PERSISTENT_2, SSD) the AWS target creates."""

    storage_capacity_gib: int = Field(
        ge=1200,
        le=10_000_000,
        description="Storage capacity, GiB (AWS's StorageCapacity): 1200, 2400 or a "
        "multiple of 2400.",
    )
    throughput_MBps_per_TiB: Literal[125, 250, 500, 1000] = Field(
        description="Per-unit storage throughput, MB/s per TiB of capacity (AWS's "
        "PerUnitStorageThroughput); the file system writes capacity x this in all."
    )

    @field_validator("storage_capacity_gib")
    @classmethod
    def _valid_capacity(cls, gib: int) -> int:
        if gib not in FSX_CAPACITY_FIRST and gib % FSX_CAPACITY_STEP:
            low = FSX_CAPACITY_STEP * (gib // FSX_CAPACITY_STEP)
            raise ValueError(
                f"FSx for Lustre PERSISTENT_2 SSD capacity is 1200, 2400 or a multiple of "
                f"2400 GiB, not {gib}: use {low} or {low + FSX_CAPACITY_STEP}"
            )
        return gib


class Aws(StrictModel):
    """Settings of the AWS target (node groups of `aws-*` instance types)."""

    fsx: FsxSettings | None = Field(
        None,
        description="The checkpoint file system's size and tier. Without it railplan sizes "
        "one from the checkpoint budgets (the cheapest that meets the strictest budget and "
        "holds two checkpoints), and creates none when there is no checkpoint budget.",
    )
