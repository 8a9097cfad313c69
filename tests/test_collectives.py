"""The NCCL collective model: NCCL's own worked numbers, properties, calibration tolerances."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget import collectives_nccl
from infra.budget.collectives import (
    COLLECTIVES,
    PROTOCOLS,
    CommTopology,
    _algorithms,
    _latency,
    _time_us,
    bus_factor,
    predict,
    predict_table,
)
from infra.catalog import Catalog
from tools.accuracy import calibration
from tools.accuracy.calibration import (
    NCCL_TESTS_LAUNCH_US_PER_GPU,
    Comparison,
    accuracy_markdown,
    compare_rows,
    is_efa,
    is_harness_bound,
    is_one_node_1mib,
    is_sharp,
    is_single_node_small,
    launch_floor_us,
    load_measurements,
    split,
)

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
    # SHARP only adds algorithms to NCCL's choice, so NCCL's own estimate of the winner never
    # gets slower. The time of what then runs may: NCCL ranks CollNet at the NICs' rate and
    # SHARP streams at a fitted share of it (`sharp_efficiency`), and its per-channel caps
    # rank over the search graph's channels; railplan follows NCCL's choice, not the faster.
    sharp = CommTopology(**{**t.__dict__, "sharp": True})
    for row in rows:
        assert _ranked_us(sharp, collective, row.bytes) <= _ranked_us(t, collective, row.bytes)


def _ranked_us(t: CommTopology, collective: str, nbytes: int) -> float:
    """NCCL's estimate of its fastest enabled (algorithm, protocol): what it ranks on."""
    pairs = [(a, p) for a in _algorithms(t, collective) for p in PROTOCOLS]  # type: ignore[arg-type]
    return min(_time_us(t, collective, a, p, nbytes, ranking=True) for a, p in pairs)  # type: ignore[arg-type]


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
    # Target: large (>= 256 MiB) median |error| <= 5 % on the held-out half (3.2 %);
    # 27 of 33 within 10 % (gj-aion's default 4- and 8-node runs plateau near 320 GB/s where
    # the model says 364). ABCI's SHARP row was +67 % until the SHARP streaming
    # efficiency was fitted; the worst is now +23 % (docs/accuracy.md). Bound at 30 %.
    errors = _held_out(catalog, 256 * 2**20, 2**40)
    assert len(errors) >= 20
    assert statistics.median(errors) <= 0.05
    assert sum(e <= 0.10 for e in errors) >= 0.7 * len(errors)
    assert max(errors) <= 0.30


def test_sharp_held_out_rows_within_target(catalog: Catalog) -> None:
    # Target: SHARP held-out median |error| <= 15 %. ABCI's held-out 8 B and 1 GiB rows were
    # -49.7 % and +66.7 %; with NCCL 2.8's CollNet LL and the fitted SHARP streaming
    # efficiency the four held-out SHARP rows are within 9 % (docs/accuracy.md, SHARP).
    errors = _focus(catalog, is_sharp)
    assert len(errors) >= 4
    assert statistics.median(errors) <= 0.15
    assert max(errors) <= 0.30


def test_medium_messages_within_target_on_held_out_rows(catalog: Catalog) -> None:
    # Target: 1-128 MiB median |error| <= 10 % on held-out rows: 9.9 % on 34 rows
    # (docs/accuracy.md), a narrow pass. It was 11.2 % until NVLS Tree's per-channel cap was
    # taken over the NVLS graph's 8 channels, as NCCL does. Fit half: 6.9 %.
    errors = _held_out(catalog, 2**20, 128 * 2**20)
    assert len(errors) >= 20
    assert statistics.median(errors) <= 0.10


def test_small_messages_are_reported_and_bounded(catalog: Catalog) -> None:
    # Latency-bound sizes (< 1 MiB): NCCL's latency constants are for ranking algorithms;
    # held-out median |error| is 19.0 % (docs/accuracy.md), both signs. Bound at 35 %.
    errors = _held_out(catalog, 1, 2**20 - 1)
    assert len(errors) >= 10
    assert statistics.median(errors) <= 0.35


def _focus(catalog: Catalog, keep: Callable[[Comparison], bool]) -> list[float]:
    """|error| of the held-out, non-anomalous rows ``keep`` selects."""
    rows = compare_rows(MEASUREMENTS, catalog)
    return [abs(c.error) for c in rows if c.held_out and not c.anomalous and keep(c)]


def test_efa_held_out_rows_within_target(catalog: Catalog) -> None:
    # The held-out 2 x p4de 8-byte all-reduce was +138.8 % (one EFA latency, fitted
    # on p5, for both aws-ofi-nccl transports). With one per transport the held-out EFA rows
    # are -1.0 %, -24.9 %, -4.8 % and +15.5 % (docs/accuracy.md). Bounds: no row beyond 30 %
    # (the bar single training rows are held to) and a median within 15 %, what the
    # InfiniBand rows of 1-128 MiB reach (the medium target is 10 %; these four rows
    # include an 8-byte and a 1 MiB one).
    errors = _focus(catalog, is_efa)
    assert len(errors) >= 4
    assert statistics.median(errors) <= 0.15
    assert max(errors) <= 0.30


def test_single_node_small_messages_within_target(catalog: Catalog) -> None:
    # One node at 1 KiB-4 MiB, held out, was 18.8 % median (A100 alone 72.6 %, up
    # to +200 %): rows measured with nccl-tests -g 8, where one thread launching on eight
    # GPUs is the bottleneck, were compared with a model that has no such floor. Now 10.8 %
    # and 10.8 % with NVIDIA/nccl#2355's rows (docs/accuracy.md). Bound at 12 % and 15 %: the 10 % medium target,
    # loosened for rows whose 1 KiB busbw is printed to 0.01 GB/s (+-12 % by itself).
    errors = _focus(catalog, is_single_node_small)
    a100 = _focus(catalog, lambda c: is_single_node_small(c) and c.row["gpu"].startswith("a100"))
    assert len(errors) >= 8 and len(a100) >= 5
    assert statistics.median(errors) <= 0.12
    assert statistics.median(a100) <= 0.15


def test_fitted_constants_were_chosen_on_fit_rows_only(catalog: Catalog) -> None:
    # The rule: held-out rows are never fitted. Rows tagged `fitted:` in the data are
    # the ones each constant's comment names; all must fall in the fit half.
    fitted = [c for c in compare_rows(MEASUREMENTS, catalog) if c.row.get("fitted")]
    names = {c.row["fitted"] for c in fitted}
    assert names == {
        "EFA_NET_LATENCY_US",
        "EFA_SENDRECV_NET_LATENCY_US",
        "NCCL_TESTS_LAUNCH_US_PER_GPU",
        "SHARP_STREAM_EFFICIENCY",
    }
    assert all(hasattr(collectives_nccl, n) or hasattr(calibration, n) for n in names)
    assert not [c.row for c in fitted if c.held_out or c.anomalous]


def test_launch_floor_belongs_to_the_benchmark_not_to_predict(catalog: Catalog) -> None:
    # `railplan predict` times one process per GPU: 8 A100 all-reduce 64 KiB (Ring/LL on the
    # two channels NCCL runs of its 24, 26.5 us) well under the floor. Only a row measured
    # with -g 8 is compared against eight launches.
    assert predict(A100, "all_reduce", 2**16).time_us < 30
    row = next(
        c
        for c in compare_rows(MEASUREMENTS, catalog)
        if c.row["source"] == "azure-abg-nd-a100-v4" and c.row["bytes"] == 2**16
    )
    assert row.predicted.time_us == pytest.approx(8 * NCCL_TESTS_LAUNCH_US_PER_GPU)
    assert launch_floor_us({"gpus_per_process": None}) == 0
    assert launch_floor_us({"gpus_per_process": 8}) == 8 * NCCL_TESTS_LAUNCH_US_PER_GPU


def test_efa_transport_follows_nics_per_gpu() -> None:
    # aws-ofi-nccl: RDMA where every GPU has a NIC (p5: 32 for 8), SENDRECV where GPUs share
    # them (p4d: 4 for 8); InfiniBand adds nothing.
    p4d = CommTopology("ampere", 8, 2, True, 12, 4, 100, "intel", False, efa=True)
    p5 = CommTopology("hopper", 8, 2, True, 18, 32, 100, "amd", False, efa=True)
    ib = CommTopology("ampere", 8, 2, True, 12, 4, 100, "intel", False)
    assert (p4d.efa_sendrecv, p5.efa_sendrecv, ib.efa_sendrecv) == (True, False, False)
    assert p4d.net_latency_extra_us > p5.net_latency_extra_us > ib.net_latency_extra_us == 0
    assert predict(p4d, "all_reduce", 8).time_us > predict(ib, "all_reduce", 8).time_us + 100


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


def test_one_mib_one_node_target_counts_one_process_per_gpu_rows(catalog: Catalog) -> None:
    # nccl-tests -g 8 makes one thread launch on every GPU: a measurement mode, not the
    # cluster's. The target counts rows run one process per GPU and prints the -g 8 row
    # beside it, with its figure, instead of dropping it.
    held = [c for c in compare_rows(MEASUREMENTS, catalog) if is_one_node_1mib(c) and c.held_out]
    counted = [c for c in held if not is_harness_bound(c)]
    harness = [c for c in held if is_harness_bound(c)]
    assert counted and max(abs(c.error) for c in counted) <= 0.30
    assert [c.row["source"] for c in harness] == ["ml-engineering-network"]
    assert harness[0].error > 1.0
    doc = accuracy_markdown(MEASUREMENTS, catalog)
    assert "held out, nccl-tests -g 8 (reported, not in the target)**: 1 rows" in doc
    assert (
        "| held out | ml-engineering-network | a100-sxm4-unknown | 1 x 8 | all_reduce | 1048576 | 8 |"
        in doc
    )
