"""All-to-all as NCCL runs it: grouped point-to-point sends and receives, in rounds.

nccl-tests' alltoall is one ``ncclGroupStart``/``ncclGroupEnd`` of ``ncclSend``/``ncclRecv``
to every peer. NCCL schedules those in rounds (round r: send to rank + r, receive from rank
- r), ordered by node distance, and packs up to 8 rounds into one work batch per channel
(``ncclP2pSchedule``, ``ncclP2pChannelBaseForRound``); a batch costs one point-to-point
latency (NVLink for peers in the node, network otherwise). So latency grows with the number
of peers over the batch size. Bandwidth: each rank sends ``S / n`` to every peer; NVLink
carries the bytes for peers in its node, the NICs (shared by the node's GPUs) the rest, and
bytes to nodes outside the job's leaf group also cross the leaves' uplinks, which an
oversubscribed fabric gives only ``1 / ratio`` of a NIC's rate.

``sendrecv`` is one ``ncclSend``/``ncclRecv`` pair between the first and the last GPU of the
communicator (nccl-tests' sendrecv_perf with two ranks): NVLink inside one node, else one NIC
(NCCL sends through the GPU's nearest NIC) across as many switches as the job's tiers put
between them. Its latency is NCCL's Ring base latency for the protocol (LL below
`P2P_LL_THRESHOLD`, else Simple) plus one NVLink or network hop latency from NCCL's tables,
plus `SWITCH_HOP_US` per switch beyond the first leaf.
"""

from __future__ import annotations

import math

from infra.budget.collectives_nccl import (
    BASE_LAT,
    HW_LAT_NET,
    HW_LAT_NVLINK,
    P2P_LL_THRESHOLD,
    P2P_ROUNDS_PER_BATCH,
    PIPELINE_CAP_US,
    PIPELINE_HOP_US,
    SWITCH_HOP_US,
)
from infra.budget.communicator import CommTopology

__all__ = ["alltoall_latency_us", "alltoall_time_us", "sendrecv_latency_us", "sendrecv_time_us"]


def alltoall_latency_us(t: CommTopology) -> float:
    """Latency: one point-to-point latency per work batch of up to 8 rounds."""
    per_node = math.ceil(t.gpus_per_node / P2P_ROUNDS_PER_BATCH)  # node delta 0: NVLink peers
    net_batches = (t.nodes - 1) * per_node  # one group of batches per remote node delta
    simple = 2
    net = HW_LAT_NET["ring"][simple] + t.net_latency_extra_us
    return BASE_LAT["ring"][simple] + per_node * HW_LAT_NVLINK["ring"][simple] + net_batches * net


def alltoall_time_us(t: CommTopology, nbytes: int) -> float:
    """Time of an nccl-tests alltoall of ``nbytes`` per rank (before the launch overhead)."""
    n, ppn = t.ranks, t.gpus_per_node
    per_peer = nbytes / n
    intra_us = per_peer * (ppn - 1) / (1000 * t.intra_gbs) if ppn > 1 else 0.0
    net_us = 0.0
    if t.nodes > 1:
        nic_per_gpu = t.nics * t.nic_gbs / ppn if t.nics else 0.0
        if nic_per_gpu <= 0:
            return math.inf
        remote = per_peer * (n - ppn)
        outside = per_peer * ppn * (t.nodes - min(t.nodes, t.leaf_nodes or t.nodes))
        net_us = max(remote, outside * t.oversubscription) / (1000 * nic_per_gpu)
    return alltoall_latency_us(t) + max(intra_us, net_us)


def switches_between(t: CommTopology) -> int:
    """Switches between the first and last node: 1 leaf, 3 via a spine, 5 via a core."""
    return 2 * max(1, t.tiers) - 1


def sendrecv_latency_us(t: CommTopology, proto: str) -> float:
    """NCCL's Ring base latency plus one NVLink or network hop, plus the extra switches."""
    p = ("ll", "ll128", "simple").index(proto)
    if t.nodes == 1:
        return BASE_LAT["ring"][p] + HW_LAT_NVLINK["ring"][p]
    fabric = (switches_between(t) - 1) * SWITCH_HOP_US + t.net_latency_extra_us
    return BASE_LAT["ring"][p] + HW_LAT_NET["ring"][p] + fabric


def sendrecv_time_us(t: CommTopology, nbytes: int) -> tuple[float, str]:
    """Time and protocol of a ``nbytes`` send from the first to the last GPU of ``t``.

    One NVLink path inside a node, one NIC between nodes (LL halves either: its flag takes
    half of each 8-byte store); Simple pays the pipeline-fill term of the collectives.
    """
    link = t.intra_gbs if t.nodes == 1 else min(t.intra_gbs, t.nic_gbs)
    if nbytes <= P2P_LL_THRESHOLD:
        return sendrecv_latency_us(t, "ll") + nbytes / (1000 * link * 0.5), "ll"
    wire = nbytes / (1000 * link)
    fill = min(2 * math.sqrt(2 * PIPELINE_HOP_US * wire), PIPELINE_CAP_US)
    return sendrecv_latency_us(t, "simple") + wire + fill, "simple"
