"""Backfill's view of running jobs, kept as jobs start and end (`infra.simulate.slurm_running`).

The view must be the one a walk over every running job gives, to the bit: hypothesis draws
Slurm replays (odd sizes, fractions, epilogs, time limits, a MIG change that closes and
reopens nodes) and every view backfill asks for is compared with that walk, kept here as it
was. And the work must not grow with the running jobs per plan: each running job's end is
worked out once, not once per plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate import slurm
from infra.simulate.cluster import GroupIndex
from infra.simulate.jobs import Job
from infra.simulate.slurm import SlurmScheduler, time_limit_s
from infra.simulate.slurm_running import RunningView
from infra.simulate.slurm_willrun import RunningEnd, mask_of
from tests.sim_helpers import group_spec, job, replay

SLURM = "scheduler: {kind: slurm}\n"
MIG = (
    'mig_layouts: {small: {profiles: {"1g.10gb": 7}}}\n'
    "scheduler: {kind: slurm, mig_strategy: mixed}\n"
)
MIG_GROUP = (
    ", mig: small, mig_schedule: {timezone: UTC, drain_timeout: 10m, "
    'changes: [{at: "0 1 * * *", mig: disabled}]}'
)


def from_scratch(sched: SlurmScheduler, group: GroupIndex) -> RunningView:
    """The view as backfill worked it out for every plan before it was kept up to date."""
    host = sched.host
    free = {n.index: n.whole_total for n in host.cluster.nodes if n.group == group.name and n.open}
    ends: list[tuple[int, int, RunningEnd]] = []
    completing: set[int] = set()
    for index, run in host.running.items():
        job = host.jobs[index]
        parts = tuple((part.node, part.whole) for part in run.alloc if part.node in free)
        if job.epilog_s and run.work_from_s + job.duration_s - job.epilog_s <= host.now:
            completing.update(node for node, _ in parts)
            continue
        for node, whole in parts:
            free[node] -= whole
        end = sched._wall(run.started_s) + round(time_limit_s(job))
        ends.append((end, index, (end, parts, mask_of(node for node, _ in parts))))
    ends.sort(key=lambda item: item[:2])
    return free, [running for _, _, running in ends], frozenset(completing)


def _checked(calls: list[int]) -> Callable[[SlurmScheduler, GroupIndex], RunningView]:
    kept = SlurmScheduler._running_on

    def running_on(self: SlurmScheduler, group: GroupIndex) -> RunningView:
        view = kept(self, group)
        old = from_scratch(self, group)
        assert view == old
        assert list(view[0]) == list(old[0])  # plan order: first fit reads it
        calls.append(len(view[1]))
        return view

    return running_on


@st.composite
def slurm_jobs(draw: st.DrawFn, count: int = 30) -> list[Job]:
    out = []
    for i in range(draw(st.integers(1, count))):
        fraction = draw(st.integers(0, 5)) == 0
        gpus = 1 if fraction else draw(st.integers(1, 24))
        run_s = draw(st.integers(1, 4000))
        limit = draw(st.one_of(st.none(), st.integers(run_s, 3 * run_s + 120)))
        epilog = draw(st.sampled_from((0.0, 0.0, 1.0, 7.5, 30.0)))
        out.append(
            replace(
                job(
                    f"j{i}",
                    draw(st.integers(0, 7000)),
                    run_s,
                    gpus,
                    milli=500 if fraction else 1000,
                ),
                limit_s=None if limit is None else float(limit),
                epilog_s=min(epilog, run_s / 2),
            )
        )
    return out


def _the_kept_view_is_the_walk_from_scratch(jobs: list[Job], nodes: int, mig: bool) -> None:
    calls: list[int] = []
    spec = group_spec(nodes, MIG, MIG_GROUP) if mig else group_spec(nodes, SLURM)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SlurmScheduler, "_running_on", _checked(calls))
        replay(spec, jobs)


# A checked replay is about 0.1 s of CPU: `make test` replays the first 20 fixed examples,
# `make test-slow` (and CI) 60, and `make fuzz` both with fresh random examples.
_REPLAYS = given(slurm_jobs(), st.sampled_from((3, 5)), st.booleans())
test_the_kept_view_is_the_walk_from_scratch = settings(max_examples=20, deadline=None)(
    _REPLAYS(_the_kept_view_is_the_walk_from_scratch)
)
test_the_kept_view_is_the_walk_from_scratch_60_examples = pytest.mark.slow(
    settings(max_examples=60, deadline=None)(_REPLAYS(_the_kept_view_is_the_walk_from_scratch))
)


def test_the_checked_replays_reach_views_with_many_running_jobs_and_a_mig_change() -> None:
    # the property above is only worth something if its replays plan behind running jobs
    # and drain nodes: one drawn by hand that does both
    calls: list[int] = []
    jobs = [job(f"s{i}", i, 5000, 1) for i in range(6)] + [job("big", 10, 600, 16)]
    jobs += [replace(job("e", 20, 400, 1), epilog_s=30.0), job("f", 3000, 300, 2)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SlurmScheduler, "_running_on", _checked(calls))
        _, result = replay(group_spec(2, MIG, MIG_GROUP), jobs)
    assert max(calls) >= 6
    assert result.repartitions


def test_each_running_jobs_end_is_worked_out_once_not_once_per_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 40 one-GPU jobs run for a long time on 6 nodes while a 48-GPU job waits: backfill plans
    # the waiting jobs every cycle; from scratch that re-read all 40 running jobs' limits per
    # plan (40,701 calls here for 12,455 plans), kept it reads each once
    counted: list[Job] = []
    plans: list[int] = []

    def limit(job: Job) -> float:
        counted.append(job)
        return time_limit_s(job)

    backfill_job = SlurmScheduler._backfill_job

    def counting(self: SlurmScheduler, *args: Any) -> bool:
        plans.append(1)
        return backfill_job(self, *args)

    monkeypatch.setattr(slurm, "time_limit_s", limit)
    monkeypatch.setattr(SlurmScheduler, "_backfill_job", counting)
    jobs = [job(f"s{i}", i, 20000, 1) for i in range(40)] + [job("big", 50, 600, 48)]
    jobs += [job(f"w{i}", 60 + 45 * i, 900, 8) for i in range(30)]
    run, _ = replay(group_spec(6, SLURM), jobs)
    assert run.starts == len(jobs)
    assert len(plans) > 50
    assert len(counted) <= run.starts + len(plans)
