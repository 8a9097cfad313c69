"""Rules about InfiniBand fabrics that need only the spec and catalog (no planned topology)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace

from infra.budget.cluster import BudgetError, comm_topology
from infra.budget.collectives import predict
from infra.catalog import Node
from infra.lint.context import LintContext
from infra.lint.engine import Violation, rule
from infra.lint.finding import Severity
from infra.lint.rules._util import known_groups
from infra.spec import NodeGroup
from infra.wording import plural


@rule(
    "RP040",
    "sharp-not-rail-optimized",
    Severity.ERROR,
    "SHARP is enabled on a compute fabric that is not rail-optimized.",
)
def sharp_not_rail_optimized(ctx: LintContext) -> Iterator[Violation]:
    """SHARP needs leaf switches that each carry one HCA rail.

    Why: "NVIDIA switches allow a limited number of streaming aggregation flows (maximum: 2)
    ... NCCL creates an aggregation streaming flow per HCA rail. It is required to build the
    cluster topology in such a way that leaf level switches are connected to the same HCA rail
    from each server" (HPC-X NCCL-RDMA-SHARP plugin docs). On a fabric that is not
    rail-optimized, leaves see up to 8 rails and SHARP jobs fail to get trees or fall back.
    Fix: set `rail_optimized: true`, or `sharp: false`.
    """
    compute = ctx.loaded.spec.fabrics.compute
    if compute and compute.sharp and not compute.rail_optimized:
        yield Violation(
            "fabrics.compute.sharp",
            "SHARP needs a rail-optimized fabric (one HCA rail per leaf switch)"
            + _rails_per_leaf(ctx),
            "set fabrics.compute.rail_optimized: true",
        )


def _rails_per_leaf(ctx: LintContext) -> str:
    """``; leaf X would carry N rails ...`` measured on the plan, when there is one."""
    plan, compute = ctx.plan, ctx.loaded.spec.fabrics.compute
    if plan is None or compute is None or compute.switch not in ctx.catalog.switches:
        return ""
    hca_rail = {(s.name, h): r for s in plan.servers for r, h in enumerate(s.hcas)}
    rails: dict[str, set[int]] = defaultdict(set)
    for c in plan.cables_in("compute", "node_leaf"):
        if (c.a, c.a_port) in hca_rail:
            rails[c.b].add(hca_rail[(c.a, c.a_port)])
    if not rails:
        return ""
    leaf, carried = max(rails.items(), key=lambda kv: (len(kv[1]), kv[0]))
    flows = ctx.catalog.switches[compute.switch].sharp_flows
    return (
        f"; leaf {leaf} would carry {plural(len(carried), 'rail')} but the switch has "
        f"{plural(flows, 'SHARP aggregation flow')}"
    )


@rule(
    "RP041",
    "sharp-no-aggregation-manager",
    Severity.ERROR,
    "SHARP is enabled without a subnet manager host that runs the aggregation manager.",
)
def sharp_no_aggregation_manager(ctx: LintContext) -> Iterator[Violation]:
    """SHARP's Aggregation Manager (sharp_am) runs beside the subnet manager on a host.

    Why: sharp_am "needs to run on the same machine running the IB subnet manager, e.g.
    opensm or ufm" (NVIDIA/nccl#320) and is configured from the SM's topology file; with the
    SM embedded in a switch there is no host for sharp_am and SHARP jobs silently fall back to
    plain network transport.
    Fix: `subnet_manager: ufm` (UFM runs the AM) or `nvidia-opensm` on a host with sharp_am.
    """
    compute = ctx.loaded.spec.fabrics.compute
    if compute and compute.sharp and compute.subnet_manager == "switch":
        yield Violation(
            "fabrics.compute.subnet_manager",
            "SHARP needs the aggregation manager, which runs with a host-based "
            "subnet manager, not one embedded in a switch",
            "set subnet_manager: ufm (or nvidia-opensm with sharp_am on that host)",
        )


@rule(
    "RP042",
    "sharp-unsupported-switch",
    Severity.ERROR,
    "SHARP is enabled on a switch model without SHARP.",
)
def sharp_unsupported_switch(ctx: LintContext) -> Iterator[Violation]:
    """SHARP needs Quantum (HDR) or newer InfiniBand switches.

    Why: in-network reduction happens in the switch ASIC; a switch without it gives no tree.
    Fix: choose a SHARP-capable switch (qm8700/qm8790/qm9700/qm9790) or `sharp: false`.
    """
    compute = ctx.loaded.spec.fabrics.compute
    switch = ctx.catalog.switches.get(compute.switch) if compute else None
    if compute and switch and compute.sharp and not switch.sharp:
        yield Violation("fabrics.compute.sharp", f"{switch.name} does not support SHARP")


@rule(
    "RP043",
    "subnet-manager-unmanaged-switch",
    Severity.ERROR,
    "The subnet manager is placed on an externally managed (unmanaged) switch.",
)
def subnet_manager_unmanaged_switch(ctx: LintContext) -> Iterator[Violation]:
    """`subnet_manager: switch` needs a managed switch model.

    Why: QM8790 and QM9790 are externally managed: they have no management CPU or OS to run
    an embedded subnet manager, so the fabric would come up with no SM and no links active.
    Fix: `subnet_manager: ufm` or `opensm`, or the managed model (qm8700, qm9700).
    """
    compute = ctx.loaded.spec.fabrics.compute
    switch = ctx.catalog.switches.get(compute.switch) if compute else None
    if compute and switch and compute.subnet_manager == "switch" and not switch.managed:
        yield Violation(
            "fabrics.compute.subnet_manager",
            f"{switch.name} is externally managed and cannot run a subnet manager",
            "set subnet_manager: ufm or opensm",
        )


@rule(
    "RP044",
    "fabric-slower-than-nics",
    Severity.WARNING,
    "The compute fabric's ports are slower than the servers' compute NICs.",
)
def fabric_slower_than_nics(ctx: LintContext) -> Iterator[Violation]:
    """Compute switch ports should run at the servers' NIC rate.

    Why: an NDR (400 Gb/s) ConnectX-7 on an HDR (200 Gb/s) switch links at 200 Gb/s; the
    cluster gets half the inter-node bandwidth it paid for. The finding states the cost: the
    predicted all-reduce bus bandwidth of 1 GiB over all the group's planned nodes (the
    `railplan predict` model, `infra.budget.collectives`) at the derated link rate and at the
    NICs' own rate. Budgets are already predicted at the derated rate.
    Fix: choose a switch whose port rate matches the NICs (qm9700 for NDR nodes).
    """
    compute = ctx.loaded.spec.fabrics.compute
    switch = ctx.catalog.switches.get(compute.switch) if compute else None
    if switch is None or switch.kind != "infiniband":
        return  # RP002 reports unknown or wrong-kind switches
    for _, group, node, _ in known_groups(ctx):
        if node.kind != "cloud" and node.compute_nic_gbps > switch.port_gbps:
            yield Violation(
                "fabrics.compute.switch",
                f"{switch.name} ports run at {switch.port_gbps:g} Gb/s but node "
                f"group {group.name!r} has {node.compute_nic_gbps:g} Gb/s NICs"
                + _derating_cost(ctx, group, node, switch.port_gbps),
            )


_COST_BYTES = 1 << 30  # 1 GiB: large enough that bandwidth, not latency, decides


def _derating_cost(ctx: LintContext, group: NodeGroup, node: Node, port_gbps: float) -> str:
    """``; predicted all_reduce busbw ... X GB/s instead of Y GB/s`` over the group's nodes."""
    if group.count < 2:
        return ""  # one node: the fabric carries none of its collectives
    try:
        derated = comm_topology(
            ctx.loaded.spec, ctx.catalog, group.count * node.gpus, group=group.name
        )
    except BudgetError:
        return ""  # e.g. a MIG-partitioned group runs no multi-node collective
    full = replace(derated, nic_gbps=derated.nic_gbps * node.compute_nic_gbps / port_gbps)
    slow = predict(derated, "all_reduce", _COST_BYTES).busbw_GBps
    fast = predict(full, "all_reduce", _COST_BYTES).busbw_GBps
    return (
        f"; predicted all_reduce busbw at 1 GiB over its {plural(group.count, 'node')}: "
        f"{slow:.1f} GB/s instead of {fast:.1f} GB/s ({slow / fast - 1:+.0%})"
    )


@rule(
    "RP048",
    "fabric-without-servers",
    Severity.WARNING,
    "A compute fabric is declared but no server can attach to it.",
)
def fabric_without_servers(ctx: LintContext) -> Iterator[Violation]:
    """A declared InfiniBand compute fabric needs servers with InfiniBand HCAs.

    Why: cloud instances (AWS p4d/p5) bring their own network (EFA); a compute fabric in the
    spec would be planned with no server on it, and budgets would silently use EFA instead.
    Fix: remove `fabrics.compute` for cloud clusters, or use on-premises nodes.
    """
    compute = ctx.loaded.spec.fabrics.compute
    nodes = [node for _, _, node, _ in known_groups(ctx)]
    if compute and nodes and not any(node.compute_hcas for node in nodes):
        yield Violation(
            "fabrics.compute",
            "no node group has InfiniBand HCAs for this fabric "
            f"({', '.join(sorted({n.name for n in nodes}))})",
            "remove fabrics.compute; cloud instances use their own network",
        )
