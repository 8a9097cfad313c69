"""The job trace the simulator replays: one `Job` per row that asked for GPUs, and the `Trace`.

Every trace reader (`infra.simulate.traces`) yields these, whatever the published format: a
job's arrival and run time in seconds from the trace's start, the GPUs it asks for (whole GPUs,
or one GPU's fraction in thousandths, as Alibaba's v2023 trace states `gpu_milli`), its tenant,
priority and the GPU model it wants. A `Trace` keeps, besides the jobs, how many rows the file
had and why the others were skipped, so the output can say so per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FLAGS", "MILLI_WHOLE", "Job", "Trace"]

MILLI_WHOLE = 1000
"""`Job.milli` of a job that wants whole GPUs: a thousandth of a GPU is the trace's unit."""


FLAGS = {
    "running at trace end": "still running when the trace was taken: replayed from its start "
    "to the snapshot's end, so its run time is cut short",
    "never scheduled": "never placed in the traced cluster: submitted anyway, as the trace's "
    "own simulator does, for the time it waited there",
    "earlier attempt": "an attempt before a job's last, each of which held its GPUs",
}
"""Flags a reader puts on jobs it replays although the trace did not measure them as run."""


@dataclass(frozen=True, slots=True)
class Job:
    """One job (a gang: all its GPUs start together or not at all).

    ``gpus`` devices of ``milli`` thousandths each: ``gpus=16, milli=1000`` is sixteen whole
    GPUs, ``gpus=1, milli=250`` a quarter of one GPU (placed on the smallest MIG slice that
    holds it, or on a whole GPU where the group is not split). ``priority`` is one of the
    spec's tenant priorities (low, normal, high, critical); ``gpu_model`` a catalog GPU id or
    ``None`` for any. ``line`` is the 1-based row of the source file, for messages.
    ``gpu_models`` lists every model the job accepts when the trace names alternatives
    (Alibaba's ``V100M16|V100M32``): the job runs on any of them, and ``gpu_model`` is the
    first; empty when the trace names one model or none. ``flag`` marks a job the trace
    did not measure as it ran, replayed anyway (`FLAGS`); empty for the others.
    ``limit_s`` is the time limit the job was submitted with (Slurm's backfill plans with
    it), ``None`` when the trace gives none. ``cpu_milli`` (thousandths of a CPU) and
    ``memory_mib`` are what the job asks of its nodes' CPUs and memory in all (a gang
    spreads them over its nodes with its GPUs); 0 when the trace does not say. A job of 0
    GPUs asks for CPUs only. ``epilog_s`` is the end of ``duration_s`` its epilog takes
    under Slurm (a trace's run time counts until the epilog completes): slurmctld frees
    the job's GPUs as it ends and leaves it out of backfill's will-run test, but starts
    nothing on its nodes before the epilog completes; 0 when the trace does not say.
    """

    id: str
    submit_s: float
    duration_s: float
    gpus: int
    milli: int = MILLI_WHOLE
    tenant: str = "default"
    priority: str = "normal"
    gpu_model: str | None = None
    line: int = 0
    gpu_models: tuple[str, ...] = ()
    flag: str = ""
    limit_s: float | None = None
    cpu_milli: int = 0
    memory_mib: int = 0
    epilog_s: float = 0.0

    @property
    def fractional(self) -> bool:
        """Whether the job wants part of one GPU (a MIG slice) rather than whole GPUs."""
        return self.milli < MILLI_WHOLE and self.gpus > 0

    def accepts(self, model: str) -> bool:
        """Whether the job may run on GPU ``model`` (any model when it names none)."""
        if self.gpu_model is None:
            return True
        return model == self.gpu_model or model in self.gpu_models

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds of work the job does when it runs undisturbed (fractions count part)."""
        return self.gpus * self.milli / MILLI_WHOLE * self.duration_s


@dataclass(frozen=True, slots=True)
class Trace:
    """Jobs read from one file, in submit order, and what was left out and why.

    ``origin_unix_s`` is the wall-clock time (Unix seconds, UTC) of ``submit_s == 0`` when
    the trace states dates (Philly, Helios); ``None`` when its times are relative (Alibaba,
    railplan CSV), and the replay then takes time 0 as midnight in the MIG schedule's zone.
    """

    source: str
    format: str
    rows: int
    jobs: tuple[Job, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    origin_unix_s: float | None = None
    used_rows: int | None = None

    @property
    def used(self) -> int:
        """Rows that went into jobs (``rows == used + skipped``, one unit: rows).

        A PAI job is several task rows; a Philly row (a job) may give a job per attempt.
        """
        return len(self.jobs) if self.used_rows is None else self.used_rows

    def flagged(self) -> dict[str, int]:
        """Jobs per flag (`FLAGS`), for the flags that occur."""
        out: dict[str, int] = {}
        for job in self.jobs:
            if job.flag:
                out[job.flag] = out.get(job.flag, 0) + 1
        return dict(sorted(out.items()))
