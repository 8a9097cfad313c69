"""`railplan trace`: write a synthetic job trace for the spec's cluster at a chosen load.

Plans the spec for its GPUs and node groups, draws jobs with
`infra.simulate.synthetic.generate_load` (sizes up to the largest node group, the spec's tenants,
measured run times, a day/night arrival cycle) and writes them as railplan's trace CSV, the
format `railplan simulate --trace` reads: to ``-o FILE`` (atomically; an existing file only
with ``--force``) or to standard output. One line on stderr says what the trace offers. Same
spec and arguments, same bytes. Exit 2 for a bad argument or spec.
"""

from __future__ import annotations

import io
import math
import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from infra.bounds import MAX_JOBS
from infra.cli.common import app, integer_option, number_option, plan_or_fail, read_spec, say
from infra.errors import InputError
from infra.wording import plural

if TYPE_CHECKING:
    from infra.simulate.synthetic import LoadTrace
    from infra.topology import Plan

DEFAULT_JOBS = 1000
MAX_LOAD = 100.0  # offered load; above 1 is an overloaded cluster, 100 a typo's neighbourhood


class Mix(StrEnum):
    """`--mix`: `infra.simulate.synthetic.MIXES`."""

    TRAINING = "training"
    MEASURED = "measured"


@app.command()
def trace(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    load: Annotated[
        float,
        number_option(
            help="Offered load: the jobs' GPU-hours over the cluster's GPU-hours in the window "
            f"(above 0, at most {MAX_LOAD:g}; above 1 overloads the cluster).",
            metavar="L",
        ),
    ] = 0.8,
    jobs: Annotated[
        int | None,
        integer_option(
            min=1,
            max=MAX_JOBS,
            help="Number of jobs; the window is then what makes them offer --load "
            "(default 1000 without --days).",
            metavar="N",
        ),
    ] = None,
    days: Annotated[
        float | None,
        number_option(
            help="Window in days instead of --jobs: jobs are drawn until they offer --load.",
            metavar="D",
        ),
    ] = None,
    seed: Annotated[int, integer_option(help="Seed of the draws: same seed, same trace.")] = 0,
    mix: Annotated[
        Mix,
        typer.Option(
            help="Job sizes: training (1, 2, 4, ... GPUs up to the largest node group, each "
            "size half as likely as the last) or measured (Alibaba's GPU pod list: fractions "
            "of a GPU, 1-8 GPUs)."
        ),
    ] = Mix.TRAINING,
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="CSV file to write ('-': standard output)."),
    ] = "-",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write a synthetic job trace for the spec's cluster at a chosen load (simulate's CSV)."""
    from infra.files import write_atomic
    from infra.simulate.synthetic import generate_load, write_csv

    _check_numbers(load, days)
    if jobs is not None and days is not None:
        raise InputError("--jobs and --days do not combine", path="--days", hint="give one of them")
    if output != "-":
        _check_target(output, spec, force)
    loaded = read_spec(spec)
    plan = plan_or_fail(loaded)
    tenants = [t.name for t in loaded.spec.scheduler.tenants] or ["default"]
    try:
        drawn = generate_load(
            load,
            gpus=plan.gpus,
            seed=seed,
            jobs=None if days is not None else (jobs or DEFAULT_JOBS),
            days=days,
            largest=_largest_group(plan),
            mix=mix.value,
            tenants=tenants,
        )
    except ValueError as exc:
        raise InputError(
            str(exc),
            path="--days" if days is not None else "--jobs",
            hint="a higher --load, fewer --jobs or a shorter --days",
        ) from None
    if not drawn.jobs and days is not None:  # a header alone: simulate refuses such a trace
        raise InputError(
            f"--days {days:g} at --load {load:g} draws no job on {plan.gpus:,} GPUs",
            path="--days",
            hint="a longer --days or a higher --load, or --jobs N",
        )
    buffer = io.StringIO()
    write_csv(drawn.jobs, buffer)
    if output == "-":
        say(buffer.getvalue().rstrip("\n"))
    else:
        write_atomic(output, buffer.getvalue().encode("utf-8"))
    sys.stderr.write(_summary(drawn) + "\n")


def _check_numbers(load: float, days: float | None) -> None:
    """Bounds typer cannot say for a float (NaN passes its range check)."""
    if not (math.isfinite(load) and 0 < load <= MAX_LOAD):
        raise InputError(
            f"--load must be above 0 and at most {MAX_LOAD:g}, got {load:g}",
            path="--load",
            hint="e.g. --load 0.8: the jobs ask for 80 % of the cluster's GPU-hours",
        )
    if days is not None and not (math.isfinite(days) and 0 < days <= 3652):
        raise InputError(
            f"--days must be above 0 and at most 3652 (10 years), got {days:g}",
            path="--days",
            hint="e.g. --days 7",
        )


def _check_target(output: str, spec: str, force: bool) -> None:
    """The output is not the spec, and an existing file is replaced only with --force."""
    from infra.files import check_outputs

    check_outputs({"--output": output}, [spec])
    if os.path.lexists(output) and not force:
        raise InputError(f"{output} exists", path="--output", hint="add --force to replace it")


def _largest_group(plan: Plan) -> int:
    """The most GPUs one gang can hold: a whole node group (a job runs within one group)."""
    return max(group.gpus * group.servers for group in plan.groups.values())


def _summary(drawn: LoadTrace) -> str:
    days = f"{drawn.window_s / 86400:.3g}"
    return (
        f"railplan trace: {plural(len(drawn.jobs), 'job')} over {days} day{'' if days == '1' else 's'} "
        f"({drawn.window_s:,.0f} s), offered load {drawn.offered_load:.3f} "
        f"of {drawn.gpus:,} GPUs"
    )
