"""Workload inflation: how full can the cluster get? The FGD paper's procedure.

Weng et al. (ATC '23, section 6.1; their simulator's ``TunePodsByNodeTotalResource``) take
the trace's tasks in a seeded random order and then draw more from it, uniformly with
replacement, until the tasks ask for ``factor`` times the cluster's GPUs (a draw that would
pass it is not taken); when the trace alone asks for more, random tasks are dropped until
it does not. Nothing departs: every task arrives one second after the one before and runs
longer than the replay, which ends at the last arrival (`SimPolicy.horizon_s`). What the
cluster then holds is the answer: `Inflation` (the paper's Fig. 9a reads the share of GPUs
the placed tasks ask for, at 130 % of the capacity requested).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from infra.simulate.jobs import MILLI_WHOLE, Job, Trace

__all__ = ["Inflation", "inflate"]


@dataclass(frozen=True, slots=True)
class Inflation:
    """An inflated replay's outcome, in GPUs (fractions as their thousandths of one).

    ``requested_gpus`` is what the drawn jobs ask for, ``allocated_gpus`` what the placed
    ones ask for (the paper's allocation), ``held_gpus`` what they hold (a fraction on an
    unshared GPU holds all of it); ``jobs`` drawn and ``placed``; ``allocation`` is
    ``allocated_gpus`` over the cluster's GPUs.
    """

    factor: float
    jobs: int
    placed: int
    requested_gpus: float
    allocated_gpus: float
    held_gpus: float
    allocation: float

    def as_json(self) -> dict[str, float]:
        """The JSON object (`railplan simulate --inflate`)."""
        return {
            "factor": self.factor,
            "jobs": self.jobs,
            "placed": self.placed,
            "requested_gpus": round(self.requested_gpus, 3),
            "allocated_gpus": round(self.allocated_gpus, 3),
            "held_gpus": round(self.held_gpus, 3),
            "allocation": round(self.allocation, 6),
        }


def _asked(job: Job) -> int:
    """Thousandths of a GPU the job asks for."""
    return job.gpus * job.milli


def inflate(trace: Trace, gpus: int, factor: float, seed: int) -> Trace:
    """``trace``'s jobs shuffled, then drawn until they ask for ``factor`` x ``gpus`` GPUs.

    Copies are named ``<id>~<k>`` (the k-th draw); every job arrives a second after the one
    before and runs for as many seconds as there are jobs (so none ends before the last
    arrives).
    """
    rng = random.Random(seed)
    jobs = list(trace.jobs)
    rng.shuffle(jobs)
    target = factor * gpus * MILLI_WHOLE
    total = sum(_asked(job) for job in jobs)
    while jobs and total > target:
        total -= _asked(jobs.pop(rng.randrange(len(jobs))))
    draws = 0
    while trace.jobs:
        pick = trace.jobs[rng.randrange(len(trace.jobs))]
        if total + _asked(pick) > target:
            break
        draws += 1
        total += _asked(pick)
        jobs.append(replace(pick, id=f"{pick.id}~{draws}"))
    n = len(jobs)
    out = tuple(
        replace(job, submit_s=float(i), duration_s=float(n + 1), flag="")
        for i, job in enumerate(jobs)
    )
    return replace(trace, jobs=out, used_rows=trace.used)  # the file's rows add up as read
