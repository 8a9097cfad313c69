"""What a simulation returns: the figures `railplan simulate`, its budgets and the report read.

`SimResult` is plain frozen data. Shares are fractions of the cluster's GPUs (0-1), times are
seconds from the trace's start, energy is kWh. `as_json()` gives the interface contract's JSON
(DESIGN.md's `simulate` row: ``trace``, ``allocation``, ``queueing_s``, ``fragmentation``,
``preemptions``, ``lost_gpu_hours``, ``repartitions``, ``never_ran``) plus railplan's
extensions, each key carrying its unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.simulate.inflate import Inflation
from infra.simulate.outcomes import JobTable

__all__ = ["Delays", "NeverRan", "Repartition", "SimResult", "TraceSummary"]


@dataclass(frozen=True, slots=True)
class Delays:
    """Queueing delay (submit to start, seconds) of a set of jobs that started."""

    jobs: int
    mean_s: float
    p50_s: float
    p95_s: float
    p99_s: float

    def as_json(self) -> dict[str, Any]:
        """Its JSON form."""
        return {
            "jobs": self.jobs,
            "mean": self.mean_s,
            "p50": self.p50_s,
            "p95": self.p95_s,
            "p99": self.p99_s,
        }


@dataclass(frozen=True, slots=True)
class Repartition:
    """One scheduled MIG change applied to one SU of a node group, and what it cost."""

    at_s: float
    group: str
    su: str
    mig: str
    nodes: int
    drain_s: float
    reconfigure_s: float
    evicted_jobs: int
    lost_gpu_hours: float

    def as_json(self) -> dict[str, Any]:
        """Its JSON form."""
        return {
            "at_s": self.at_s,
            "group": self.group,
            "su": self.su,
            "mig": self.mig,
            "nodes": self.nodes,
            "drain_s": self.drain_s,
            "reconfigure_s": self.reconfigure_s,
            "evicted_jobs": self.evicted_jobs,
            "lost_gpu_hours": self.lost_gpu_hours,
        }


@dataclass(frozen=True, slots=True)
class NeverRan:
    """A job that could not run on this cluster at all, and why (one line)."""

    job: str
    line: int
    reason: str

    def as_json(self) -> dict[str, Any]:
        """Its JSON form."""
        return {"job": self.job, "line": self.line, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """The trace file: its format, rows, rows used and skipped per reason, jobs, flags.

    ``rows == used + sum(skipped)``, in rows; ``jobs`` counts the jobs the used rows became
    (a PAI job is several task rows, a Philly row a job per attempt); ``flagged`` the jobs
    replayed with a flag (`infra.simulate.jobs.FLAGS`).
    """

    source: str
    format: str
    rows: int
    used: int
    skipped: dict[str, int]
    jobs: int = 0
    flagged: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """Its JSON form."""
        return {
            "source": self.source,
            "format": self.format,
            "rows": self.rows,
            "used": self.used,
            "skipped": dict(sorted(self.skipped.items())),
            "jobs": self.jobs,
            "flagged": dict(sorted(self.flagged.items())),
        }


@dataclass(frozen=True, slots=True)
class SimResult:
    """Figures of one replay.

    ``allocation_*``, ``fragmentation`` and ``profile_24h`` are time-weighted shares of the
    cluster's GPUs held by running jobs over the trace window (``window_s``: first to last
    submission; the whole horizon when every job arrives at once); ``horizon_s`` runs on to
    the last finish, and energy counts all of it; ``series`` samples allocated GPUs at evenly
    spaced times (``(t_s, gpus)``, at most a few hundred points, for plots); ``profile_24h``
    is the mean allocated share per hour of the day (index 0 = 00:00-01:00 in the schedule's
    time zone, or UTC). ``fragmentation`` is the time-weighted share of GPUs that were free
    while the head of some queue waited for lack of GPUs it could use. ``gpu_hours`` splits
    the GPU-hours jobs held over the whole replay (``held``) into ``work`` kept (finished or
    checkpointed), ``lost`` to evictions, ``resume_wait`` (held while powered-off nodes
    booted) and ``unfinished`` (held by runs still going when the replay stopped); the four
    add up to ``held``. ``outcomes`` counts jobs per outcome
    (`infra.simulate.outcomes.OUTCOMES`), ``jct`` the completion times of finished jobs,
    ``makespan_s`` runs from the first submission to the last finish; ``share_waste`` is what
    jobs held beyond what they asked for (a fraction on a larger slice or a whole GPU), in
    GPU-hours and as a share of ``held``; ``fragmentation_fgd`` is FGD's fragmentation
    (`infra.simulate.fragment`) over the trace window, as a share of the cluster's GPUs and of
    its free GPUs. ``job_table`` holds every job's outcome (`railplan simulate --jobs-csv`).
    ``inflation`` is how full the cluster got in an inflated replay (`--inflate`), else None.
    """

    trace: TraceSummary
    gpus: int
    horizon_s: float
    window_s: float
    allocation_mean: float
    allocation_p50: float
    allocation_p95: float
    allocation_by_group: dict[str, float]
    allocation_by_tenant: dict[str, float]
    queueing: dict[str, Delays]
    queueing_by_size: dict[str, Delays]
    fragmentation: float
    preemptions: int
    reclaims: int
    lost_gpu_hours: float
    repartitions: tuple[Repartition, ...]
    never_ran: tuple[NeverRan, ...]
    series: tuple[tuple[float, int], ...]
    profile_24h: tuple[float, ...]
    energy_kwh: float
    energy_saved_kwh: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    gpu_hours: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    jct: Delays = Delays(0, 0.0, 0.0, 0.0, 0.0)
    makespan_s: float = 0.0
    share_waste: dict[str, float] = field(default_factory=dict)
    fragmentation_fgd: dict[str, float] = field(default_factory=dict)
    job_table: JobTable | None = field(default=None, compare=False, repr=False)
    inflation: Inflation | None = None

    def as_json(self) -> dict[str, Any]:
        """The `simulate --format json` document (keys sorted by the CLI's writer).

        ``inflation`` only for an inflated replay.
        """
        extra = {"inflation": self.inflation.as_json()} if self.inflation is not None else {}
        return extra | {
            "trace": self.trace.as_json(),
            "gpus": self.gpus,
            "horizon_s": self.horizon_s,
            "window_s": self.window_s,
            "allocation": {
                "mean": self.allocation_mean,
                "p50": self.allocation_p50,
                "p95": self.allocation_p95,
                "by_group": self.allocation_by_group,
                "by_tenant": self.allocation_by_tenant,
                "series": [[t, gpus] for t, gpus in self.series],
            },
            "queueing_s": {t: d.as_json() for t, d in self.queueing.items()},
            "queueing_s_by_size": {s: d.as_json() for s, d in self.queueing_by_size.items()},
            "fragmentation": self.fragmentation,
            "preemptions": self.preemptions,
            "reclaims": self.reclaims,
            "lost_gpu_hours": self.lost_gpu_hours,
            "repartitions": [r.as_json() for r in self.repartitions],
            "never_ran": [n.as_json() for n in self.never_ran],
            "profile_24h": list(self.profile_24h),
            "energy_kwh": self.energy_kwh,
            "energy_saved_kwh": self.energy_saved_kwh,
            "notes": list(self.notes),
            "gpu_hours": dict(self.gpu_hours),
            "outcomes": dict(self.outcomes),
            "jct_s": self.jct.as_json(),
            "makespan_s": self.makespan_s,
            "share_waste": dict(self.share_waste),
            "fragmentation_fgd": dict(self.fragmentation_fgd),
        }
