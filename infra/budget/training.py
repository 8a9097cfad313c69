"""Data-parallel training step time and scaling efficiency at an assumed MFU (the fallback).

A `scaling_efficiency` budget that names a model (`model:` or `layers`/`hidden`/`heads`) is
answered by the layout-aware model in `train_layout`/`train_plan` instead; this module
answers only budgets that give nothing but `model_params` and an `mfu`, as older specs do.

A step computes ``6 * P * tokens`` FLOPs per GPU (forward + backward, Kaplan et al. 2020,
"Scaling Laws for Neural Language Models", §2.1: C ≈ 6NBS) at the GPU's dense peak for the
precision times an MFU, then all-reduces ``P * gradient_bytes`` over the data-parallel GPUs.
Part of the all-reduce hides behind the backward pass (``overlap`` of the compute time, as
PyTorch DDP's gradient buckets do); the rest is exposed. Scaling efficiency is the compute
time over the step time: 1.0 means perfectly linear scaling, the same throughput per GPU as
a single GPU that never communicates.

>>> from infra.budget.collectives import CommTopology
>>> t = CommTopology("hopper", 8, 16, True, 18, 8, 400, "intel", False)
>>> s = step_estimate(7 * 10**9, 8192, 989.5, 0.4, t, 2, 0.5)
>>> round(s.compute_s, 3), round(s.efficiency, 3)
(0.869, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.budget.collectives import CommTopology, predict

__all__ = ["StepEstimate", "step_estimate"]


@dataclass(frozen=True)
class StepEstimate:
    """One training step: compute, gradient all-reduce, what is exposed, and efficiency."""

    compute_s: float
    allreduce_s: float
    exposed_s: float
    step_s: float
    efficiency: float
    allreduce_algorithm: str


def step_estimate(
    params: int,
    tokens_per_gpu: int,
    dense_tflops: float,
    mfu: float,
    comm: CommTopology,
    gradient_bytes: int,
    overlap: float,
) -> StepEstimate:
    """Estimate a data-parallel step on the GPUs of ``comm``."""
    compute_s = 6 * params * tokens_per_gpu / (dense_tflops * 1e12 * mfu)
    row = predict(comm, "all_reduce", params * gradient_bytes)
    allreduce_s = row.time_us / 1e6
    exposed_s = max(0.0, allreduce_s - overlap * compute_s)
    step_s = compute_s + exposed_s
    return StepEstimate(
        compute_s,
        allreduce_s,
        exposed_s,
        step_s,
        compute_s / step_s,
        f"{row.algorithm}/{row.protocol}",
    )
