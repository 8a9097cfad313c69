"""Preemption tries that surely fail, settled without lifting (`Preemptor._settled_unlifted`).

A try lifts its candidates in batches until the head fits; with every candidate lifted and no
place found, it puts them all back. For a gang whose node groups no freed node can complete
(`gang_fails_once_freed`: not enough wholly free nodes in one SU, say) that is known before
lifting anything, and the try's effects are made directly (`Cluster.lift_and_return`). The
replays, the indexes' orders and every figure must be those of the lifting try.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.build import build_cluster
from infra.simulate.cluster import Allocation, Cluster, Node, whole_part
from infra.simulate.engine import Replay
from infra.simulate.jobs import Job
from infra.simulate.place import find, gang_fails_once_freed
from infra.simulate.policy import SimPolicy
from infra.simulate.preempt import _restores
from infra.spec import Spec
from infra.topology import expand
from tests.sim_helpers import catalog, group_spec, job, replay

MIX = 'mig_layouts: {mix: {profiles: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}}\n'


class Counting(Replay):
    """The engine as it is, counting the tries settled without lifting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settled = 0
        settle = self.preemptor._settled_unlifted

        def counted(job: Job, victims: list[int]) -> bool:
            done = settle(job, victims)
            self.settled += done
            return done

        self.preemptor._settled_unlifted = counted  # type: ignore[method-assign]


class Lifting(Replay):
    """Every try lifts its candidates, as before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.preemptor._settled_unlifted = lambda job, victims: False  # type: ignore[method-assign]


def _spec(nodes: int, su_size: int, tenants: str, split: bool = False) -> Spec:
    extra = f"fabrics: {{compute: {{switch: qm8790, su_size: {su_size}, subnet_manager: ufm}}}}\n"
    extra += f"scheduler:\n  mig_strategy: mixed\n{tenants}" + MIX
    group = ", mig: [{gpus: [0, 1, 2], layout: mix}]" if split else ""
    return group_spec(nodes, extra, group)


def assert_same_replay(fast: Replay, slow: Replay) -> None:
    """Two engines replayed the same trace to the same jobs, meters, quotas and indexes."""
    assert fast.first_start == slow.first_start
    assert fast.end_at == slow.end_at
    assert fast.evictions == slow.evictions
    assert (fast.frag_area, fast.fgd_area) == (slow.frag_area, slow.fgd_area)
    assert fast.book.usage == slow.book.usage
    assert _state(fast.cluster) == _state(slow.cluster)


def _same(spec: Spec, trace: list[Job], policy: SimPolicy) -> Counting:
    fast, fast_result = replay(spec, trace, policy, cls=Counting)
    slow, slow_result = replay(spec, trace, policy, cls=Lifting)
    assert isinstance(fast, Counting)
    assert_same_replay(fast, slow)
    assert fast_result == slow_result
    return fast


TENANTS = (
    "  tenants:\n"
    "    - {name: a, gpus: 48, priority: high}\n"
    "    - {name: b, gpus: 1, priority: low, borrowing_limit: null}\n"
    "  preemption: {reclaim: any, within_tenant: lower_priority}\n"
)


def test_a_gang_no_su_can_hold_settles_without_lifting() -> None:
    # SUs {n0, n1} and {n2, n3}: a1 and b1 share n0, y holds n2, x leaves n1 at t = 1, so one
    # node is free in each SU and a's 16-GPU gang fits neither, even with b's borrowed job
    # lifted (it frees half of n0): the reclaim is settled without lifting, nobody evicted
    spec = _spec(4, 2, TENANTS)
    trace = [
        job("a1", 0, 1000, 4, tenant="a", priority="high"),
        job("b1", 0, 1000, 4, tenant="b", priority="low"),
        job("x", 0, 1, 8, tenant="a", priority="high"),
        job("y", 0, 1000, 8, tenant="a", priority="high"),
        job("a4", 2, 1000, 16, tenant="a", priority="high"),
    ]
    fast = _same(spec, trace, SimPolicy(preempt_retry_s=0))
    assert fast.settled > 0
    assert fast.preemptions == 0
    assert fast.first_start[4] == 1000  # when a1, b1 and y end


@st.composite
def cases(draw: st.DrawFn) -> tuple[Spec, list[Job], SimPolicy]:
    """A few nodes in small SUs, two tenants that preempt, gangs and smaller jobs."""
    nodes = draw(st.integers(4, 6))
    su_size = draw(st.integers(2, 3))
    rows = []
    for name in ("a", "b"):
        quota = draw(st.integers(1, nodes * 8))
        borrow = draw(st.sampled_from(("null", "null", "0", str(draw(st.integers(1, nodes * 8))))))
        priority = draw(st.sampled_from(("low", "normal", "high", "critical")))
        rows.append(
            f"    - {{name: {name}, gpus: {quota}, priority: {priority}, "
            f"borrowing_limit: {borrow}}}\n"
        )
    reclaim = draw(st.sampled_from(("any", "any", "lower_priority", "never")))
    within = draw(st.sampled_from(("lower_priority", "lower_priority", "never")))
    tenants = (
        "  tenants:\n" + "".join(rows) + f"  preemption: {{reclaim: {reclaim}, "
        f"within_tenant: {within}}}\n"
    )
    spec = _spec(nodes, su_size, tenants, split=draw(st.integers(0, 3)) == 0)
    trace = []
    for i in range(draw(st.integers(3, 30))):
        kind = draw(st.integers(0, 5))  # 0, 1: a gang later; 2, 3: holds a node or leaves it
        gpus = draw(st.sampled_from((16, 24))) if kind < 2 else draw(st.sampled_from((2, 4, 8)))
        milli = draw(st.sampled_from((250, 500))) if kind == 5 else 1000
        trace.append(
            job(
                f"j{i}",
                draw(st.integers(2, 20)) * 5 if kind < 2 else draw(st.integers(0, 2)),
                draw(st.integers(1, 60)) * 10 if kind != 3 else draw(st.integers(1, 5)),
                1 if milli < 1000 else gpus,
                milli=milli,
                tenant=draw(st.sampled_from(("a", "b", "c"))),  # c: no quota
                priority=draw(st.sampled_from(("low", "normal", "high", "critical"))),
            )
        )
    policy = SimPolicy(
        preempt_retry_s=draw(st.sampled_from((0.0, 0.0, 30.0))),
        checkpoint_write_s=10,
        placement=draw(st.sampled_from(("best-fit", "first-fit"))),
    )
    return spec, trace, policy


@settings(max_examples=60, deadline=None)
@given(cases())
def test_settling_replays_exactly_as_lifting(case: tuple[Spec, list[Job], SimPolicy]) -> None:
    _same(*case)


def _state(cluster: Cluster) -> list[Any]:
    """Every free count, stamp and index of ``cluster``, with the indexes' orders."""
    nodes = [(n.whole_free, n.running, n.stamp, dict(n.slices_free), n.open) for n in cluster.nodes]
    groups = [
        (
            [list(d) for d in g.by_free],
            {s: list(d) for s, d in g.by_slice.items()},
            {su: list(d) for su, d in g.su_full.items()},
            g.full,
            g.su_counts,
        )
        for g in cluster.groups.values()
    ]
    return [nodes, groups]


def _busy(nodes: int, split: bool, sizes: list[int]) -> tuple[Cluster, list[Allocation]]:
    """A cluster of ``nodes`` in SUs of 2 holding a job of each size where it fits."""
    extra = "fabrics: {compute: {switch: qm8790, su_size: 2, subnet_manager: ufm}}\n"
    extra += "scheduler: {mig_strategy: mixed}\n" + MIX if split else ""
    group = ", mig: [{gpus: [0, 1, 2, 3], layout: mix}]" if split else ""
    spec = group_spec(nodes, extra, group)
    cluster = build_cluster(spec, expand(spec, catalog()), catalog())
    taken = []
    for i, gpus in enumerate(sizes):
        alloc = find(cluster, job(f"r{i}", 0, 1, gpus))
        if alloc is not None:
            cluster.take(alloc)
            taken.append(alloc)
    return cluster, taken


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 6),
    st.booleans(),
    st.lists(st.sampled_from((1, 2, 3, 4, 6, 8, 16)), max_size=14),
    st.lists(st.integers(0, 13), max_size=8),
)
def test_lift_and_return_leaves_what_giving_and_taking_leave(
    nodes: int, split: bool, sizes: list[int], picks: list[int]
) -> None:
    cluster, taken = _busy(nodes, split, sizes)
    lifted = [taken[p] for p in dict.fromkeys(picks) if p < len(taken)]
    twin = copy.deepcopy(cluster)
    heard: list[int] = []
    heard_twin: list[int] = []

    def hear(into: list[int]) -> Any:
        def watch(node: Node) -> None:
            into.append(node.index)

        return watch

    cluster.watch, twin.watch = hear(heard), hear(heard_twin)
    for alloc in lifted:
        twin.give(alloc)
    for alloc in lifted:
        twin.take(alloc)
    cluster.lift_and_return(lifted)
    assert _state(cluster) == _state(twin)
    assert heard == heard_twin


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 6),
    st.booleans(),
    st.lists(st.sampled_from((1, 2, 4, 8, 16)), max_size=14),
    st.lists(st.integers(0, 13), max_size=8),
    st.sampled_from((16, 24, 32, 12)),
)
def test_a_gang_said_to_fail_finds_no_place_once_freed(
    nodes: int, split: bool, sizes: list[int], picks: list[int], gpus: int
) -> None:
    cluster, taken = _busy(nodes, split, sizes)
    lifted = {p: taken[p] for p in picks if p < len(taken)}
    wanted = job("w", 0, 1, gpus)
    fails = gang_fails_once_freed(cluster, wanted, (part for a in lifted.values() for part in a))
    for alloc in lifted.values():
        cluster.give(alloc)
    if fails:
        assert find(cluster, wanted) is None
    if gpus % 8:  # a remainder on one more node: not answered
        assert not fails


def test_a_gang_said_to_fail_is_said_so_when_only_its_su_lacks() -> None:
    # 4 nodes in SUs of 2: one node free in each SU, so 2 free nodes but no SU holds 16 GPUs
    cluster, _ = _busy(4, False, [])
    taken = [(whole_part(cluster.nodes[n], 8),) for n in (1, 3)]
    for alloc in taken:
        cluster.take(alloc)
    assert sum(len(nodes) for nodes in cluster.groups["gpu"].su_full.values()) == 2
    assert find(cluster, job("w", 0, 1, 16)) is None
    assert gang_fails_once_freed(cluster, job("w", 0, 1, 16), ())
    # with one of the held nodes freed, its SU has two free nodes: it may fit
    assert not gang_fails_once_freed(cluster, job("w", 0, 1, 16), taken[0])


def _lifted_and_returned(usage: dict[str, float], shares: list[float]) -> dict[str, float]:
    """``usage`` after each share is taken off tenant ``t`` and then added back, in order."""
    out = dict(usage)
    for sign in (-1, +1):
        for share in shares:
            out["t"] += sign * share
    return out


def test_quota_additions_are_skipped_only_where_they_restore_usage_bit_for_bit() -> None:
    assert not _restores({"t": 0.1}, [0.7])  # 0.1 - 0.7 + 0.7 is not 0.1
    assert _lifted_and_returned({"t": 0.1}, [0.7]) != {"t": 0.1}
    assert not _restores({"t": 3 / 7}, [1 / 7, 2 / 7, 5 / 7])
    assert not _restores({"t": 8.0, "u": 0.5}, [8.0])  # another tenant's fraction
    assert not _restores({"t": 2.0**60}, [8.0])
    assert _restores({"t": 48.0, "u": 0.0}, [8.0, 16.0, 4.0])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 10_000).map(float), max_size=6),
    st.integers(0, 100_000).map(float),
)
def test_whole_gpu_shares_restore_usage_bit_for_bit(shares: list[float], used: float) -> None:
    assert _restores({"t": used}, shares)
    assert _lifted_and_returned({"t": used}, shares) == {"t": used}
