"""IT and facility power of a plan, and the energy cost of one PFLOP-day of delivered compute.

This module owns the numbers behind the ``rack_power``, ``cluster_power`` and
``cost_per_pflop_day`` budgets: IT power summed from the plan's racks (with an estimate for
cloud instances, which have no rack and no catalog power), facility power through PUE, the
cluster's dense peak at a precision, and the energy and money one PFLOP-day costs at a given
model FLOPs utilization. Pure functions over typed data; no I/O.

Formulas and their sources:

* IT power = sum of rack ``power_kw`` (the planner adds every racked server's catalog
  ``max_power_kw`` and every switch's ``max_power_w``; `infra.topology.Plan.power_kw`).
  Servers without a rack (cloud instances, catalog ``max_power_kw`` 0) are *estimated* as
  GPU TDP x GPUs per node x a server overhead factor. The default factor 1.8 is inferred from
  the catalog's own DGX figures: DGX H100 10.2 kW / (8 x 700 W) = 1.82, DGX A100
  6.5 kW / (8 x 400 W) = 2.03 (CPUs, NICs, NVSwitches, fans, PSU losses).
* Facility power = IT power x PUE. The Green Grid, "PUE: A Comprehensive Examination of the
  Metric", White Paper #49 (2012): PUE = total facility energy / IT equipment energy.
* One PFLOP-day (petaflop/s-day) = 10**15 FLOP/s for 86,400 s = 8.64e19 FLOP. D. Amodei,
  D. Hernandez, "AI and Compute", OpenAI (2018); T. Brown et al., "Language Models are
  Few-Shot Learners", NeurIPS 2020, Appendix D (GPT-3 175B: 3.14e23 FLOP = 3,640 PF-days).
* Cluster dense peak = sum over servers of GPUs x catalog ``dense_tflops[precision]``.
* MFU (model FLOPs utilization) = achieved model FLOP/s / peak FLOP/s. A. Chowdhery et al.,
  "PaLM: Scaling Language Modeling with Pathways", JMLR 2023 (arXiv:2204.02311), §4.1:
  PaLM 540B 46.2 %, GPT-3 21.3 %, Megatron-Turing NLG 30.2 %; Korthikanti et al., MLSys 2023
  (arXiv:2205.05198), Table 5: 41.5-56.3 % without data parallelism; Llama 3 (arXiv:2407.21783),
  Table 4: 38-43 % on 16K H100s. The default 0.4 sits at the low end of large dense runs.
* Delivered PFLOP/s = dense peak TFLOP/s x MFU / 1000; hours per PFLOP-day =
  24 / delivered PFLOP/s; kWh per PFLOP-day = facility kW x those hours; cost = kWh x price.
  Only electricity is counted: no hardware, staff or cooling capex.

>>> c = cost_per_pflop_day(it_kw=100.0, dense_tflops=10_000.0, price_per_kwh=0.1, pue=1.5,
...                        mfu=0.5)
>>> c.delivered_pflops, c.hours_per_pflop_day, c.kwh_per_pflop_day, round(c.usd_per_pflop_day, 2)
(5.0, 4.8, 720.0, 72.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.models import Catalog, Gpu, Node
from infra.spec.base import Precision
from infra.topology.model import Plan

__all__ = [
    "DEFAULT_MFU",
    "DEFAULT_SERVER_OVERHEAD",
    "PFLOP_DAY_FLOP",
    "ItPower",
    "PflopDayCost",
    "cloud_server_kw",
    "cluster_dense_tflops",
    "cluster_kw",
    "cost_per_pflop_day",
    "delivered_pflops",
    "facility_kw",
    "it_power",
    "max_rack_kw",
    "plan_cost_per_pflop_day",
]

DEFAULT_MFU = 0.4
"""Model FLOPs utilization assumed when none is given (PaLM 46.2 %, Llama 3 38-43 %)."""

DEFAULT_SERVER_OVERHEAD = 1.8
"""Server power / GPU TDP power for servers without catalog power (DGX H100 1.82, A100 2.03)."""

PFLOP_DAY_FLOP = 1e15 * 86_400
"""FLOP in one petaflop/s-day (Amodei and Hernandez 2018)."""

_HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class ItPower:
    """IT power of a plan, split into what the catalog states and what is estimated.

    Attributes:
        racked_kw: sum of rack power (racked servers and switches at catalog maximum).
        estimated_kw: unracked servers; an estimate where the catalog has no power figure.
        estimated_servers: servers whose power is estimated from GPU TDP.
        unracked_kw: unracked servers that do have a catalog ``max_power_kw``.
    """

    racked_kw: float
    estimated_kw: float
    estimated_servers: int
    unracked_kw: float = 0.0

    @property
    def total_kw(self) -> float:
        """All IT power, kW."""
        return self.racked_kw + self.unracked_kw + self.estimated_kw

    @property
    def is_estimate(self) -> bool:
        """Whether any part of the total is a TDP-based estimate."""
        return self.estimated_servers > 0


@dataclass(frozen=True)
class PflopDayCost:
    """Energy and electricity cost of delivering one PFLOP-day, with every intermediate.

    Attributes:
        it_kw: IT power, kW.
        pue: power usage effectiveness.
        facility_kw: ``it_kw x pue``.
        dense_tflops: cluster dense peak at the chosen precision, TFLOP/s.
        mfu: model FLOPs utilization, 0-1.
        delivered_pflops: ``dense_tflops x mfu / 1000``, PFLOP/s.
        hours_per_pflop_day: ``24 / delivered_pflops``.
        kwh_per_pflop_day: ``facility_kw x hours_per_pflop_day``.
        price_per_kwh: electricity price, USD per kWh.
        usd_per_pflop_day: ``kwh_per_pflop_day x price_per_kwh``.
    """

    it_kw: float
    pue: float
    facility_kw: float
    dense_tflops: float
    mfu: float
    delivered_pflops: float
    hours_per_pflop_day: float
    kwh_per_pflop_day: float
    price_per_kwh: float
    usd_per_pflop_day: float


def cloud_server_kw(
    node: Node, gpu: Gpu, server_overhead: float = DEFAULT_SERVER_OVERHEAD
) -> float:
    """Estimated power of one server from its GPUs: TDP x GPUs x overhead, kW.

    Args:
        node: the catalog node (its ``gpus`` count is used).
        gpu: the node's catalog GPU (its ``tdp_w`` is used).
        server_overhead: server power per unit of GPU power (CPUs, NICs, fans, PSU loss).

    Returns:
        The estimate in kW. It is an estimate, not a catalog fact.

    Raises:
        ValueError: ``server_overhead`` is below 1.
    """
    if server_overhead < 1.0:
        raise ValueError(f"server_overhead must be at least 1, got {server_overhead}")
    return gpu.tdp_w * node.gpus * server_overhead / 1000.0


def it_power(
    plan: Plan, catalog: Catalog, server_overhead: float = DEFAULT_SERVER_OVERHEAD
) -> ItPower:
    """IT power of a plan: its racks, plus servers that have no rack.

    Racked servers are already inside their rack's ``power_kw``. A server without a rack
    counts its catalog ``max_power_kw``, or, when that is 0 (cloud instances), the
    `cloud_server_kw` estimate.

    Args:
        plan: the planned cluster.
        catalog: the catalog the plan was made with.
        server_overhead: factor for the TDP-based estimate.

    Returns:
        The split of IT power into catalog-based and estimated parts.
    """
    racked = sum(r.power_kw for r in plan.racks)
    unracked = estimated = 0.0
    count = 0
    for server in plan.servers:
        if server.rack:
            continue
        node = catalog.nodes[server.node]
        if node.max_power_kw > 0:
            unracked += node.max_power_kw
        else:
            estimated += cloud_server_kw(node, catalog.gpus[node.gpu], server_overhead)
            count += 1
    return ItPower(racked, estimated, count, unracked)


def cluster_kw(
    plan: Plan, catalog: Catalog, server_overhead: float = DEFAULT_SERVER_OVERHEAD
) -> float:
    """Whole-cluster IT power in kW, for the ``cluster_power`` budget (see `it_power`)."""
    return it_power(plan, catalog, server_overhead).total_kw


def max_rack_kw(plan: Plan) -> float:
    """The most power any one rack of the plan draws, kW; 0 when nothing is racked.

    This is the value the ``rack_power`` budget compares with its ``max_kw``. Cloud
    instances have no rack and do not take part.
    """
    return max((r.power_kw for r in plan.racks), default=0.0)


def facility_kw(it_kw: float, pue: float) -> float:
    """Facility power from IT power: ``it_kw x pue`` (The Green Grid WP #49).

    Raises:
        ValueError: ``pue`` is below 1 or ``it_kw`` is negative.
    """
    if pue < 1.0:
        raise ValueError(f"PUE must be at least 1, got {pue}")
    if it_kw < 0:
        raise ValueError(f"IT power cannot be negative, got {it_kw}")
    return it_kw * pue


def cluster_dense_tflops(plan: Plan, catalog: Catalog, precision: Precision) -> float:
    """Dense peak of every GPU in the plan at ``precision``, TFLOP/s.

    Args:
        plan: the planned cluster.
        catalog: the catalog the plan was made with.
        precision: the compute precision.

    Returns:
        The sum over servers of GPUs x catalog ``dense_tflops[precision]``.

    Raises:
        ValueError: a GPU in the plan has no figure for ``precision`` (e.g. fp8 on A100).
    """
    total = 0.0
    for server in plan.servers:
        node = catalog.nodes[server.node]
        gpu = catalog.gpus[node.gpu]
        if precision not in gpu.dense_tflops:
            raise ValueError(f"{gpu.name} has no {precision.value} throughput in the catalog")
        total += node.gpus * gpu.dense_tflops[precision]
    return total


def delivered_pflops(dense_tflops: float, mfu: float = DEFAULT_MFU) -> float:
    """Model FLOP/s a cluster delivers, PFLOP/s: dense peak x MFU (Chowdhery et al. 2022).

    Args:
        dense_tflops: the cluster's dense peak at the training precision, TFLOP/s.
        mfu: model FLOPs utilization, in (0, 1].

    Returns:
        ``dense_tflops x mfu / 1000``.

    Raises:
        ValueError: ``dense_tflops`` is not positive or ``mfu`` is outside (0, 1].
    """
    if not 0.0 < mfu <= 1.0:
        raise ValueError(f"MFU must be in (0, 1], got {mfu}")
    if dense_tflops <= 0:
        raise ValueError(f"dense_tflops must be positive, got {dense_tflops}")
    return dense_tflops * mfu / 1000.0


def cost_per_pflop_day(
    it_kw: float,
    dense_tflops: float,
    price_per_kwh: float,
    pue: float,
    mfu: float = DEFAULT_MFU,
) -> PflopDayCost:
    """Electricity cost of delivering one PFLOP-day on a cluster.

    Args:
        it_kw: IT power of the cluster, kW.
        dense_tflops: the cluster's dense peak at the training precision, TFLOP/s.
        price_per_kwh: electricity price, USD per kWh.
        pue: power usage effectiveness (1 or more).
        mfu: model FLOPs utilization, in (0, 1].

    Returns:
        The cost and every intermediate value (see `PflopDayCost`).

    Raises:
        ValueError: a value is out of range.
    """
    if price_per_kwh < 0:
        raise ValueError(f"price_per_kwh cannot be negative, got {price_per_kwh}")
    facility = facility_kw(it_kw, pue)
    delivered = delivered_pflops(dense_tflops, mfu)
    hours = _HOURS_PER_DAY / delivered
    kwh = facility * hours
    return PflopDayCost(
        it_kw=it_kw,
        pue=pue,
        facility_kw=facility,
        dense_tflops=dense_tflops,
        mfu=mfu,
        delivered_pflops=delivered,
        hours_per_pflop_day=hours,
        kwh_per_pflop_day=kwh,
        price_per_kwh=price_per_kwh,
        usd_per_pflop_day=kwh * price_per_kwh,
    )


def plan_cost_per_pflop_day(
    plan: Plan,
    catalog: Catalog,
    precision: Precision,
    price_per_kwh: float,
    pue: float,
    mfu: float = DEFAULT_MFU,
    server_overhead: float = DEFAULT_SERVER_OVERHEAD,
) -> PflopDayCost:
    """`cost_per_pflop_day` for a whole plan: its IT power and its dense peak.

    Args:
        plan: the planned cluster.
        catalog: the catalog the plan was made with.
        precision: the training precision (picks ``dense_tflops``).
        price_per_kwh: electricity price, USD per kWh.
        pue: power usage effectiveness.
        mfu: model FLOPs utilization.
        server_overhead: factor for cloud-instance power estimates (see `it_power`).

    Returns:
        The cost with every intermediate value.

    Raises:
        ValueError: the plan has no GPU throughput at ``precision`` or a value is out of range.
    """
    it_kw = cluster_kw(plan, catalog, server_overhead)
    dense = cluster_dense_tflops(plan, catalog, precision)
    return cost_per_pflop_day(it_kw, dense, price_per_kwh, pue, mfu)
