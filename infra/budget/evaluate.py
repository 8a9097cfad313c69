"""Evaluate the `budgets:` a spec declares: predicted value, limit, pass/fail and headroom.

Each budget kind maps to one model: all-reduce time (`collectives`), scaling efficiency
(`training`), checkpoint seconds (`storage`), rack and cluster power and cost per PFLOP-day
(`power_cost`), model fit (`memory`), the SHARP gain (`collectives` with and without
SHARP), and a trace replay's utilisation and queueing delay (`simulation`). Each result
carries the prediction's error band and calibration (`bands`) and tests the bound the budget
asks for (`budget_result`). A budget that cannot be evaluated (more GPUs than the cluster has,
no storage fabric for servers that are not AWS instances, a precision the GPU lacks) gets
``error`` instead of a verdict.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import assert_never

from infra.budget.bands import collective_bands
from infra.budget.budget_result import BudgetResult
from infra.budget.cluster import BudgetError, comm_topology, main_group, sharp_usable
from infra.budget.collectives import predict
from infra.budget.evaluate_memory import model_fits
from infra.budget.evaluate_power import cluster_power, cost, rack_power
from infra.budget.evaluate_training import scaling, scaling_answer, scaling_step
from infra.budget.simulation import Replays, queueing_delay, utilization
from infra.budget.storage import (
    checkpoint_band,
    checkpoint_estimate,
    published_checkpoint_ratio,
)
from infra.catalog import Catalog
from infra.spec import Spec
from infra.spec.budgets import (
    AllReduceBudget,
    AllReduceEntry,
    Budget,
    CheckpointBudget,
    CheckpointEntry,
    ClusterPowerEntry,
    CostEntry,
    ModelFitsEntry,
    QueueingDelayEntry,
    RackPowerEntry,
    ScalingEfficiencyEntry,
    SharpGainBudget,
    SharpGainEntry,
    UtilizationEntry,
)
from infra.topology import Plan
from infra.wording import plural

__all__ = ["BudgetResult", "evaluate_budgets", "scaling_answer", "scaling_step"]


def _planned(plan: Plan | None, r: BudgetResult) -> Plan:
    """The plan, which power, storage and cost budgets need."""
    if plan is None:
        raise BudgetError("the spec cannot be planned (see RP049)", path=r.path)
    return plan


def _all_reduce(
    b: AllReduceBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    topo = comm_topology(
        spec, cat, b.gpus, path=f"{r.path}.gpus", group=b.group, group_path=f"{r.path}.group"
    )
    row = predict(topo, "all_reduce", b.bytes)
    bands = collective_bands(topo, "all_reduce", b.bytes, row.busbw_GBps, row.time_us)
    return replace(
        r,
        predicted=row.time_us / 1000,
        limit=b.max_ms,
        unit="ms",
        detail=f"{b.bytes:,} B on {b.gpus} GPUs: {row.algorithm}/{row.protocol}, "
        f"busbw {row.busbw_GBps:g} GB/s (band {bands.busbw.low:g}-{bands.busbw.high:g})",
        band_low=bands.time.low / 1000,
        band_high=bands.time.high / 1000,
        band_regime=bands.time.regime,
        fit=bands.fit,
    )


def _checkpoint(
    b: CheckpointBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plan = _planned(plan, r)
    group, node = main_group(spec, cat, None, f"{r.path}.gpus")
    gpus = b.gpus or group.count * node.gpus
    if gpus > group.count * node.gpus:
        raise BudgetError(
            f"asks for {gpus:,} GPUs but node group {group.name!r} has {group.count * node.gpus:,}",
            path=f"{r.path}.gpus",
            hint="use a GPU count up to the group's GPUs, or leave gpus out",
        )
    writers = gpus if b.writers == "all" else min(b.model_parallel, gpus)
    nodes = -(-writers // node.gpus)
    try:
        est = checkpoint_estimate(b.bytes, spec, cat, plan, nodes)
    except ValueError as exc:
        raise BudgetError(str(exc), path=r.path, hint="add fabrics.storage") from None
    band, fit = checkpoint_band(est.seconds, b.bytes, writers)
    # Below 10 GB/s whole numbers hide what limits (a small FSx writes 0.29 GB/s, not "0").
    stages = ", ".join(
        f"{k} {v:,.0f} GB/s" if v >= 10 else f"{k} {v:.3g} GB/s" for k, v in est.stages_gbs.items()
    )
    who = "every GPU its shard" if b.writers == "all" else "rank 0 of each model shard"
    target = f" to {est.storage}" if est.storage else ""
    low, high, rows = published_checkpoint_ratio()
    measured = (
        f"; held-out published checkpoints took {low:.2f}x-{high:.2f}x this model's time "
        f"({plural(rows, 'row')})"
        if rows
        else ""
    )
    result = replace(
        r,
        predicted=est.seconds,
        limit=b.max_s,
        unit="s",
        detail=f"{writers:,} GPUs on {nodes:,} nodes write ({who}){target}; limited by "
        f"{est.limiter} ({stages}){measured}",
        fit=fit,
    )
    if band is None:
        return result
    return replace(result, band_low=band.low, band_high=band.high, band_regime=band.regime)


def _sharp_gain(
    b: SharpGainBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plain = predict(
        comm_topology(
            spec, cat, b.gpus, sharp=False, path=r.path, group=b.group, group_path=f"{r.path}.group"
        ),
        "all_reduce",
        b.bytes,
    )
    if not sharp_usable(spec, cat):
        return replace(
            r,
            predicted=0.0,
            limit=b.min,
            unit="",
            better="higher",
            detail="SHARP is not usable on this fabric (fabrics.compute.sharp, "
            "rail_optimized, a host subnet manager)",
        )
    sharp = predict(
        comm_topology(
            spec, cat, b.gpus, sharp=True, path=r.path, group=b.group, group_path=f"{r.path}.group"
        ),
        "all_reduce",
        b.bytes,
    )
    gain = 1 - sharp.time_us / plain.time_us
    # The band is the SHARP prediction's: the SHARP time is what the gain hangs on, and the
    # two predictions share the rest of the model (their errors are not independent).
    topo = comm_topology(spec, cat, b.gpus, sharp=True, path=r.path, group=b.group)
    bands = collective_bands(topo, "all_reduce", b.bytes, sharp.busbw_GBps, sharp.time_us)
    return replace(
        r,
        predicted=gain,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"{b.bytes:,} B on {b.gpus} GPUs: {plain.time_us:g} us "
        f"({plain.algorithm}) without SHARP, {sharp.time_us:g} us "
        f"({sharp.algorithm}, band {bands.time.low:g}-{bands.time.high:g}) with",
        band_low=1 - bands.time.high / plain.time_us,
        band_high=1 - bands.time.low / plain.time_us,
        band_regime=bands.time.regime,
        fit=bands.fit,
    )


def _dispatch(  # noqa: C901 - one arm per budget kind, kept exhaustive by assert_never
    budget: Budget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult, runs: Replays
) -> BudgetResult:
    """Evaluate ``budget`` with its kind's evaluator (each typed for its kind's parameters)."""
    match budget:
        case AllReduceEntry():
            return _all_reduce(budget.all_reduce, spec, cat, plan, r)
        case ScalingEfficiencyEntry():
            return scaling(budget.scaling_efficiency, spec, cat, r)
        case CheckpointEntry():
            return _checkpoint(budget.checkpoint, spec, cat, plan, r)
        case RackPowerEntry():
            return rack_power(budget.rack_power, spec, cat, _planned(plan, r), r)
        case ClusterPowerEntry():
            return cluster_power(budget.cluster_power, spec, cat, _planned(plan, r), r)
        case ModelFitsEntry():
            return model_fits(budget.model_fits, spec, cat, r)
        case CostEntry():
            return cost(budget.cost_per_pflop_day, spec, cat, _planned(plan, r), r)
        case SharpGainEntry():
            return _sharp_gain(budget.sharp_gain, spec, cat, plan, r)
        case UtilizationEntry():
            found = utilization(budget.utilization, spec, cat, _planned(plan, r), runs)
            return replace(r, **found._asdict())
        case QueueingDelayEntry():
            found = queueing_delay(budget.queueing_delay, spec, cat, _planned(plan, r), runs)
            return replace(r, **found._asdict())
        case _:
            assert_never(budget)


def _evaluate(
    i: int, budget: Budget, spec: Spec, cat: Catalog, plan: Plan | None, runs: Replays
) -> BudgetResult:
    kind = budget.kind
    fields = getattr(budget, kind)
    blank = BudgetResult(
        i,
        kind,
        f"budgets[{i}].{kind}",
        math.nan,
        math.nan,
        "",
        "lower",
        "",
        claim=fields.claim or "",
        bound=fields.bound,
    )
    try:
        return _dispatch(budget, spec, cat, plan, blank, runs)
    except BudgetError as exc:
        return replace(
            blank,
            error=exc.message,
            error_hint=exc.hint or "",
            path=exc.path or blank.path,
        )


def evaluate_budgets(
    spec: Spec, catalog: Catalog, plan: Plan | None, *, spec_file: str | None = None
) -> list[BudgetResult]:
    """Evaluate every declared budget, in spec order, each distinct budget once.

    A budget equal to an earlier one (same kind and parameters) gets the earlier result,
    renumbered to its own index and path: a spec repeating one budget costs one evaluation.
    Traces the replay budgets name are read relative to ``spec_file``'s directory (the
    current directory without one) and replayed once each.
    """
    first: dict[Budget, BudgetResult] = {}
    results = []
    runs = Replays(spec_file)
    for i, budget in enumerate(spec.budgets):
        if budget not in first:
            first[budget] = _evaluate(i, budget, spec, catalog, plan, runs)
        results.append(_renumbered(first[budget], i))
    return results


def _renumbered(result: BudgetResult, index: int) -> BudgetResult:
    """``result`` as the result of the equal budget at ``index``."""
    if result.index == index:
        return result
    old, new = f"budgets[{result.index}]", f"budgets[{index}]"
    path = new + result.path[len(old) :] if result.path.startswith(old) else result.path
    return replace(result, index=index, path=path)
