"""Scheduling passes that would try no bucket, not made (`Replay.calm`).

After a pass every waiting bucket is blocked; until a job is requeued or the buckets are
unblocked, a pass tries only the buckets whose preemption retry is due, and none is before
``preempt_retry_s`` after the earliest last try. The engine skips such passes; replays must
be those of the engine that makes every pass.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from infra.simulate.engine import Replay
from infra.simulate.jobs import Job
from infra.simulate.policy import SimPolicy
from infra.spec import Spec
from tests.sim_helpers import job, replay
from tests.test_simulate_settle import TENANTS, _spec, assert_same_replay, cases


class Counting(Replay):
    """The engine as it is, counting the passes it makes and those it skips."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = self.made = 0

    def _pass(self) -> bool:
        self.calls += 1
        return super()._pass()

    def _ready(self) -> Any:
        self.made += 1
        return super()._ready()


class Scanning(Replay):
    """Every pass is made, as before."""

    def _pass(self) -> bool:
        self.calm = (-1, 0.0)
        return super()._pass()


def _same(spec: Spec, trace: list[Job], policy: SimPolicy) -> Counting:
    fast, fast_result = replay(spec, trace, policy, cls=Counting)
    slow, slow_result = replay(spec, trace, policy, cls=Scanning)
    assert isinstance(fast, Counting)
    assert_same_replay(fast, slow)
    assert fast.tried_preempt == slow.tried_preempt
    assert fast_result == slow_result
    return fast


@settings(max_examples=40, deadline=None)
@given(cases())
def test_skipping_calm_passes_replays_exactly_as_every_pass(
    case: tuple[Spec, list[Job], SimPolicy],
) -> None:
    spec, trace, policy = case
    _same(spec, trace, policy)
    _same(spec, trace, SimPolicy(preempt_retry_s=30.0, placement=policy.placement))


def test_a_gang_waiting_retries_preemption_once_a_retry_and_skips_the_passes_between() -> None:
    # a's gang waits for the whole cluster; b's borrowed job may be reclaimed but that is not
    # enough: each retry finds nothing. Submits every 5 s between retries make passes that
    # would try nothing (the gang blocked, its retry not due), and are skipped
    spec = _spec(4, 2, TENANTS)
    trace = [
        job("a1", 0, 1000, 8, tenant="a", priority="high"),
        job("b1", 0, 1000, 4, tenant="b", priority="low"),
        job("gang", 1, 100, 32, tenant="a", priority="high"),
        *(job(f"s{i}", 2 + 5 * i, 1000, 8, tenant="a", priority="high") for i in range(40)),
    ]
    fast = _same(spec, trace, SimPolicy(preempt_retry_s=60.0))
    assert fast.made < fast.calls
    assert fast.first_start[2] is not None
