"""The communication of one training step: what each parallelism sends and what overlap hides.

This module owns the communication side of the step model (`infra.budget.train_layout`
adds it to the compute): the sub-communicators carved from the job's `CommTopology` (TP
ranks inside one node; DP ranks one per node when TP fills the node, the node's NICs shared
by the DP groups that run at once; pipeline neighbours; ZeRO-3's ranks), each collective
timed by `collectives.predict`; tensor-parallel collectives on NVLink and what Transformer
Engine's overlap hides of them, context parallelism's K/V ring behind attention, pipeline
point-to-point sends, and data-parallel gradient reduction (ZeRO 0-3 traffic) overlapped
with the backward pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from infra.budget.collectives import CommTopology, predict
from infra.budget.train_job import Job, Layout
from infra.budget.train_model import layer_gemms, stage_params

__all__ = [
    "GRAD_BYTES",
    "UB_COMM_SMS",
    "ZERO3_REDUCE_BUCKET",
    "ZERO3_REUSE_DISTANCE",
    "DpTraffic",
    "cp_seconds",
    "dp_exposed",
    "dp_traffic",
    "p2p_seconds",
    "tp_exposed",
    "tp_seconds",
]


GRAD_BYTES = 2  # 16-bit gradient reduction (Megatron-Core's default for bf16)
# SOURCED: DeepSpeed's ZeRO default ``reduce_bucket_size``, 5e8 elements
# (deepspeed/runtime/zero/config.py; deepspeed.ai/docs/config-json).
ZERO3_REDUCE_BUCKET = 500_000_000
# SOURCED: DeepSpeed's ``stage3_max_reuse_distance`` default, 1e9 elements ("Do not release
# a parameter if it will be reused within this threshold of parameters"; deepspeed.ai/docs/
# config-json and deepspeed/runtime/zero/config.py), applied by
# `PartitionedParameterCoordinator.__params_to_release` (`_regathered`).
ZERO3_REUSE_DISTANCE = 1_000_000_000


# SOURCED: SMs Transformer Engine's userbuffers give an overlapped TP all-gather or
# reduce-scatter by default: ``"num_sm": 1 if method == "ring_exchange" else 16``
# (transformer_engine/pytorch/module/base.py, initialize_ub's get_default_config). Userbuffers
# are not NCCL, so the share does not follow NCCL's channel count (`tp_exposed`).
UB_COMM_SMS = 16


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


def tp_seconds(job: Job, layout: Layout, passes: int) -> float:
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


def tp_exposed(job: Job, layout: Layout, tp_s: float, linear_s: float) -> float:
    """The TP collective time a step waits for, out of ``tp_s``.

    Without overlap all of it. With Transformer Engine's userbuffers overlap (NeMo's
    ``ub_tp_comm_overlap``, `train_stack`'s [NEMO-UB]) each all-gather / reduce-scatter is
    split into chunks pipelined with the GEMM that consumes or produces it, so it hides
    behind up to ``linear_s``, the step's linear-layer GEMM seconds. As with DP overlap
    (`dp_exposed`), what hides still costs its communication kernels' share of the SMs:
    userbuffers' `UB_COMM_SMS`, not NCCL's channels.
    """
    if not job.tp_overlap or layout.tp == 1:
        return tp_s
    hidden = min(tp_s, linear_s)
    tax = min(1.0, UB_COMM_SMS / job.gpu.sms)
    return tp_s - hidden + tax * hidden


def cp_seconds(job: Job, layout: Layout, attention_s: float) -> float:
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


def dp_traffic(job: Job, layout: Layout, m: int) -> DpTraffic:
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


def dp_exposed(
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


def p2p_seconds(job: Job, layout: Layout, m: int) -> float:
    """Pipeline sends of a step: activations forward and gradients back, per micro-batch.

    Megatron scatters each message over the TP ranks (``b·s·h·2/tp`` bytes each) and
    interleaving multiplies the stage boundaries a micro-batch crosses by ``virtual``.
    """
    if layout.pp == 1:
        return 0.0
    nbytes = layout.micro_batch * job.shape.seq // layout.cp * job.shape.hidden * 2 // layout.tp
    one = _comm_us(_p2p_topology(job.comm, layout), "broadcast", nbytes) / 1e6
    return 2 * layout.virtual * m * one
