"""Scheduling passes by shape (`infra.simulate.shapes`): the engine's own pass, only cheaper.

Where nothing can be evicted in a pass the engine serves shapes instead of buckets. Replays of
random traces with both passes must agree exactly (every start, end and figure), with
preemption on or off and tenants with or without a quota, and the placement searches must stay
a few per job as the queue grows: a trace of fractions of hundreds of sizes used to search once
per waiting bucket after every job that ended (with preemption on, or one tenant per job).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate import engine
from infra.simulate.cluster import PLACEMENTS
from infra.simulate.engine import Replay
from infra.simulate.jobs import Job
from infra.simulate.policy import SimPolicy
from infra.spec import Spec
from tests.sim_helpers import group_spec, job, replay, spec_of


class Buckets(Replay):
    """The engine's pass over every bucket, as before shapes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shapes = None


class Shapes(Replay):
    """Shapes served from the first waiting bucket on (the engine waits for a few dozen)."""

    FEW_BUCKETS = 0


class SomeShapes(Replay):
    """Shapes served from 4 waiting buckets on, handed back below 2."""

    FEW_BUCKETS = 4


MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'
DAY_NIGHT = (
    ", mig: mix, mig_schedule: {timezone: UTC, drain_timeout: 20m, changes: "
    '[{at: "0 7 * * *", mig: mix}, {at: "0 21 * * *", mig: disabled}]}'
)


@st.composite
def clusters(draw: st.DrawFn) -> Spec:
    """A few DGX A100 (MIG split, by day, or not) or generic nodes sharing GPUs; tenants."""
    nodes = draw(st.integers(1, 3))
    tenants = ""
    if draw(st.booleans()):
        rows = []
        for name in ("a", "b"):
            quota = draw(st.integers(1, nodes * 8))
            borrow = draw(st.sampled_from(("null", "0", str(draw(st.integers(1, nodes * 8))))))
            priority = draw(st.sampled_from(("low", "normal", "high", "critical")))
            rows.append(
                f"    - {{name: {name}, gpus: {quota}, priority: {priority}, "
                f"borrowing_limit: {borrow}}}\n"
            )
        reclaim = draw(st.sampled_from(("any", "lower_priority", "never")))
        within = draw(st.sampled_from(("lower_priority", "never")))
        tenants = (
            "  tenants:\n"
            + "".join(rows)
            + f"  preemption: {{reclaim: {reclaim}, within_tenant: {within}}}\n"
        )
    kind = draw(st.sampled_from(("whole", "split", "day-night", "shared")))
    if kind == "shared":
        replicas = draw(st.sampled_from((2, 4, 7)))
        return spec_of(
            f"node_groups:\n  - {{name: s, count: {nodes}, hostname: 's{{index:02d}}', "
            "shape: {gpus: 4, gpu: a100-sxm4-80gb, cpus: 32, memory_gib: 64}, "
            f"sharing: {{strategy: time-slicing, replicas: {replicas}}}}}\n"
            f"scheduler:\n  kind: kubernetes\n{tenants}"
        )
    split = {
        "whole": "",
        "split": ", mig: [{gpus: [0, 1, 2], layout: mix}]",
        "day-night": DAY_NIGHT,
    }
    return group_spec(nodes, f"scheduler:\n  mig_strategy: mixed\n{tenants}{MIX}", split[kind])


NEAR = (100, 120, 140, 280, 300, 420, 500, 510, 700, 999)
"""Fractions that need as many MIG slices in pairs: buckets of one shape."""


@st.composite
def traces(draw: st.DrawFn) -> list[Job]:
    """Jobs of many fraction sizes, whole GPUs up to three nodes, some stating CPUs."""
    long = draw(st.booleans())  # hours: MIG changes by day and night happen meanwhile
    out = []
    for i in range(draw(st.integers(3, 40))):
        fraction = draw(st.integers(0, 2)) == 0
        base = job(
            f"j{i}",
            draw(st.integers(0, 30)) * (3600 if long else 5),
            draw(st.integers(1, 100)) * (900 if long else 4),
            1 if fraction else draw(st.integers(1, 24)),
            milli=draw(st.sampled_from(NEAR) | st.integers(1, 999)) if fraction else 1000,
            tenant=draw(st.sampled_from(("a", "b", "c", "d"))),  # c, d: no quota
            priority=draw(st.sampled_from(("low", "normal", "high", "critical"))),
        )
        if draw(st.integers(0, 5)) == 0:
            base = base.__class__(**{**_fields(base), "cpu_milli": draw(st.integers(1, 4)) * 4000})
        out.append(base)
    return out


def _fields(j: Job) -> dict[str, Any]:
    return {name: getattr(j, name) for name in j.__slots__}  # type: ignore[attr-defined]


def _the_shape_pass_replays_exactly_as_the_bucket_pass(
    spec: Spec, trace: list[Job], placement: str, seed: int, cls: type[Replay]
) -> None:
    policy = SimPolicy(placement=placement, seed=seed, checkpoint_write_s=10)
    fast, fast_result = replay(spec, trace, policy, cls=cls)
    slow, slow_result = replay(spec, trace, policy, cls=Buckets)
    assert fast.shapes is not None and slow.shapes is None
    assert fast.first_start == slow.first_start
    assert fast.end_at == slow.end_at
    assert fast.evictions == slow.evictions
    assert fast.frag_area == slow.frag_area
    assert fast_result == slow_result


# Two replays of up to 40 jobs an example: `make test` replays the first 50 fixed examples,
# `make test-slow` (and CI) 300, and `make fuzz` both with fresh random examples each run.
_EXAMPLES = given(
    clusters(),
    traces(),
    st.sampled_from(PLACEMENTS),
    st.integers(0, 3),
    st.sampled_from((Shapes, SomeShapes)),
)
test_the_shape_pass_replays_exactly_as_the_bucket_pass = settings(max_examples=50, deadline=None)(
    _EXAMPLES(_the_shape_pass_replays_exactly_as_the_bucket_pass)
)
test_the_shape_pass_replays_exactly_as_the_bucket_pass_300_examples = pytest.mark.slow(
    settings(max_examples=300, deadline=None)(
        _EXAMPLES(_the_shape_pass_replays_exactly_as_the_bucket_pass)
    )
)


def test_a_pass_that_may_evict_serves_buckets_and_the_shapes_resume_after() -> None:
    # b borrows a's idle GPUs; a's job then reclaims them: that pass is the engine's own
    spec = group_spec(
        1,
        "scheduler:\n  tenants:\n    - {name: a, gpus: 4, priority: high}\n"
        "    - {name: b, gpus: 4, priority: low, borrowing_limit: 4}\n"
        "  preemption: {reclaim: any, within_tenant: never}\n",
    )
    jobs = [
        job("b1", 0, 100, 4, tenant="b"),
        job("b2", 0, 100, 4, tenant="b"),
        job("a1", 10, 50, 4, tenant="a"),
    ]
    fast, fast_result = replay(spec, jobs, cls=Shapes)
    slow, slow_result = replay(spec, jobs, cls=Buckets)
    assert fast.shapes is not None and fast.shapes.synced
    assert fast.preemptions == slow.preemptions == 1
    assert fast_result == slow_result


def _fractions(count: int) -> list[Job]:
    """One tenant's day-long fractions of 300 sizes, one a second: most wait for quota."""
    return [
        job(f"j{i}", i, 86_400, 1, milli=1 + i * 7 % 300, tenant="a", priority="critical")
        for i in range(count)
    ]


def _spec(preemption: str) -> Spec:
    """Two DGX A100 split by MIG; tenant a's quota 6 GPUs."""
    return group_spec(
        2,
        "scheduler:\n  mig_strategy: mixed\n  tenants:\n    - {name: a, gpus: 6}\n"
        f"  preemption: {preemption}\n" + MIX,
        ", mig: [{gpus: [0, 1, 2, 3, 4, 5, 6, 7], layout: mix}]",
    )


FRACTIONS = _spec("{reclaim: never, within_tenant: never}")
PREEMPTING = _spec("{reclaim: any, within_tenant: lower_priority}")
"""`FRACTIONS` with preemption on (Kueue's default): one tenant and priority evict nobody."""


def _one_tenant_each(count: int) -> list[Job]:
    """`_fractions`, each job of a tenant of its own without a quota: most wait for GPUs."""
    return [replace(j, tenant=f"u{i}") for i, j in enumerate(_fractions(count))]


@pytest.mark.parametrize("count", [300, 1200])
@pytest.mark.parametrize(
    "spec, trace",
    [(FRACTIONS, _fractions), (PREEMPTING, _fractions), (FRACTIONS, _one_tenant_each)],
    ids=["no-preemption", "preemption", "tenant-per-job"],
)
def test_placement_searches_stay_a_few_per_job_as_the_queue_grows(
    count: int, spec: Spec, trace: Callable[[int], list[Job]], monkeypatch: pytest.MonkeyPatch
) -> None:
    searches = 0
    least_held = engine.least_held

    def counted(*args: Any) -> float:
        nonlocal searches
        searches += 1
        return least_held(*args)

    monkeypatch.setattr(engine, "least_held", counted)
    _, result = replay(spec, trace(count))
    assert result.trace.jobs == count
    assert searches <= 8 * count  # was a search per waiting bucket per job that ended


def test_buckets_of_one_shape_waiting_for_quota_do_not_count_as_waiting_for_gpus() -> None:
    # 0.5 and 0.51 of a GPU need 4 slices each: one shape. Quota (1 GPU, held by x) blocks
    # both while 7 GPUs stand free, which is not fragmentation.
    spec = group_spec(
        1,
        "scheduler:\n  tenants:\n    - {name: a, gpus: 1, borrowing_limit: 0}\n"
        "  preemption: {reclaim: never, within_tenant: never}\n",
    )
    jobs = [
        job("x", 0, 100, 1, tenant="a"),
        job("y", 1, 100, 1, milli=500, tenant="a"),
        job("z", 1, 100, 1, milli=510, tenant="a"),
    ]
    fast, fast_result = replay(spec, jobs, cls=Shapes)
    slow, slow_result = replay(spec, jobs, cls=Buckets)
    assert fast.shapes is not None
    assert fast.frag_area == slow.frag_area == 0.0
    assert fast_result == slow_result
