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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.budget.bands import MIN_ROWS, Band, Fit, lower_band, ratios_for, table
from infra.budget.checkpoint_term import STAGE, serialisation_gbs
from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology import Plan

__all__ = [
    "CHECKPOINT_LEVELS",
    "NIC_EFFICIENCY",
    "CheckpointEstimate",
    "checkpoint_band",
    "checkpoint_estimate",
    "published_checkpoint_ratio",
]

NIC_EFFICIENCY = 0.96


@dataclass(frozen=True)
class CheckpointEstimate:
    """Seconds to write a checkpoint and the stage that limits it (GB/s of each stage)."""

    seconds: float
    limiter: str
    stages_gbs: dict[str, float]
    writer_nodes: int = 0


def checkpoint_estimate(
    nbytes: int, spec: Spec, catalog: Catalog, plan: Plan, writer_nodes: int | None = None
) -> CheckpointEstimate:
    """Estimate the write time of ``nbytes`` from ``writer_nodes`` servers (default: all).

    Raises:
        ValueError: the spec has no storage fabric and no filesystem figure.
    """
    storage = spec.fabrics.storage
    if storage is None:
        raise ValueError("no storage fabric in the spec (fabrics.storage)")
    rate = catalog.switches[storage.switch].port_gbps / 8 * NIC_EFFICIENCY
    servers = plan.servers if writer_nodes is None else plan.servers[:writer_nodes]
    node_ports = sum(catalog.nodes[s.node].storage_nic_ports for s in servers)
    stages = {"writers' storage NICs": node_ports * rate}
    stages[STAGE] = serialisation_gbs(len(servers))
    if storage.client_GBps:
        stages["filesystem per client"] = len(servers) * storage.client_GBps
    uplinks = len(plan.cables_in("storage", "leaf_spine"))
    if uplinks:
        stages["storage fabric uplinks"] = uplinks * rate
    if storage.storage_ports:
        stages["storage system ports"] = storage.storage_ports * rate
    if storage.filesystem_gbps:
        stages["filesystem"] = storage.filesystem_gbps
    limiter = min(stages, key=lambda k: stages[k])
    gbs = stages[limiter]
    seconds = nbytes / 1e9 / gbs if gbs > 0 else math.inf
    return CheckpointEstimate(seconds, limiter, stages, len(servers))


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
