"""The slurmctld threads' clocks (`infra.simulate.agent_clock`), worked out by hand."""

from __future__ import annotations

import pytest

from infra.simulate.agent_clock import AgentClock


def test_with_nothing_seen_the_thread_wakes_once_a_second_from_the_first_submission() -> None:
    clock = AgentClock((), origin=5.0)
    assert clock.next_at(0.0) == 6.0  # never before a second after the origin
    assert clock.next_at(6.0) == 6.0
    assert clock.next_at(6.2) == 7.0


def test_between_two_wake_ups_seen_the_sleeps_are_evenly_spaced() -> None:
    clock = AgentClock((10.0, 13.006), origin=0.0)  # three sleeps of 1.002 s
    assert clock.next_at(10.5) == pytest.approx(11.002)
    assert clock.next_at(12.1) == pytest.approx(13.006)  # never past the next one seen
    assert clock.next_at(9.5) == pytest.approx(10.0)  # before the first: back from it
    assert clock.next_at(8.5) == pytest.approx(10.0 - 1.002)


def test_a_long_gap_counts_its_sleeps_at_the_length_the_short_gaps_show() -> None:
    # a thread whose sleeps last 1.0018 s (as slurmctld's loop did), seen at 0, 1.0018 and
    # 2.0036, then again 300 sleeps on: 300.54 s later. Counted in whole seconds that gap
    # would hold 301 sleeps and put the wake-ups in its middle about 0.27 s off.
    sleep = 1.0018
    seen = (0.0, sleep, 2 * sleep, 2 * sleep + 300 * sleep)
    clock = AgentClock(seen, origin=0.0)
    assert clock.sleep == pytest.approx(sleep)
    middle = 2 * sleep + 150 * sleep
    assert clock.next_at(middle - 0.01) == pytest.approx(middle)
    assert clock.next_at(seen[-1] + 0.5) == pytest.approx(seen[-1] + sleep)  # after: on
