"""Evaluate the `budgets:` a spec declares: predicted value, limit, pass/fail and headroom.

Each budget kind maps to one model: all-reduce time (`collectives`), scaling efficiency
(`training`), checkpoint seconds (`storage`), rack and cluster power and cost per PFLOP-day
(`power_cost`), model fit (`memory`), the SHARP gain (`collectives` with and without
SHARP), and a trace replay's utilisation and queueing delay (`simulation`). A budget that cannot be evaluated (more GPUs than the cluster has, no storage
fabric, a precision the GPU lacks) gets ``error`` instead of a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, assert_never

from infra.budget import memory, power_cost
from infra.budget.cluster import BudgetError, comm_topology, main_group, sharp_usable
from infra.budget.collectives import predict
from infra.budget.memo import train_cached
from infra.budget.simulation import Replays, queueing_delay, utilization
from infra.budget.storage import checkpoint_estimate
from infra.budget.train_model import (
    MemoryBreakdown,
    ModelShape,
    activation_bytes_per_layer,
    layout_memory,
)
from infra.budget.train_plan import TrainAnswer, TrainRequest, fitting_batch, model_shape
from infra.budget.train_stack import resolve as resolve_stack
from infra.budget.training import StepEstimate, step_estimate
from infra.catalog import Catalog
from infra.catalog.models import Gpu
from infra.errors import InputError
from infra.spec import Spec
from infra.spec.budgets import (
    AllReduceBudget,
    AllReduceEntry,
    Budget,
    CheckpointBudget,
    CheckpointEntry,
    ClusterPowerEntry,
    CostBudget,
    CostEntry,
    ModelFitsBudget,
    ModelFitsEntry,
    PowerBudget,
    QueueingDelayEntry,
    RackPowerEntry,
    ScalingEfficiencyBudget,
    ScalingEfficiencyEntry,
    SharpGainBudget,
    SharpGainEntry,
    UtilizationEntry,
)
from infra.topology import Plan
from infra.wording import plural

__all__ = ["BudgetResult", "evaluate_budgets", "scaling_answer", "scaling_step"]


@dataclass(frozen=True)
class BudgetResult:
    """One evaluated budget.

    ``margin`` is the headroom as a fraction of the limit (negative: the shortfall).
    ``better`` says which direction passes: ``lower`` (time, power, cost, memory) or
    ``higher`` (scaling efficiency, SHARP gain).
    """

    index: int
    kind: str
    path: str
    predicted: float
    limit: float
    unit: str
    better: Literal["lower", "higher"]
    detail: str
    error: str = ""
    claim: str = ""  # whose claim this is: a miss is reported, not a failure

    @property
    def verdict(self) -> Literal["pass", "miss", "fail", "error"]:
        """``miss`` is a missed claim: someone else's number, tested and reported, not failed."""
        if self.error:
            return "error"
        if self.passed:
            return "pass"
        return "miss" if self.claim else "fail"

    @property
    def fails(self) -> bool:
        """Whether this result fails the check: a missed requirement or an unevaluable budget."""
        return self.verdict in ("fail", "error")

    @property
    def passed(self) -> bool:
        """Whether the prediction meets the limit (False when it could not be evaluated)."""
        if self.error:
            return False
        if self.better == "lower":
            return self.predicted <= self.limit
        return self.predicted >= self.limit

    @property
    def margin(self) -> float:
        """Headroom relative to the limit: positive when met, negative when missed."""
        if self.error or not self.limit:
            return math.nan
        gap = (
            self.limit - self.predicted if self.better == "lower" else (self.predicted - self.limit)
        )
        return gap / self.limit


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
    return replace(
        r,
        predicted=row.time_us / 1000,
        limit=b.max_ms,
        unit="ms",
        detail=f"{b.bytes:,} B on {b.gpus} GPUs: {row.algorithm}/{row.protocol}, "
        f"busbw {row.busbw_GBps:g} GB/s",
    )


def scaling_step(b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, path: str) -> StepEstimate:
    """The training step a `scaling_efficiency` budget (at spec ``path``) describes.

    Raises:
        BudgetError: the budget cannot be evaluated on this spec.
    """
    if b.uses_train_model:  # the training model's step, in the older model's terms
        a = scaling_answer(b, spec, cat, path)
        bd = a.result.breakdown
        lay = a.result.layout
        return StepEstimate(
            a.result.step_s - bd.dp_comm_exposed_s,
            a.result.dp_comm_s,
            bd.dp_comm_exposed_s,
            a.result.step_s,
            a.scaling_efficiency,
            f"TP {lay.tp}{lay.cp_label()} x PP {lay.pp} x DP {lay.dp}",
        )
    topo = comm_topology(
        spec, cat, b.gpus, path=f"{path}.gpus", group=b.group, group_path=f"{path}.group"
    )
    gpu = cat.gpus[main_group(spec, cat, b.group, f"{path}.group")[1].gpu]
    if not gpu.supports(b.precision):
        raise BudgetError(f"{gpu.name} has no {b.precision}", path=f"{path}.precision")
    return step_estimate(
        b.model_params,
        b.tokens_per_gpu,
        gpu.dense_tflops[b.precision],
        b.mfu,
        topo,
        b.gradient_bytes,
        b.overlap,
    )


def _default_batch(b: ScalingEfficiencyBudget, shape: ModelShape | None = None) -> int:
    """The budget's batch, else the preset's published one, else tokens_per_gpu x gpus / seq."""
    if shape is None:
        shape = model_shape(b.model, b.layers, b.hidden, b.heads, b.seq, b.vocab)
    return b.global_batch or shape.global_batch or -(-b.tokens_per_gpu * b.gpus // shape.seq)


def scaling_answer(b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, path: str) -> TrainAnswer:
    """The training model's answer for a budget that names a model (preset or shape).

    The global batch is the budget's, never changed: one no layout divides is an error that
    names the nearest valid ones. A batch the budget does not state (the preset's published
    one, else ``tokens_per_gpu x gpus / seq``) becomes the nearest batch some layout divides,
    and the budget's detail says so.

    Raises:
        BudgetError: the shape or layout is invalid, or nothing fits.
    """
    try:
        shape = model_shape(b.model, b.layers, b.hidden, b.heads, b.seq, b.vocab, f"{path}.model")
    except InputError as exc:
        raise BudgetError(exc.message, path=path, hint=exc.hint) from None
    batch = _default_batch(b, shape)
    try:
        stack = resolve_stack(b.stack, path=f"{path}.stack")
    except InputError as exc:
        raise BudgetError(exc.message, path=exc.path, hint=exc.hint) from None
    request = TrainRequest(
        gpus=b.gpus,
        shape=shape,
        global_batch=batch,
        micro_batch=b.micro_batch,
        tp=b.tp,
        pp=b.pp,
        cp=b.cp,
        recompute=b.recompute,
        zero=b.zero,
        precision=b.precision,
        group=b.group,
        stack=stack,
    )
    try:
        if b.global_batch is None:  # not stated: the preset's batch, made to fit (and said so)
            request = replace(request, global_batch=fitting_batch(spec, cat, request))
        return train_cached(spec, cat, request)
    except (InputError, BudgetError) as exc:
        raise BudgetError(exc.message, path=_spec_path(path, exc.path), hint=exc.hint) from None


def _spec_path(path: str, option: str | None) -> str:
    """The budget field an option's error is about: ``--global-batch`` is ``path.global_batch``.

    Options the budget has no field for (and paths already in the spec) locate the budget.
    """
    if option and option.startswith("--"):
        field = option.removeprefix("--").replace("-", "_")
        if field in ScalingEfficiencyBudget.model_fields:
            return f"{path}.{field}"
    return option if option and not option.startswith("-") else path


def _scaling(
    b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    if b.uses_train_model:
        return _scaling_trained(b, spec, cat, r)
    step = scaling_step(b, spec, cat, r.path)
    return replace(
        r,
        predicted=step.efficiency,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"step {step.step_s:.3f} s: compute {step.compute_s:.3f} s, "
        f"gradient all-reduce {step.allreduce_s:.3f} s "
        f"({step.allreduce_algorithm}), exposed {step.exposed_s:.3f} s",
    )


def _scaling_trained(
    b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, r: BudgetResult
) -> BudgetResult:
    a = scaling_answer(b, spec, cat, r.path)
    res, lay = a.result, a.result.layout
    bd, step = res.breakdown, res.step_s
    losses = {
        "pipeline bubble": bd.pp_bubble_s,
        "exposed DP communication": bd.dp_comm_exposed_s,
        "pipeline sends": bd.pp_comm_s,
    }
    worst = max(losses, key=lambda k: losses[k])
    stack = f" (stack {a.stack})" if b.stack else ""
    wanted, used = _default_batch(b), a.global_batch
    if b.global_batch is None and used != wanted:
        stack += f"; global batch {used:,}: the nearest to {wanted:,} that {b.gpus:,} GPUs divide"
    return replace(
        r,
        predicted=a.scaling_efficiency,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"{b.model or 'model'} on TP {lay.tp}{lay.cp_label()} x PP {lay.pp} "
        f"(x{lay.virtual}) x DP {lay.dp}, {res.micro_batches} micro-batches of "
        f"{lay.micro_batch}{stack}: step {step:.3f} s, MFU "
        f"{res.tflops_per_gpu(False) / res.peak_tflops:.1%}; against one replica the "
        f"loss is mostly the {worst} ({losses[worst] / step:.0%} of the step; bubble "
        f"{bd.pp_bubble_s / step:.0%}, exposed DP {bd.dp_comm_exposed_s / step:.0%})",
    )


def _checkpoint(
    b: CheckpointBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plan = _planned(plan, r)
    try:
        est = checkpoint_estimate(b.bytes, spec, cat, plan)
    except ValueError as exc:
        raise BudgetError(str(exc), path=r.path, hint="add fabrics.storage") from None
    stages = ", ".join(f"{k} {v:,.0f} GB/s" for k, v in est.stages_gbs.items())
    return replace(
        r,
        predicted=est.seconds,
        limit=b.max_s,
        unit="s",
        detail=f"limited by {est.limiter} ({stages})",
    )


def _rack_power(
    b: PowerBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plan = _planned(plan, r)
    return replace(
        r,
        predicted=power_cost.max_rack_kw(plan),
        limit=b.max_kw,
        unit="kW",
        detail=f"hottest of {plural(len(plan.racks), 'rack')}, at maximum draw",
    )


def _cluster_power(
    b: PowerBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plan = _planned(plan, r)
    it = power_cost.it_power(plan, cat)
    note = " (cloud servers estimated from GPU TDP)" if it.is_estimate else ""
    return replace(
        r,
        predicted=it.total_kw,
        limit=b.max_kw,
        unit="kW",
        detail=f"IT power of servers and switches at maximum draw{note}",
    )


def _model_fits(
    b: ModelFitsBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    group, node = main_group(spec, cat, b.group, f"{r.path}.group")
    available = group.count * node.gpus
    gpus = b.gpus or available
    if gpus > available:  # fitting on GPUs the cluster does not have proves nothing
        raise BudgetError(
            f"asks for {gpus:,} GPUs but node group {group.name!r} has {available:,}",
            path=f"{r.path}.gpus",
            hint="use a GPU count up to the group's GPUs, or leave gpus out",
        )
    gpu = cat.gpus[node.gpu]
    if b.precision not in memory.TRAINING_PRECISIONS:
        raise BudgetError(
            f"{b.precision} is not a training precision",
            path=f"{r.path}.precision",
            hint="use bf16, fp16, fp8 or fp32",
        )
    split = b.tp * b.pp * b.cp
    if gpus % split:
        raise BudgetError(
            f"{gpus:,} GPUs do not split into TP {b.tp} x PP {b.pp} x CP {b.cp} replicas",
            path=f"{r.path}.gpus",
            hint="TP x PP x CP must divide the GPUs",
        )
    try:
        mem = _fits_memory(b, gpu, gpus)
    except ValueError as exc:  # a shape whose heads do not split the hidden size
        raise BudgetError(str(exc), path=f"{r.path}.activations") from None
    least = _fewest_gpus(b, gpu, split, max(gpus, 1) * 64)
    fewest = f"fits from {least} GPUs" if least else "fits on no GPU count at this stage"
    layout = f"TP {b.tp} x PP {b.pp} x CP {b.cp}, " if split > 1 else ""
    acts = f"recompute-{b.activations.recompute}" if b.activations else "omitted"
    return replace(
        r,
        predicted=mem.total / 1e9,
        limit=mem.usable / 1e9,
        unit="GB",
        detail=f"per GPU on {gpus} x {gpu.name}, {layout}ZeRO-{b.zero_stage}: weights "
        f"{mem.weights / 1e9:.1f}, gradients {mem.gradients / 1e9:.1f}, "
        f"optimizer {mem.optimizer / 1e9:.1f} GB; activations "
        f"{acts}; {fewest}",
    )


def _fits_memory(b: ModelFitsBudget, gpu: Gpu, gpus: int) -> MemoryBreakdown:
    """`train_model.layout_memory` (`railplan train`'s memory model) for the budget on ``gpus``.

    Weights split evenly over TP x PP; activations are Korthikanti's per layer with
    sequence parallelism over TP and CP, ``layers`` per stage times the ``pp``
    micro-batches 1F1B keeps in flight on the first stage.
    """
    weights = -(-int(b.model_params) // (b.tp * b.pp))
    shards = gpus // (b.tp * b.pp)
    a = b.activations
    if a is None:
        return layout_memory(weights, 0, shards, gpu, b.precision, b.zero_stage, 0.0)
    shape = ModelShape("budget", a.layers, a.hidden, a.heads, a.seq_len, 1)
    per_layer = activation_bytes_per_layer(shape, a.micro_batch, b.tp, True, a.recompute, b.cp)
    activations = per_layer * a.layers * b.pp
    layer_weights = 12 * a.hidden**2 // b.tp
    return layout_memory(
        weights, layer_weights, shards, gpu, b.precision, b.zero_stage, activations
    )


def _fewest_gpus(b: ModelFitsBudget, gpu: Gpu, split: int, most: int) -> int | None:
    """Fewest GPUs (a multiple of ``split``) on which the budget's model fits, by bisection.

    Memory per GPU only falls as ZeRO shards over more replicas, so fitting is monotone.
    """
    low, high = 1, most // split
    if high < 1 or not _fits_memory(b, gpu, high * split).fits:
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if _fits_memory(b, gpu, mid * split).fits else (mid + 1, high)
    return low * split


def _cost(
    b: CostBudget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult
) -> BudgetResult:
    plan = _planned(plan, r)
    try:
        c = power_cost.plan_cost_per_pflop_day(
            plan, cat, b.precision, b.price_per_kwh, b.pue, b.mfu
        )
    except ValueError as exc:
        raise BudgetError(str(exc), path=f"{r.path}.precision") from None
    hardware = 0.0
    note = ""
    if b.price_per_node_usd:  # straight-line amortisation: USD per day over PFLOP-days per day
        per_day = len(plan.servers) * b.price_per_node_usd / (b.amortize_years * 365.0)
        hardware = per_day / c.delivered_pflops
        note = (
            f"; hardware {hardware:,.2f} USD ({len(plan.servers):,} servers at "
            f"{b.price_per_node_usd:,.0f} USD over {b.amortize_years:g} years) + energy "
            f"{c.usd_per_pflop_day:,.2f} USD"
        )
    return replace(
        r,
        predicted=c.usd_per_pflop_day + hardware,
        limit=b.max_usd,
        unit="USD",
        detail=f"{c.facility_kw:,.0f} kW facility for {c.delivered_pflops:,.1f} "
        f"delivered PFLOP/s: {c.kwh_per_pflop_day:,.0f} kWh per PFLOP-day{note}",
    )


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
    return replace(
        r,
        predicted=gain,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"{b.bytes:,} B on {b.gpus} GPUs: {plain.time_us:g} us "
        f"({plain.algorithm}) without SHARP, {sharp.time_us:g} us "
        f"({sharp.algorithm}) with",
    )


def _dispatch(  # noqa: C901 - one arm per budget kind, kept exhaustive by assert_never
    budget: Budget, spec: Spec, cat: Catalog, plan: Plan | None, r: BudgetResult, runs: Replays
) -> BudgetResult:
    """Evaluate ``budget`` with its kind's evaluator (each typed for its kind's parameters)."""
    match budget:
        case AllReduceEntry():
            return _all_reduce(budget.all_reduce, spec, cat, plan, r)
        case ScalingEfficiencyEntry():
            return _scaling(budget.scaling_efficiency, spec, cat, plan, r)
        case CheckpointEntry():
            return _checkpoint(budget.checkpoint, spec, cat, plan, r)
        case RackPowerEntry():
            return _rack_power(budget.rack_power, spec, cat, plan, r)
        case ClusterPowerEntry():
            return _cluster_power(budget.cluster_power, spec, cat, plan, r)
        case ModelFitsEntry():
            return _model_fits(budget.model_fits, spec, cat, plan, r)
        case CostEntry():
            return _cost(budget.cost_per_pflop_day, spec, cat, plan, r)
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
    claim = getattr(budget, kind).claim or ""
    blank = BudgetResult(
        i, kind, f"budgets[{i}].{kind}", math.nan, math.nan, "", "lower", "", claim=claim
    )
    try:
        return _dispatch(budget, spec, cat, plan, blank, runs)
    except BudgetError as exc:
        return replace(
            blank,
            error=exc.message + (f" ({exc.hint})" if exc.hint else ""),
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
