"""One training step of a GPT-style model on a tensor/pipeline/data-parallel layout.

This module owns the step-time model behind `railplan train` and the `scaling_efficiency`
budget: GEMM time by shape (`gemm_efficiency`), the element-wise work beside it, the
pipeline bubble (1F1B, interleaved), the memory-bound Adam step, memory per GPU
(`train_model`), and the step they add up to with the communication
(`infra.budget.train_comm`: tensor-parallel collectives on NVLink, context parallelism's
K/V ring behind attention, pipeline point-to-point, data-parallel gradient reduction
overlapped with the backward pass). A step is of a `Job` on a `Layout`
(`infra.budget.train_job`).

Fitted constants (`PEAK_SHARE`, `HALF_DIM`) and the rows they were fitted on are listed in
docs/accuracy.md ("Training"); everything else is a formula from [Megatron-2021] or
[Korthikanti] (see `train_model`) or an assumption stated where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.budget.train_comm import (
    cp_seconds,
    dp_exposed,
    dp_traffic,
    p2p_seconds,
    tp_exposed,
    tp_seconds,
)
from infra.budget.train_job import Job, Layout
from infra.budget.train_model import (
    Flops,
    Gemm,
    MemoryBreakdown,
    activation_bytes_per_layer,
    iteration_flops,
    layer_gemms,
    logit_gemm,
    memory_per_gpu,
    stage_params,
)
from infra.spec.base import Precision

__all__ = [
    "ELEMENTWISE",
    "HALF_DIM",
    "PEAK_SHARE",
    "Breakdown",
    "StepResult",
    "gemm_efficiency",
    "micro_batches",
    "step",
]

# Fitted (docs/accuracy.md, "Training"): the share of the dense peak a large bf16 GEMM
# reaches, per architecture, and the smallest GEMM dimension at which it reaches half of
# that (a saturating curve: small dimensions starve the tensor cores of reuse).
PEAK_SHARE = {"ampere": 0.78, "hopper": 0.76}
HALF_DIM = 192.0
# Fitted: element-wise kernels (norms, softmax, dropout, residuals, bias) move this many
# times the bytes of the activations a layer stores ([Korthikanti] eq. 1) per pass.
ELEMENTWISE = 1.5
# Fitted (`train_accuracy.fit_fp8_share`) on the fitting half's three NeMo FP8 rows: the
# share of a bf16 GEMM's share of peak an fp8 GEMM keeps of its doubled peak. It was an
# assumed 0.75, then 0.85 by this fit; the fit's 3-row median moved to 1.0 (no fp8 penalty)
# when the Hopper share moved from 0.75 to 0.76 (Megatron-Core's DP buckets), and to 0.73
# when NeMo's TP overlap (`train_comm.tp_exposed`) stopped charging those rows' TP collectives: the
# 1.0 had absorbed them. TE's GEMM profiling guide measures FP8 (delayed
# scaling, quantization included) at 1.69x BF16 on a 5B shape on H200 NVL, i.e. 0.85 of
# the doubled peak (docs/examples/gemm_profiling/gemm_profiling.rst, TransformerEngine
# commit 8f2e635); 0.73 on H100, with less HBM bandwidth per FLOP, is of that order.
FP8_SHARE = 0.73
# Fitted (`train_accuracy.fit_step_fixed`) on `fit`'s rows: seconds every step pays whatever
# its size (kernel launches, optimizer bookkeeping, the data loader). Those rows chose none
# until megatron-39.1b's assumed interleaving became 1 (2026-12-06: Megatron-LM 2021
# interleaves only with PP > 2); since, with the ampere share refitted to 0.78, they choose
# 0.02 s (median |error| 2.9 %, 3.0 % with none). BLOOM's ramp-up row alone wants ~5 s.
STEP_FIXED_S = 0.02
# Assumed: Adam reads and writes 16 bytes per parameter (fp32 master weights, momentum,
# variance; the gradient in, the 16-bit weights out) at full HBM bandwidth.
ADAM_BYTES = 32
# SOURCED: fused causal attention skips the blocks above the diagonal, "around 1.7-1.8x
# speedup compared to attention without the causal mask" (FlashAttention-2, Dao 2023,
# arXiv:2307.08691, §3.1.1). Model FLOPs still count the full s x s, as Megatron and PaLM do.
CAUSAL_ATTENTION_TIME = 1 / 1.75
# GEMMs that stay BF16 in FP8 training (`_gemm_time`).
BF16_UNDER_FP8 = frozenset({"attention", "logits"})


@dataclass(frozen=True)
class Breakdown:
    """Seconds of one step on the slowest GPU, by component (they add up to the step)."""

    compute_s: float
    recompute_s: float
    tp_comm_s: float
    cp_comm_s: float
    pp_comm_s: float
    pp_bubble_s: float
    dp_comm_exposed_s: float
    optimizer_s: float

    @property
    def step_s(self) -> float:
        """The step: every component is on the critical path."""
        return (
            self.compute_s
            + self.recompute_s
            + self.tp_comm_s
            + self.cp_comm_s
            + self.pp_comm_s
            + self.pp_bubble_s
            + self.dp_comm_exposed_s
            + self.optimizer_s
        )


@dataclass(frozen=True)
class StepResult:
    """One evaluated layout: its step, FLOPs, memory and DP communication."""

    layout: Layout
    breakdown: Breakdown
    flops: Flops
    memory: MemoryBreakdown
    micro_batches: int
    dp_comm_s: float
    peak_tflops: float

    @property
    def step_s(self) -> float:
        """Seconds per iteration."""
        return self.breakdown.step_s

    def tflops_per_gpu(self, hardware: bool) -> float:
        """Achieved TFLOP/s per GPU: model FLOPs, or hardware FLOPs (with recomputation)."""
        flops = self.flops.hardware if hardware else self.flops.model
        return flops / (self.step_s * self.layout.gpus) / 1e12


def gemm_efficiency(m: int, n: int, k: int, arch: str, precision: Precision) -> float:
    """Share of the dense peak a GEMM of ``m x k`` by ``k x n`` reaches.

    Rises with the smallest dimension (its arithmetic intensity) towards `PEAK_SHARE`.
    """
    smallest = min(m, n, k)
    share = PEAK_SHARE[arch] * (FP8_SHARE if precision is Precision.FP8 else 1.0)
    return share * smallest / (smallest + HALF_DIM)


def _gemm_time(job: Job, gemm: Gemm) -> float:
    """Seconds of one GEMM at its shape's share of the peak of the precision it runs in.

    FP8 training runs only the linear layers in FP8: Transformer Engine's core attention is
    BF16 unless FP8 attention is asked for, and Megatron keeps the output layer in BF16.
    """
    precision = job.precision
    if precision is Precision.FP8 and gemm.name in BF16_UNDER_FP8:
        precision = Precision.BF16
    peak = job.gpu.dense_tflops[precision] * 1e12
    share = gemm_efficiency(gemm.m, gemm.n, gemm.k, job.gpu.architecture, precision)
    return gemm.flops / (peak * share)


def _gemm_seconds(job: Job, layout: Layout) -> tuple[float, float, float]:
    """Forward seconds of one micro-batch: (blocks of a stage, attention part, logits)."""
    gemms = layer_gemms(job.shape, layout.micro_batch, layout.tp, layout.cp)
    times = {g.name: _gemm_time(job, g) for g in gemms}
    if job.flash_attention:  # the unfused kernels of 2021 computed the masked half too
        times["attention"] *= CAUSAL_ATTENTION_TIME
    layers = -(-job.shape.layers // layout.pp)
    logit_s = _gemm_time(job, logit_gemm(job.shape, layout.micro_batch, layout.tp, layout.cp))
    # Element-wise work is memory-bound: it moves about the activations the layer stores
    # ([Korthikanti] Table 2: norms and dropouts replicated over TP ranks unless sequence
    # parallel, the s x s attention scores unless fused).
    stored = activation_bytes_per_layer(
        job.shape,
        layout.micro_batch,
        layout.tp,
        layout.sp and layout.tp > 1,
        "selective" if job.flash_attention else "none",
        layout.cp,
    )
    elementwise = ELEMENTWISE * stored / (job.gpu.hbm_bandwidth_gbs * 1e9)
    block = sum(times.values()) + elementwise
    return layers * block, layers * times["attention"], logit_s


def _optimizer_seconds(job: Job, layout: Layout) -> float:
    """Adam over this GPU's share of the weights: memory-bound (`ADAM_BYTES`)."""
    local = stage_params(job.shape, layout.tp, layout.pp)
    if layout.zero >= 1:
        local = -(-local // layout.replicas)
    return local * ADAM_BYTES / (job.gpu.hbm_bandwidth_gbs * 1e9)


def micro_batches(job: Job, layout: Layout) -> int:
    """Micro-batches a step runs per pipeline: ``B / (dp·b)`` rounded up, at least 1.

    Also 1 for a layout with no replica (DP 0), which `check_layout` refuses by name.
    """
    return max(1, -(-job.global_batch // max(1, layout.dp * layout.micro_batch)))


def step(job: Job, layout: Layout, optimizer_s: float | None = None) -> StepResult:
    """Time one iteration of ``job`` on ``layout`` (``optimizer_s`` overrides the Adam time).

    The global batch is split into ``B / (dp·b)`` micro-batches per pipeline (rounded up).
    """
    m = micro_batches(job, layout)
    blocks_s, attention_s, logit_s = _gemm_seconds(job, layout)
    recompute_share = {"none": 0.0, "selective": attention_s, "full": blocks_s}
    compute_s = m * 3 * (blocks_s + logit_s)
    recompute_s = m * recompute_share[layout.recompute]
    tp_s = tp_exposed(
        job,
        layout,
        m * tp_seconds(job, layout, 3 if layout.recompute == "full" else 2),
        m * 3 * (blocks_s - attention_s),  # the blocks' GEMMs outside attention, 3 passes
    )
    cp_s = m * cp_seconds(job, layout, attention_s)
    per_micro = (compute_s + recompute_s + tp_s + cp_s) / m
    bubble_s = (layout.pp - 1) / layout.virtual * per_micro
    dp = dp_traffic(job, layout, m)
    forward_s = blocks_s + logit_s + tp_seconds(job, layout, 1)
    breakdown = Breakdown(
        compute_s=compute_s,
        recompute_s=recompute_s,
        tp_comm_s=tp_s,
        cp_comm_s=cp_s,
        pp_comm_s=p2p_seconds(job, layout, m),
        pp_bubble_s=bubble_s,
        dp_comm_exposed_s=dp_exposed(job, layout, dp, (forward_s, per_micro - forward_s), m),
        optimizer_s=_optimizer_seconds(job, layout) + STEP_FIXED_S
        if optimizer_s is None
        else optimizer_s,
    )
    batch = m * layout.dp * layout.micro_batch
    return StepResult(
        layout=layout,
        breakdown=breakdown,
        flops=iteration_flops(job.shape, batch, layout.recompute),
        memory=memory_per_gpu(
            job.shape,
            job.gpu,
            job.precision,
            (layout.tp, layout.pp, layout.dp, layout.micro_batch, layout.virtual),
            layout.recompute,
            layout.zero,
            layout.sp,
            layout.cp,
        ),
        micro_batches=m,
        dp_comm_s=dp.total_s,
        peak_tflops=job.gpu.dense_tflops[job.precision],
    )


def scaling_efficiency(job: Job, result: StepResult) -> float:
    """Per-GPU throughput of ``result`` over that of one replica (dp = 1, same layout).

    The replica trains the same global batch (so its pipeline has ``dp`` times the
    micro-batches) and is credited the same optimizer time, so the ratio isolates what
    spreading the batch over replicas costs: a longer bubble and the DP communication.
    """
    if result.layout.dp == 1:
        return 1.0
    replica = step(job, replace(result.layout, dp=1), result.breakdown.optimizer_s)
    batch = result.micro_batches * result.layout.dp * result.layout.micro_batch
    per_gpu = batch / result.step_s / result.layout.gpus
    replica_batch = replica.micro_batches * result.layout.micro_batch
    return per_gpu / (replica_batch / replica.step_s / replica.layout.gpus)
