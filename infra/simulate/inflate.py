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

import math
import random
from dataclasses import dataclass, replace

from infra.errors import InputError
from infra.simulate.jobs import MILLI_WHOLE, Job, Trace
from infra.wording import plural

__all__ = ["MAX_INFLATED_JOBS", "Inflation", "inflate"]

MAX_INFLATED_JOBS = 500_000
"""Most jobs an inflation draws. The FGD paper's 130 % of the openb cluster is about 10,000;
a job of one thousandth of a GPU inflated 100 times on 131,072 GPUs would be 13 billion (the
replay costs some 40 us and 1 KB a drawn job: 500,000 is about 20 s and 0.5 GB)."""
_MARGIN = 1.1  # foretold draws past this times the bound are refused before drawing


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

    Raises:
        InputError: the draw would pass `MAX_INFLATED_JOBS` (fractions of a GPU inflated far).
    """
    rng = random.Random(seed)
    jobs = list(trace.jobs)
    rng.shuffle(jobs)
    target = factor * gpus * MILLI_WHOLE
    total = sum(_asked(job) for job in jobs)
    while jobs and total > target:
        total -= _asked(jobs.pop(rng.randrange(len(jobs))))
    _foretell(trace, gpus, factor, len(jobs), target - total)
    picks: list[Job] = []  # the draws, copied only once they are known to stay in bounds
    while trace.jobs:
        pick = trace.jobs[rng.randrange(len(trace.jobs))]
        if total + _asked(pick) > target:
            break
        total += _asked(pick)
        if len(jobs) + len(picks) >= MAX_INFLATED_JOBS:
            raise _too_many(
                factor, gpus, f"{(target - total) / MILLI_WHOLE:,.1f} GPUs still to ask for"
            )
        picks.append(pick)
    n, kept = len(jobs) + len(picks), len(jobs)
    out = tuple(
        replace(job, submit_s=float(i), duration_s=float(n + 1), flag="")
        for i, job in enumerate(jobs)
    ) + tuple(
        replace(
            pick, id=f"{pick.id}~{k}", submit_s=float(kept + k - 1), duration_s=n + 1.0, flag=""
        )
        for k, pick in enumerate(picks, 1)
    )
    return replace(trace, jobs=out, used_rows=trace.used)  # the file's rows add up as read


def _foretell(trace: Trace, gpus: int, factor: float, kept: int, left: float) -> None:
    """Refuse before drawing when the trace's mean ask says the draws pass the bound by far.

    Uniform draws with replacement ask for the trace's mean each: ``left / mean`` of them are
    to come, and past `_MARGIN` times the bound (hundreds of thousands of draws, so their sum
    is within a per cent of its mean) the draw is refused without drawing half a million jobs.
    """
    if not trace.jobs or left <= 0:
        return
    mean = sum(_asked(job) for job in trace.jobs) / len(trace.jobs)
    coming = math.inf if mean == 0 else left / mean
    if kept + coming > _MARGIN * MAX_INFLATED_JOBS:
        about = "without end" if math.isinf(coming) else f"about {kept + coming:,.0f}"
        raise _too_many(factor, gpus, about)


def _too_many(factor: float, gpus: int, detail: str) -> InputError:
    return InputError(
        f"--inflate {factor:g} on {plural(gpus, 'GPU')} would draw more than "
        f"{MAX_INFLATED_JOBS:,} jobs ({detail})",
        path="--inflate",
        hint="a smaller --inflate: the trace's jobs ask for small fractions of a GPU",
    )
