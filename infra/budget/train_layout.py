"""One training step of a GPT-style model on a tensor/pipeline/data-parallel layout.

This module owns the step-time model behind `railplan train` and the `scaling_efficiency`
budget: GEMM time by shape (`gemm_efficiency`), tensor-parallel collectives on NVLink,
context parallelism's K/V ring behind attention, pipeline point-to-point and bubble (1F1B,
interleaved), data-parallel gradient reduction overlapped with the backward pass (ZeRO 0-3
traffic), the memory-bound Adam step and memory per GPU (`train_model`). All
collective times come from `collectives.predict` on sub-communicators of the job's
`CommTopology` (TP ranks inside one node; DP ranks one per node when TP fills the node;
the node's NICs shared by the DP groups that run at once).

Fitted constants (`PEAK_SHARE`, `HALF_DIM`) and the rows they were fitted on are listed in
docs/accuracy.md ("Training"); everything else is a formula from [Megatron-2021] or
[Korthikanti] (see `train_model`) or an assumption stated where it is used.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from infra.budget.collectives import CommTopology, predict
from infra.budget.train_model import (
    Flops,
    Gemm,
    MemoryBreakdown,
    ModelShape,
    Recompute,
    activation_bytes_per_layer,
    iteration_flops,
    layer_gemms,
    logit_gemm,
    memory_per_gpu,
    stage_params,
)
from infra.budget.train_stack import MEGATRON_CORE_PIPELINE, PipelineRules
from infra.catalog.models import Gpu
from infra.spec.base import Precision

__all__ = [
    "ELEMENTWISE",
    "HALF_DIM",
    "PEAK_SHARE",
    "Breakdown",
    "Job",
    "Layout",
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
# when NeMo's TP overlap (`_tp_exposed`) stopped charging those rows' TP collectives: the
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
GRAD_BYTES = 2  # 16-bit gradient reduction (Megatron-Core's default for bf16)
# SOURCED: DeepSpeed's ZeRO default ``reduce_bucket_size``, 5e8 elements
# (deepspeed/runtime/zero/config.py; deepspeed.ai/docs/config-json).
ZERO3_REDUCE_BUCKET = 500_000_000
# SOURCED: DeepSpeed's ``stage3_max_reuse_distance`` default, 1e9 elements ("Do not release
# a parameter if it will be reused within this threshold of parameters"; deepspeed.ai/docs/
# config-json and deepspeed/runtime/zero/config.py), applied by
# `PartitionedParameterCoordinator.__params_to_release` (`_regathered`).
ZERO3_REUSE_DISTANCE = 1_000_000_000
# SOURCED: fused causal attention skips the blocks above the diagonal, "around 1.7-1.8x
# speedup compared to attention without the causal mask" (FlashAttention-2, Dao 2023,
# arXiv:2307.08691, §3.1.1). Model FLOPs still count the full s x s, as Megatron and PaLM do.
CAUSAL_ATTENTION_TIME = 1 / 1.75
# SOURCED: SMs Transformer Engine's userbuffers give an overlapped TP all-gather or
# reduce-scatter by default: ``"num_sm": 1 if method == "ring_exchange" else 16``
# (transformer_engine/pytorch/module/base.py, initialize_ub's get_default_config). Userbuffers
# are not NCCL, so the share does not follow NCCL's channel count (`_tp_exposed`).
UB_COMM_SMS = 16
# GEMMs that stay BF16 in FP8 training (`_gemm_time`).
BF16_UNDER_FP8 = frozenset({"attention", "logits"})


@dataclass(frozen=True)
class Layout:
    """How the job is split: ``tp·pp·dp`` GPUs, micro-batches of ``micro_batch``."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    virtual: int = 1  # interleaved stages per GPU (1 = plain 1F1B)
    recompute: Recompute = "selective"
    zero: int = 1
    sp: bool = True  # sequence parallelism with TP
    cp: int = 1  # context parallelism: each sequence split over cp GPUs

    @property
    def gpus(self) -> int:
        """GPUs the layout needs."""
        return self.tp * self.cp * self.pp * self.dp

    def cp_label(self, times: str = "x") -> str:
        """`` x CP n`` for a layout that splits sequences, else empty (layout labels)."""
        return f" {times} CP {self.cp}" if self.cp > 1 else ""

    @property
    def replicas(self) -> int:
        """GPUs holding the same weights (DP x CP): gradients reduce, and ZeRO shards, over them."""
        return self.dp * self.cp


@dataclass(frozen=True)
class Job:
    """What is trained on what: the model, the GPU, the communicator of all the GPUs."""

    shape: ModelShape
    gpu: Gpu
    precision: Precision
    global_batch: int
    comm: CommTopology
    dp_overlap: bool = True  # gradient reduction overlaps the last backward pass
    flash_attention: bool = True  # fused attention: no s x s scores in memory
    tp_overlap: bool = False  # TP collectives pipelined with their GEMMs (`_tp_exposed`)
    pipeline_zero: int = 3  # the highest ZeRO stage the framework runs with PP > 1
    pipeline: PipelineRules = MEGATRON_CORE_PIPELINE  # what the stack's pipeline code refuses


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


@functools.lru_cache(maxsize=4096)
def _comm_us(topo: CommTopology, collective: str, nbytes: int) -> float:
    """Microseconds of one collective (cached: the search asks the same sizes often)."""
    if topo.ranks < 2 or nbytes <= 0:
        return 0.0
    return predict(topo, collective, nbytes).time_us  # type: ignore[arg-type]


def _tp_topology(comm: CommTopology, tp: int) -> CommTopology:
    """TP ranks: ``tp`` GPUs of one node, over NVLink."""
    return replace(comm, gpus_per_node=tp, nodes=1)


def _dp_topology(comm: CommTopology, layout: Layout) -> CommTopology:
    """DP ranks: consecutive after TP, so ``gpus_per_node / tp`` of them share a node.

    The groups that run at once (one per TP rank and stage) share the node's NICs. With
    context parallelism the group is DP x CP ranks (Megatron reduces gradients over both).
    """
    per_node = max(1, min(layout.replicas, comm.gpus_per_node // layout.tp))
    nodes = -(-layout.replicas // per_node)
    groups = max(1, comm.gpus_per_node // per_node)
    return replace(_nic_share(comm, groups), gpus_per_node=per_node, nodes=nodes)


def _nic_share(comm: CommTopology, ways: int) -> CommTopology:
    """``comm`` with its node's NICs split ``ways`` ways: whole NICs, else a share of the rate.

    Four NICs shared by eight GPUs give each half a NIC, not a whole one.
    """
    if comm.nics >= ways and comm.nics % ways == 0:
        return replace(comm, nics=comm.nics // ways)
    return replace(comm, nics=1, nic_gbps=comm.nic_gbps * comm.nics / ways)


def _p2p_topology(comm: CommTopology, layout: Layout) -> CommTopology:
    """Two neighbouring stages: ``tp·cp·dp`` ranks apart, so on two nodes once that fills one."""
    return _pair_topology(comm, layout.tp * layout.replicas < comm.gpus_per_node)


def _pair_topology(comm: CommTopology, same_node: bool) -> CommTopology:
    """Two ranks sending to each other: over NVLink, or one GPU's share of the NICs."""
    if same_node:
        return replace(comm, gpus_per_node=2, nodes=1)
    return replace(_nic_share(comm, comm.gpus_per_node), gpus_per_node=1, nodes=2)


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


def _tp_seconds(job: Job, layout: Layout, passes: int) -> float:
    """TP collectives of one micro-batch on a stage: 2 per block and pass.

    Megatron's TP all-reduces each block's attention and MLP output; with sequence
    parallelism each all-reduce is a reduce-scatter plus an all-gather of the same bytes.
    """
    if layout.tp == 1:
        return 0.0
    topo = _tp_topology(job.comm, layout.tp)
    nbytes = layout.micro_batch * job.shape.seq // layout.cp * job.shape.hidden * 2
    if layout.sp:
        one = _comm_us(topo, "reduce_scatter", nbytes) + _comm_us(topo, "all_gather", nbytes)
    else:
        one = _comm_us(topo, "all_reduce", nbytes)
    layers = -(-job.shape.layers // layout.pp)
    return 2 * passes * layers * one / 1e6


def _tp_exposed(job: Job, layout: Layout, tp_s: float, linear_s: float) -> float:
    """The TP collective time a step waits for, out of ``tp_s``.

    Without overlap all of it. With Transformer Engine's userbuffers overlap (NeMo's
    ``ub_tp_comm_overlap``, `train_stack`'s [NEMO-UB]) each all-gather / reduce-scatter is
    split into chunks pipelined with the GEMM that consumes or produces it, so it hides
    behind up to ``linear_s``, the step's linear-layer GEMM seconds. As with DP overlap
    (`_dp_exposed`), what hides still costs its communication kernels' share of the SMs:
    userbuffers' `UB_COMM_SMS`, not NCCL's channels.
    """
    if not job.tp_overlap or layout.tp == 1:
        return tp_s
    hidden = min(tp_s, linear_s)
    tax = min(1.0, UB_COMM_SMS / job.gpu.sms)
    return tp_s - hidden + tax * hidden


def _cp_seconds(job: Job, layout: Layout, attention_s: float) -> float:
    """Context-parallel K/V exchange of one micro-batch on a stage, less what attention hides.

    Ring attention (Megatron-Core's P2P context parallelism through Transformer Engine)
    passes each rank's K and V chunk around the ``cp`` ranks: cp - 1 sends per layer in the
    forward, and in the backward K/V again with their gradients (twice the bytes), once more
    for a recomputed forward. Each send overlaps attention on the chunk before it, so a ring
    step waits only for what its ``1/cp`` share of the layer's attention does not cover.
    ``attention_s`` is the stage's forward attention; CP ranks are ``tp`` apart.
    """
    if layout.cp == 1:
        return 0.0
    shape = job.shape
    kv_width = 2 * shape.hidden * shape.kv_heads_or_heads // shape.heads
    nbytes = layout.micro_batch * shape.seq // layout.cp * kv_width // layout.tp * 2
    pair = _pair_topology(job.comm, layout.tp * layout.cp <= job.comm.gpus_per_node)
    send_s = _comm_us(pair, "broadcast", nbytes) / 1e6
    layers = -(-shape.layers // layout.pp)
    chunk_s = attention_s / layers / layout.cp  # one ring step's forward attention
    # (sends per ring step, attention passes behind them): forward, backward, recomputation
    passes = [(1, 1.0), (2, 2.0)] + ([(1, 1.0)] if layout.recompute == "full" else [])
    per_layer = sum(max(0.0, sends * send_s - work * chunk_s) for sends, work in passes)
    return layers * (layout.cp - 1) * per_layer


@dataclass(frozen=True)
class DpTraffic:
    """Seconds of DP communication in a step, by the pass it must finish in."""

    forward_s: float  # ZeRO-3's weight gathers before each forward
    backward_s: float  # gradient reduction (and ZeRO-3's gathers before each backward)

    @property
    def total_s(self) -> float:
        """All of it, hidden or not."""
        return self.forward_s + self.backward_s


def _zero3_topology(comm: CommTopology, layout: Layout) -> CommTopology:
    """ZeRO-3's DP ranks: over NVLink inside one node, else each GPU through its NIC share.

    ZeRO++ (Wang et al. 2023, arXiv:2306.10209, abstract and overview) counts ZeRO-3's
    cross-node traffic as 3M per GPU (M = the model's 16-bit weights): a forward all-gather,
    a backward all-gather and a gradient reduce-scatter, each of the GPU's full M; its hpZ
    keeps a secondary copy per node to remove the backward gather's inter-node traffic. So
    every rank's gathers go through its own share of the node's NICs, which all three
    collectives share (they add up; none hides behind another). This is an implementation's
    behaviour, not the wire's floor: an NCCL ring over whole nodes needs each byte to enter
    a node only once (ZeRO 0-2 are timed that way, `_dp_topology`). The choice was made
    knowing SC21's ZeRO-3 rows (about 16-18 GB/s per GPU of 3M at every GPU count).
    """
    if layout.tp * layout.replicas <= comm.gpus_per_node:
        return replace(comm, gpus_per_node=layout.replicas, nodes=1)
    return replace(_nic_share(comm, comm.gpus_per_node), gpus_per_node=1, nodes=layout.replicas)


def _bucketed_us(topo: CommTopology, collective: str, params: int, bucket: int) -> float:
    """Microseconds of ``params`` 16-bit values moved in collectives of ``bucket`` each."""
    full, rest = divmod(params, bucket)
    one = _comm_us(topo, collective, bucket * GRAD_BYTES)
    return full * one + _comm_us(topo, collective, rest * GRAD_BYTES)


def _regathered(matrices: list[int]) -> list[int]:
    """The weight matrices of a layer that full recomputation makes ZeRO-3 gather a third time.

    With full recomputation a layer's backward first re-runs its forward, gathering each
    matrix, then runs the backward through them in reverse. After a module runs, DeepSpeed
    keeps its parameters only if they reappear among the modules whose parameters add up to
    ``stage3_max_reuse_distance`` from there (`PartitionedParameterCoordinator.
    __params_to_release`, deepspeed/runtime/zero/partitioned_param_coordinator.py: it walks
    the recorded module order from the current step, counting each module's elements, and
    stops at the distance). Matrix ``i`` is met again after itself, the later matrices'
    recomputed forward and their backward: ``w_i + 2·sum(w_j, j > i)`` elements. At or past
    `ZERO3_REUSE_DISTANCE` it is released and gathered again for its backward.

    >>> h = 12288  # GPT-3 175B: QKV, projection and MLP-up go; MLP-down (4h² < 1e9) stays
    >>> len(_regathered([3 * h * h, h * h, 4 * h * h, 4 * h * h]))
    3
    """
    return [
        w for i, w in enumerate(matrices) if w + 2 * sum(matrices[i + 1 :]) >= ZERO3_REUSE_DISTANCE
    ]


def _zero3_traffic(job: Job, layout: Layout, m: int) -> DpTraffic:
    """DeepSpeed ZeRO-3: per micro-batch 2-3 gathers of each weight matrix, one reduce-scatter.

    DeepSpeed fetches a module's partitioned parameters right before its forward and again
    before its backward, prefetching up to ``stage3_prefetch_bucket_size`` elements ahead
    (default 5e7, less than one GPT-3 weight matrix: so one matrix ahead); parameters under
    ``stage3_param_persistence_threshold`` (1e5: biases, norms) stay whole, so each weight
    matrix is one all-gather. With full recomputation the recomputed forward gathers, and
    the backward right after it reuses only the matrices within ``stage3_max_reuse_distance``
    (default 1e9 elements); the others are gathered a third time (`_regathered`: for a
    layer of more than about 1e9 elements, most of it). Gradients are partitioned, so each
    micro-batch reduce-scatters them in ``reduce_bucket_size`` buckets (5e8). (DeepSpeed
    config docs, deepspeed/runtime/zero/config.py.)
    """
    topo = _zero3_topology(job.comm, layout)
    shape, layers = job.shape, -(-job.shape.layers // layout.pp)
    matrices = [g.n * g.k for g in layer_gemms(shape, 1, layout.tp) if g.name != "attention"]
    gather = layers * sum(_comm_us(topo, "all_gather", w * GRAD_BYTES) for w in matrices)
    gather += _comm_us(topo, "all_gather", shape.vocab * shape.hidden // layout.tp * GRAD_BYTES)
    again = _regathered(matrices) if layout.recompute == "full" else []
    regather = layers * sum(_comm_us(topo, "all_gather", w * GRAD_BYTES) for w in again)
    params = stage_params(shape, layout.tp, layout.pp)
    scatter = _bucketed_us(topo, "reduce_scatter", params, ZERO3_REDUCE_BUCKET)
    return DpTraffic(m * gather / 1e6, m * (gather + regather + scatter) / 1e6)


def _dp_traffic(job: Job, layout: Layout, m: int) -> DpTraffic:
    """Gradient reduction (and ZeRO's parameter all-gathers) of one step over DP ranks.

    ZeRO-0 all-reduces the gradients once; ZeRO-1/2 (Megatron's distributed optimizer)
    reduce-scatter them and all-gather the updated weights; ZeRO-3 is `_zero3_traffic`.
    Megatron-Core reduces in buckets of ``max(4e7, 1e6 x DP)`` parameters when it overlaps
    the reduction with the backward pass, else in one collective
    (`DistributedDataParallelConfig.bucket_size`: "larger DP sizes need larger buckets to
    ensure collectives do not become latency-bound").
    """
    if layout.replicas == 1:
        return DpTraffic(0.0, 0.0)
    if layout.zero == 3:
        return _zero3_traffic(job, layout, m)
    topo = _dp_topology(job.comm, layout)
    params = stage_params(job.shape, layout.tp, layout.pp)
    bucket = max(40_000_000, 1_000_000 * layout.replicas) if job.dp_overlap else params
    if layout.zero == 0:
        return DpTraffic(0.0, _bucketed_us(topo, "all_reduce", params, bucket) / 1e6)
    gather = _bucketed_us(topo, "all_gather", params, bucket)
    return DpTraffic(0.0, (gather + _bucketed_us(topo, "reduce_scatter", params, bucket)) / 1e6)


def _dp_exposed(
    job: Job, layout: Layout, dp: DpTraffic, passes_s: tuple[float, float], m: int
) -> float:
    """The DP time the step waits for.

    ``passes_s`` is one micro-batch's (forward, backward) seconds. Gradients of a stage are
    reduced bucket by bucket as the last micro-batch's backward produces them. ZeRO-3
    prefetches each layer's weights behind the previous layer's compute, so a pass hides
    only the traffic it needs itself: a forward (a third of the compute) hides its own
    gathers, not the backward's. What hides is not free: NCCL runs one thread block per
    channel, so while it overlaps it takes ``channels / SMs`` of the GPU from the GEMMs (16
    channels between nodes on 132 SMs: 12 %; 24 inside one DGX A100 or H100).
    """
    if not job.dp_overlap:
        return dp.total_s
    forward_s, backward_s = passes_s
    runs = m if layout.zero == 3 else 1  # ZeRO-3 moves weights in every micro-batch
    hidden = min(dp.forward_s, runs * forward_s) + min(dp.backward_s, runs * backward_s)
    tax = min(1.0, _dp_topology(job.comm, layout).channels / job.gpu.sms)
    return dp.total_s - hidden + tax * hidden


def _p2p_seconds(job: Job, layout: Layout, m: int) -> float:
    """Pipeline sends of a step: activations forward and gradients back, per micro-batch.

    Megatron scatters each message over the TP ranks (``b·s·h·2/tp`` bytes each) and
    interleaving multiplies the stage boundaries a micro-batch crosses by ``virtual``.
    """
    if layout.pp == 1:
        return 0.0
    nbytes = layout.micro_batch * job.shape.seq // layout.cp * job.shape.hidden * 2 // layout.tp
    one = _comm_us(_p2p_topology(job.comm, layout), "broadcast", nbytes) / 1e6
    return 2 * layout.virtual * m * one


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
    tp_s = _tp_exposed(
        job,
        layout,
        m * _tp_seconds(job, layout, 3 if layout.recompute == "full" else 2),
        m * 3 * (blocks_s - attention_s),  # the blocks' GEMMs outside attention, 3 passes
    )
    cp_s = m * _cp_seconds(job, layout, attention_s)
    per_micro = (compute_s + recompute_s + tp_s + cp_s) / m
    bubble_s = (layout.pp - 1) / layout.virtual * per_micro
    dp = _dp_traffic(job, layout, m)
    forward_s = blocks_s + logit_s + _tp_seconds(job, layout, 1)
    breakdown = Breakdown(
        compute_s=compute_s,
        recompute_s=recompute_s,
        tp_comm_s=tp_s,
        cp_comm_s=cp_s,
        pp_comm_s=_p2p_seconds(job, layout, m),
        pp_bubble_s=bubble_s,
        dp_comm_exposed_s=_dp_exposed(job, layout, dp, (forward_s, per_micro - forward_s), m),
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
