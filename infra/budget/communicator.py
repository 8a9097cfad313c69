"""`CommTopology`: what the collective model knows about the ranks of one communicator.

Its own module so the collective model's parts (`collectives`, `collectives_p2p`) share it
without importing each other; `infra.budget.collectives` re-exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from infra.budget.collectives_nccl import (
    EFA_NET_LATENCY_US,
    EFA_SENDRECV_NET_LATENCY_US,
    INTER_SPEEDS,
    INTRA_SPEEDS,
    MAX_CHANNELS,
    NVLINK_LINK_BW,
    RING_SEARCH_MAX_CHANNELS,
)

__all__ = ["CommTopology", "intra_ring_search"]

FALLBACK_CHANNELS = 16
"""Channels assumed where the model does not follow NCCL's search: one node without NVSwitch."""


def intra_ring_search(arch: str, total_gbs: float) -> tuple[int, float]:
    """(channels, GB/s per channel) NCCL's ring search finds in one NVSwitch node.

    src/graph/search.cc, ncclTopoCompute: pass 1 tries the per-channel speeds fastest
    first and keeps the graph with the most channels x speed; each GPU's NVLinks to the
    switch carry ``total_gbs``, so ``total // speed`` rings fit. It stops once the rings fill
    the links, or when the next speed is at most 0.49 of the best found.
    ncclTopoDupChannels then doubles the rings at half the speed, unless the speed is below
    25 GB/s or (compute capability above 8.0) below 50 with more than 4 channels. Pass 2
    raises the speed while the same count still fits. 8 A100 (12 NVLinks x 20 GB/s): 6 x 40,
    doubled to 12 x 20; 8 H100 (18 x 20.6): 6 x 60, doubled to 12 x 30.
    """
    speeds = INTRA_SPEEDS[arch]
    i = next((k for k, s in enumerate(speeds) if s <= total_gbs), len(speeds) - 1)
    n, bw = 0, 0.0
    while True:
        rings = min(RING_SEARCH_MAX_CHANNELS, int(total_gbs // speeds[i]))
        if rings * speeds[i] > n * bw:
            n, bw = rings, speeds[i]
        last = i == len(speeds) - 1
        if last or n * bw >= total_gbs or (n and speeds[i + 1] / bw <= 0.49):
            break
        i += 1
    if n and bw >= 25.0 and not (arch != "ampere" and bw < 50.0 and n > 4):
        dup = min(2 * n, RING_SEARCH_MAX_CHANNELS)
        n, bw = dup, bw / -(-dup // n)
    for faster in sorted(s for s in speeds if s > bw):
        if n * faster > total_gbs:
            break
        bw = faster
    return max(n, 1), bw


@dataclass(frozen=True)
class CommTopology:
    """What NCCL's model needs to know about the ranks of one communicator.

    Attributes:
        arch: GPU architecture.
        gpus_per_node: ranks per node (ppn).
        nodes: nodes in the communicator.
        nvswitch: GPUs of a node meet at NVSwitch chips (enables NVLS on Hopper).
        nvlink_links: NVLink ports per GPU.
        nics: compute-fabric NICs per node.
        nic_gbps: line rate of each NIC, Gb/s.
        cpu: host CPU vendor (NCCL's multi-node LL caps and network overhead depend on it).
        sharp: InfiniBand SHARP is usable (NCCL CollNet; needs a rail-optimized fabric).
        nvls: NCCL_NVLS_ENABLE; NVLS also needs Hopper and NVSwitch.
        nccl: NCCL version; algorithms it lacks are never chosen (`infra.catalog.nccl`).
        tiers: switch tiers the job's traffic climbs (1 one leaf per rail, 2 leaf-spine, 3
            leaf-spine-core); SHARP latency grows with it. 2 = NCCL's reference.
        leaf_nodes: nodes under one leaf group (an SU of a rail-optimized fabric); 0 = all.
        oversubscription: leaf down:up ratio; only traffic leaving the leaf group pays it.
        efa: the network is AWS EFA (aws-ofi-nccl), whose latency is higher than IB's.
    """

    arch: Literal["ampere", "hopper"]
    gpus_per_node: int
    nodes: int
    nvswitch: bool
    nvlink_links: int
    nics: int
    nic_gbps: float
    cpu: Literal["intel", "amd"]
    sharp: bool
    nvls: bool = True
    nccl: str = "2.30.7"
    tiers: int = 2
    leaf_nodes: int = 0
    oversubscription: float = 1.0
    efa: bool = False

    @property
    def ranks(self) -> int:
        """GPUs in the communicator."""
        return self.gpus_per_node * self.nodes

    @property
    def intra_gbs(self) -> float:
        """Per-GPU NVLink bandwidth NCCL's graph sees (GB/s, one direction)."""
        return self.nvlink_links * NVLINK_LINK_BW[self.arch]

    @property
    def nic_gbs(self) -> float:
        """Achievable GB/s per NIC: the fastest search speed within the line rate."""
        line = self.nic_gbps / 8
        return next((s for s in INTER_SPEEDS[self.arch] if s <= line), line)

    @property
    def spans_leaf_groups(self) -> bool:
        """Whether the job's nodes sit under more than one leaf group (uplinks are shared)."""
        return 0 < self.leaf_nodes < self.nodes

    @property
    def inter_gbs(self) -> float:
        """Network bandwidth leaving one node (GB/s) for a ring (`uplink_gbs` with one flow)."""
        return self.uplink_gbs(1.0)

    def uplink_gbs(self, crossing: float) -> float:
        """Network GB/s per node when ``crossing`` NIC-rate flows per rail leave each leaf group.

        On a rail-optimized fabric each rail of a leaf group (SU) meets at one leaf, so only
        flows to another group climb to the spines, and a leaf's uplinks carry ``s / ratio``
        NIC rates for its ``s`` nodes. A ring placed in node order leaves each group once
        (``crossing`` 1), a SHARP tree sends one aggregated stream up per leaf (1), NCCL's
        double binary tree a few (`tree_crossing`): traffic inside the group pays nothing, and
        the job slows only when its crossing flows exceed the uplinks: ``crossing x ratio / s``.
        """
        full = self.nics * self.nic_gbs
        if not self.spans_leaf_groups:
            return full
        return full / max(1.0, crossing * self.oversubscription / self.leaf_nodes)

    @property
    def tree_crossing(self) -> float:
        """NIC-rate flows per rail NCCL's double binary tree sends out of each leaf group.

        ncclGetDtree (src/graph/trees.cc): tree 1 is a binary tree over the nodes in rank
        order, whose edges leave a group of ``s`` consecutive nodes about once; tree 2 is the
        same tree shifted by one node, which puts one edge across each group boundary per
        level below the group's size, ``log2(s) + 1``. Each tree runs on half the channels,
        so each flow carries half a NIC's rate.
        """
        s = max(1, min(self.leaf_nodes, self.nodes))
        return (1 + math.log2(s) + 1) / 2

    @property
    def efa_sendrecv(self) -> bool:
        """aws-ofi-nccl runs its SENDRECV transport here, not its RDMA one.

        The plugin's RDMA transport (one-sided writes into a receiver-advertised buffer,
        striped over up to 4 rails per GPU) is "preferred on multi-NIC EC2 instances
        (p5/p5e/p5en/p6/trn)"; SENDRECV (two-sided tagged messages matched by libfabric's EFA
        provider, one rail, no one-sided RMA) is "the default on single-NIC instances
        (p4d/p4de/p3dn/g5/inf)" (aws/aws-ofi-nccl doc/rdma-protocol.md and
        doc/sendrecv-protocol.md). Read here as: RDMA when the node has a NIC for every GPU,
        as p5 (32 for 8), p5en (16) and p6 (8) do; SENDRECV when GPUs share NICs (p4d: 4).
        """
        return self.efa and self.nics < self.gpus_per_node

    @property
    def net_latency_extra_us(self) -> float:
        """Latency a network step adds over NCCL's InfiniBand constants (EFA, by transport)."""
        if not self.efa:
            return 0.0
        return EFA_SENDRECV_NET_LATENCY_US if self.efa_sendrecv else EFA_NET_LATENCY_US

    @property
    def search_channels(self) -> int:
        """Channels NCCL's ring search finds (a ring graph's ``nChannels``).

        Between nodes one per NIC: a ring enters and leaves each node through a NIC at the
        NIC's speed (24 GB/s HDR, 48 NDR), and ncclTopoDupChannels (src/graph/search.cc)
        doubles them as inside a node: not below 25 GB/s (HDR), nor on Hopper below 50 with
        more than 4 rings (8 NDR NICs), but 8 NDR NICs on Ampere give 16. Inside one NVSwitch
        node what `intra_ring_search` finds; other single-node topologies keep half the
        fallback.
        """
        if self.nodes > 1 and self.nics:
            speed, rings = self.nic_gbs, self.nics
            if speed >= 25.0 and not (self.arch != "ampere" and speed < 50.0 and rings > 4):
                return min(2 * rings, RING_SEARCH_MAX_CHANNELS)
            return rings
        if not self.nvswitch or self.intra_gbs <= 0:
            return FALLBACK_CHANNELS // 2
        return intra_ring_search(self.arch, self.intra_gbs)[0]

    @property
    def channels(self) -> int:
        """Channels NCCL opens: each ring the search found, twice (src/graph/connect.cc).

        Two per NIC between nodes; 24 on 8 A100 and 8 H100, 16 on H800's 8 NVLinks.
        """
        return min(MAX_CHANNELS, 2 * self.search_channels)

    @property
    def nvls_channels(self) -> int:
        """Channels of NCCL's NVLS graph: one per GPU pulling from NVLS, at most the node's GPUs.

        src/graph/search.cc, ncclTopoCompareGraphs: "NVLS channels correspond to GPUs pulling
        from NVLS. So the more the better", kept only while ``nChannels <= GPU count``.
        """
        return min(self.channels, self.gpus_per_node)

    @property
    def scale(self) -> int:
        """NCCL's column index: 0 for one node, 1 for two, 2 for three or more."""
        return min(self.nodes, 3) - 1
