"""Slurm's scheduler as the spec configures it: the one owner of `SchedulerParameters`.

The rendered slurm.conf writes `SchedulerType=sched/backfill` and the `SchedulerParameters`
line from `backfill_of` (`infra.render.slurm_conf`), and `railplan simulate` replays the same
parameters (`infra.simulate.slurm`), so the two cannot disagree. Only the backfill knobs the
replay models are rendered: `bf_interval`, `bf_resolution`, `bf_window` (minutes) and
`bf_max_job_test`, each Slurm 22.05's default unless the spec's `scheduler.backfill` says
otherwise; and `nohold_on_prolog_fail`, which the replay has no use for (it models no Prolog).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.spec import Spec
from infra.spec.scheduling import duration_seconds

__all__ = ["PROLOG_FAILURE", "SCHEDULER_TYPE", "BackfillParameters", "backfill_of"]

SCHEDULER_TYPE = "sched/backfill"
# Without it Slurm holds a job whose Prolog failed (Reason=launch_failed_requeued_held) until
# someone releases it; the cluster twin's prolog scenario showed the job waiting for ever.
PROLOG_FAILURE = "nohold_on_prolog_fail"


@dataclass(frozen=True, slots=True)
class BackfillParameters:
    """`sched/backfill`'s settings in seconds (the window too; slurm.conf has it in minutes)."""

    interval_s: int
    resolution_s: int
    window_s: int
    max_job_test: int

    def scheduler_parameters(self) -> str:
        """The `SchedulerParameters` value slurm.conf carries."""
        return (
            f"bf_interval={self.interval_s},bf_resolution={self.resolution_s},"
            f"bf_window={self.window_s // 60},bf_max_job_test={self.max_job_test},"
            f"{PROLOG_FAILURE}"
        )


def backfill_of(spec: Spec) -> BackfillParameters:
    """The backfill parameters of a Slurm spec (Slurm's defaults where it sets none)."""
    bf = spec.scheduler.backfill
    return BackfillParameters(
        duration_seconds(bf.interval),
        duration_seconds(bf.resolution),
        duration_seconds(bf.window),
        bf.max_job_test,
    )
