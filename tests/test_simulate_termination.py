"""Every replay ends and conserves GPU-seconds: termination and accounting.

The livelock once found (a 12-GPU job admitted on 12 GPUs, charged 16, two tenants
reclaiming from each other at one instant for ever) ends with the schedule worked out by
hand; a property test over arbitrary job sizes (1 to 3 nodes' GPUs, odd sizes, fractions),
tenants with random quotas, borrowing and lending, priorities and every preemption setting
checks that each replay returns, that every job finished or was found unable to run, that a
tenant is charged exactly what its jobs hold, and that the GPU-seconds held add up to the
work kept, the work lost, the resume waits and the runs cut by the stop; and the event
budget turns a livelock (made here on purpose) into a located `LivelockError`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.cluster import COMPUTE_SLICES, Allocation, held
from infra.simulate.engine import Replay
from infra.simulate.feasible import quota_limits
from infra.simulate.jobs import Job
from infra.simulate.livelock import STARTS_PER_INSTANT, LivelockError
from infra.simulate.policy import SimPolicy
from infra.simulate.state import Run
from infra.simulate.tenants import Book
from infra.spec import Spec
from tests.sim_helpers import group_spec, job, replay, starts

TWO_TENANTS = (
    "scheduler:\n  kind: kubernetes\n  batch: kueue\n  tenants:\n"
    "    - {name: a, gpus: 14, priority: normal}\n"
    "    - {name: b, gpus: 12, priority: normal}\n"
    "  preemption: {reclaim: any, within_tenant: lower_priority}\n"
)

LIVELOCK = [  # the shape: equal-priority tenants, reclaim on, five jobs, 12-GPU gangs
    job("j0", 0, 7, 8, tenant="a"),
    job("j4", 0, 2, 12, tenant="b"),
    job("j1", 1, 69, 12, tenant="b"),
    job("j2", 1, 46, 12, tenant="b"),
    job("j3", 1, 42, 12, tenant="a"),
]


def test_the_livelock_input_ends_with_the_schedule_worked_out_by_hand() -> None:
    # Before: j4 was admitted on 12 GPUs and charged 16 (two whole nodes), so b borrowed 4;
    # a's j3 (12 within a's 14) reclaimed it, was charged 16 and borrowed in turn, and b took
    # it back, for ever at t = 7. Now a 12-GPU gang holds 8 + 4 GPUs and is charged 12:
    # j0 holds node 1 until 7; j4 needs a whole node and 4 more, so it waits for j0 and runs
    # 7-9; then the queue in submit order (equal priorities): j1 9-78, j2 78-124, j3 124-166.
    # Nobody borrows, so nothing is reclaimed.
    run, result = replay(group_spec(2, TWO_TENANTS), LIVELOCK)
    assert starts(run) == {"j0": 0.0, "j4": 7.0, "j1": 9.0, "j2": 78.0, "j3": 124.0}
    assert (result.preemptions, result.horizon_s, result.never_ran) == (0, 166.0, ())


def test_a_gang_larger_than_a_node_holds_and_is_charged_what_it_asks() -> None:
    run, _ = replay(
        group_spec(2, TWO_TENANTS), [job("g", 0, 100, 12, tenant="b")], SimPolicy(horizon_s=50)
    )
    (only,) = run.running.values()
    assert sorted((p.whole, p.slice) for p in only.alloc) == [(4, 0), (8, 0)]
    assert run.book.usage["b"] == held(only.alloc) == 12.0


def test_a_job_no_cohort_can_lend_enough_for_never_runs() -> None:
    # a may borrow without limit, but b lends only 4: a holds at most 12 GPUs
    spec = group_spec(
        2,
        "scheduler:\n  tenants:\n    - {name: a, gpus: 8, borrowing_limit: null}\n"
        "    - {name: b, gpus: 8, lending_limit: 4}\n",
    )
    _, result = replay(spec, [job("big", 0, 100, 16, tenant="a")])
    (never,) = result.never_ran
    assert never.reason == (
        "asks for 16 GPUs; tenant a may hold at most 12 (its quota plus what it may borrow:"
        " its borrowing limit, at most what the other tenants lend)"
    )


# --- the property ----------------------------------------------------------------------


class Tally(Replay):
    """A replay that keeps its own account of every run and checks each start's charge."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.tally_held = 0.0  # GPU-seconds of runs that ended, by this class's own count
        self.kept = [0.0] * len(self.jobs)  # per job: seconds of work kept across its runs
        self.evicting = False

    def _start(self, index: int, alloc: Allocation) -> None:
        super()._start(index, alloc)
        tenant = self.jobs[index].tenant
        charged = sum(r.share for i, r in self.running.items() if self.jobs[i].tenant == tenant)
        assert self.book.usage[tenant] == pytest.approx(charged, abs=1e-9)
        own = sum(p.whole + p.slice / COMPUTE_SLICES for p in alloc)
        assert self.running[index].share == pytest.approx(own, abs=1e-12)
        limits = quota_limits(self.spec) if self.slurm is None else {}
        if tenant in limits:
            assert self.book.usage[tenant] <= limits[tenant] + 1e-9

    def _release(self, index: int, *, freed: bool = False) -> Run:
        run = self.running[index]
        self.tally_held += run.share * (self.now - run.started_s)
        if not self.evicting:  # a finish: the whole run's work is kept
            self.kept[index] += self.now - run.work_from_s
        return super()._release(index, freed=freed)

    def evict(self, index: int, *, freed: bool = False) -> float:
        run = self.running[index]
        self.kept[index] += self.policy.saved_s(max(0.0, self.now - run.work_from_s))
        self.evicting = True
        try:
            return super().evict(index, freed=freed)
        finally:
            self.evicting = False


@st.composite
def tenants(draw: st.DrawFn, gpus: int, split: bool) -> str:
    kind = draw(st.sampled_from(("kubernetes", "kubernetes", "slurm")))
    lines = ["scheduler:", f"  kind: {kind}", *(["  mig_strategy: mixed"] if split else [])]
    if kind == "slurm":  # Slurm's main scheduler and backfill; no quotas, no preemption
        interval = draw(st.sampled_from(("1s", "30s")))
        return "\n".join([*lines, f"  backfill: {{interval: {interval}, resolution: 1s}}"]) + "\n"
    lines.append("  tenants:")
    for name in ("a", "b"):
        quota = draw(st.integers(1, gpus))
        borrow = draw(st.sampled_from(("null", "0", str(draw(st.integers(1, gpus))))))
        lend = draw(st.sampled_from(("", f", lending_limit: {draw(st.integers(0, quota))}")))
        priority = draw(st.sampled_from(("low", "normal", "high", "critical")))
        lines.append(
            f"    - {{name: {name}, gpus: {quota}, priority: {priority},"
            f" borrowing_limit: {borrow}{lend}}}"
        )
    reclaim = draw(st.sampled_from(("any", "lower_priority", "never")))
    within = draw(st.sampled_from(("lower_priority", "never")))
    lines.append(f"  preemption: {{reclaim: {reclaim}, within_tenant: {within}}}")
    return "\n".join(lines) + "\n"


MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Spec, list[Job], SimPolicy]:
    nodes = draw(st.integers(1, 3))
    split = draw(st.booleans())
    extra = draw(tenants(nodes * 8, split)) + (MIX if split else "")
    group = ", mig: [{gpus: [0, 1, 2], layout: mix}]" if split else ""
    spec = group_spec(nodes, extra, group)
    trace = []
    for i in range(draw(st.integers(3, 14))):
        fraction = draw(st.integers(0, 4)) == 0
        trace.append(
            job(
                f"j{i}",
                draw(st.integers(0, 12)) * 5,  # many jobs arrive at one instant
                draw(st.integers(1, 100)) * 4,
                1 if fraction else draw(st.integers(1, 24)),  # up to 3 nodes, odd sizes too
                milli=draw(st.integers(1, 999)) if fraction else 1000,
                tenant=draw(st.sampled_from(("a", "b", "c"))),  # c is not in the spec
                priority=draw(st.sampled_from(("low", "normal", "high", "critical"))),
            )
        )
    retry = draw(st.sampled_from((0.0, 60.0)))
    interval = draw(st.sampled_from((0.0, 50.0, 1800.0)))
    policy = SimPolicy(checkpoint_interval_s=interval, checkpoint_write_s=10, preempt_retry_s=retry)
    return spec, trace, policy


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_every_replay_ends_and_conserves_gpu_seconds(
    scenario: tuple[Spec, list[Job], SimPolicy],
) -> None:
    spec, trace, policy = scenario
    run, result = replay(spec, trace, policy, cls=Tally)
    assert isinstance(run, Tally)
    never = {n.job for n in result.never_ran}
    finished = {j.id for i, j in enumerate(run.jobs) if i not in run.running}
    assert run.active == 0 and not run.running and not run.queues.buckets
    assert finished | never == {j.id for j in trace}
    for i, j in enumerate(run.jobs):  # each job's kept work adds up to its run time
        assert run.kept[i] == pytest.approx(j.duration_s, abs=1e-6)
    meter = sum(run.by_group.areas(run.end_s).values())
    assert meter == pytest.approx(run.tally_held, rel=1e-9, abs=1e-6)
    hours = result.gpu_hours
    parts = hours["work"] + hours["lost"] + hours["resume_wait"] + hours["unfinished"]
    assert hours["held"] == pytest.approx(parts, abs=1e-5)
    assert hours["held"] == pytest.approx(meter / 3600, abs=1e-5)
    assert all(abs(u) < 1e-9 for u in run.book.usage.values())
    assert all(n.whole_free == n.whole_total and not n.running for n in run.cluster.nodes)


# --- the budget -------------------------------------------------------------------------


class Lying(Book):
    """The old bug's effect: every tenant believes it stays within its quota, so it reclaims."""

    def within_quota(self, tenant: str, share: float) -> bool:
        return tenant in self.quota


class Livelocked(Replay):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.book.__class__ = Lying


def test_a_livelock_is_a_located_error_not_a_hang() -> None:
    spec = group_spec(
        1,
        "scheduler:\n  tenants:\n"
        "    - {name: a, gpus: 4, borrowing_limit: null}\n"
        "    - {name: b, gpus: 4, borrowing_limit: null}\n"
        "  preemption: {reclaim: any, within_tenant: never}\n",
    )
    jobs = [job("x", 0, 100, 8, tenant="a"), job("y", 0, 100, 8, tenant="b")]
    with pytest.raises(LivelockError) as caught:
        replay(spec, jobs, SimPolicy(preempt_retry_s=0), cls=Livelocked)
    message = str(caught.value)
    assert message.startswith("the replay livelocked at t = 0 s: job ")
    assert f"started {STARTS_PER_INSTANT + 1} times at that instant" in message
    assert "(trace line 2, tenant a, 8 GPUs)" in message or "(trace line 3, tenant b" in message
    assert "tenants whose jobs evicted it: " in message


def test_the_preemption_budget_stops_a_replay_that_evicts_too_often() -> None:
    # legitimate preemption (a high job evicts a low one) over a budget set below it
    spec = group_spec(
        1,
        "scheduler:\n  tenants:\n    - {name: t, gpus: 8}\n"
        "  preemption: {within_tenant: lower_priority, reclaim: never}\n",
    )
    jobs = [job("low", 0, 100, 8), job("high", 10, 10, 8, priority="high")]
    _, ok = replay(spec, jobs, SimPolicy(preemptions_per_job=0.5))
    assert ok.preemptions == 1
    with pytest.raises(LivelockError, match=r"evicted by preemption number 1, over the budget"):
        replay(spec, jobs, SimPolicy(preemptions_per_job=0.4))
