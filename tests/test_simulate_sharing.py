"""GPU sharing, CPUs and memory, generic server shapes, placement policies and inflation.

A fraction shares a GPU where the group's device plugin shares it
(time-slicing or MPS replicas), every node and job has CPUs and memory, a spec may describe
a server the catalog lacks, placement is first fit, best fit, packing or FGD, and
``--inflate`` answers how full the cluster gets. Worked out by hand on one- and two-node
clusters.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from infra.errors import SpecError
from infra.simulate.cluster import Allocation
from infra.simulate.engine import Replay, simulate
from infra.simulate.fragment import fragment, node_state
from infra.simulate.inflate import inflate
from infra.simulate.jobs import Job
from infra.simulate.openb import OPENB_SHAPES, openb_like
from infra.simulate.policy import SimPolicy
from infra.simulate.synthetic import FRACTION_COUNTS, GPU_PODS, MULTI_GPU_COUNTS
from infra.spec import load_spec
from infra.topology import expand
from tests.sim_helpers import catalog, job, replay, spec_of, starts, trace_of

ROOT = Path(__file__).resolve().parent.parent


def shaped(*groups: str, extra: str = "") -> str:
    """Node groups of generic shapes: ``name:count:gpus:model:cpus[:replicas]`` each."""
    rows = []
    for g in groups:
        name, count, gpus, model, cpus, *rest = g.split(":")
        sharing = f", sharing: {{strategy: time-slicing, replicas: {rest[0]}}}" if rest else ""
        rows.append(
            f"  - {{name: {name}, count: {count}, hostname: '{name}{{index:02d}}', "
            f"shape: {{gpus: {gpus}, gpu: {model}, cpus: {cpus}, memory_gib: 64}}{sharing}}}"
        )
    return "node_groups:\n" + "\n".join(rows) + "\n" + extra


def asks(jid: str, submit: float, duration: float, gpus: int, **kw: int | str) -> Job:
    """A job that may state ``milli``, ``cpu_milli``, ``memory_mib`` and ``model``."""
    milli = int(kw.pop("milli", 1000))
    model = kw.pop("model", None)
    base = job(jid, submit, duration, gpus, milli=milli, model=model)  # type: ignore[arg-type]
    return replace(base, **kw)  # type: ignore[arg-type]


def parts(run: Replay) -> dict[str, Allocation]:
    return {run.jobs[i].id: r.alloc for i, r in run.running.items()}


# --- sharing ------------------------------------------------------------------------------


def test_fractions_share_one_gpu_on_a_sharing_group_and_hold_their_replicas() -> None:
    # Before: every fraction on an unsplit GPU took (and held) a whole one
    spec = spec_of(shaped("t4:1:2:t4:16:100"))
    jobs = [asks("a", 0, 100, 1, milli=590), asks("b", 1, 100, 1, milli=410)]
    jobs.append(asks("c", 2, 100, 1))
    run, result = replay(spec, jobs, SimPolicy(horizon_s=50))
    got = parts(run)
    assert got["a"][0].units == 59 and got["a"][0].held == pytest.approx(0.59)
    assert got["b"][0].gpus == got["a"][0].gpus  # b fills the rest of a's GPU
    assert got["c"][0].whole == 1 and got["c"][0].gpus != got["a"][0].gpus
    assert run.alloc == pytest.approx(2.0)
    assert result.gpus == 2


def test_without_sharing_a_fraction_holds_a_whole_gpu() -> None:
    spec = spec_of(shaped("t4:1:2:t4:16"))
    jobs = [asks("a", 0, 100, 1, milli=590), asks("b", 1, 100, 1, milli=410)]
    jobs.append(asks("c", 2, 100, 1))
    run, _ = replay(spec, jobs, SimPolicy(horizon_s=50))
    assert set(parts(run)) == {"a", "b"} and run.alloc == pytest.approx(2.0)


# --- CPUs and memory ----------------------------------------------------------------------


def test_cpus_are_a_dimension_a_job_waits_for() -> None:
    # 2 GPUs and 8 CPUs: two 1-GPU jobs of 6 CPUs each cannot share the node
    spec = spec_of(shaped("g:1:2:v100:8"))
    jobs = [asks("a", 0, 100, 1, cpu_milli=6000), asks("b", 1, 100, 1, cpu_milli=6000)]
    run, _ = replay(spec, jobs)
    assert starts(run) == {"a": 0.0, "b": 100.0}
    # memory the same way: 64 GiB a node
    jobs = [asks("a", 0, 100, 1, memory_mib=40_000), asks("b", 1, 100, 1, memory_mib=40_000)]
    run, _ = replay(spec, jobs)
    assert starts(run) == {"a": 0.0, "b": 100.0}


def test_a_cpu_only_job_takes_cpus_gpu_jobs_then_lack() -> None:
    spec = spec_of(shaped("g:1:2:v100:8"))
    jobs = [asks("cpu", 0, 100, 0, cpu_milli=8000), asks("gpu", 1, 100, 1, cpu_milli=1000)]
    run, result = replay(spec, jobs)
    assert starts(run) == {"cpu": 0.0, "gpu": 100.0}
    assert result.gpu_hours["held"] == pytest.approx(100 / 3600, abs=1e-6)  # the GPU job


def test_a_job_asking_more_cpus_than_any_node_has_never_runs() -> None:
    spec = spec_of(shaped("g:2:2:v100:8"))
    _, result = replay(spec, [asks("big", 0, 10, 1, cpu_milli=16_000)])
    assert [n.reason for n in result.never_ran] == [
        "asks one node for 16 CPUs and 0 GiB; the nodes it may use have at most 8 CPUs and 64 GiB"
    ]


def test_a_gang_spreads_its_cpus_over_its_nodes_with_its_gpus() -> None:
    spec = spec_of(shaped("g:2:2:v100:8"))
    run, _ = replay(spec, [asks("g", 0, 100, 3, cpu_milli=9000)], SimPolicy(horizon_s=50))
    (alloc,) = parts(run).values()
    assert sorted((p.whole, p.cpu) for p in alloc) == [(1, 3000), (2, 6000)]


# --- generic shapes -----------------------------------------------------------------------


def test_a_shape_and_a_node_are_one_or_the_other() -> None:
    with pytest.raises(SpecError, match="either `node`"):
        spec_of(
            "node_groups: [{name: g, count: 1, node: dgx-h100, "
            "shape: {gpus: 2, gpu: t4, cpus: 8, memory_gib: 64}}]\n"
        )
    with pytest.raises(SpecError, match="give `node`"):
        spec_of("node_groups: [{name: g, count: 1}]\n")


def test_servers_of_one_two_and_four_gpus_of_older_models() -> None:
    spec = spec_of(shaped("p:1:1:p100:8", "t:1:2:t4:16", "v:1:4:v100:32"))
    jobs = [asks("four", 0, 10, 4), asks("t4", 0, 10, 2, model="t4"), asks("one", 0, 10, 1)]
    run, result = replay(spec, jobs, SimPolicy(horizon_s=5))
    nodes = {j: run.cluster.nodes[a[0].node].group for j, a in parts(run).items()}
    assert nodes == {"four": "v", "t4": "t", "one": "p"}
    assert result.gpus == 7


# --- placement policies -------------------------------------------------------------------


def _two_models(placement: str) -> str:
    spec = spec_of(shaped("a:1:2:a:16:10", "b:1:2:b:16:10"))
    jobs = [
        asks("x", 0, 100, 1, milli=500, model="a"),
        asks("y", 1, 100, 1, model="b"),
        asks("z", 2, 100, 1, milli=300),
    ]
    run, _ = replay(spec, jobs, SimPolicy(horizon_s=50, placement=placement))
    return run.cluster.nodes[parts(run)["z"][0].node].group


def test_packing_fills_a_partly_used_gpu_best_fit_the_fullest_node() -> None:
    # a: 1.5 GPUs free, one GPU half used; b: 1 GPU free. Best fit leaves the least room
    # (b: 0.7); packing prefers the partly used GPU (score 95 over 49); first fit plan order
    assert _two_models("best-fit") == "b"
    assert _two_models("packing") == "a"
    assert _two_models("first-fit") == "a"


def test_fgd_keeps_a_gpu_usable_by_the_typical_task_where_best_fit_does_not() -> None:
    # Typical tasks: 0.5 of a GPU (4 of 6). x takes 0.4 of one GPU; z (0.2) beside it would
    # leave 0.4, too small for 0.5 (fragmentation +0.27 GPU), on the free GPU none
    spec = spec_of(shaped("g:1:2:t4:16:10"))
    later = [asks(f"w{i}", 100, 10, 1, milli=500) for i in range(4)]
    jobs = [asks("x", 0, 1000, 1, milli=400), asks("z", 1, 1000, 1, milli=200), *later]

    def same_gpu(placement: str) -> bool:
        run, _ = replay(spec, jobs, SimPolicy(horizon_s=50, placement=placement))
        got = parts(run)
        return got["x"][0].gpus == got["z"][0].gpus

    assert same_gpu("best-fit")
    assert not same_gpu("fgd")


class Revalued(Replay):
    """Checks the FGD meter at every step against each open node valued from scratch."""

    checked = 0

    def _advance(self, at: float) -> None:
        super()._advance(at)
        meter, total = self.fgd, 0.0
        for node in self.cluster.nodes:
            state = node_state(node, meter.models[node.group])
            value = fragment(state, meter.shapes) if node.open else 0.0
            assert meter.value[node.index] == value, (node.name, state)
            total += value
        assert meter.total == pytest.approx(total)
        Revalued.checked += 1


def test_the_fgd_meter_values_every_node_as_its_free_state_does() -> None:
    # Nodes of two groups alike in GPUs, CPUs and use, one sharing its GPUs: a node's
    # value is the same whether the meter keys it by its whole state or (sharing no GPU,
    # no MIG slices) by its group, free CPUs and free GPUs; the t4 jobs make the group count
    jobs = [asks(f"t{i}", 3 * i, 50 + 7 * i, 1 + i % 2, model="t4") for i in range(12)]
    jobs += [asks(f"v{i}", 3 * i + 1, 40 + 5 * i, 1 + i % 3, cpu_milli=2000) for i in range(12)]
    jobs += [asks(f"f{i}", 3 * i + 2, 30 + 11 * i, 1, milli=300) for i in range(12)]
    spec = spec_of(shaped("t:2:4:t4:16", "v:2:4:v100:16", "s:1:4:t4:16:10"))
    Revalued.checked = 0
    run, _ = replay(spec, jobs, cls=Revalued)
    assert run.unfinished() == 0 and Revalued.checked > 30


# --- inflation ----------------------------------------------------------------------------


def test_inflate_draws_until_the_factor_and_nothing_departs() -> None:
    jobs = [asks("a", 0, 5, 1), asks("b", 3, 5, 2), asks("c", 9, 5, 1, milli=500)]
    trace = trace_of(jobs)
    out = inflate(trace, 8, 1.5, seed=3)
    asked = sum(j.gpus * j.milli for j in out.jobs) / 1000
    assert 12 - 2 < asked <= 12  # the next draw (at most 2 GPUs) would pass 1.5 x 8
    assert [j.submit_s for j in out.jobs] == [float(i) for i in range(len(out.jobs))]
    assert all(j.duration_s > len(out.jobs) for j in out.jobs)
    assert len({j.id for j in out.jobs}) == len(out.jobs)
    assert (out.rows, out.used) == (3, 3)  # the trace's rows as read, not the draws
    assert out == inflate(trace, 8, 1.5, seed=3)
    assert out != inflate(trace, 8, 1.5, seed=4)


def test_an_inflated_replay_reports_how_full_the_cluster_got() -> None:
    spec = spec_of(shaped("g:2:2:v100:8"))
    jobs = [asks("a", 0, 5, 1), asks("b", 3, 5, 2)]  # 3 GPUs asked; inflated to 8
    cat = catalog().with_shapes(spec)
    got = simulate(spec, expand(spec, cat), cat, trace_of(jobs), policy=SimPolicy(inflate=2.0))
    assert got.inflation is not None
    assert got.inflation.requested_gpus == pytest.approx(8.0)
    assert got.inflation.allocated_gpus == pytest.approx(4.0)  # the cluster's 4 GPUs
    assert got.inflation.allocation == pytest.approx(1.0)


# --- the openb-like workload and cluster (bench/fgd_openb.py) -----------------------------


def test_openb_shapes_agree_with_the_published_counts() -> None:
    # the synthetic generator's separately counted marginals of the same file
    assert sum(OPENB_SHAPES.values()) == 8152
    assert sum(n for (_, _, g, _), n in OPENB_SHAPES.items() if g == 0) == 8152 - GPU_PODS
    fractions = Counter[int]()
    multi = Counter[int]()
    for (_, _, gpus, milli), n in OPENB_SHAPES.items():
        if gpus == 1 and milli < 1000:
            fractions[milli] += n
        elif gpus > 1:
            multi[gpus] += n
    assert fractions == FRACTION_COUNTS and multi == MULTI_GPU_COUNTS
    first = openb_like(500, seed=1)
    assert first == openb_like(500, seed=1) and first != openb_like(500, seed=2)
    assert all(j.fractional == (j.gpus == 1 and j.milli < 1000) for j in first)


def test_the_openb_cluster_spec_is_the_published_node_list() -> None:
    spec = load_spec(ROOT / "bench" / "openb-cluster.yaml").spec
    plan = expand(spec, catalog().with_shapes(spec))
    assert (len(plan.servers), sum(g.gpus * g.servers for g in plan.groups.values())) == (
        1213,
        6212,
    )
