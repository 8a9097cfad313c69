"""The event queue: the trace's submits beside the heap pop as if they had been pushed first.

`Events.arrive` keeps the submits in a sorted array (a heap of a million submits cost a cache
miss per level of every pop); merged with the heap, the events must come out in the order the
one heap gave, ``(time, kind, sequence)`` with the submits' sequences the lowest, through both
`Events.pop` and `Events.pop_at`, while handlers push more events as they go.
"""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from infra.simulate.state import FINISH, MIG, SCHED, SUBMIT, Events

TIMES = st.sampled_from((0.0, 1.0, 2.5, 3.0, 7.0))
KINDS = st.sampled_from((FINISH, MIG, SUBMIT + 1, SCHED))  # every kind but SUBMIT


class OneHeap:
    """The former queue: every event, submits first, in one heap."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, tuple[int, ...]]] = []
        self.seq = 0

    def push(self, at: float, kind: int, *payload: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, kind, self.seq, payload))

    def pop(self) -> tuple[float, int, tuple[int, ...]]:
        at, kind, _, payload = heapq.heappop(self.heap)
        return at, kind, payload


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TIMES, max_size=12),
    st.lists(st.tuples(TIMES, KINDS), max_size=8),
    st.lists(st.tuples(st.integers(0, 30), TIMES, KINDS), max_size=10),
    st.booleans(),
)
def test_submits_beside_the_heap_pop_as_one_heap_did(
    submits: list[float],
    timers: list[tuple[float, int]],
    later: list[tuple[int, float, int]],
    by_time: bool,
) -> None:
    """``later``: after the n-th pop, push an event at least as late as the one popped."""
    new, old = Events(), OneHeap()
    for index, at in enumerate(submits):
        new.arrive(at, index)
        old.push(at, SUBMIT, index)
    new.seal()
    for number, (at, kind) in enumerate(timers):
        new.push(at, kind, 100 + number)
        old.push(at, kind, 100 + number)
    popped_new, popped_old = [], []
    while old.heap:
        assert new
        if by_time:  # as the replay's loop reads them: every event of one time, then the next
            at = new.next_at()
            event = new.pop_at(at)
            assert event is not None
            got = (at, *event)
        else:
            got = new.pop()
        popped_new.append(got)
        popped_old.append(old.pop())
        for n, delay, kind in later:
            if n == len(popped_old):
                when = popped_old[-1][0] + delay
                new.push(when, kind, 200 + n)
                old.push(when, kind, 200 + n)
    assert not new
    assert new.next_at() == float("inf")
    assert popped_new == popped_old


def test_pop_at_leaves_a_later_event_where_it_is() -> None:
    events = Events()
    events.arrive(5.0, 0)
    events.seal()
    events.push(3.0, FINISH, 1)
    assert events.pop_at(5.0) is None  # the finish at 3 comes first
    assert events.pop_at(3.0) == (FINISH, (1,))
    assert events.pop_at(3.0) is None
    assert events.next_at() == 5.0
    assert events.pop_at(5.0) == (SUBMIT, (0,))
    assert not events


@settings(max_examples=100, deadline=None)
@given(st.lists(TIMES, max_size=12))
def test_arriving_all_at_once_is_arriving_one_by_one(submits: list[float]) -> None:
    one, bulk = Events(), Events()
    for index, at in enumerate(submits):
        one.arrive(at, index)
    bulk.arrive_all(submits)
    one.seal()
    bulk.seal()
    assert (one.arrivals_at, one.arrivals) == (bulk.arrivals_at, bulk.arrivals)
