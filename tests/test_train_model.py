"""The training model's formulas against the papers they come from, and its properties."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from infra.budget import train_layout
from infra.budget.collectives import CommTopology
from infra.budget.train_job import Job, Layout
from infra.budget.train_layout import gemm_efficiency, scaling_efficiency, step
from infra.budget.train_model import (
    PRESETS,
    ModelShape,
    activation_bytes_per_layer,
    iteration_flops,
    layer_gemms,
    logit_gemm,
    memory_per_gpu,
)
from infra.catalog import Catalog
from infra.spec.base import Precision


def megatron_eq3(shape: ModelShape, batch: int) -> float:
    """Narayanan et al. 2021 eq. (3), written out independently of the model's GEMM list."""
    b, s, l, h, v = batch, shape.seq, shape.layers, shape.hidden, shape.vocab
    return 96 * b * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))


@pytest.mark.parametrize("name", ["gpt3-175b", "mt-nlg-530b", "gpt-1t"])
def test_hardware_flops_with_full_recompute_are_megatron_eq3(name: str) -> None:
    shape = PRESETS[name]
    flops = iteration_flops(shape, 1024, "full")
    assert flops.hardware == pytest.approx(megatron_eq3(shape, 1024), rel=1e-9)
    # model FLOPs are three passes over the blocks: eq. (3) less one forward of the blocks
    assert flops.model / flops.hardware == pytest.approx(0.75, abs=0.01)


def test_preset_parameter_counts_match_their_names() -> None:
    expected = {"gpt3-175b": 175, "mt-nlg-530b": 530, "llama2-70b": 69, "llama3-405b": 405}
    expected["gpt-1t"] = 1008
    for name, billions in expected.items():
        assert PRESETS[name].params / 1e9 == pytest.approx(billions, rel=0.01), name
        assert PRESETS[name].source


def test_korthikanti_table2_activations() -> None:
    # GPT-3 175B, b = 1, t = 8: Table 2's per-layer bytes for each technique
    g = PRESETS["gpt3-175b"]
    sbh, extra = g.seq * g.hidden, 5 * g.heads * g.seq / g.hidden
    assert activation_bytes_per_layer(g, 1, 8, False, "none") == pytest.approx(
        sbh * (10 + 24 / 8 + extra / 8)
    )
    assert activation_bytes_per_layer(g, 1, 8, True, "none") == pytest.approx(
        sbh * (34 + extra) / 8
    )
    assert activation_bytes_per_layer(g, 1, 8, True, "selective") == pytest.approx(sbh * 34 / 8)
    assert activation_bytes_per_layer(g, 1, 1, False, "full") == pytest.approx(2 * sbh)


def test_gemm_efficiency_rises_with_the_smallest_dimension() -> None:
    small = gemm_efficiency(4096, 4096, 64, "hopper", Precision.BF16)
    large = gemm_efficiency(4096, 4096, 4096, "hopper", Precision.BF16)
    assert 0 < small < large < train_layout.PEAK_SHARE["hopper"]


def comm(nodes: int, arch: str = "hopper") -> CommTopology:
    return CommTopology(arch, 8, nodes, True, 18, 8, 400, "intel", False)  # type: ignore[arg-type]


def job(catalog: Catalog, nodes: int, batch: int = 512, name: str = "gpt3-175b") -> Job:
    return Job(PRESETS[name], catalog.gpus["h100-sxm5-80gb"], Precision.BF16, batch, comm(nodes))


@given(
    st.integers(1, 64),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["none", "selective", "full"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_step_positive_finite_and_recompute_never_below_model_flops(
    catalog: Catalog, dp: int, tp: int, pp: int, recompute: str, zero: int, sp: bool
) -> None:
    layout = Layout(tp, pp, dp, 1, 1, recompute, zero, sp)  # type: ignore[arg-type]
    nodes = max(1, layout.gpus // 8)
    if layout.gpus % 8 and layout.gpus > 8:
        return
    result = step(job(catalog, nodes), layout)
    assert math.isfinite(result.step_s) and result.step_s > 0
    assert all(v >= 0 for v in vars(result.breakdown).values())
    gap = result.tflops_per_gpu(True) - result.tflops_per_gpu(False)
    assert gap >= 0 and (gap > 0) == (recompute != "none")


@given(st.integers(1, 200), st.sampled_from([1, 2, 4, 8]), st.integers(0, 3))
def test_efficiency_never_above_one_replica(catalog: Catalog, dp: int, pp: int, zero: int) -> None:
    layout = Layout(8, pp, dp, 1, 1, "selective", zero)
    j = job(catalog, layout.gpus // 8, batch=1600)
    assert 0 < scaling_efficiency(j, step(j, layout)) <= 1 + 1e-12


@given(st.integers(1, 2000), st.integers(1, 100))
def test_zero3_fit_is_monotone_in_gpus(catalog: Catalog, dp: int, more: int) -> None:
    h100 = catalog.gpus["h100-sxm5-80gb"]
    shape = PRESETS["llama3-405b"]

    def fits(n: int) -> bool:
        return memory_per_gpu(shape, h100, Precision.BF16, (8, 1, n, 1, 1), "full", 3).fits

    assert not fits(dp) or fits(dp + more)


@given(st.sampled_from([64, 256, 1024, 2048]), st.sampled_from(["selective", "full"]))
def test_zero3_forward_gathers_hide_only_behind_the_forward(
    catalog: Catalog, dp: int, recompute: str
) -> None:
    # Llama 3 405B, TP 8 PP 1 ZeRO-3, one micro-batch each: a forward (a third of the
    # compute) cannot hide the full weights' gather (about 101 GB per TP rank over one NIC),
    # so at least the gather minus the forward is exposed, whatever the backward hides.
    layout = Layout(8, 1, dp, 1, 1, recompute, 3)  # type: ignore[arg-type]
    j = job(catalog, dp, batch=dp, name="llama3-405b")
    result = step(j, layout)
    passes = 3 if recompute == "full" else 2  # TP collectives: one pass of them is forward
    forward_window = (result.breakdown.compute_s / 3) + result.breakdown.tp_comm_s / passes
    gather_s = result.dp_comm_s / 3  # ZeRO-3: gather (forward), gather + scatter (backward)
    assert result.breakdown.dp_comm_exposed_s >= gather_s - forward_window - 1e-9
    assert result.breakdown.dp_comm_exposed_s <= result.dp_comm_s


def test_zero3_holds_two_gathered_layers(catalog: Catalog) -> None:
    h100, shape = catalog.gpus["h100-sxm5-80gb"], PRESETS["llama3-405b"]
    sharded = memory_per_gpu(shape, h100, Precision.BF16, (8, 1, 2048, 1, 1), "full", 3)
    stage1 = memory_per_gpu(shape, h100, Precision.BF16, (8, 1, 2048, 1, 1), "full", 1)
    two_layers = 2 * shape.layer_params // 8 * 2
    assert sharded.weights == pytest.approx(stage1.weights / 2048 + two_layers, rel=0.01)


@pytest.mark.parametrize("cp", [2, 4, 16])
def test_context_parallelism_splits_each_gpus_work_and_activations(cp: int) -> None:
    # Every GEMM keeps s/cp of the rows; attention scores s/cp queries against all s keys,
    # so a CP rank does exactly 1/cp of the forward FLOPs and stores 1/cp of the activations.
    shape = replace(PRESETS["llama3-405b"], seq=131_072)
    whole = sum(g.flops for g in layer_gemms(shape, 1, 8))
    assert sum(g.flops for g in layer_gemms(shape, 1, 8, cp)) == pytest.approx(whole / cp)
    for mode in ("none", "selective", "full"):
        one = activation_bytes_per_layer(shape, 1, 8, True, mode)  # type: ignore[arg-type]
        split = activation_bytes_per_layer(shape, 1, 8, True, mode, cp)  # type: ignore[arg-type]
        assert split == pytest.approx(one / cp)


@example(cp=16, tp=8, seq=4096)  # the case that must expose the exchange
@given(
    st.sampled_from([2, 4, 8, 16]), st.sampled_from([1, 2, 4, 8]), st.sampled_from([4096, 131_072])
)
def test_context_parallel_exchange_hides_only_behind_attention(
    catalog: Catalog, cp: int, tp: int, seq: int
) -> None:
    # The K/V ring costs nothing when a chunk's attention outlasts a send, and never more
    # than all its sends unhidden; at 131,072 tokens the attention hides it entirely.
    shape = replace(PRESETS["llama3-405b"], seq=seq)
    j = Job(shape, catalog.gpus["h100-sxm5-80gb"], Precision.BF16, 64, comm(64))
    layout = Layout(tp, 1, 512 // (tp * cp), 1, 1, "selective", 1, cp=cp)
    result = step(j, layout)
    assert result.breakdown.cp_comm_s >= 0
    assert layout.gpus == 512 and result.step_s > 0
    if seq == 131_072:
        assert result.breakdown.cp_comm_s == 0
    if seq == 4096 and cp == 16 and tp == 8:  # 256-token chunks, each send over the network
        assert result.breakdown.cp_comm_s > 0.1 * result.step_s


def test_fp8_training_keeps_attention_and_logits_in_bf16(catalog: Catalog) -> None:
    # Transformer Engine runs its linear layers in FP8; core attention and Megatron's output
    # layer stay BF16, so only those GEMMs take as long as in a BF16 job.
    shape = PRESETS["llama3-405b"]
    fp8 = Job(shape, catalog.gpus["h100-sxm5-80gb"], Precision.FP8, 64, comm(8))
    bf16 = replace(fp8, precision=Precision.BF16)
    for gemm in [*layer_gemms(shape, 1, 8), logit_gemm(shape, 1, 8)]:
        fp8_s, bf16_s = train_layout._gemm_time(fp8, gemm), train_layout._gemm_time(bf16, gemm)
        assert (fp8_s == pytest.approx(bf16_s)) == (gemm.name in {"attention", "logits"})
        assert fp8_s <= bf16_s
