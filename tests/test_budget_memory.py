"""Memory model: ZeRO paper sanity points, Korthikanti activations, monotonicity, fit boundary.

Published numbers come from Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", SC 2020 (arXiv:1910.02054) and Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", MLSys 2023 (arXiv:2205.05198).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.budget.memory import (
    GB,
    TRAINING_PRECISIONS,
    ActivationShape,
    activation_bytes,
    estimate_memory,
    min_gpus_to_fit,
    state_bytes_per_param,
    usable_bytes,
)
from infra.catalog import Catalog, Gpu, load_catalog
from infra.spec.base import Precision

PSI_7_5B = 7_500_000_000
BF16 = Precision.BF16
H100 = load_catalog().gpus["h100-sxm5-80gb"]


def gpu_with(memory_gb: float) -> Gpu:
    """A catalog GPU with another memory size (the ZeRO paper's 32 GB V100 is not cataloged)."""
    return H100.model_copy(update={"memory_gb": memory_gb})


# --- ZeRO paper sanity points ---------------------------------------------------------------


def test_zero_baseline_is_16_psi_120_gb() -> None:
    # §3.1: 2Ψ + 2Ψ + 12Ψ = 16Ψ; Figure 1: 7.5 B parameters -> 120 GB with standard DP.
    est = estimate_memory(PSI_7_5B, 64, H100, BF16, zero_stage=0)
    assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes) == (
        2 * PSI_7_5B,
        2 * PSI_7_5B,
        12 * PSI_7_5B,
    )
    assert est.total_bytes == 120 * GB
    assert est.activation_bytes == 0
    assert est.activation_model == "omitted"


def test_zero_gpt2_needs_at_least_24_gb() -> None:
    # §3.1: "GPT-2 with 1.5 Billion parameters ... at least 24 GB", 3 GB for fp16 weights.
    est = estimate_memory(1_500_000_000, 1, H100, BF16, zero_stage=0)
    assert est.total_bytes == 24 * GB
    assert est.weights_bytes == 3 * GB


@pytest.mark.parametrize(
    ("stage", "paper_gb", "exact_bytes"),
    [
        (1, 31.4, 30 * GB + 12 * PSI_7_5B // 64),  # §5.1: 4Ψ + KΨ/N_d
        (2, 16.6, 15 * GB + 14 * PSI_7_5B // 64),  # §5.2: 2Ψ + 14Ψ/N_d
        (3, 1.9, 16 * PSI_7_5B // 64),  # §5.3: 16Ψ/N_d
    ],
)
def test_zero_figure1_stages_at_64_gpus(stage: int, paper_gb: float, exact_bytes: int) -> None:
    # Figure 1 and §5.1-5.3: Ψ = 7.5 B, N_d = 64 -> 31.4 GB, 16.6 GB, 1.9 GB.
    est = estimate_memory(PSI_7_5B, 64, H100, BF16, zero_stage=stage)
    assert est.total_bytes == exact_bytes
    assert round(est.total_bytes / GB, 1) == paper_gb


def test_zero_trillion_parameters_on_1024_gpus() -> None:
    # §1: a trillion-parameter model needs about 16 TB; "16TB divided by 1024 is 16GB".
    est = estimate_memory(10**12, 1024, H100, BF16, zero_stage=3)
    assert est.total_bytes == 16 * 10**12 // 1024
    assert round(est.total_bytes / GB) == 16


@pytest.mark.parametrize(("stage", "largest_b"), [(1, 7.5), (2, 14), (3, 128)])
def test_zero_largest_models_on_64_v100_32gb(stage: int, largest_b: float) -> None:
    # §5.4: with N_d = 64, ZeRO trains up to 7.5 B, 14 B and 128 B parameters with P_os,
    # P_os+g and P_os+g+p on 32 GB GPUs (model states only, no reserve).
    v100 = gpu_with(32)
    fits = estimate_memory(int(largest_b * 1e9), 64, v100, BF16, stage, reserve_fraction=0.0)
    too_big = estimate_memory(int(largest_b * 1.1e9), 64, v100, BF16, stage, 0.0)
    assert fits.fits
    assert not too_big.fits


# --- precision, activations, usable memory ---------------------------------------------------


def test_bytes_per_param_by_precision() -> None:
    assert state_bytes_per_param(Precision.BF16) == (2, 2, 12)
    assert state_bytes_per_param(Precision.FP16) == (2, 2, 12)
    assert state_bytes_per_param(Precision.FP8) == (1, 2, 12)
    assert state_bytes_per_param(Precision.FP32) == (4, 4, 8)
    assert state_bytes_per_param(Precision.TF32) == (4, 4, 8)
    for unmodelled in (Precision.INT8, Precision.FP64):
        assert unmodelled not in TRAINING_PRECISIONS
        with pytest.raises(ValueError, match="not a modelled training precision"):
            state_bytes_per_param(unmodelled)


def test_korthikanti_activations_gpt3_layer() -> None:
    # §5: GPT-3 has a = 96, s = 2048, h = 12288, so 5as/h = 80; selective recomputation
    # keeps 34 of 34 + 80 ("save 70%"); Table 2: full recomputation keeps 2sbh.
    s, b, h, a = 2048, 1, 12288, 96
    assert 5 * a * s // h == 80
    shape = ActivationShape(seq_len=s, micro_batch=b, hidden=h, layers=1, heads=a)
    stored = activation_bytes(shape, BF16)
    assert stored == s * b * h * (34 + 80)
    selective = activation_bytes(
        ActivationShape(s, b, h, layers=1, heads=a, recompute="selective"), BF16
    )
    assert selective == 34 * s * b * h
    assert round(1 - selective / stored, 2) == 0.70
    full = activation_bytes(ActivationShape(s, b, h, layers=96, heads=a, recompute="full"), BF16)
    assert full == 2 * s * b * h * 96
    assert activation_bytes(shape, Precision.FP32) == 2 * stored


def test_activations_add_to_total_and_are_not_sharded() -> None:
    shape = ActivationShape(seq_len=4096, micro_batch=1, hidden=4096, layers=32, heads=32)
    few = estimate_memory(7_000_000_000, 8, H100, BF16, 3, activations=shape)
    many = estimate_memory(7_000_000_000, 64, H100, BF16, 3, activations=shape)
    assert few.activation_bytes == many.activation_bytes == activation_bytes(shape, BF16)
    assert few.activation_model == "recompute-none"
    assert few.total_bytes == few.model_state_bytes + few.activation_bytes


def test_usable_memory_reserve() -> None:
    assert usable_bytes(H100) == 72 * GB
    assert usable_bytes(H100, 0.0) == 80 * GB
    with pytest.raises(ValueError):
        usable_bytes(H100, 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"params": 0}, {"gpus": 0}, {"zero_stage": 4}, {"reserve_fraction": -0.1}],
)
def test_bad_arguments_raise(kwargs: dict[str, float]) -> None:
    args = {"params": PSI_7_5B, "gpus": 8, "gpu": H100, "precision": BF16, "zero_stage": 1}
    with pytest.raises(ValueError):
        estimate_memory(**{**args, **kwargs})  # type: ignore[arg-type]


def test_bad_activation_shape_raises() -> None:
    with pytest.raises(ValueError, match="heads"):
        ActivationShape(seq_len=1, micro_batch=1, hidden=1, layers=1, heads=0)


# --- monotonicity ----------------------------------------------------------------------------

params_st = st.integers(min_value=1, max_value=10**13)
gpus_st = st.integers(min_value=1, max_value=100_000)
precision_st = st.sampled_from(sorted(TRAINING_PRECISIONS))


@given(params_st, gpus_st, gpus_st, st.sampled_from([1, 2, 3]), precision_st)
def test_more_gpus_never_increase_per_gpu_bytes(
    params: int, n1: int, n2: int, stage: int, precision: Precision
) -> None:
    small, large = sorted((n1, n2))
    a = estimate_memory(params, small, H100, precision, stage)
    b = estimate_memory(params, large, H100, precision, stage)
    assert b.total_bytes <= a.total_bytes
    for part in ("weights_bytes", "gradients_bytes", "optimizer_bytes"):
        assert getattr(b, part) <= getattr(a, part)


@given(params_st, gpus_st, precision_st)
def test_higher_stage_never_increases_bytes(params: int, gpus: int, precision: Precision) -> None:
    totals = [estimate_memory(params, gpus, H100, precision, s).total_bytes for s in range(4)]
    assert totals == sorted(totals, reverse=True)


@given(params_st, precision_st)
def test_stage0_is_independent_of_gpu_count(params: int, precision: Precision) -> None:
    one = estimate_memory(params, 1, H100, precision, 0)
    many = estimate_memory(params, 4096, H100, precision, 0)
    assert one.total_bytes == many.total_bytes


# --- min_gpus_to_fit -------------------------------------------------------------------------


@given(
    st.integers(min_value=10**8, max_value=2 * 10**12),
    st.sampled_from([1, 2, 3]),
    st.sampled_from(sorted(load_catalog().gpus)),
)
def test_min_gpus_is_the_boundary(params: int, stage: int, gpu_id: str) -> None:
    gpu = load_catalog().gpus[gpu_id]
    n = min_gpus_to_fit(params, gpu, BF16, stage, max_gpus=65_536)
    if n is None:
        assert not estimate_memory(params, 65_536, gpu, BF16, stage).fits
        return
    assert estimate_memory(params, n, gpu, BF16, stage).fits
    if n > 1:
        assert not estimate_memory(params, n - 1, gpu, BF16, stage).fits


def test_min_gpus_worked_example(catalog: Catalog) -> None:
    # 70 B, bf16, ZeRO-3 on H100 80 GB (72 GB usable): 16 x 70 GB / n <= 72 GB -> n = 16
    # (1120 / 16 = 70 GB fits, 1120 / 15 = 74.7 GB does not).
    h100 = catalog.gpus["h100-sxm5-80gb"]
    assert min_gpus_to_fit(70 * 10**9, h100, BF16, 3, max_gpus=1024) == 16
    assert estimate_memory(70 * 10**9, 16, h100, BF16, 3).fits
    assert not estimate_memory(70 * 10**9, 15, h100, BF16, 3).fits
    # ZeRO-2 keeps 2Ψ = 140 GB of weights on every GPU: never fits.
    assert min_gpus_to_fit(70 * 10**9, h100, BF16, 2, max_gpus=1_000_000) is None
    # Too few GPUs allowed.
    assert min_gpus_to_fit(70 * 10**9, h100, BF16, 3, max_gpus=15) is None


def test_min_gpus_stage0_fits_on_one_or_never() -> None:
    assert min_gpus_to_fit(4 * 10**9, H100, BF16, 0, max_gpus=1024) == 1  # 64 GB <= 72 GB
    assert min_gpus_to_fit(5 * 10**9, H100, BF16, 0, max_gpus=1024) is None  # 80 GB
    with pytest.raises(ValueError):
        min_gpus_to_fit(5 * 10**9, H100, BF16, 0, max_gpus=0)


def test_activations_can_make_a_model_never_fit() -> None:
    # 80 layers x (34 + 5as/h) s b h at s = 8192, h = 8192, a = 64: about 1.9 TB, unshardable.
    shape = ActivationShape(seq_len=8192, micro_batch=1, hidden=8192, layers=80, heads=64)
    assert min_gpus_to_fit(70 * 10**9, H100, BF16, 3, max_gpus=4096, activations=shape) is None
    full = ActivationShape(8192, 1, 8192, layers=80, heads=64, recompute="full")
    n = min_gpus_to_fit(70 * 10**9, H100, BF16, 3, max_gpus=4096, activations=full)
    assert n is not None and n > 16  # 10.7 GB of checkpoints leaves less room for states
