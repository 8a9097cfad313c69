"""The training step against what the wire and the tensor cores allow, from first principles.

No GPU or network exists here: the step model is checked against lower bounds written out
independently (bytes a node or GPU must receive over its NICs, FLOPs at the dense peak), and
against the published ZeRO-3 trend of Megatron-LM SC21 Table 2. Also two layout fixes:
1F1B without interleaving holds ``L`` layers' activations, and a fixed TP/PP keeps
context parallelism at 1.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra.budget.collectives import CommTopology
from infra.budget.train_job import Job, Layout
from infra.budget.train_layout import step
from infra.budget.train_model import PRESETS, ModelShape, memory_per_gpu
from infra.budget.train_plan import train
from infra.budget.train_request import TrainRequest
from infra.budget.train_rules import stages_fit
from infra.catalog import Catalog
from infra.spec import load_spec_text
from infra.spec.base import Precision
from tools.accuracy.train_accuracy import compare, load_rows

from .conftest import ROOT
from .test_train_plan import cluster

GPN = 8  # GPUs per node in every case below (DGX A100 / H100)


def _weights(shape: ModelShape, tp: int, pp: int) -> float:
    """16-bit bytes of one GPU's first-stage weights: its blocks and the embedding, over TP."""
    h, f = shape.hidden, shape.ffn_or_default
    kv = 2 * h * shape.kv_heads_or_heads // shape.heads
    block = h * (h + kv) + h * h + (3 if shape.gated else 2) * h * f
    return 2 * (math.ceil(shape.layers / pp) * block + shape.vocab * h) / tp


def gpu_nic_bytes(shape: ModelShape, layout: Layout, m: int) -> float:
    """Bytes one GPU must receive over its share of the node's NICs in a step (a lower bound).

    ZeRO-3 (DeepSpeed): per micro-batch two all-gathers of the GPU's weights and one
    reduce-scatter of its gradients, each ring-scaled (n-1)/n, all across nodes (ZeRO++,
    arXiv:2306.10209: 3M cross-node bytes per GPU). Pipeline: a stage filling whole nodes
    receives (2v - 1) messages per micro-batch from other nodes (activations in, gradients
    back, one fewer at either end of the chunk chain).
    """
    total = 0.0
    n = layout.replicas
    if layout.zero == 3 and layout.tp * n > GPN:
        total += m * 3 * _weights(shape, layout.tp, layout.pp) * (n - 1) / n
    if layout.pp > 1 and layout.tp * n >= GPN:
        message = layout.micro_batch * shape.seq / layout.cp * shape.hidden * 2 / layout.tp
        total += (2 * layout.virtual - 1) * m * message
    return total


def node_nic_bytes(shape: ModelShape, layout: Layout) -> float:
    """Bytes one node must receive for the gradient reduction of ZeRO 0-2 (a lower bound).

    The DP x CP group of each TP rank has ``k`` members on a node and spans ``s`` nodes; a
    node holds GPN / k such groups. Whatever the algorithm (no in-network reduction here),
    an all-reduce makes each node receive 2(s-1)/s of the data and an all-gather (s-1)/s
    (Patarasuk and Yuan 2009, the bandwidth-optimal bound).
    """
    if layout.zero == 3:
        return 0.0
    k = min(layout.replicas, GPN // layout.tp)
    spans = layout.replicas // k
    if spans < 2:
        return 0.0
    share = (2 if layout.zero == 0 else 1) * (spans - 1) / spans
    return GPN // k * share * _weights(shape, layout.tp, layout.pp)


def _job(catalog: Catalog, shape: ModelShape, gpus: int, batch: int, nics: int) -> Job:
    gpu = catalog.gpus["a100-sxm4-80gb"]
    topo = CommTopology("ampere", GPN, max(1, gpus // GPN), True, 12, nics, 200, "amd", False)
    return Job(shape, gpu, Precision.BF16, batch, topo)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@example("gpt3-175b", 1, 1, 1536, 1, 1, 1, "full", 3, 8, True)  # ZeRO-3 DP-only: was 202 TFLOP/s
@given(
    st.sampled_from(["gpt3-175b", "llama2-70b"]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.integers(1, 256),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2]),
    st.sampled_from(["none", "selective", "full"]),
    st.integers(0, 3),
    st.sampled_from([4, 8]),
    st.booleans(),
)
def test_step_is_at_least_the_wire_and_the_peak(
    catalog: Catalog,
    name: str,
    tp: int,
    pp: int,
    dp: int,
    cp: int,
    micro_batch: int,
    virtual: int,
    recompute: str,
    zero: int,
    nics: int,
    overlap: bool,
) -> None:
    shape = PRESETS[name]
    layout = Layout(tp, pp, dp, micro_batch, virtual, recompute, zero, cp=cp)  # type: ignore[arg-type]
    if (layout.gpus > GPN and layout.gpus % GPN) or not stages_fit(shape.layers, pp, virtual):
        return
    if virtual > 1 and pp == 1:
        return
    job = replace(_job(catalog, shape, layout.gpus, 1536, nics), dp_overlap=overlap)
    result = step(job, layout)
    m = result.micro_batches
    tokens = m * dp * micro_batch * shape.seq
    params = shape.layers * shape.layer_params + shape.vocab * shape.hidden
    peak = job.gpu.dense_tflops[Precision.BF16] * 1e12
    assert result.step_s >= 6 * params * tokens / (layout.gpus * peak)  # Kaplan's 6·N·D
    line = 200e9 / 8  # bytes/s per NIC, one direction
    assert result.step_s >= gpu_nic_bytes(shape, layout, m) / (nics * line / GPN)
    assert result.step_s >= node_nic_bytes(shape, layout) / (nics * line)


def test_issue_24_case_is_bound_by_its_nic() -> None:
    # GPT-3 175B, DP 1,536 ZeRO-3, one sequence per GPU: 3 x 349 GB through 25 GB/s.
    layout = Layout(1, 1, 1536, 1, 1, "full", 3)
    assert gpu_nic_bytes(PRESETS["gpt3-175b"], layout, 1) / 25e9 == pytest.approx(41.9, rel=0.01)


def test_sc21_zero3_rows_follow_the_published_trend(catalog: Catalog) -> None:
    # SC21 Table 2, ZeRO-3 without model parallelism (held-out rows): per-GPU throughput
    # falls as GPUs grow at a fixed batch, and every row is within 25 % of the published
    # TFLOP/s per GPU (the target for these rows). The scaling rows (ratios to the smallest
    # count) are held to 30 %: with DeepSpeed's reuse distance counted (`_regathered`), 530B's
    # fall from 640 GPUs comes out steeper than published (-28.6 % against -20.1 %;
    # docs/accuracy.md, "ZeRO-3 overlap").
    data = load_rows(ROOT / "tests" / "data" / "training-measurements.yaml")
    rows = {c.row_id: c for c in compare(data, catalog) if c.row_id.startswith("zero3-")}
    scaling = [c for c in rows.values() if c.metric == "scaling"]
    assert len(scaling) == 4 and all(abs(c.error) <= 0.30 for c in scaling)
    single = [c for c in rows.values() if c.metric != "scaling"]
    assert len(single) == 6 and all(c.held_out and abs(c.error) <= 0.25 for c in single)
    for model, counts in (("175b", (384, 768, 1536)), ("530b", (640, 1120, 2240))):
        predicted = [rows[f"zero3-{model}-{n}"].predicted for n in counts]
        assert predicted == sorted(predicted, reverse=True)


def test_korthikanti_1t_fits_without_interleaving(catalog: Catalog) -> None:
    # Korthikanti et al. 2022, Table 3: 1T GPT on 512 A100 80GB, TP 8 PP 64, selective
    # recompute with sequence parallelism, micro-batch 1. Plain 1F1B holds 64 micro-batches
    # of 2 layers = 128 layers' inputs (§4.2.3): 29 GB, not twice that.
    gpu, shape = catalog.gpus["a100-sxm4-80gb"], PRESETS["gpt-1t"]
    plain = memory_per_gpu(shape, gpu, Precision.BF16, (8, 64, 1, 1, 1), "selective", 1)
    assert plain.fits
    assert plain.activations == pytest.approx(34 * 2048 * 25600 / 8 * 128, rel=1e-6)
    interleaved = memory_per_gpu(shape, gpu, Precision.BF16, (8, 64, 1, 1, 2), "selective", 1)
    assert interleaved.activations / plain.activations == pytest.approx(1 + 63 / 128)


def test_fixed_tp_and_pp_keep_context_parallelism_at_one(catalog: Catalog) -> None:
    # Left free, the search splits 131,072-token sequences (CP > 1); with --tp/--pp given
    # and no --cp, the layout is the one asked for.
    spec = load_spec_text(cluster(2048)).spec
    long = replace(PRESETS["llama3-405b"], seq=131_072)
    fixed = train(spec, catalog, TrainRequest(16_384, long, 128, tp=8, pp=16))
    assert fixed.result.layout.cp == 1
    assert train(spec, catalog, TrainRequest(16_384, long, 128)).result.layout.cp > 1
