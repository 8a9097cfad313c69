"""The replay's event budget: a livelock becomes a located error, never a hang.

A replay ends when time runs past every job (`infra.simulate.engine`), but evictions happen
without time passing: two tenants that evicted each other at one instant once kept the loop
at that instant for good (a 12-GPU job was admitted on 12 GPUs and charged 16).
Admission and charge are one number now (`infra.simulate.cluster.held`), and
`tests/test_simulate_termination.py` checks replays over arbitrary sizes, tenants,
priorities and preemption settings end; this budget guards the rest. A job may start at most
`STARTS_PER_INSTANT` times at one instant (each restart at one instant needs an eviction by
a job of strictly higher rank, or a reclaim that lowers what tenants borrow, and there are 16
rank classes), and preemption may evict at most `SimPolicy.preemptions_per_job` times the
trace's jobs in all. Past either, `LivelockError` names the time, the job, its trace line
and the tenants that evicted it. It is not a `RailplanError`: a livelock is a bug in the
scheduler model, not in the input, so the CLI reports it as an internal error (exit 3).
"""

from __future__ import annotations

from typing import Protocol

from infra.simulate.jobs import Job

__all__ = ["STARTS_PER_INSTANT", "EventBudget", "LivelockError"]

STARTS_PER_INSTANT = 32
"""Most starts of one job at one instant (twice the 16 tenant x job priority classes)."""


class LivelockError(RuntimeError):
    """The replay exceeded its event budget: a scheduler-model livelock (a railplan bug)."""


class BudgetHost(Protocol):
    """What the budget reads of the replay (`infra.simulate.engine.Replay`)."""

    jobs: list[Job]


class EventBudget:
    """Counts starts per job at the current instant and preemptions overall."""

    def __init__(self, host: BudgetHost, preemptions_per_job: float) -> None:
        self.host = host
        self.limit = int(preemptions_per_job * len(host.jobs))
        self.instant = float("-inf")
        self.starts: dict[int, int] = {}  # job -> starts at `instant`
        self.evicted_by: dict[int, dict[str, None]] = {}  # job -> tenants that evicted it
        self.preemptions = 0

    def started(self, index: int, now: float) -> None:
        """Job ``index`` starts at ``now``; raises past `STARTS_PER_INSTANT` at one instant."""
        if now != self.instant:
            self.instant, self.starts = now, {}
            self.evicted_by.clear()
        count = self.starts.get(index, 0) + 1
        self.starts[index] = count
        if count > STARTS_PER_INSTANT:
            raise LivelockError(self._where(index, now, f"started {count} times at that instant"))

    def preempted(self, victim: int, by_tenant: str, now: float) -> None:
        """``victim`` was evicted by a job of ``by_tenant``; raises past the trace's budget."""
        self.evicted_by.setdefault(victim, {})[by_tenant] = None
        self.preemptions += 1
        if self.preemptions > self.limit:
            what = (
                f"was evicted by preemption number {self.preemptions}, over the budget of"
                f" {self.limit} for {len(self.host.jobs)} jobs"
            )
            raise LivelockError(self._where(victim, now, what))

    def _where(self, index: int, now: float, what: str) -> str:
        job = self.host.jobs[index]
        by = ", ".join(self.evicted_by.get(index, {})) or "none at this instant"
        return (
            f"the replay livelocked at t = {now:g} s: job {job.id} (trace line {job.line},"
            f" tenant {job.tenant}, {job.gpus} GPUs) {what}; tenants whose jobs evicted it: {by}"
        )
