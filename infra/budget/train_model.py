"""GPT-style model shapes, their FLOPs and the memory one GPU holds to train them.

This module owns what does not depend on the cluster: the published model presets (each
citing its paper), the parameter count of a shape, the FLOPs of one forward pass split into
its GEMMs (so the layout model can price each GEMM by its shape), model FLOPs versus
hardware FLOPs under activation recomputation, and per-GPU memory for a tensor/pipeline/data
parallel layout. Model states reuse `infra.budget.memory` (ZeRO stages 0-3, usable HBM);
activations extend its Korthikanti et al. formula with the tensor/sequence-parallel terms.

Sources:

[Megatron-2021] D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM", SC 2021 (arXiv:2104.04473). §5.1 eq. (3): one iteration
    of B sequences is 96·B·s·l·h²·(1 + s/6h + V/16lh) FLOPs with full recomputation, i.e.
    4 passes over the layers (24·B·s·h² + 4·B·s²·h each, forward) and 3 over the logits.
[Korthikanti] V. Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
    Models", MLSys 2023 (arXiv:2205.05198). Table 2: activations per layer s·b·h·(34 + 5as/h)
    without parallelism; s·b·h·(10 + 24/t + 5as/ht) with tensor parallelism t;
    s·b·h·(34 + 5as/h)/t with sequence parallelism too; selective recomputation drops the
    5as/h term; full keeps 2·s·b·h (the layer input). §4.2.3: with 1F1B the first stage holds
    L layers' worth; interleaving multiplies that by 1 + (p-1)/(p·v).

>>> g = PRESETS["gpt3-175b"]
>>> round(g.params / 1e9, 1)
174.6
>>> f = iteration_flops(g, 1536, "full")
>>> round(f.hardware / 1e18, 2)  # eq. (3), B = 1536
4.51
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.budget import memory
from infra.catalog.models import Gpu
from infra.spec.base import Precision

__all__ = [
    "PRESETS",
    "Flops",
    "Gemm",
    "MemoryBreakdown",
    "ModelShape",
    "Recompute",
    "interleaving_factor",
    "iteration_flops",
    "layer_gemms",
    "layout_memory",
    "memory_per_gpu",
]

Recompute = Literal["none", "selective", "full"]


@dataclass(frozen=True)
class ModelShape:
    """A GPT-style decoder: ``layers`` blocks of attention + MLP, tied to a vocabulary.

    ``ffn`` is the MLP's inner width (4·hidden for GPT, a gated SwiGLU's for Llama);
    ``kv_heads`` below ``heads`` is grouped-query attention.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int = 0
    kv_heads: int = 0
    gated: bool = False
    tied_embeddings: bool = True
    source: str = ""
    global_batch: int = 0  # the batch the source trained with (sequences), 0 unknown

    def __post_init__(self) -> None:
        """Reject shapes that are no transformer (a value below 1, heads not dividing)."""
        for field in ("layers", "hidden", "heads", "seq", "vocab"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.kv_heads < 0 or self.heads % self.kv_heads_or_heads:
            raise ValueError(f"kv heads {self.kv_heads} must divide heads {self.heads}")

    @property
    def ffn_or_default(self) -> int:
        """MLP width: ``ffn``, else GPT's 4·hidden."""
        return self.ffn or 4 * self.hidden

    @property
    def kv_heads_or_heads(self) -> int:
        """Key/value heads: ``kv_heads``, else one per attention head (no GQA)."""
        return self.kv_heads or self.heads

    @property
    def qkv_width(self) -> int:
        """Output width of the fused QKV projection (GQA shrinks K and V)."""
        return self.hidden + 2 * self.hidden * self.kv_heads_or_heads // self.heads

    @property
    def layer_params(self) -> int:
        """Weights of one block (biases and norms are < 0.1 % and left out)."""
        h = self.hidden
        mlp = (3 if self.gated else 2) * h * self.ffn_or_default
        return h * self.qkv_width + h * h + mlp

    @property
    def params(self) -> int:
        """All weights: the blocks plus the token embedding (and output layer if untied)."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params + embeddings


# Published shapes. Each `source` names the table the numbers come from; the batch is the
# one the source trained with (sequences of `seq` tokens).
PRESETS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape(
            "gpt3-175b",
            96,
            12288,
            96,
            2048,
            50257,
            global_batch=1536,
            source="Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 "
            "(batch 3.2M tokens; 1536 sequences as Megatron-LM trains it)",
        ),
        ModelShape(
            "mt-nlg-530b",
            105,
            20480,
            128,
            2048,
            51200,
            global_batch=1920,
            source="Smith et al. 2022, 'Using DeepSpeed and Megatron to Train Megatron-Turing "
            "NLG 530B', §3.2 and §4 (batch 1920); vocabulary: GPT-2 BPE padded as Megatron does",
        ),
        ModelShape(
            "llama2-70b",
            80,
            8192,
            64,
            4096,
            32000,
            ffn=28672,
            kv_heads=8,
            gated=True,
            tied_embeddings=False,
            global_batch=1024,
            source="Touvron et al. 2023, 'Llama 2', Table 1 (4M-token batch); FFN and KV heads "
            "from the released config.json",
        ),
        ModelShape(
            "llama3-405b",
            126,
            16384,
            128,
            8192,
            128256,
            ffn=53248,
            kv_heads=8,
            gated=True,
            tied_embeddings=False,
            global_batch=2048,
            source="Llama Team 2024, 'The Llama 3 Herd of Models', Table 3 (shape) and Table 4 "
            "(16M-token batch)",
        ),
        ModelShape(
            "gpt-1t",
            128,
            25600,
            160,
            2048,
            51200,
            global_batch=3072,
            source="Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on "
            "GPU Clusters Using Megatron-LM', Table 1 (1008 B row, batch 3072)",
        ),
    )
}


@dataclass(frozen=True)
class Gemm:
    """One matrix multiply of a forward pass: ``count`` GEMMs of ``m x k`` by ``k x n``."""

    name: str
    m: int
    n: int
    k: int
    count: int = 1

    @property
    def flops(self) -> float:
        """Multiply-adds counted as 2 FLOPs, as Megatron's formula does."""
        return 2.0 * self.m * self.n * self.k * self.count


def layer_gemms(shape: ModelShape, micro_batch: int, tp: int, cp: int = 1) -> list[Gemm]:
    """The forward GEMMs of one block on one of ``tp`` tensor-parallel GPUs.

    Megatron splits QKV and the MLP's first GEMM by columns and the projections after them
    by rows, so every GEMM keeps ``b·s`` rows and loses a factor ``tp`` in one dimension.
    Attention is a batched GEMM per head (``s x s`` by head width), heads split over ``tp``.
    Context parallelism over ``cp`` GPUs gives each ``s/cp`` of the tokens: every GEMM loses
    that share of its rows, and attention scores its ``s/cp`` queries against all ``s`` keys.
    """
    tokens = micro_batch * shape.seq // cp
    h, f = shape.hidden, shape.ffn_or_default
    head = h // shape.heads
    heads = micro_batch * shape.heads // tp
    up = (2 if shape.gated else 1) * f // tp
    return [
        Gemm("qkv", tokens, shape.qkv_width // tp, h),
        Gemm("attention", shape.seq // cp, shape.seq, head, 2 * heads),
        Gemm("projection", tokens, h, h // tp),
        Gemm("mlp-up", tokens, up, h),
        Gemm("mlp-down", tokens, h, f // tp),
    ]


def logit_gemm(shape: ModelShape, micro_batch: int, tp: int, cp: int = 1) -> Gemm:
    """The output layer's GEMM on one tensor-parallel GPU (vocabulary split over ``tp``)."""
    return Gemm("logits", micro_batch * shape.seq // cp, -(-shape.vocab // tp), shape.hidden)


@dataclass(frozen=True)
class Flops:
    """FLOPs of one iteration: what the model needs and what the hardware runs."""

    model: float
    hardware: float


def _recomputed_share(shape: ModelShape, recompute: Recompute) -> float:
    """Share of a block's forward FLOPs that recomputation runs again.

    Full recomputes the whole forward; selective only the attention scores and their
    product with V ([Korthikanti] §5: the 4·s²·h part of the 24·s·h² + 4·s²·h forward).
    """
    if recompute == "none":
        return 0.0
    gemms = layer_gemms(shape, 1, 1)
    total = sum(g.flops for g in gemms)
    if recompute == "full":
        return 1.0
    return sum(g.flops for g in gemms if g.name == "attention") / total


def iteration_flops(shape: ModelShape, global_batch: int, recompute: Recompute) -> Flops:
    """FLOPs of one iteration over ``global_batch`` sequences ([Megatron-2021] eq. 3).

    Model FLOPs are 3 passes (forward, two for backward) over blocks and logits; hardware
    FLOPs add the recomputed share of one more forward over the blocks.
    """
    block = sum(g.flops for g in layer_gemms(shape, global_batch, 1)) * shape.layers
    logits = logit_gemm(shape, global_batch, 1).flops
    model = 3 * (block + logits)
    return Flops(model, model + _recomputed_share(shape, recompute) * block)


def activation_bytes_per_layer(
    shape: ModelShape, micro_batch: int, tp: int, sp: bool, recompute: Recompute, cp: int = 1
) -> float:
    """Stored activation bytes of one block on one GPU ([Korthikanti] Table 2, 16-bit).

    Context parallelism keeps ``s/cp`` of the tokens (and of the attention scores' rows) on
    each GPU, so every term shrinks by ``cp``.
    """
    s, b, h, a = shape.seq, micro_batch, shape.hidden, shape.heads
    attention = 5 * a * s / h if recompute == "none" else 0.0
    if recompute == "full":
        return 2 * s * b * h / (tp if sp else 1) / cp
    if sp:
        return s * b * h * (34 + attention) / tp / cp
    return s * b * h * (10 + 24 / tp + attention / tp) / cp


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one GPU holds for the first pipeline stage (the fullest), by part."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    usable: int

    @property
    def total(self) -> int:
        """All four parts together."""
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def fits(self) -> bool:
        """Whether the total stays within the GPU's usable memory."""
        return self.total <= self.usable


def stage_params(shape: ModelShape, tp: int, pp: int) -> int:
    """Weights on one GPU of the first stage: its blocks and the embedding, split ``tp``."""
    layers = -(-shape.layers // pp)
    return (layers * shape.layer_params + shape.vocab * shape.hidden) // tp


def interleaving_factor(pp: int, virtual: int) -> float:
    """How many times ``L`` layers' activations the first stage holds ([Korthikanti] §4.2.3).

    Plain 1F1B (``virtual`` 1) holds ``p`` micro-batches of ``L/p`` layers: exactly ``L``
    layers' worth, factor 1. Megatron's interleaved schedule with ``virtual`` chunks per GPU
    warms up with more micro-batches in flight: ``1 + (p - 1) / (p·v)``.

    >>> interleaving_factor(64, 1), interleaving_factor(8, 1), interleaving_factor(8, 2)
    (1.0, 1.0, 1.4375)
    """
    return 1 + (pp - 1) / (pp * virtual) if pp > 1 and virtual > 1 else 1.0


def memory_per_gpu(
    shape: ModelShape,
    gpu: Gpu,
    precision: Precision,
    layout: tuple[int, int, int, int, int],
    recompute: Recompute,
    zero_stage: int,
    sp: bool = True,
    cp: int = 1,
) -> MemoryBreakdown:
    """Memory of one GPU for ``layout`` = (tp, pp, dp, micro_batch, virtual stages).

    Model states are `memory.estimate_memory` of this GPU's weights sharded by ZeRO stage
    over the ``dp x cp`` ranks that hold them (context-parallel ranks hold the same weights;
    Megatron's distributed optimizer shards over both); activations are ``L/pp`` blocks
    times ``pp`` micro-batches in flight (so ``L`` blocks' worth, [Korthikanti] §4.2.3),
    more only with interleaving (`interleaving_factor`). A sharding ZeRO-3 also holds two layers' gathered weights (the
    layer it computes and the one it prefetches: DeepSpeed's prefetch bucket, FSDP's
    default forward prefetch).
    """
    tp, pp, dp, micro_batch, virtual = layout
    per_layer = activation_bytes_per_layer(shape, micro_batch, tp, sp, recompute, cp)
    in_flight = -(-shape.layers // pp) * pp * interleaving_factor(pp, virtual)
    return layout_memory(
        stage_params(shape, tp, pp),
        shape.layer_params // tp,
        dp * cp,
        gpu,
        precision,
        zero_stage,
        per_layer * in_flight,
    )


def layout_memory(
    weights: int,
    layer_weights: int,
    shards: int,
    gpu: Gpu,
    precision: Precision,
    zero_stage: int,
    activations: float,
) -> MemoryBreakdown:
    """One GPU's memory from its ``weights`` (its TP x PP share) and 16-bit ``activations``.

    The one memory model of `railplan train` (`memory_per_gpu`) and the `model_fits`
    budget: model states are `memory.estimate_memory` of the GPU's weights sharded by ZeRO
    stage over the ``shards`` (DP x CP) ranks that hold them; a sharding ZeRO-3 also holds
    two layers' gathered weights (``layer_weights`` each: the layer it computes and the one it
    prefetches, DeepSpeed's prefetch bucket, FSDP's default forward prefetch); activations
    double for 32-bit training.
    """
    states = memory.estimate_memory(weights, shards, gpu, precision, zero_stage)
    weight_bytes = memory.state_bytes_per_param(precision)[0]
    gathered = 2 * layer_weights * weight_bytes if zero_stage == 3 and shards > 1 else 0
    scale = 2 if precision in (Precision.FP32, Precision.TF32) else 1
    return MemoryBreakdown(
        states.weights_bytes + gathered,
        states.gradients_bytes,
        states.optimizer_bytes,
        int(activations * scale),
        states.usable_bytes,
    )
