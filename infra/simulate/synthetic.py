"""Synthetic job traces whose distributions come from a published trace, seeded and exact.

`generate` draws jobs the way Alibaba's GPU cluster submitted them, measured from the public
``cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv`` (github.com/alibaba/clusterdata;
the 8,152-pod trace of Weng et al., "Beware of Fragmentation", USENIX ATC '23): of its 7,064
GPU pods 3,078 (43.6 %) ask for part of one GPU, 75 (1.1 %) for several GPUs and 3,911 one
whole GPU; the fractions, the multi-GPU sizes, the run times (``deletion_time -
scheduled_time`` of the 6,203 scheduled GPU pods, as quantiles) and the QoS classes below are
that file's counts. Arrivals follow a day/night cycle (a sinusoid peaking in the afternoon):
the Helios (Hu et al., SC '21) and Philly (Jeon et al., USENIX ATC '19) characterisations
describe submissions peaking in working hours; the amplitude and peak hour are railplan's
parameters, not measured figures. `write_csv` writes railplan's trace CSV.
"""

from __future__ import annotations

import bisect
import csv
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import pairwise
from typing import TextIO

from infra.bounds import MAX_JOBS
from infra.simulate.jobs import MILLI_WHOLE, Job
from infra.simulate.traces.alibaba_v2023 import QOS_PRIORITY
from infra.simulate.traces.railplan_csv import COLUMNS

__all__ = [
    "DURATION_QUANTILES",
    "FRACTIONAL_SHARE",
    "FRACTION_COUNTS",
    "MAX_JOBS",
    "MIXES",
    "MULTI_GPU_COUNTS",
    "MULTI_GPU_SHARE",
    "QOS_COUNTS",
    "LoadTrace",
    "generate",
    "generate_load",
    "write_csv",
]

GPU_PODS = 7064
FRACTIONAL_SHARE = 3078 / GPU_PODS
"""GPU pods asking for part of one GPU (``num_gpu`` 1, ``gpu_milli`` < 1000) in the v2023 list."""
MULTI_GPU_SHARE = 75 / GPU_PODS
"""GPU pods asking for more than one GPU in the v2023 list."""

FRACTION_COUNTS = {
    810: 1078, 470: 750, 320: 328, 650: 253, 230: 140, 460: 128, 590: 75, 160: 74, 550: 72,
    220: 62, 370: 47, 110: 24, 480: 19, 50: 7, 330: 7, 350: 6, 270: 4, 440: 2, 140: 1, 290: 1,
}  # fmt: skip
"""``gpu_milli`` of the 3,078 fractional pods, with how many asked for each."""

MULTI_GPU_COUNTS = {2: 16, 4: 15, 8: 44}
"""``num_gpu`` of the 75 multi-GPU pods."""

QOS_COUNTS = {"LS": 4011, "BE": 2948, "Burstable": 99, "Guaranteed": 6}
"""QoS class of the 7,064 GPU pods (priorities via the v2023 reader's mapping)."""

DURATION_QUANTILES = (
    (0.0, 4), (0.05, 48), (0.1, 67), (0.2, 143), (0.3, 218), (0.4, 368), (0.5, 655),
    (0.6, 1037), (0.7, 1695), (0.8, 3302), (0.9, 7389), (0.95, 16994), (0.99, 147608),
    (1.0, 12537496),
)  # fmt: skip
"""Run-time quantiles (seconds) of the 6,203 scheduled GPU pods; sampled log-linearly between."""

DAY_S = 86400.0


def generate(
    jobs: int,
    *,
    gpus: int,
    seed: int,
    tenants: Sequence[str] = ("default",),
    days: float = 7.0,
    peak_hour: float = 14.0,
    day_night_ratio: float = 3.0,
    max_duration_s: float = 7 * DAY_S,
    fractional_share: float = FRACTIONAL_SHARE,
    multi_gpu_share: float = MULTI_GPU_SHARE,
) -> list[Job]:
    """``jobs`` jobs submitted over ``days`` on a cluster of ``gpus`` GPUs, in submit order.

    ``day_night_ratio`` is the arrival rate at ``peak_hour`` over the rate twelve hours later;
    run times are capped at ``max_duration_s`` (the measured tail reaches 145 days: services
    that outlive any replay); no job asks for more than ``gpus``. Same arguments, same jobs.
    """
    if jobs < 0 or gpus < 1 or days <= 0 or not tenants or day_night_ratio < 1:
        raise ValueError("generate needs jobs >= 0, gpus >= 1, days > 0, tenants, ratio >= 1")
    rng = random.Random(seed)
    times = sorted(_arrival(rng, days, peak_hour, day_night_ratio) for _ in range(jobs))
    sizes = _Sampler(rng, fractional_share, multi_gpu_share, gpus)
    return [_job(rng, n, at, sizes, tenants, max_duration_s) for n, at in enumerate(times)]


def _arrival(rng: random.Random, days: float, peak_hour: float, ratio: float) -> float:
    """One submit time under a sinusoidal rate (rejection sampling: exact, seeded)."""
    amplitude = (ratio - 1) / (ratio + 1)
    while True:
        at = rng.uniform(0.0, days * DAY_S)
        phase = 2 * math.pi * ((at / 3600.0) - peak_hour) / 24.0
        if rng.random() * (1 + amplitude) <= 1 + amplitude * math.cos(phase):
            return round(at, 1)


class _Sampler:
    """Job sizes: (gpus, milli) by the measured shares, capped at the cluster's size."""

    def __init__(self, rng: random.Random, fractional: float, multi: float, gpus: int) -> None:
        self.rng, self.fractional, self.multi, self.cap = rng, fractional, multi, gpus
        self.fractions = list(FRACTION_COUNTS)
        self.fraction_weights = list(FRACTION_COUNTS.values())
        self.multis = [n for n in MULTI_GPU_COUNTS if n <= gpus] or [1]
        self.multi_weights = [MULTI_GPU_COUNTS.get(n, 1) for n in self.multis]

    def mean_gpus(self) -> float:
        """The GPUs a drawn job asks for on average (a fraction counts its part)."""
        fractions = sum(m * n for m, n in FRACTION_COUNTS.items()) / sum(FRACTION_COUNTS.values())
        multi = sum(g * w for g, w in zip(self.multis, self.multi_weights, strict=True))
        return (
            self.fractional * fractions / MILLI_WHOLE
            + self.multi * multi / sum(self.multi_weights)
            + (1 - self.fractional - self.multi)
        )

    def draw(self) -> tuple[int, int]:
        pick = self.rng.random()
        if pick < self.fractional:
            return 1, self.rng.choices(self.fractions, self.fraction_weights)[0]
        if pick < self.fractional + self.multi:
            return self.rng.choices(self.multis, self.multi_weights)[0], MILLI_WHOLE
        return 1, MILLI_WHOLE


class _PowerSampler:
    """Whole-GPU jobs of 1, 2, 4, ... GPUs up to ``cap``, each size half as likely as the last.

    So every size class offers about the same GPU-time: most jobs are small while most of the
    work is in large gangs, as the Philly and Helios characterisations describe training
    clusters. The halving is railplan's choice, not a measured figure.
    """

    def __init__(self, rng: random.Random, cap: int) -> None:
        self.rng = rng
        self.sizes = [1 << k for k in range(max(1, cap).bit_length())]
        self.weights = [1.0 / size for size in self.sizes]

    def mean_gpus(self) -> float:
        """The GPUs a drawn job asks for on average: each size weighs 1/size."""
        return len(self.sizes) / sum(self.weights)

    def draw(self) -> tuple[int, int]:
        return self.rng.choices(self.sizes, self.weights)[0], MILLI_WHOLE


def _sizes(mix: str, rng: random.Random, cap: int) -> _Sampler | _PowerSampler:
    """The size sampler of a `MIXES` mix (drawing nothing yet)."""
    if mix == "training":
        return _PowerSampler(rng, cap)
    return _Sampler(rng, FRACTIONAL_SHARE, MULTI_GPU_SHARE, cap)


def _duration(rng: random.Random, cap: float) -> float:
    """A run time from the measured quantiles, log-linear between neighbours."""
    q = rng.random()
    at = max(1, bisect.bisect_left([p for p, _ in DURATION_QUANTILES], q))
    (p0, v0), (p1, v1) = DURATION_QUANTILES[at - 1], DURATION_QUANTILES[at]
    share = (q - p0) / (p1 - p0)
    return round(min(cap, math.exp(math.log(v0) + share * (math.log(v1) - math.log(v0)))), 1)


def _mean_duration(cap: float) -> float:
    """The mean of `_duration` (before its rounding to 0.1 s).

    The log-linear quantile function integrated between each pair of neighbours, a run time
    above ``cap`` counted as ``cap``.
    """
    total = 0.0
    for (p0, v0), (p1, v1) in pairwise(DURATION_QUANTILES):
        rate = math.log(v1 / v0)  # v(t) = v0 * exp(rate * t) for t in [0, 1]
        if cap <= v0:
            part = cap
        elif cap >= v1:
            part = (v1 - v0) / rate
        else:
            below = math.log(cap / v0) / rate  # where v(t) reaches the cap
            part = (cap - v0) / rate + (1 - below) * cap
        total += (p1 - p0) * part
    return total


def _job(
    rng: random.Random,
    n: int,
    at: float,
    sizes: _Sampler | _PowerSampler,
    tenants: Sequence[str],
    cap: float,
) -> Job:
    return replace(_body(rng, sizes, tenants, cap), id=f"job{n:06d}", submit_s=at, line=n + 2)


def _body(
    rng: random.Random, sizes: _Sampler | _PowerSampler, tenants: Sequence[str], cap: float
) -> Job:
    """A job without its id and submit time; the draws in this order (seeded traces rely on it)."""
    gpus, milli = sizes.draw()
    qos = rng.choices(list(QOS_COUNTS), list(QOS_COUNTS.values()))[0]
    duration = max(1.0, _duration(rng, cap))
    return Job(
        id="",
        submit_s=0.0,
        duration_s=duration,
        gpus=gpus,
        milli=milli,
        tenant=tenants[rng.randrange(len(tenants))],
        priority=QOS_PRIORITY[qos],
    )


def write_csv(jobs: Sequence[Job], out: TextIO) -> None:
    """``jobs`` as railplan's trace CSV (times to a tenth of a second)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for job in jobs:
        times = (f"{job.submit_s:.1f}", f"{job.duration_s:.1f}")
        writer.writerow(
            (job.id, *times, job.gpus, job.milli, job.tenant, job.priority, job.gpu_model or "")
        )


MIXES = ("training", "measured")
"""Job-size mixes of `generate_load`: powers of two up to the largest job (`_PowerSampler`), or
the Alibaba v2023 pod list's measured sizes (fractions of a GPU, 1-8 GPUs; `_Sampler`)."""
MAX_WINDOW_S = 10 * 365.25 * DAY_S
"""The longest window: the trace readers' bound on a submit time (`traces.common.MAX_TRACE_S`)."""
LOAD_TOLERANCE = 0.005
"""How near a window's (``days``) offered load comes to the one asked for, relative."""
_ESTIMATED = 100_000
"""From this many jobs their mean work (`_mean_duration` x the sizes' mean) foretells the
total to a few per cent: a window (``jobs``) or a job count (``days``) past `_MARGIN` times
its limit by that estimate is refused before a job is drawn (two million draws take a minute)."""
_MARGIN = 1.5
_MAX_REJECTS = 10_000
_PROBE_JOBS = 10_000  # jobs whose mean work tells a window far past MAX_JOBS


@dataclass(frozen=True)
class LoadTrace:
    """Jobs drawn to offer a load: their GPU-seconds over ``gpus`` x ``window_s``."""

    jobs: list[Job]
    window_s: float
    gpus: int

    @property
    def offered_load(self) -> float:
        """GPU-seconds the jobs ask for over the GPU-seconds the cluster has in the window."""
        return sum(job.gpu_seconds for job in self.jobs) / (self.gpus * self.window_s)


def generate_load(
    load: float,
    *,
    gpus: int,
    seed: int,
    jobs: int | None = None,
    days: float | None = None,
    largest: int | None = None,
    mix: str = "training",
    tenants: Sequence[str] = ("default",),
    peak_hour: float = 14.0,
    day_night_ratio: float = 3.0,
    max_duration_s: float = 7 * DAY_S,
) -> LoadTrace:
    """A trace offering ``load`` times the GPU-time of ``gpus`` GPUs over its window.

    Either ``jobs`` jobs, the window then set so they offer exactly ``load`` (up to float
    rounding), or jobs drawn until they offer ``load`` over ``days`` (within
    `LOAD_TOLERANCE`). Sizes come from ``mix`` (`MIXES`), none above ``largest`` (default
    ``gpus``); run times, priorities and the day/night arrival cycle as `generate`'s. Same
    arguments, same jobs. Raises ValueError for arguments out of range.
    """
    _check_load_args(load, gpus, jobs, days, mix, tenants)
    rng = random.Random(seed)
    sizes = _sizes(mix, rng, largest or gpus)
    _foretell(load * gpus, jobs, days, sizes.mean_gpus() * _mean_duration(max_duration_s))
    draw = partial(_body, rng, sizes, tenants, max_duration_s)
    if jobs is not None:
        bodies = [draw() for _ in range(jobs)]
        window = sum(job.gpu_seconds for job in bodies) / (load * gpus)
    else:
        window = (days or 0.0) * DAY_S
        bodies = _until(draw, load * gpus * window)
    if not 0 < window <= MAX_WINDOW_S:
        raise ValueError(f"the jobs would need a window of {window:.3g} s (at most 10 years)")
    times = sorted(_arrival(rng, window / DAY_S, peak_hour, day_night_ratio) for _ in bodies)
    return LoadTrace(
        jobs=[
            replace(body, id=f"job{n:06d}", submit_s=at, line=n + 2)
            for n, (at, body) in enumerate(zip(times, bodies, strict=True))
        ],
        window_s=window,
        gpus=gpus,
    )


def _foretell(gpus_busy: float, jobs: int | None, days: float | None, mean_work: float) -> None:
    """Refuse, before drawing, a trace whose mean work puts it far past a limit (`_ESTIMATED`).

    ``gpus_busy`` is the load times the GPUs; ``mean_work`` a job's mean GPU-seconds.
    """
    if jobs is not None and jobs >= _ESTIMATED:
        window = jobs * mean_work / gpus_busy
        if window > _MARGIN * MAX_WINDOW_S:
            raise ValueError(
                f"the jobs would need a window of about {window:.3g} s (at most 10 years)"
            )
    if days is not None:
        needed = gpus_busy * days * DAY_S / mean_work
        if needed >= _ESTIMATED and needed > _MARGIN * MAX_JOBS:
            raise ValueError(
                f"the window would need more than {MAX_JOBS:,} jobs (about {needed:,.0f})"
            )


def _check_load_args(
    load: float, gpus: int, jobs: int | None, days: float | None, mix: str, tenants: Sequence[str]
) -> None:
    if not (math.isfinite(load) and load > 0) or gpus < 1 or not tenants or mix not in MIXES:
        raise ValueError("generate_load needs load > 0, gpus >= 1, tenants and a known mix")
    if (jobs is None) == (days is None):
        raise ValueError("generate_load needs jobs or days, not both")
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be 1 to {MAX_JOBS:,}")
    if days is not None and not (math.isfinite(days) and 0 < days * DAY_S <= MAX_WINDOW_S):
        raise ValueError("days must be above 0 and at most 10 years")


def _until(draw: Callable[[], Job], target: float) -> list[Job]:
    """Jobs from ``draw`` until their GPU-seconds are within `LOAD_TOLERANCE` of ``target``.

    Near the end a job that would overshoot the band is left out and the next one drawn (a
    2,048-GPU week-long job would otherwise stop a day's trace far short of its load); after
    `_MAX_REJECTS` such draws in a row the trace ends where it is. A window that needs more
    than `MAX_JOBS` is refused once `_PROBE_JOBS` jobs show it needs twice that on average,
    not after drawing two million (a minute of CPU only to say no).
    """
    too_many = ValueError(f"the window would need more than {MAX_JOBS:,} jobs")
    bodies: list[Job] = []
    work, rejects = 0.0, 0
    while work < target * (1 - LOAD_TOLERANCE) and rejects < _MAX_REJECTS:
        body = draw()
        if work + body.gpu_seconds > target * (1 + LOAD_TOLERANCE):
            rejects += 1
            continue
        bodies.append(body)
        work, rejects = work + body.gpu_seconds, 0
        if len(bodies) > MAX_JOBS or (
            len(bodies) == _PROBE_JOBS and target / work * _PROBE_JOBS > 2 * MAX_JOBS
        ):
            raise too_many
    return bodies
