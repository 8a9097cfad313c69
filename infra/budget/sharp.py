"""SHARP (in-network aggregation) latency as a function of the aggregation tree's depth.

NCCL's tuning model has one network latency per algorithm (CollNet Direct 31 µs, CollNet
Chain 30 µs, NVLS 18 µs for Simple, ../shared/facts/fabric.md §3.2), whatever the fabric. A
SHARP aggregation climbs the switch tiers the job spans (one leaf, leaf -> spine, leaf ->
spine -> core) and the result comes back down, so a job spread over a three-tier fabric waits
longer than one inside a rail group. We split NCCL's constant into a plain network hop (Ring
Simple's 14 µs, which every message pays) and a tree round trip (the rest), read the latter
as measured on a two-tier fabric, and scale it linearly with the tiers climbed. This is a
DERIVATION from NCCL's constants (no published per-tier SHARP latency was found), marked as
such in `collectives_nccl.SHARP_REFERENCE_TIERS`.

>>> sharp_net_latency("collnet_direct", 2, tiers=2)
31.0
>>> sharp_net_latency("collnet_direct", 2, tiers=3) > sharp_net_latency("collnet_direct", 2, 1)
True
"""

from __future__ import annotations

from infra.budget.collectives_nccl import HW_LAT_NET, SHARP_REFERENCE_TIERS

__all__ = ["SHARP_ALGORITHMS", "sharp_net_latency"]

SHARP_ALGORITHMS = ("collnet_direct", "collnet_chain", "nvls")
"""Algorithms whose inter-node step is an IB SHARP aggregation (NVLS multi-node = NVLS + IB
SHARP; NVLS Tree uses NCCL's own tree between nodes, not SHARP)."""


def sharp_net_latency(algo: str, proto: int, tiers: int) -> float:
    """Network latency (µs) of one SHARP aggregation over ``tiers`` switch tiers.

    ``proto`` indexes NCCL's protocol columns (0 LL, 1 LL128, 2 Simple). A non-SHARP
    algorithm gets NCCL's own constant back unchanged.
    """
    nccl = float(HW_LAT_NET[algo][proto])
    if algo not in SHARP_ALGORITHMS or nccl == 0:
        return nccl
    hop = float(HW_LAT_NET["ring"][2])
    tree = max(0.0, nccl - hop)
    return hop + tree * max(1, tiers) / SHARP_REFERENCE_TIERS
