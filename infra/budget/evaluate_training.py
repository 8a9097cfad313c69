"""The `scaling_efficiency` budget: the training model's answer, or the fallback step estimate.

A budget naming a model (preset or shape) is answered by `railplan train`'s layout search
(`train_plan`), whose scaling efficiency carries the held-out band of its regime
(`train_bands`); one giving only ``model_params`` and an MFU takes `training.step_estimate`,
whose band comes from its gradient all-reduce's band (the MFU is the user's assumption).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infra.budget.bands import CollectiveBands, collective_bands
from infra.budget.budget_result import BudgetResult
from infra.budget.cluster import BudgetError, comm_topology, main_group
from infra.budget.memo import train_cached
from infra.budget.train_model import ModelShape
from infra.budget.train_plan import TrainAnswer, fitting_batch
from infra.budget.train_request import TrainRequest, model_shape
from infra.budget.train_stack import resolve as resolve_stack
from infra.budget.training import StepEstimate, step_estimate
from infra.catalog import Catalog
from infra.errors import InputError
from infra.spec import Spec
from infra.spec.budgets import ScalingEfficiencyBudget

__all__ = ["scaling", "scaling_answer", "scaling_step"]


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


def scaling(b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, r: BudgetResult) -> BudgetResult:
    """Evaluate a `scaling_efficiency` budget (the training model's, or the fallback)."""
    if b.uses_train_model:
        return _scaling_trained(b, spec, cat, r)
    step = scaling_step(b, spec, cat, r.path)
    low, high, bands = _fallback_band(b, spec, cat, r.path, step)
    return replace(
        r,
        predicted=step.efficiency,
        limit=b.min,
        unit="",
        better="higher",
        detail=f"step {step.step_s:.3f} s: compute {step.compute_s:.3f} s at the budget's "
        f"MFU {b.mfu:g} (assumed, no band), gradient all-reduce {step.allreduce_s:.3f} s "
        f"({step.allreduce_algorithm}), exposed {step.exposed_s:.3f} s",
        band_low=low,
        band_high=high,
        band_regime=bands.time.regime,
        fit=bands.fit,
    )


def _fallback_band(
    b: ScalingEfficiencyBudget, spec: Spec, cat: Catalog, path: str, step: StepEstimate
) -> tuple[float, float, CollectiveBands]:
    """The fallback's efficiency band: its gradient all-reduce at both edges of its band."""
    topo = comm_topology(spec, cat, b.gpus, path=f"{path}.gpus", group=b.group)
    nbytes = int(b.model_params) * b.gradient_bytes
    time_us = step.allreduce_s * 1e6
    bands = collective_bands(topo, "all_reduce", nbytes, nbytes / time_us / 1000, time_us)

    def efficiency(allreduce_us: float) -> float:
        exposed = max(0.0, allreduce_us / 1e6 - b.overlap * step.compute_s)
        return step.compute_s / (step.compute_s + exposed)

    return efficiency(bands.time.high), efficiency(bands.time.low), bands


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
        f"{bd.pp_bubble_s / step:.0%}, exposed DP {bd.dp_comm_exposed_s / step:.0%})"
        + _layout_note(a),
        **_trained_band(a),
    )


def _trained_band(a: TrainAnswer) -> dict[str, Any]:
    """The `BudgetResult` band fields of a training answer's scaling efficiency."""
    if a.band is None:
        return {}
    band = a.band.efficiency(a.scaling_efficiency)
    return {
        "band_low": band.low,
        "band_high": band.high,
        "band_regime": band.regime,
        "fit": a.band.fit,
    }


def _layout_note(a: TrainAnswer) -> str:
    """What the search says about the chosen layout: the MFU band and, if any, what is beside."""
    if a.band is None:
        return ""
    mfu = a.band.throughput(a.result.tflops_per_gpu(False) / a.result.peak_tflops, 4)
    note = f"; MFU band {mfu.low:.1%}-{mfu.high:.1%}"
    if a.other is not None and a.other.calibrated:
        note += f"; best calibrated layout {a.other.result.tflops_per_gpu(False):.1f} TFLOP/s"
    return note
