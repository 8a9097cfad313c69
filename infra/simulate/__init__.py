"""Discrete-event replay of a job trace on the planned cluster (`railplan simulate`).

`jobs` defines the trace's jobs; `traces` reads the published trace formats into them and
`synthetic` draws seeded traces from a published trace's measured distributions; the
engine replays them against the plan with the scheduler the spec renders (gang admission,
topology-aware placement, tenant quotas with borrowing and reclaim, priority preemption, MIG
schedules, Slurm's main scheduler and backfill, Slurm power saving) and returns the figures
`railplan simulate` prints, per job too.
"""

from infra.simulate.jobs import MILLI_WHOLE, Job, Trace

__all__ = ["MILLI_WHOLE", "Job", "Trace"]
