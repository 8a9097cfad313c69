"""GPU memory for mixed-precision Adam training, and the fewest GPUs a model fits on.

This module owns the per-GPU memory model behind the ``model_fits`` budget: the bytes one
data-parallel GPU holds for a model's weights, gradients and optimizer state under ZeRO stage
0-3, an optional activation term, the usable memory of a catalog GPU, and the smallest GPU
count on which the total fits. Pure functions over typed data; no I/O. Sizes are bytes, and
``GB`` is 10**9 bytes, as in the ZeRO paper (7.5e9 parameters x 16 bytes = 120 GB).

Sources, one per formula:

[ZeRO] S. Rajbhandari, J. Rasley, O. Ruwase, Y. He, "ZeRO: Memory Optimizations Toward
    Training Trillion Parameter Models", SC 2020 (arXiv:1910.02054).

    * §3.1: mixed-precision Adam holds an fp16 copy of the parameters (2Ψ bytes) and of the
      gradients (2Ψ), plus optimizer state of KΨ bytes: an fp32 copy of the parameters,
      momentum and variance, 4Ψ each, so K = 12 and the total is 2Ψ + 2Ψ + KΨ = 16Ψ
      ("GPT-2 with 1.5 Billion parameters ... at least 24 GB").
    * §5.1 P_os (stage 1): 4Ψ + KΨ/N_d; §5.2 P_os+g (stage 2): 2Ψ + 14Ψ/N_d;
      §5.3 P_os+g+p (stage 3): 16Ψ/N_d, N_d being the data-parallel degree.
    * Figure 1 and §5.1-5.3, Ψ = 7.5 B, N_d = 64: 120 GB with standard data parallelism,
      31.4 GB with P_os, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p.

[Korthikanti] V. Korthikanti, J. Casper, S. Lym, L. McAfee, M. Andersch, M. Shoeybi,
    B. Catanzaro, "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023
    (arXiv:2205.05198). Sequence length s, micro-batch b, hidden size h, attention heads a,
    layers L; 16-bit activations, 1-byte dropout masks, a 4h MLP.

    * §4.1 eq. (1): activations per transformer layer = s·b·h·(34 + 5·a·s/h) bytes.
    * §4.2.3 eq. (5): with 1F1B pipelining the first stage still stores L layers' worth, so
      L x eq. (1) is the per-GPU figure with or without pipeline parallelism.
    * §5 and Table 2: selective recomputation 34·s·b·h, full recomputation 2·s·b·h per layer.

Assumptions (modelling choices, not from the sources):

* Weights and gradients per parameter by precision: bf16/fp16 2 + 2 ([ZeRO] §3.1); fp8
  1 + 2, i.e. an fp8 copy of the weights with bf16 gradients; fp32/tf32 4 + 4 (tf32 is a
  tensor-core mode over fp32 storage). Optimizer state: 12 bytes (fp32 master weights,
  momentum, variance) for bf16/fp16/fp8; 8 bytes (momentum, variance) for fp32/tf32, whose
  weights are already the fp32 master copy. fp64 and int8 are not modelled training formats.
  Frameworks that keep bf16 weights and cast to fp8 per GEMM (Transformer Engine's default)
  hold at least the bf16 figure, so the fp8 figure is a lower bound.
* Activations are optional (the default omits them and the result says so). They are not
  sharded by ZeRO-DP; tensor/sequence parallelism, embeddings, the output layer and the
  transient working set of a recomputed layer are ignored ([Korthikanti] §4.3 shows the
  embedding and output terms are negligible). For 4-byte precisions eq. (1) is doubled.
* ZeRO shards hold ``ceil(Ψ / N_d)`` parameters each (the largest shard); gather buffers,
  prefetch buckets and temporary fused buffers are not counted.
* Usable memory is the catalog ``memory_gb`` x 10**9 less a reserve fraction (default 10 %)
  for the CUDA context, NCCL buffers and allocator fragmentation ([ZeRO] §3.2 reports OOMs
  "with over 30% of memory still available in some extreme cases"). The catalog's marketing
  figure (80 for H100 80GB) is treated as 10**9-byte GB, which slightly understates capacity.

>>> from infra.catalog import load_catalog
>>> h100 = load_catalog().gpus["h100-sxm5-80gb"]
>>> est = estimate_memory(7_500_000_000, 1, h100, Precision.BF16, zero_stage=0)
>>> est.total_bytes / GB  # [ZeRO] Figure 1: 16Ψ for Ψ = 7.5 B
120.0
>>> est.fits, est.activation_model
(False, 'omitted')
>>> stage1 = estimate_memory(7_500_000_000, 64, h100, Precision.BF16, zero_stage=1)
>>> round(stage1.total_bytes / GB, 1)
31.4
>>> min_gpus_to_fit(7_500_000_000, h100, Precision.BF16, zero_stage=3, max_gpus=1024)
2
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from infra.catalog.models import Gpu
from infra.spec.base import Precision

__all__ = [
    "DEFAULT_RESERVE_FRACTION",
    "GB",
    "TRAINING_PRECISIONS",
    "ActivationModel",
    "ActivationShape",
    "MemoryEstimate",
    "Recompute",
    "activation_bytes",
    "estimate_memory",
    "min_gpus_to_fit",
    "state_bytes_per_param",
    "usable_bytes",
]

GB = 10**9
"""Bytes in a GB, as the ZeRO paper counts them."""

DEFAULT_RESERVE_FRACTION = 0.1
"""Share of GPU memory kept back for CUDA context, NCCL buffers and fragmentation."""

Recompute = Literal["none", "selective", "full"]
ActivationModel = Literal["omitted", "recompute-none", "recompute-selective", "recompute-full"]

# Bytes per parameter: (weights, gradients, optimizer state). See the module docstring.
_STATE_BYTES: dict[Precision, tuple[int, int, int]] = {
    Precision.BF16: (2, 2, 12),
    Precision.FP16: (2, 2, 12),
    Precision.FP8: (1, 2, 12),
    Precision.TF32: (4, 4, 8),
    Precision.FP32: (4, 4, 8),
}

TRAINING_PRECISIONS: frozenset[Precision] = frozenset(_STATE_BYTES)
"""Precisions this model covers; callers should check before calling (fp64, int8 are not)."""

_FOUR_BYTE_ACTIVATIONS = frozenset({Precision.FP32, Precision.TF32})

_MODEL: dict[Recompute, ActivationModel] = {
    "none": "recompute-none",
    "selective": "recompute-selective",
    "full": "recompute-full",
}


@dataclass(frozen=True)
class ActivationShape:
    """The transformer shape the activation term needs ([Korthikanti] notation).

    Attributes:
        seq_len: sequence length ``s``.
        micro_batch: micro-batch size per GPU ``b``.
        hidden: hidden size ``h``.
        layers: transformer layers ``L``.
        heads: attention heads ``a``.
        recompute: ``none`` (store everything, eq. 1), ``selective`` (34·s·b·h per layer) or
            ``full`` (2·s·b·h per layer, only each layer's input kept).
    """

    seq_len: int
    micro_batch: int
    hidden: int
    layers: int
    heads: int
    recompute: Recompute = "none"

    def __post_init__(self) -> None:
        """Reject shapes that cannot describe a transformer.

        Raises:
            ValueError: a dimension is below 1 or ``recompute`` is unknown.
        """
        for name in ("seq_len", "micro_batch", "hidden", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"ActivationShape.{name} must be at least 1")
        if self.recompute not in ("none", "selective", "full"):
            raise ValueError(f"unknown recompute mode {self.recompute!r}")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one GPU holds when training a model, and whether that fits its usable memory.

    Attributes:
        weights_bytes: working weights on this GPU.
        gradients_bytes: gradients on this GPU.
        optimizer_bytes: optimizer state (master weights, momentum, variance) on this GPU.
        activation_bytes: stored activations on this GPU; 0 when omitted.
        activation_model: ``omitted`` when no shape was given, else the recompute mode used.
        total_bytes: sum of the four components.
        usable_bytes: GPU memory after the reserve.
        fits: ``total_bytes <= usable_bytes``.
    """

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    activation_model: ActivationModel
    total_bytes: int
    usable_bytes: int
    fits: bool

    @property
    def model_state_bytes(self) -> int:
        """Weights, gradients and optimizer state together ([ZeRO]'s "model states")."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes


def state_bytes_per_param(precision: Precision) -> tuple[int, int, int]:
    """Bytes per parameter for weights, gradients and Adam optimizer state.

    Args:
        precision: the weight precision of the training run.

    Returns:
        ``(weights, gradients, optimizer)``; ``(2, 2, 12)`` for bf16/fp16 ([ZeRO] §3.1).

    Raises:
        ValueError: ``precision`` is not in `TRAINING_PRECISIONS` (fp64, int8).
    """
    try:
        return _STATE_BYTES[precision]
    except KeyError:
        known = ", ".join(sorted(p.value for p in TRAINING_PRECISIONS))
        raise ValueError(
            f"{precision.value} is not a modelled training precision (use one of {known})"
        ) from None


def activation_bytes(shape: ActivationShape, precision: Precision) -> int:
    """Activation bytes one GPU stores for a training step ([Korthikanti] eq. 1, 5, Table 2).

    Args:
        shape: sequence length, micro-batch, hidden size, layers, heads and recompute mode.
        precision: the training precision; 4-byte formats double the 16-bit figure.

    Returns:
        ``L`` times the per-layer bytes of the chosen recompute mode.
    """
    s, b, h, a = shape.seq_len, shape.micro_batch, shape.hidden, shape.heads
    if shape.recompute == "full":
        per_layer = 2 * s * b * h
    elif shape.recompute == "selective":
        per_layer = 34 * s * b * h
    else:  # s·b·h·(34 + 5·a·s/h), kept in integers
        per_layer = 34 * s * b * h + 5 * a * s * s * b
    scale = 2 if precision in _FOUR_BYTE_ACTIVATIONS else 1
    return shape.layers * per_layer * scale


def usable_bytes(gpu: Gpu, reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> int:
    """GPU memory a training job can use: catalog capacity less a reserve.

    Args:
        gpu: the catalog GPU (``memory_gb`` read as 10**9-byte GB).
        reserve_fraction: share kept back for CUDA context, NCCL buffers, fragmentation.

    Returns:
        Usable bytes, rounded down.

    Raises:
        ValueError: ``reserve_fraction`` is outside [0, 1).
    """
    if not 0.0 <= reserve_fraction < 1.0:
        raise ValueError(f"reserve_fraction must be in [0, 1), got {reserve_fraction}")
    return int(gpu.memory_gb * GB * (1.0 - reserve_fraction))


def _check_job(params: int, gpus: int, zero_stage: int) -> None:
    """Raise ValueError for a parameter count, GPU count or ZeRO stage out of range."""
    if params < 1:
        raise ValueError(f"params must be at least 1, got {params}")
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")


def _model_state_bytes(
    params: int, gpus: int, precision: Precision, zero_stage: int
) -> tuple[int, int, int]:
    """Per-GPU (weights, gradients, optimizer) bytes under ZeRO ([ZeRO] §5.1-5.3).

    Stage 1 shards the optimizer state, stage 2 also the gradients, stage 3 also the
    weights; a shard holds ``ceil(params / gpus)`` parameters.
    """
    _check_job(params, gpus, zero_stage)
    w, g, k = state_bytes_per_param(precision)
    shard = -(-params // gpus)  # ceil division in integers
    optimizer = k * (shard if zero_stage >= 1 else params)
    gradients = g * (shard if zero_stage >= 2 else params)
    weights = w * (shard if zero_stage >= 3 else params)
    return weights, gradients, optimizer


def estimate_memory(
    params: int,
    gpus: int,
    gpu: Gpu,
    precision: Precision,
    zero_stage: int,
    reserve_fraction: float = DEFAULT_RESERVE_FRACTION,
    activations: ActivationShape | None = None,
) -> MemoryEstimate:
    """Estimate the memory one GPU needs to train a model with mixed-precision Adam.

    Args:
        params: model parameters Ψ.
        gpus: data-parallel GPUs N_d sharing the model state.
        gpu: the catalog GPU.
        precision: weight precision (see `state_bytes_per_param`).
        zero_stage: 0 (replicated), 1 (optimizer sharded), 2 (+ gradients), 3 (+ weights).
        reserve_fraction: share of GPU memory kept back (see `usable_bytes`).
        activations: the transformer shape for the activation term; ``None`` omits it.

    Returns:
        Per-component bytes, the usable bytes and whether the total fits.

    Raises:
        ValueError: an argument is out of range or the precision is not modelled.
    """
    weights, gradients, optimizer = _model_state_bytes(params, gpus, precision, zero_stage)
    acts = 0 if activations is None else activation_bytes(activations, precision)
    total = weights + gradients + optimizer + acts
    usable = usable_bytes(gpu, reserve_fraction)
    return MemoryEstimate(
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activation_bytes=acts,
        activation_model="omitted" if activations is None else _MODEL[activations.recompute],
        total_bytes=total,
        usable_bytes=usable,
        fits=total <= usable,
    )


def min_gpus_to_fit(
    params: int,
    gpu: Gpu,
    precision: Precision,
    zero_stage: int,
    *,
    max_gpus: int,
    reserve_fraction: float = DEFAULT_RESERVE_FRACTION,
    activations: ActivationShape | None = None,
) -> int | None:
    """The fewest data-parallel GPUs (at most ``max_gpus``) on which the model fits.

    Bisection finds the boundary (``n`` fits, ``n - 1`` does not). Stage 0 shards nothing:
    1 or ``None``. Activations are never sharded, so some models fit at no count.

    Args:
        params: model parameters Ψ.
        gpu: the catalog GPU.
        precision: weight precision.
        zero_stage: ZeRO stage 0-3.
        max_gpus: the largest count to consider, e.g. the cluster's GPUs.
        reserve_fraction: share of GPU memory kept back.
        activations: the transformer shape for the activation term; ``None`` omits it.

    Returns:
        The smallest fitting count, or ``None`` if no count up to ``max_gpus`` fits.

    Raises:
        ValueError: an argument is out of range or the precision is not modelled.
    """
    if max_gpus < 1:
        raise ValueError(f"max_gpus must be at least 1, got {max_gpus}")

    def fits(n: int) -> bool:
        est = estimate_memory(params, n, gpu, precision, zero_stage, reserve_fraction, activations)
        return est.fits

    if zero_stage == 0:
        return 1 if fits(1) else None
    return _fewest_fitting(fits, max_gpus)


def _fewest_fitting(fits: Callable[[int], bool], max_gpus: int) -> int | None:
    """Bisect for the smallest ``n`` in ``1..max_gpus`` with ``fits(n)``.

    ``fits`` must be monotone (once true, true for every larger ``n``), which holds because
    per-GPU bytes never grow with the GPU count.
    """
    if fits(1):
        return 1
    if not fits(max_gpus):
        return None
    low, high = 1, max_gpus  # invariant: fits(high) and not fits(low)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) else (mid, high)
    return high
