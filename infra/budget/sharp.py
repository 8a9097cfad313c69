"""SHARP (in-network aggregation) latency as a function of the aggregation tree's depth.

NCCL's tuning model has one network latency per algorithm (CollNet Direct 31 µs, CollNet
Chain 30 µs, NVLS 18 µs for Simple, ../shared/facts/fabric.md §3.2), whatever the fabric. A
SHARP aggregation climbs the switch tiers the job spans (one leaf, leaf -> spine, leaf ->
spine -> core) and the result comes back down, so a job spread over a three-tier fabric waits
longer than one inside a rail group. We split NCCL's constant into a plain network hop (Ring
Simple's 14 µs, which every message pays) and a tree round trip (the rest), read the latter
as measured on a two-tier fabric, and scale it linearly with the tiers climbed. This is a
DERIVATION from NCCL's constants (no published per-tier SHARP latency was found), marked as
such in `collectives_nccl.SHARP_REFERENCE_TIERS`. Beyond the tiers, a SHARP all-reduce's time
does not depend on the job's node count, and that is NCCL's model too: tuning.cc's CollNet
latencies (``baseLat + 2 (min(1, ppn-1) intraLat + (ppn-1) 0.4) + interLat`` for Direct,
``baseLat + 2 (ppn-1) intraLat + interLat`` for Chain) have no node term and their bandwidth
depends only on GPUs per NIC, while each switch of the aggregation tree reduces all its
children at once, so a wider tree is no deeper. So 1,120 and 8,000 A100 on one SHARP fabric,
both climbing three tiers, get the same CollNet Direct time at every size (busbw differs only by
``2(n-1)/n``); Ring (``2 (nodes-1)`` network latencies) and Tree (``2 log2(nodes)``) do grow
with nodes but lose to CollNet at every size on both. Not modelled: SHARP's per-switch
resource limits (aggregation trees shared between concurrent jobs).

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
