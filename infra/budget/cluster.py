"""From a spec to the inputs of the performance models: which GPUs a job runs on.

A budget names a GPU count; the job runs on the spec's largest node group (the training
partition of a real cluster), on as few nodes as hold that many GPUs. SHARP counts as usable
only when the spec enables it on a fabric where it can work (rail-optimized, host subnet
manager, SHARP-capable switches): the same conditions lint checks.
"""

from __future__ import annotations

import math

from infra.budget.collectives import CommTopology
from infra.catalog import Catalog, Node
from infra.errors import RailplanError
from infra.spec import NodeGroup, Spec

__all__ = ["BudgetError", "comm_topology", "main_group", "sharp_usable"]


class BudgetError(RailplanError):
    """A budget cannot be evaluated on this spec (asks for more GPUs than exist, ...)."""


def main_group(spec: Spec, catalog: Catalog) -> tuple[NodeGroup, Node]:
    """The node group with the most GPUs (first on a tie) and its catalog node."""
    known = [g for g in spec.node_groups if g.node in catalog.nodes]
    if not known:
        raise BudgetError("no node group names a catalog node", path="node_groups")
    group = max(known, key=lambda g: g.count * catalog.nodes[g.node].gpus)
    return group, catalog.nodes[group.node]


def sharp_usable(spec: Spec, catalog: Catalog) -> bool:
    """Whether NCCL could use IB SHARP (CollNet) on this spec's compute fabric."""
    c = spec.fabrics.compute
    if c is None or not c.sharp or c.switch not in catalog.switches:
        return False
    return c.rail_optimized and c.subnet_manager != "switch" and catalog.switches[c.switch].sharp


def comm_topology(
    spec: Spec, catalog: Catalog, gpus: int, *, sharp: bool | None = None, path: str = ""
) -> CommTopology:
    """The communicator of a ``gpus``-GPU job on the spec's main node group.

    Raises:
        BudgetError: fewer than 2 GPUs, or more than the group has.
    """
    group, node = main_group(spec, catalog)
    available = group.count * node.gpus
    if gpus < 2 or gpus > available:
        raise BudgetError(
            f"asks for {gpus} GPUs but node group {group.name!r} has {available}",
            path=path,
            hint="use a GPU count between 2 and the group's GPUs",
        )
    per_node = min(gpus, node.gpus)
    if gpus % per_node:
        raise BudgetError(
            f"{gpus} GPUs is not a whole number of {node.gpus}-GPU nodes",
            path=path,
            hint=f"use a multiple of {node.gpus}",
        )
    gpu = catalog.gpus[node.gpu]
    return CommTopology(
        arch=gpu.architecture,
        gpus_per_node=per_node,
        nodes=math.ceil(gpus / per_node),
        nvswitch=node.nvswitches > 0,
        nvlink_links=gpu.nvlink_links,
        nics=node.compute_nics,
        nic_gbps=node.compute_nic_gbps,
        cpu=node.cpu,
        sharp=(sharp_usable(spec, catalog) and bool(node.compute_hcas)) if sharp is None else sharp,
    )
