"""Admission searches skipped as sure to fail again (`infra.simulate.refind`) change nothing.

With `FailedSearches.check` on, every skipped search is run anyway and must find no place;
and a replay that skips gives exactly the starts, ends, evictions, meters, indexes and
result of one that searches every time. Random small traces (hypothesis) over SUs, two
groups, MIG slices and scheduled MIG changes, gangs with a remainder, fractions, quota,
preemption, and the three indexed placements.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.engine import Replay
from infra.simulate.jobs import Job
from infra.simulate.policy import SimPolicy
from infra.simulate.refind import FailedSearches
from infra.spec import Spec
from tests.sim_helpers import group_spec, job, replay, spec_of
from tests.test_simulate_settle import _state

MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'
HOURLY = (
    "mig: mix, mig_schedule: {timezone: UTC, drain_timeout: 5m, changes: "
    '[{at: "0 * * * *", mig: disabled}, {at: "30 * * * *", mig: mix}]}'
)


class Searching(Replay):
    """A replay whose admission searches every time (nothing is skipped)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.searches.failed = _Never()


class _Never(dict[Any, int]):
    """A record of failed searches that remembers none."""

    def __setitem__(self, key: Any, value: int) -> None:
        pass


@pytest.fixture(autouse=True)
def checked() -> Iterator[None]:
    FailedSearches.check = True
    yield
    FailedSearches.check = False


def spec(nodes: int, su_size: int, tenants: str, mig: int) -> Spec:
    """``nodes`` DGX A100 in SUs of ``su_size``, and a second group of 2 (MIG: 1 split, 2 by
    the hour)."""
    infer = ", " + ("mig: [{gpus: [0, 1, 2], layout: mix}]" if mig == 1 else HOURLY)
    return spec_of(
        f"node_groups:\n  - {{name: gpu, node: dgx-a100-640gb, count: {nodes}, "
        f'hostname: "n{{index:02d}}"}}\n'
        f'  - {{name: inf, node: dgx-a100-640gb, count: 2, hostname: "i{{index:02d}}"'
        f"{infer if mig else ''}}}\n"
        f"fabrics: {{compute: {{switch: qm8790, su_size: {su_size}, subnet_manager: ufm}}}}\n"
        f"scheduler:\n  mig_strategy: mixed\n{tenants}{MIX}"
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[Spec, list[Job], SimPolicy]:
    """A few nodes in small SUs, two tenants that may preempt, gangs and smaller jobs."""
    rows = []
    for name in ("a", "b"):
        quota = draw(st.integers(1, 64))
        borrow = draw(st.sampled_from(("null", "0", "8")))
        priority = draw(st.sampled_from(("low", "normal", "high")))
        rows.append(f"    - {{name: {name}, gpus: {quota}, priority: {priority}, ")
        rows.append(f"borrowing_limit: {borrow}}}\n")
    reclaim = draw(st.sampled_from(("any", "never")))
    tenants = "  tenants:\n" + "".join(rows)
    tenants += f"  preemption: {{reclaim: {reclaim}, within_tenant: lower_priority}}\n"
    trace = []
    for i in range(draw(st.integers(3, 40))):
        kind = draw(st.integers(0, 3))  # 0: a gang (some with a remainder), 3: a fraction
        gpus = draw(st.sampled_from((12, 16, 20, 24) if kind == 0 else (1, 2, 3, 4, 8)))
        trace.append(
            job(
                f"j{i}",
                draw(st.integers(0, 60)) * 60,
                draw(st.integers(1, 90)) * 60,
                1 if kind == 3 else gpus,
                milli=draw(st.sampled_from((250, 500))) if kind == 3 else 1000,
                tenant=draw(st.sampled_from(("a", "b", "c"))),  # c: no quota
                priority=draw(st.sampled_from(("low", "normal", "high"))),
            )
        )
    policy = SimPolicy(
        preempt_retry_s=draw(st.sampled_from((0.0, 60.0))),
        checkpoint_write_s=10,
        placement=draw(st.sampled_from(("best-fit", "first-fit", "random"))),
        seed=draw(st.integers(0, 3)),
    )
    nodes, su_size = draw(st.integers(3, 6)), draw(st.integers(2, 3))
    return spec(nodes, su_size, tenants, draw(st.integers(0, 2))), trace, policy


def same(spec: Spec, trace: list[Job], policy: SimPolicy) -> Replay:
    """Replay with and without skipping; assert every outcome equal; the skipping one."""
    fast, fast_result = replay(spec, trace, policy)
    slow, slow_result = replay(spec, trace, policy, cls=Searching)
    assert slow.searches.skipped == 0
    assert fast.first_start == slow.first_start
    assert fast.end_at == slow.end_at
    assert fast.evictions == slow.evictions
    assert (fast.frag_area, fast.fgd_area) == (slow.frag_area, slow.fgd_area)
    assert _state(fast.cluster) == _state(slow.cluster)
    assert fast_result == slow_result
    return fast


@settings(max_examples=80, deadline=None)
@given(cases())
def test_a_skipped_search_would_have_failed_and_changes_nothing(
    case: tuple[Spec, list[Job], SimPolicy],
) -> None:
    same(*case)


def test_a_gang_waiting_for_whole_nodes_skips_while_only_partial_nodes_free() -> None:
    # a 5-GPU job holds each of the four nodes for an hour; the one-GPU jobs beside them end
    # one by one, freeing GPUs no node can make whole: the 16-GPU gang's search is skipped
    # after each end, and it starts when the 5-GPU jobs end
    tenants = "  tenants:\n    - {name: a, gpus: 64}\n"
    trace = [job(f"h{i}", 0, 3600, 5, tenant="a") for i in range(4)]
    trace += [job(f"s{i}", 0, 60 * (i + 1), 1, tenant="a") for i in range(12)]
    trace.append(job("gang", 10, 600, 16, tenant="a"))
    fast = same(spec(2, 2, tenants, 0), trace, SimPolicy())
    assert fast.searches.skipped >= 11
    assert fast.first_start[-1] == 3600


def test_a_fraction_waiting_for_a_slice_searches_again_when_one_is_freed() -> None:
    # every GPU split (two slices of 2 or 3 compute slices each, 16 on the node): the 17th
    # quarter GPU waits with no whole GPU anywhere, and takes the first slice given back;
    # a give of slices alone leaves a node's free whole GPUs at 0, the fraction's need
    mig = "scheduler: {mig_strategy: mixed}\n" + MIX
    trace = [job(f"f{i:02d}", 0, 100 + i, 1, milli=250) for i in range(17)]
    fast = same(group_spec(1, mig, ", mig: mix"), trace, SimPolicy())
    assert fast.first_start[-1] == 100
