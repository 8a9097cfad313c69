"""Properties of the collective model that must hold whatever the calibration.

Each test varies one input of a communicator and checks the direction of the change: more
ranks never make a latency-bound collective faster, a slower NIC or switch port never speeds
anything up, more oversubscription never speeds up all-to-all, NVLS is never chosen below the
NCCL release that added it, SHARP latency never falls as the aggregation tree gets deeper,
and a MIG-partitioned group is refused.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.budget.cluster import BudgetError, comm_topology
from infra.budget.collectives import COLLECTIVES, CommTopology, predict
from infra.budget.sharp import sharp_net_latency
from infra.catalog import Catalog
from infra.catalog.nccl import nccl_has
from infra.spec import load_spec_text

from .test_cli import railplan

SIZES = st.sampled_from([8, 4096, 2**20, 16 * 2**20, 2**30])
VERSIONS = st.sampled_from(["2.8.4", "2.12.12", "2.16.5", "2.17.1", "2.18.1", "2.21.5", "2.30.7"])


@st.composite
def topologies(draw: st.DrawFn) -> CommTopology:
    """A communicator from the space railplan plans: Ampere or Hopper, 1-8 GPUs per node."""
    arch = draw(st.sampled_from(["ampere", "hopper"]))
    return CommTopology(
        arch=arch,
        gpus_per_node=draw(st.sampled_from([1, 2, 4, 8])),
        nodes=draw(st.integers(1, 512)),
        nvswitch=draw(st.booleans()),
        nvlink_links=18 if arch == "hopper" else 12,
        nics=draw(st.sampled_from([1, 2, 4, 8])),
        nic_gbps=draw(st.sampled_from([100, 200, 400])),
        cpu=draw(st.sampled_from(["intel", "amd"])),
        sharp=draw(st.booleans()),
        nccl=draw(VERSIONS),
        tiers=draw(st.integers(1, 3)),
        leaf_nodes=draw(st.sampled_from([0, 20, 32])),
        oversubscription=draw(st.sampled_from([1.0, 2.0, 4.0])),
        efa=draw(st.booleans()),
    )


def _ok(t: CommTopology) -> bool:
    return t.ranks >= 2


@settings(max_examples=150, deadline=None)
@given(t=topologies(), collective=st.sampled_from(COLLECTIVES), extra=st.integers(1, 4096))
def test_latency_bound_time_never_falls_with_more_nodes(
    t: CommTopology, collective: str, extra: int
) -> None:
    if not _ok(t):
        t = dataclasses.replace(t, nodes=2)
    bigger = dataclasses.replace(t, nodes=t.nodes + extra, tiers=t.tiers)
    assert predict(bigger, collective, 8).time_us >= predict(t, collective, 8).time_us  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(t=topologies(), collective=st.sampled_from(COLLECTIVES), nbytes=SIZES)
def test_a_slower_nic_or_port_never_speeds_anything_up(
    t: CommTopology, collective: str, nbytes: int
) -> None:
    if not _ok(t):
        t = dataclasses.replace(t, nodes=2)
    for slower in (rate for rate in (200, 100, 50) if rate < t.nic_gbps):
        derated = dataclasses.replace(t, nic_gbps=slower)
        assert (
            predict(derated, collective, nbytes).time_us >= predict(t, collective, nbytes).time_us
        )  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(t=topologies(), nbytes=SIZES, collective=st.sampled_from(COLLECTIVES))
def test_more_oversubscription_never_speeds_anything_up(
    t: CommTopology, nbytes: int, collective: str
) -> None:
    t = dataclasses.replace(t, nodes=max(t.nodes, 2))
    times = [
        predict(dataclasses.replace(t, oversubscription=ratio), collective, nbytes).time_us  # type: ignore[arg-type]
        for ratio in (1.0, 1.5, 2.0, 4.0, 8.0)
    ]
    assert times == sorted(times)


def test_oversubscription_slows_alltoall_across_leaf_groups() -> None:
    t = CommTopology("hopper", 8, 128, True, 18, 8, 400, "intel", False, leaf_nodes=32)
    full = predict(t, "alltoall", 2**30).time_us
    over = predict(dataclasses.replace(t, oversubscription=4.0), "alltoall", 2**30).time_us
    inside = dataclasses.replace(t, nodes=32)
    assert over > full
    assert predict(dataclasses.replace(inside, oversubscription=4.0), "alltoall", 2**30) == (
        predict(inside, "alltoall", 2**30)
    )  # one leaf group: no uplink crossed


def test_alltoall_latency_grows_with_ranks_in_rounds() -> None:
    small = CommTopology("hopper", 8, 2, True, 18, 8, 400, "intel", False)
    large = dataclasses.replace(small, nodes=1000)
    # NCCL runs nRanks - 1 peers in rounds of at most 8 per batch: 1000 nodes need ~1000
    # network batches, 2 nodes one; 8 B all-to-all time must reflect that.
    assert predict(large, "alltoall", 8).time_us > 100 * predict(small, "alltoall", 8).time_us


@settings(max_examples=150, deadline=None)
@given(t=topologies(), collective=st.sampled_from(COLLECTIVES), nbytes=SIZES)
def test_nvls_never_chosen_below_its_nccl_version(
    t: CommTopology, collective: str, nbytes: int
) -> None:
    # NVLS-capable hardware (Hopper, NVSwitch, 8 GPUs), so only the version can rule it out
    t = dataclasses.replace(t, arch="hopper", nvlink_links=18, nvswitch=True, gpus_per_node=8)
    algorithm = predict(t, collective, nbytes).algorithm  # type: ignore[arg-type]
    if not nccl_has(t.nccl, "nvls"):
        assert algorithm not in ("nvls", "nvls_tree")
    if not nccl_has(t.nccl, "nvls_ib_sharp") and t.nodes > 1:
        assert algorithm not in ("nvls", "nvls_tree")
    if not nccl_has(t.nccl, "collnet"):
        assert not algorithm.startswith("collnet")


def test_nvls_appears_exactly_at_its_release() -> None:
    base = CommTopology("hopper", 8, 1, True, 18, 8, 400, "intel", False)
    assert (
        predict(dataclasses.replace(base, nccl="2.16.5"), "all_reduce", 2**30).algorithm == "ring"
    )
    assert (
        predict(dataclasses.replace(base, nccl="2.17.1"), "all_reduce", 2**30).algorithm == "nvls"
    )


@settings(max_examples=100, deadline=None)
@given(t=topologies(), nbytes=SIZES)
def test_sharp_latency_never_falls_with_tree_depth(t: CommTopology, nbytes: int) -> None:
    t = dataclasses.replace(t, nodes=max(t.nodes, 2), sharp=True)
    # Per SHARP algorithm (as NCCL_ALGO forces it): a deeper aggregation tree is never faster.
    # The unforced choice may fall: NCCL ranks by its own model, which gives SHARP the NICs'
    # full rate, and a deeper tree can tip it to an algorithm that really is faster.
    for forced in (("collnet_chain",), ("collnet_direct",)):
        times = [
            predict(dataclasses.replace(t, tiers=tiers), "all_reduce", nbytes, forced).time_us
            for tiers in (1, 2, 3)
        ]
        assert times == sorted(times)
    for algo in ("collnet_direct", "collnet_chain", "nvls"):
        lat = [sharp_net_latency(algo, 2, tiers) for tiers in (1, 2, 3)]
        assert lat == sorted(lat) and lat[0] < lat[2]


def test_multi_node_nvls_is_bounded_by_the_network() -> None:
    # tuning.cc: interBw = bwInter (x2 only for NVLSTree on <= 2 nodes); nccl-tests' busbw of
    # an NVLS/NVLSTree all-reduce on 3+ nodes cannot exceed the node's network bandwidth.
    for nodes in (3, 16, 1000):
        t = CommTopology("hopper", 8, nodes, True, 18, 8, 400, "intel", True)
        row = predict(t, "all_reduce", 2**33, ("nvls", "nvls_tree"))
        assert row.algorithm in ("nvls", "nvls_tree")
        assert row.busbw_GBps <= t.inter_gbs * 1.001


SPEC = {
    "name": "t",
    "node_groups": [
        {"name": "infer", "node": "dgx-h100", "count": 4, "mig": "all-1g"},
        {"name": "train", "node": "dgx-h100", "count": 1280},
    ],
    "mig_layouts": {"all-1g": {"profiles": {"1g.10gb": 7}}},
    "fabrics": {"compute": {"switch": "qm9700", "su_size": 32, "sharp": True}},
}


def test_sharp_small_all_reduce_is_slower_on_10000_gpus_than_on_32(catalog: Catalog) -> None:
    s = load_spec_text(yaml.safe_dump(SPEC)).spec
    small, large = comm_topology(s, catalog, 32), comm_topology(s, catalog, 10_240)
    assert small.sharp and large.sharp and small.tiers < large.tiers
    assert predict(large, "all_reduce", 8).time_us > predict(small, "all_reduce", 8).time_us


def test_a_mig_partitioned_group_is_refused(catalog: Catalog, tmp_path: object) -> None:
    s = load_spec_text(yaml.safe_dump(SPEC)).spec
    with pytest.raises(BudgetError) as caught:
        comm_topology(s, catalog, 16, group="infer")
    message = str(caught.value)
    assert "group infer is MIG-partitioned (7 x 1g.10gb)" in message
    assert "no NVLink or P2P" in message
    assert caught.value.hint == "predict on a group without MIG"


def test_the_cli_refuses_a_mig_group_with_exit_2(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "mig.yaml"  # type: ignore[operator]
    path.write_text(yaml.safe_dump(SPEC))
    result = railplan(
        "predict", str(path), "--collective", "all_reduce", "--gpus", "16", "--group", "infer"
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "MIG-partitioned (7 x 1g.10gb)" in result.stderr


def test_efa_is_slower_than_infiniband_at_small_sizes() -> None:
    ib = CommTopology("hopper", 8, 2, True, 18, 32, 100, "amd", False)
    efa = dataclasses.replace(ib, efa=True)
    assert predict(efa, "all_reduce", 8).time_us > predict(ib, "all_reduce", 8).time_us
    assert math.isclose(
        predict(efa, "all_reduce", 2**34).busbw_GBps,
        predict(ib, "all_reduce", 2**34).busbw_GBps,
        rel_tol=0.02,
    )


def test_sharp_all_reduce_time_does_not_grow_with_nodes_on_the_same_tiers() -> None:
    """NCCL's CollNet latency has no node term; Ring and Tree, which have one, lose anyway."""
    small = CommTopology("ampere", 8, 140, True, 12, 8, 200, "amd", True, tiers=3)
    large = dataclasses.replace(small, nodes=1000)
    for nbytes in (8, 2**16, 2**24, 2**33):
        a, b = predict(small, "all_reduce", nbytes), predict(large, "all_reduce", nbytes)
        assert (a.time_us, a.algorithm) == (b.time_us, b.algorithm) == (a.time_us, "collnet_direct")
    ring = [predict(t, "all_reduce", 8, ("ring",)).time_us for t in (small, large)]
    assert ring[0] < ring[1]
