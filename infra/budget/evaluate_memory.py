"""The `model_fits` budget: memory per GPU of a model on a layout, and the fewest GPUs it fits on.

Arithmetic on the budget's numbers (`train_model.layout_memory`, the memory model `railplan
train` uses): nothing is fitted, so the figure has no error band and is tested as it is.
"""

from __future__ import annotations

from dataclasses import replace

from infra.budget import memory
from infra.budget.budget_result import BudgetResult
from infra.budget.cluster import BudgetError, main_group
from infra.budget.train_model import (
    MemoryBreakdown,
    ModelShape,
    activation_bytes_per_layer,
    layout_memory,
)
from infra.catalog import Catalog
from infra.catalog.models import Gpu
from infra.spec import Spec
from infra.spec.budgets import ModelFitsBudget

__all__ = ["model_fits"]


def model_fits(b: ModelFitsBudget, spec: Spec, cat: Catalog, r: BudgetResult) -> BudgetResult:
    """Evaluate a `model_fits` budget: memory per GPU against what the GPU can use."""
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
