"""When a slurmctld thread that sleeps a second at a time wakes (`infra.simulate.slurm`).

The backfill agent and the background loop both sleep about a second between checks
(`_my_sleep`, `sleep(1)`), and each sleep ends a little late, by an amount that depends on the machine and its load: on the
test machine the backfill agent's wake-ups slid 0.6 to 2.7 ms a second, so over a
quarter-hour they passed a whole second boundary twice. A fixed phase and period cannot
follow that, and which side of a second a wake-up falls on decides Slurm's whole-second
checks (`bf_interval`, `batch_sched_delay`). So a clock is a list of wake-ups seen in a
running daemon's log, in trace seconds, with evenly spaced wake-ups between two that were
seen and one sleep apart before the first and after the last; with none seen, once a
second from ``origin``. A sleep's length is measured on the gaps of a minute or less,
where the number of sleeps in a gap is plain; that length counts the sleeps of the longer
gaps (the background loop's main passes were once five minutes apart in a log: counted in
whole seconds, that gap put its middle wake-ups 80 ms early).
Which wake-ups run a cycle or a pass is still the model's decision: the clock says only
when the thread looks.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

SLEEP_S = 1.0
"""How long the threads sleep between two checks (Slurm 22.05's backfill agent after a
skipped check, and the background loop)."""

SHORT_GAP_S = 60.0
"""Gaps between seen wake-ups up to this long measure a sleep's length: at the drift seen
(under 3 ms a second) they hold fewer than half a second of it, so their sleeps count
plainly."""


class AgentClock:
    """The wake-ups of one thread: through ``seen`` (trace seconds), else from ``origin``."""

    def __init__(self, seen: Sequence[float], origin: float) -> None:
        self.seen = sorted(seen) or [origin + SLEEP_S]
        self.earliest = -math.inf if seen else origin + SLEEP_S  # none seen: from origin on
        self.sleep = _sleep_length(self.seen)
        gaps = [b - a for a, b in itertools.pairwise(self.seen)]
        self.periods = [gap / max(1, round(gap / self.sleep)) for gap in gaps]

    def next_at(self, after: float) -> float:
        """The first wake-up at or after trace time ``after``."""
        after = max(after, self.earliest)
        seen = self.seen
        first, last = seen[0], seen[-1]
        if after <= first:
            return first - math.floor((first - after) / self.sleep + 1e-9) * self.sleep
        if after > last:
            return last + math.ceil((after - last) / self.sleep - 1e-9) * self.sleep
        i = bisect.bisect_left(seen, after) - 1  # seen[i] < after <= seen[i + 1]
        period = self.periods[i]
        return min(seen[i + 1], seen[i] + math.ceil((after - seen[i]) / period - 1e-9) * period)


def _sleep_length(seen: Sequence[float]) -> float:
    """A sleep's mean length over the gaps of up to `SHORT_GAP_S` between wake-ups seen."""
    short = [b - a for a, b in itertools.pairwise(seen) if SLEEP_S / 2 < b - a <= SHORT_GAP_S]
    sleeps = sum(round(gap / SLEEP_S) for gap in short)
    return sum(short) / sleeps if sleeps else SLEEP_S
