"""Jobs that can never run: one verdict per kind of job (`infra.simulate.feasible`).

`never_reasons` decides each job from its GPUs, fraction, tenant, GPU models, CPUs and memory
alone, so it decides each such kind once. A trace that repeats kinds must get, job by job,
the verdict each job gets alone.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.feasible import never_reasons
from infra.simulate.jobs import Job
from infra.topology import expand
from tests.sim_helpers import catalog, group_spec, job

SPEC = group_spec(
    2,
    "scheduler:\n  tenants:\n    - {name: a, gpus: 8, priority: high, borrowing_limit: 4}\n"
    "    - {name: b, gpus: 8, priority: low}\n"
    "    - {name: z, gpus: 0, priority: low, borrowing_limit: 0}\n",
)

JOBS = st.builds(
    lambda gpus, milli, tenant, model, cpu, mem: replace(
        job("j", 0, 1, gpus, milli=milli if gpus == 1 else 1000, tenant=tenant, model=model),
        cpu_milli=cpu,
        memory_mib=mem,
    ),
    st.sampled_from((1, 24)),
    st.sampled_from((250, 1000)),
    st.sampled_from(("a", "z")),
    st.sampled_from((None, "h100-80gb")),
    st.sampled_from((0, 10_000_000)),
    st.sampled_from((0, 10**9)),
)  # two values a field, so kinds repeat and differ in one field


@settings(max_examples=60, deadline=None)
@given(st.lists(JOBS, max_size=30))
def test_each_job_gets_the_verdict_it_gets_alone(jobs: list[Job]) -> None:
    cat = catalog()
    plan = expand(SPEC, cat)
    together = never_reasons(SPEC, plan, cat, jobs)
    alone = {}
    for at, one in enumerate(jobs):
        reason = never_reasons(SPEC, plan, cat, [one]).get(0)
        if reason:
            alone[at] = reason
    assert together == alone


def test_kinds_that_differ_in_one_field_get_their_own_verdicts() -> None:
    cat = catalog()
    plan = expand(SPEC, cat)
    fraction = job("f", 0, 1, 1, milli=250, tenant="z")
    jobs = [
        fraction,
        replace(fraction, milli=1000),  # a whole GPU: more than z's 0, said otherwise
        replace(fraction, tenant="a"),
        replace(fraction, gpu_model="h100-80gb"),
        replace(fraction, tenant="a", cpu_milli=10_000_000),
        replace(fraction, tenant="a", memory_mib=10**9),
    ]
    reasons = never_reasons(SPEC, plan, cat, jobs)
    assert sorted(reasons) == [0, 1, 3, 4, 5]
    assert len(set(reasons.values())) == 5
