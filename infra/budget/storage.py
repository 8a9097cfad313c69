"""Checkpoint time: checkpoint bytes over the slowest stage between the writers and the filesystem.

Writes leave through the storage NICs of the nodes that write (every node of the job for a
sharded checkpoint; for a `replica` checkpoint only data-parallel rank 0 of each model shard,
the nodes of one replica), each node at most at the filesystem's per-client rate where the
spec states one (``fabrics.storage.client_GBps``), then cross the storage fabric (its
leaf-spine capacity) into the storage systems' ports, and land in the filesystem at its rated
throughput (``fabrics.storage.filesystem_gbps``). NICs reach about 96 % of line rate (NCCL's
48 of 50 GB/s on NDR). Before any of that, each writing node copies and serialises its
tensors at a fitted per-node rate (`checkpoint_term`); the time is set by the narrowest of
these stages. The published checkpoint timings in ``tests/data/checkpoint-measurements.yaml``
fit that rate (their fit half) and give the band (their held-out half, `checkpoint_band`).

An AWS cluster has no storage fabric: its instances write to the FSx for Lustre file system
the AWS target creates for the spec (the spec's `aws.fsx`, else sized from its checkpoint
budgets), each at most at its instance's FSx client rate, all together at most at the file
system's write throughput (capacity x per-unit throughput tier).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infra.budget.bands import MIN_ROWS, Band, Fit, lower_band, ratios_for, table
from infra.budget.checkpoint_term import STAGE, serialisation_gbs
from infra.catalog import Catalog
from infra.catalog.fsx import FsxLustre, provisioned_fsx
from infra.spec import Spec
from infra.topology import Plan, Server
from infra.wording import plural

__all__ = [
    "CHECKPOINT_LEVELS",
    "NIC_EFFICIENCY",
    "CheckpointEstimate",
    "checkpoint_band",
    "checkpoint_estimate",
    "published_checkpoint_ratio",
    "sized_fsx",
]

NIC_EFFICIENCY = 0.96
FSX_CLIENT = "FSx client"  # a stage of the writers' client rates added up: "16 FSx clients"
FSX_STAGE = "FSx file system"
FSX_CAPACITY_STAGE = "FSx capacity"


@dataclass(frozen=True)
class CheckpointEstimate:
    """Seconds to write a checkpoint and the stage that limits it (GB/s of each stage)."""

    seconds: float
    limiter: str
    stages_gbs: dict[str, float]
    writer_nodes: int = 0
    storage: str = ""  # what the checkpoint lands on when railplan provisions it (FSx)


def checkpoint_estimate(
    nbytes: int, spec: Spec, catalog: Catalog, plan: Plan, writer_nodes: int | None = None
) -> CheckpointEstimate:
    """Estimate the write time of ``nbytes`` from ``writer_nodes`` servers (default: all).

    Without a storage fabric, AWS instances write to the FSx for Lustre file system the AWS
    target creates for the spec (`infra.catalog.fsx.provisioned_fsx`).

    Raises:
        ValueError: the spec has no storage fabric and its writers are not AWS instances.
    """
    storage = spec.fabrics.storage
    servers = plan.servers if writer_nodes is None else plan.servers[:writer_nodes]
    if storage is None:
        return _fsx_estimate(nbytes, spec, catalog, servers)
    rate = catalog.switches[storage.switch].port_gbps / 8 * NIC_EFFICIENCY
    node_ports = sum(catalog.nodes[s.node].storage_nic_ports for s in servers)
    stages = {"writers' storage NICs": node_ports * rate}
    stages[STAGE] = serialisation_gbs(len(servers))
    if storage.client_GBps:
        stages[clients(len(servers), "filesystem client")] = len(servers) * storage.client_GBps
    uplinks = len(plan.cables_in("storage", "leaf_spine"))
    if uplinks:
        stages["storage fabric uplinks"] = uplinks * rate
    if storage.storage_ports:
        stages["storage system ports"] = storage.storage_ports * rate
    if storage.filesystem_gbps:
        stages["filesystem"] = storage.filesystem_gbps
    return _narrowest(nbytes, stages, len(servers))


def clients(count: int, noun: str) -> str:
    """The stage of ``count`` writers' client rates added up, named so: "16 FSx clients".

    Not "per client": the stage's GB/s is all of them together (16 x 12.5 GB/s = 200 GB/s).
    """
    return plural(count, noun)


def _narrowest(
    nbytes: int, stages: dict[str, float], writers: int, storage: str = ""
) -> CheckpointEstimate:
    """The estimate when the narrowest of ``stages`` (GB/s) sets the time."""
    limiter = min(stages, key=lambda k: stages[k])
    gbs = stages[limiter]
    seconds = nbytes / 1e9 / gbs if gbs > 0 else math.inf
    return CheckpointEstimate(seconds, limiter, stages, writers, storage)


def _fsx_estimate(
    nbytes: int, spec: Spec, catalog: Catalog, servers: Sequence[Server]
) -> CheckpointEstimate:
    """The write time to the FSx for Lustre file system the AWS target creates for the spec.

    Stages: the writers' serialisation, each writer at its instance's FSx client rate
    (`Node.fsx_client_gbps`), and the file system's write throughput (capacity x tier). A
    checkpoint larger than the file system never lands: its capacity stage is 0 GB/s.

    Raises:
        ValueError: a writing server is not an AWS instance (no storage fabric to write to).
    """
    rates = [catalog.nodes[s.node].fsx_client_gbps for s in servers]
    fsx = sized_fsx(spec)
    if fsx is None or not rates or any(rate is None for rate in rates):
        also = "; aws.fsx is for AWS instance types only" if spec.aws.fsx else ""
        raise ValueError(f"no storage fabric in the spec (fabrics.storage){also}")
    stages = {STAGE: serialisation_gbs(len(servers))}
    stages[clients(len(rates), FSX_CLIENT)] = sum(rate / 8 for rate in rates if rate is not None)
    stages[FSX_STAGE] = round(fsx.write_GBps, 6)
    if nbytes > fsx.capacity_bytes:  # it never lands: no time is long enough
        held = f"{fsx.capacity_bytes / 1e9:,.0f} GB, less than the checkpoint"
        stages[f"{FSX_CAPACITY_STAGE} ({held})"] = 0.0
    return _narrowest(nbytes, stages, len(servers), fsx.describe())


CHECKPOINT_LEVELS = ["checkpoint, I/O-bound estimate", "all rows"]
"""The regimes of a checkpoint time (one: the published timings are few)."""


def checkpoint_band(seconds: float, nbytes: int, writer_gpus: int) -> tuple[Band | None, Fit]:
    """The band of a checkpoint time estimate, and whether a published timing is near it.

    A band needs `MIN_ROWS` held-out timings (the held-out half of the published ones,
    docs/accuracy.md, Checkpoints); with fewer there is none, and the budget tests the
    estimate itself and says so. Calibrated when a published checkpoint is within a factor of
    two in size and in writing GPUs.
    """
    ratios = ratios_for("checkpoint", CHECKPOINT_LEVELS)
    band = lower_band(seconds, ratios, 3) if ratios.rows >= MIN_ROWS else None
    rows = table()["checkpoint"]["envelope"]
    if not rows:
        return band, Fit("extrapolated", "no published checkpoint timing", "")

    def gap(row: list[float | str]) -> float:
        return abs(math.log2(nbytes / float(row[1]))) + abs(math.log2(writer_gpus / float(row[2])))

    near = min(rows, key=gap)
    size, gpus = nbytes / float(near[1]), writer_gpus / float(near[2])
    if 0.5 <= size <= 2 and 0.5 <= gpus <= 2:
        return band, Fit("calibrated", str(near[0]))
    return band, Fit("extrapolated", str(near[0]), f"{size:.1f}x the bytes, {gpus:.1f}x the GPUs")


def published_checkpoint_ratio() -> tuple[float, float, int]:
    """(lowest, highest) measured / estimated time of the held-out published saves, how many."""
    ratios = ratios_for("checkpoint", CHECKPOINT_LEVELS)
    return ratios.low, ratios.high, ratios.rows


def sized_fsx(spec: Spec) -> FsxLustre | None:
    """The FSx file system the AWS target creates for ``spec`` (`provisioned_fsx`).

    Sized so a budget meets the bound it tests: for a `conservative` budget the write rate it
    asks for is scaled by the held-out checkpoints' slowest measured / estimated ratio, else
    taken as it is.

    The budget and the Pulumi program both call this, so they see one file system.
    """
    _, slowest, rows = published_checkpoint_ratio()
    edge = max(1.0, slowest) if rows >= MIN_ROWS else 1.0
    return provisioned_fsx(spec, lambda bound: edge if bound == "conservative" else 1.0)
