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
    NVLINK_LINK_BW,
)

__all__ = ["CommTopology"]


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
    def channels(self) -> int:
        """Channels NCCL typically opens: two per NIC between nodes, 16 inside one."""
        return 2 * self.nics if self.nodes > 1 and self.nics else 16

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
