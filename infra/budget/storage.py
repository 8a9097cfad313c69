"""Checkpoint time: checkpoint bytes over the slowest stage between GPUs and the filesystem.

Writes leave through every server's storage NICs (ports x rate), cross the storage fabric
(its leaf-spine capacity) into the storage systems' ports, and land in the filesystem at its
rated throughput (``fabrics.storage.filesystem_gbps``). NICs reach about 96 % of line rate
(NCCL's 48 of 50 GB/s on NDR); the time is set by the narrowest of these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog import Catalog
from infra.spec import Spec
from infra.topology import Plan

__all__ = ["NIC_EFFICIENCY", "CheckpointEstimate", "checkpoint_estimate"]

NIC_EFFICIENCY = 0.96


@dataclass(frozen=True)
class CheckpointEstimate:
    """Seconds to write a checkpoint and the stage that limits it (GB/s of each stage)."""

    seconds: float
    limiter: str
    stages_gbs: dict[str, float]


def checkpoint_estimate(
    nbytes: int, spec: Spec, catalog: Catalog, plan: Plan
) -> CheckpointEstimate:
    """Estimate the write time of ``nbytes`` from every server at once.

    Raises:
        ValueError: the spec has no storage fabric and no filesystem figure.
    """
    storage = spec.fabrics.storage
    if storage is None:
        raise ValueError("no storage fabric in the spec (fabrics.storage)")
    rate = catalog.switches[storage.switch].port_gbps / 8 * NIC_EFFICIENCY
    node_ports = sum(catalog.nodes[s.node].storage_nic_ports for s in plan.servers)
    stages = {"server storage NICs": node_ports * rate}
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
    return CheckpointEstimate(seconds, limiter, stages)
