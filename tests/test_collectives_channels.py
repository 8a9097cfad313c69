"""The small-message term: NCCL runs a small Ring/Tree collective on fewer channels.

NCCL's getAlgoInfo (src/enqueue.cc) drops channels while ``nBytes < nc x threads x
threshold``; the collective then moves its bytes over those channels only. Below the size
that fills every channel the time is latency plus a per-channel transfer that stays the
same as the message grows (one more channel per 32 KiB for Ring/LL on 8 GPUs), so the
model must be latency-dominated there and never faster for a larger message.
"""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.collectives import CommTopology, _bus_bw, _latency, channels_run, predict
from infra.budget.communicator import intra_ring_search
from infra.catalog import Catalog
from tools.accuracy.calibration import compare_rows, load_measurements

from .conftest import TESTS

A100 = CommTopology("ampere", 8, 1, True, 12, 8, 200, "amd", False)
H100_2 = CommTopology("hopper", 8, 2, True, 18, 8, 400, "intel", False)
MEASUREMENTS = load_measurements(TESTS / "data" / "nccl-measurements.yaml")


def test_ring_ll_takes_one_channel_per_32_kib_on_eight_gpus() -> None:
    # 512 threads x 8 B x 8 ranks = 32 KiB per channel, up to the communicator's 24.
    runs = [channels_run(A100, "ring", "ll", 2**k * 1024) for k in range(12)]
    assert runs == [1, 1, 1, 1, 1, 1, 2, 4, 8, 16, 24, 24]
    assert channels_run(A100, "ring", "ll", 48 * 1024) == 1.5  # between counts: the envelope
    assert channels_run(A100, "ring", "simple", 64 * 1024) == 2  # 512 x 64 B = 32 KiB
    assert channels_run(A100, "ring", "ll128", 20 * 1024) == 4  # 640 x 8 B = 5 KiB
    assert channels_run(A100, "nvls", "simple", 8) == A100.channels  # NVLS keeps its own


WIDE = CommTopology("ampere", 8, 33, True, 12, 4, 100, "intel", False)  # 1 MiB per channel


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=1000, max_value=2**27), st.sampled_from([A100, H100_2, WIDE]))
def test_time_never_falls_as_the_message_grows(nbytes: int, t: CommTopology) -> None:
    # On 264 ranks Ring/LL takes one channel per 1 MiB: NCCL's whole channel counts would
    # make 2 MiB - 1 B slower than 2 MiB; the model keeps the envelope.
    for collective in ("all_reduce", "all_gather"):
        small = predict(t, collective, nbytes)
        large = predict(t, collective, nbytes * 5 // 4)
        assert large.time_us >= small.time_us - 0.01


def test_small_ring_messages_are_latency_dominated() -> None:
    # Below 768 KiB (24 channels x 32 KiB) each running channel carries 32 KiB at 10 GB/s
    # (240 / 24), so the transfer part is the same at 64, 128 and 256 KiB (11.5 us) and
    # NCCL's latency (15 us) is most of it.
    lat = _latency(A100, "all_reduce", "ring", "ll")
    times = [predict(A100, "all_reduce", 2**k * 1024).time_us for k in (6, 7, 8)]
    assert all(row == times[0] for row in times)
    assert all(lat / row >= 0.55 for row in times)


def test_128_kib_on_one_a100_node_follows_published_rows(catalog: Catalog) -> None:
    # NVIDIA/nccl#2355 (8 x A100-SXM4-80GB, one process per GPU, NCCL 2.29.7/2.31.2): 8.7 GB/s
    # busbw at 128 KiB, 17.7 at 256 KiB. With every channel running, the model said 13.0 and
    # 22.7 (+50 %, +28 %); on the channels NCCL runs, of 16, 10.1 and 20.3 (+17 %, +15 %);
    # of the 24 NCCL opens on 8 A100, 8.7 and 17.3.
    rows = [
        c
        for c in compare_rows(MEASUREMENTS, catalog)
        if c.row["source"] == "nccl-2355" and c.row["bytes"] <= 256 * 1024
    ]
    assert len(rows) == 4
    assert max(abs(c.error) for c in rows) <= 0.05


def test_nccl_2355_held_out_rows(catalog: Catalog) -> None:
    # The published table's held-out half: 128 KiB-4 MiB on one A100 node, median within 15 %,
    # none beyond 30 % (4 MiB is -25 %: NCCL runs LL128 there, whose pipeline-fill term
    # railplan fitted on other rows makes it rank below LL).
    rows = [
        abs(c.error)
        for c in compare_rows(MEASUREMENTS, catalog)
        if c.row["source"] == "nccl-2355" and c.held_out
    ]
    assert len(rows) == 6
    assert statistics.median(rows) <= 0.15
    assert max(rows) <= 0.30


def test_channel_count_follows_nccls_search_per_generation() -> None:
    # NCCL's ring search (search.cc) inside one NVSwitch node, each ring then run twice
    # (connect.cc): 8 A100 (12 NVLinks) 6 x 40 GB/s -> 12 x 20 -> 24 channels, as
    # nccl-tests#100 and nccl#1765 print; 8 H100 (18) 6 x 60 -> 12 x 30 -> 24; H800's 8
    # NVLinks 4 x 40 -> 8 x 20 -> 16, as nccl#892 prints. Between nodes two per NIC.
    assert intra_ring_search("ampere", 12 * 20.0) == (12, 20.0)
    assert intra_ring_search("hopper", 18 * 20.6) == (12, 30.0)
    assert intra_ring_search("hopper", 8 * 20.6) == (8, 20.0)
    assert (A100.channels, A100.search_channels) == (24, 12)
    assert CommTopology("hopper", 8, 1, True, 18, 8, 400, "intel", False).channels == 24
    assert CommTopology("hopper", 8, 1, True, 8, 8, 400, "intel", False).channels == 16
    assert H100_2.channels == 16 and WIDE.channels == 8


A100_2 = CommTopology("ampere", 8, 2, True, 12, 8, 200, "amd", False)  # 8 HDR NICs


def test_per_channel_caps_rank_over_nccls_search_graph_channels() -> None:
    # src/graph/tuning.cc: busBw caps are graphs[a]->nChannels x perChMax*Bw, the search
    # graph's channels (one per HDR NIC: 8), half the 16 the communicator runs. Tree on 2 x 8
    # A100: min(240 x 0.92, 8 x 23.6) = 188.8 GB/s in NCCL's ranking; the time of what runs
    # caps over the 16 running channels, so 220.8 binds there.
    assert (A100_2.search_channels, A100_2.channels) == (8, 16)
    ranked = _bus_bw(A100_2, "all_reduce", "tree", "simple", ranking=True)
    timed = _bus_bw(A100_2, "all_reduce", "tree", "simple")
    assert ranked == pytest.approx(8 * 23.6)
    assert timed == pytest.approx(240 * 0.92)
    ring_ll128 = _bus_bw(H100_2, "all_reduce", "ring", "ll128", ranking=True)
    assert ring_ll128 == pytest.approx(8 * 36.7)  # below 384 x 0.92 = 353.3
    # One A100 node: 0.92 x 240 binds before 12 search channels x 20 GB/s, either way.
    assert _bus_bw(A100, "all_reduce", "ring", "ll128", ranking=True) == pytest.approx(220.8)


def test_large_all_reduce_on_two_a100_nodes_ranks_as_nccl() -> None:
    # NCCL's own model on 2 x 8 A100 HDR at 1 GiB: Ring/Simple 192 GB/s busBw beats Tree/LL128,
    # capped at 8 x 20 = 160 GB/s over the search graph; railplan ranked Tree/LL128 first
    # with the caps over the 16 running channels (mscclpp-ndmv4 and gcm-check-nccl rows).
    row = predict(A100_2, "all_reduce", 2**30)
    assert (row.algorithm, row.protocol) == ("ring", "simple")


def test_inter_node_channels_duplicate_as_ncclTopoDupChannels() -> None:
    # src/graph/search.cc: graphs at >= 25 GB/s per channel double, except on Hopper below 50
    # with more than 4 rings. 8 NDR NICs: 16 on Ampere, 8 on Hopper; HDR (24 GB/s): never.
    a100_ndr = CommTopology("ampere", 8, 2, True, 12, 8, 400, "amd", False)
    h100_ndr4 = CommTopology("hopper", 8, 2, True, 18, 4, 400, "intel", False)
    assert a100_ndr.search_channels == 16
    assert H100_2.search_channels == 8
    assert h100_ndr4.search_channels == 8  # 4 rings at 48 GB/s: not above 4, so doubled
    assert A100_2.search_channels == 8
