"""The NCCL collective model: NCCL's own worked numbers, properties, calibration tolerances."""

from __future__ import annotations

import itertools
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.calibration import accuracy_markdown, compare_rows, load_measurements, split
from infra.budget.collectives import (
    COLLECTIVES,
    CommTopology,
    _latency,
    bus_factor,
    predict,
    predict_table,
)
from infra.catalog import Catalog

from .conftest import ROOT, TESTS

H100 = CommTopology("hopper", 8, 16, True, 18, 8, 400, "intel", False)
A100 = CommTopology("ampere", 8, 1, True, 12, 8, 200, "amd", False)
MEASUREMENTS = load_measurements(TESTS / "data" / "nccl-measurements.yaml")


def test_latencies_match_the_worked_example_in_the_facts() -> None:
    # fabric.md §3: Ring/Simple AllReduce, 16 H100 nodes x 8 GPUs, Intel: 8.4 + 224 x 3.4 +
    # 30 x 14 = 1,190 us before the plateau factor; Tree/Simple 8.4 + 2(7 x 4.0 + 4 x 14).
    # (The network overhead, 3 us for Simple on Intel, is below 3.4 so the ring keeps 3.4;
    # tree's intra latency becomes max(4.0, 3.0) = 4.0.)
    assert _latency(H100, "all_reduce", "ring", "simple") == pytest.approx(1190.0)
    assert _latency(H100, "all_reduce", "tree", "simple") == pytest.approx(176.4)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_nccl_tests_definitions(collective: str) -> None:
    row = predict(H100, collective, 2**30)  # type: ignore[arg-type]
    assert row.algbw_GBps == pytest.approx(2**30 / (row.time_us * 1000), rel=1e-3)
    assert row.busbw_GBps == pytest.approx(
        row.algbw_GBps * bus_factor(collective, 128),  # type: ignore[arg-type]
        rel=1e-2,
    )


def test_bus_factors() -> None:
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == 7 / 8
    assert bus_factor("broadcast", 8) == 1


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.integers(1, 64),
    nics=st.sampled_from([1, 2, 4, 8]),
    rate=st.sampled_from([100, 200, 400]),
    arch=st.sampled_from(["ampere", "hopper"]),
    collective=st.sampled_from(COLLECTIVES),
)
def test_time_grows_with_bytes_and_sharp_never_hurts(
    nodes: int, nics: int, rate: int, arch: str, collective: str
) -> None:
    t = CommTopology(
        arch,
        8,
        nodes,
        True,
        18 if arch == "hopper" else 12,
        nics,
        rate,  # type: ignore[arg-type]
        "intel",
        False,
    )
    rows = predict_table(t, collective, 8, 2**32, 4)  # type: ignore[arg-type]
    assert all(a.time_us <= b.time_us for a, b in itertools.pairwise(rows))
    sharp = CommTopology(**{**t.__dict__, "sharp": True})
    for row in rows:
        assert predict(sharp, collective, row.bytes).time_us <= row.time_us  # type: ignore[arg-type]


def test_more_nic_bandwidth_never_slows_large_all_reduce() -> None:
    slow = CommTopology("hopper", 8, 32, True, 18, 8, 200, "intel", False)
    assert (
        predict(H100.__class__(**{**H100.__dict__, "nodes": 32}), "all_reduce", 2**33).time_us
        <= predict(slow, "all_reduce", 2**33).time_us
    )


@pytest.mark.parametrize(("nodes", "cap"), [(2, 8 * 57.7), (4, 8 * 45.5), (64, 8 * 45.5)])
def test_nvls_tree_is_capped_per_nvls_channel(nodes: int, cap: float) -> None:
    # NCCL's NVLS graph has one channel per GPU (search.cc) and caps NVLS Tree per channel
    # (nvls.cc): 8 x 57.7 GB/s on two Hopper nodes, 8 x 45.5 on more, whatever the NICs give.
    fast_nics = CommTopology("hopper", 8, nodes, True, 18, 16, 800, "intel", False)
    row = predict(fast_nics, "all_reduce", 2**34, ("nvls_tree",))
    assert row.algorithm == "nvls_tree"
    assert cap * 0.95 <= row.busbw_GBps <= cap


def test_algorithm_restriction_like_nccl_algo() -> None:
    assert predict(H100, "all_reduce", 2**33, ("ring",)).algorithm == "ring"
    assert predict(A100, "all_reduce", 2**20).algorithm == "ring"  # one node: no tree


# --- calibration ---------------------------------------------------------------------------


def _held_out(catalog: Catalog, low: int, high: int) -> list[float]:
    """|error| of held-out, non-anomalous rows with ``low <= bytes <= high`` (peak = 8 GiB)."""
    return [
        abs(c.error)
        for c in compare_rows(MEASUREMENTS, catalog)
        if c.held_out and not c.anomalous and low <= (c.row["bytes"] or 2**33) <= high
    ]


def test_large_messages_within_target_on_held_out_rows(catalog: Catalog) -> None:
    # Issue 11 target: large (>= 256 MiB) median |error| <= 5 % on the held-out half (3.9 %);
    # 25 of 32 within 10 % (gj-aion's default 4- and 8-node runs plateau near 320 GB/s where
    # the model says 364). The worst rows (ABCI's A100 with 4 HDR NICs and SHARP, about
    # +67 %) are in docs/accuracy.md; none may be off by more than a factor of two.
    errors = _held_out(catalog, 256 * 2**20, 2**40)
    assert len(errors) >= 20
    assert statistics.median(errors) <= 0.05
    assert sum(e <= 0.10 for e in errors) >= 0.7 * len(errors)
    assert max(errors) <= 1.0


def test_medium_messages_within_target_on_held_out_rows(catalog: Catalog) -> None:
    # Issue 11 target: 1-128 MiB median |error| <= 10 % on held-out rows: 9.9 % on 30 rows
    # (docs/accuracy.md), a narrow pass. It was 11.2 % until NVLS Tree's per-channel cap was
    # taken over the NVLS graph's 8 channels, as NCCL does. Fit half: 7.8 %.
    errors = _held_out(catalog, 2**20, 128 * 2**20)
    assert len(errors) >= 20
    assert statistics.median(errors) <= 0.10


def test_small_messages_are_reported_and_bounded(catalog: Catalog) -> None:
    # Latency-bound sizes (< 1 MiB): NCCL's latency constants are for ranking algorithms;
    # held-out median |error| is about 20 % (docs/accuracy.md), both signs. Bound at 35 %.
    errors = _held_out(catalog, 1, 2**20 - 1)
    assert len(errors) >= 10
    assert statistics.median(errors) <= 0.35


def test_the_split_alternates_within_each_source() -> None:
    rows = [{"source": s} for s in ("a", "a", "b", "a", "b")]
    assert split(rows) == [False, True, False, False, True]


def test_accuracy_document_is_current(catalog: Catalog) -> None:
    # The collectives part comes first; the "## Training" section follows (test_train_accuracy).
    assert (
        (ROOT / "docs" / "accuracy.md")
        .read_text()
        .startswith(accuracy_markdown(MEASUREMENTS, catalog))
    ), "docs/accuracy.md is stale: run `make accuracy`"


def test_every_measurement_cites_a_known_source() -> None:
    sources = MEASUREMENTS["sources"]
    assert all(row["source"] in sources for row in MEASUREMENTS["measurements"])
    assert all(src["url"] for src in sources.values())
