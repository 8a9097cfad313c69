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
"""

from __future__ import annotations

import math

from infra.budget.collectives_nccl import BASE_LAT, HW_LAT_NET, HW_LAT_NVLINK, P2P_ROUNDS_PER_BATCH
from infra.budget.communicator import CommTopology

__all__ = ["alltoall_latency_us", "alltoall_time_us"]


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
