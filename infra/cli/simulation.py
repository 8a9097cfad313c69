"""`railplan simulate`: replay a job trace on the planned cluster and print what it saw.

Reads the spec and the trace (format detected from its columns; ``--map-gpu`` renames the
trace's GPU models to catalog ids), plans the cluster, fills the replay's checkpoint
assumptions from the spec's `checkpoint` budget (`infra.budget.sim_policy`) and runs
`infra.simulate.engine.simulate` with a progress bar on stderr. ``--compare-mig`` replays the
trace on each MIG variant of the cluster instead (`infra.simulate.variants`: no MIG, static MIG,
the spec as declared) and prints them side by side (`infra.simulate.compare`). Exits 0 whatever
the figures (utilisation budgets are evaluated elsewhere), 2 for an unreadable spec or trace or
a `--compare-mig` spec without MIG.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from infra.cli.common import (
    Format,
    ProgressBar,
    app,
    integer_option,
    number_option,
    plan_or_fail,
    progress_bar,
    read_spec,
    say,
    write_output,
)
from infra.errors import InputError, spelling_hint
from infra.progress import Progress as ProgressFn

if TYPE_CHECKING:
    from infra.catalog import Catalog
    from infra.simulate.jobs import Trace
    from infra.simulate.result import SimResult
    from infra.spec import LoadedSpec, Spec
    from infra.topology import Plan


class Placement(StrEnum):
    """`--placement`: `infra.simulate.cluster.PLACEMENTS`."""

    BEST_FIT = "best-fit"
    FIRST_FIT = "first-fit"
    RANDOM = "random"
    PACKING = "packing"
    FGD = "fgd"


def _gpu_map(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        source, sep, target = pair.partition("=")
        if not sep or not source or not target:
            raise InputError(
                f"--map-gpu expects SRC=ID, got {pair!r}",
                path="--map-gpu",
                hint="e.g. --map-gpu A100-SXM4-80GB=a100-sxm4-80gb",
            )
        out[source] = target
    return out


def _known_targets(mapping: dict[str, str], gpus: Iterable[str]) -> None:
    """InputError for a ``--map-gpu`` target that is not a catalog GPU id."""
    known = sorted(gpus)
    for source, target in mapping.items():
        if target not in known:
            raise InputError(
                f"--map-gpu {source}={target}: {target!r} is not a catalog GPU id",
                path="--map-gpu",
                hint=spelling_hint(target, known) or "one of " + ", ".join(known),
            )


@app.command()
def simulate(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    trace: Annotated[str, typer.Option("--trace", help="Job trace (CSV or a published format).")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
    seed: Annotated[int, integer_option(help="Seed of the replay's random choices.")] = 0,
    map_gpu: Annotated[
        list[str] | None,
        typer.Option("--map-gpu", help="Rename a trace GPU model to a catalog id (SRC=ID)."),
    ] = None,
    placement: Annotated[
        Placement | None,
        typer.Option(
            help="How a job picks its nodes (random and score ties use --seed); default: the "
            "scheduler's own, best-fit for Kubernetes, first-fit for Slurm."
        ),
    ] = None,
    inflate: Annotated[
        float | None,
        number_option(
            "--inflate",
            min=0.01,
            max=100.0,
            help="Draw jobs from the trace until they ask for F times the cluster's GPUs, "
            "nothing departing (the FGD paper's inflation): how full does the cluster get?",
            metavar="F",
        ),
    ] = None,
    jobs_csv: Annotated[
        str | None,
        typer.Option("--jobs-csv", help="Write every job's outcome, start, end and JCT (CSV)."),
    ] = None,
    compare_mig: Annotated[
        bool,
        typer.Option(
            "--compare-mig",
            help="Replay on the cluster with no MIG, static MIG and MIG as declared; "
            "print them side by side.",
        ),
    ] = False,
) -> None:
    """Replay a job trace on the planned cluster: allocation, queueing, preemption, MIG changes."""
    from infra.budget.sim_policy import sim_policy
    from infra.catalog import catalog_for
    from infra.files import check_outputs
    from infra.simulate.engine import simulate as replay
    from infra.simulate.text import result_json, result_text
    from infra.simulate.traces import read_trace

    mapping = _gpu_map(map_gpu or [])
    if compare_mig:  # before any work: what the side-by-side replay would ignore
        _compare_alone(inflate, jobs_csv)
    if jobs_csv is not None:  # before any work: the CSV must not replace the spec or trace
        check_outputs({"--jobs-csv": jobs_csv}, [spec, trace])
    loaded = read_spec(spec)
    catalog = catalog_for(loaded.spec)
    _known_targets(mapping, catalog.gpus)  # a typo would leave every mapped job never run
    jobs = read_trace(trace, gpu_map=mapping)
    if compare_mig:
        _compare(loaded, catalog, jobs, output_format, seed, placement and placement.value)
        return
    with progress_bar() as bar:
        planned = plan_or_fail(loaded, bar.task("plan"))
        policy = sim_policy(
            loaded.spec, catalog, planned, seed=seed, placement=placement and placement.value
        )
        policy = replace(policy, inflate=inflate)
        result = replay(
            loaded.spec, planned, catalog, jobs, policy=policy, progress=bar.task("simulate")
        )
    if jobs_csv is not None and result.job_table is not None:
        write_output(jobs_csv, result.job_table.csv())
    say(result_json(result) if output_format is Format.JSON else result_text(result))


def _compare_alone(inflate: float | None, jobs_csv: str | None) -> None:
    """--compare-mig replays several clusters: --inflate and --jobs-csv are one cluster's."""
    if inflate is not None:
        raise InputError(
            "--inflate and --compare-mig do not combine",
            path="--inflate",
            hint="inflate one cluster at a time: drop --compare-mig",
        )
    if jobs_csv is not None:
        raise InputError(
            "--jobs-csv and --compare-mig do not combine: the comparison replays one cluster "
            "per MIG variant and writes no job table",
            path="--jobs-csv",
            hint="write one cluster's jobs without --compare-mig",
        )


def _compare(
    loaded: LoadedSpec,
    catalog: Catalog,
    jobs: Trace,
    output_format: Format,
    seed: int,
    placement: str | None,
) -> None:
    """`simulate --compare-mig`: the trace on each MIG variant, side by side."""
    from infra.budget.sim_policy import sim_policy
    from infra.simulate.compare import MigComparison, comparison_json, comparison_text
    from infra.simulate.engine import simulate as replay
    from infra.simulate.variants import mig_variants, split_groups

    variants = mig_variants(loaded.spec, catalog)
    if not variants:
        raise InputError(
            "--compare-mig needs a node group that splits GPUs with MIG",
            file=loaded.file,
            path="node_groups",
            hint="give a group `mig: <layout>` or a `mig_schedule`, or drop --compare-mig",
        )
    with progress_bar() as bar:
        plan = plan_or_fail(loaded, bar.task("plan"))

        def run(variant: Spec, planned: Plan, progress: ProgressFn) -> SimResult:
            policy = sim_policy(variant, catalog, planned, seed=seed, placement=placement)
            return replay(variant, planned, catalog, jobs, policy=policy, progress=progress)

        results = replay_variants(variants, catalog, bar, (loaded.spec, plan), run)
    comparison = MigComparison(results, split_groups(loaded.spec, catalog))
    text = comparison_json if output_format is Format.JSON else comparison_text
    say(text(comparison))


def replay_variants(
    variants: dict[str, Spec],
    catalog: Catalog,
    bar: ProgressBar,
    declared: tuple[Spec, Plan],
    run: Callable[[Spec, Plan, ProgressFn], SimResult],
) -> dict[str, SimResult]:
    """Each variant planned once (``declared``'s plan reused) and replayed by ``run``.

    ``run`` replays the trace with the calling command's policy; one progress bar task per
    variant for its plan and one for its replay.
    """
    from infra.topology import expand

    results = {}
    for name, spec in variants.items():
        plan = (
            declared[1] if spec is declared[0] else expand(spec, catalog, bar.task(f"plan {name}"))
        )
        results[name] = run(spec, plan, bar.task(f"simulate {name}"))
    return results
