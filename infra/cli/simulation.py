"""`railplan simulate`: replay a job trace on the planned cluster and print what it saw.

Reads the spec and the trace (format detected from its columns; ``--map-gpu`` renames the
trace's GPU models to catalog ids), plans the cluster, fills the replay's checkpoint
assumptions from the spec's `checkpoint` budget (`infra.budget.sim_policy`) and runs
`infra.simulate.engine.simulate` with a progress bar on stderr. Exits 0 whatever the figures
(utilisation budgets are evaluated elsewhere), 2 for an unreadable spec or trace.
"""

from __future__ import annotations

from typing import Annotated

import typer

from infra.budget.sim_policy import sim_policy
from infra.catalog import load_catalog
from infra.cli.common import Format, _load_spec, _say, app
from infra.cli.planning import _plan_or_fail
from infra.cli.progress_bar import _progress_bar
from infra.errors import InputError
from infra.simulate.engine import simulate as replay
from infra.simulate.text import result_json, result_text
from infra.simulate.traces import read_trace


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


@app.command()
def simulate(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help="Spec file.")],
    trace: Annotated[str, typer.Option("--trace", help="Job trace (CSV or a published format).")],
    output_format: Annotated[Format, typer.Option("--format", "-f")] = Format.TEXT,
    seed: Annotated[int, typer.Option(help="Seed of the replay's random choices.")] = 0,
    map_gpu: Annotated[
        list[str] | None,
        typer.Option("--map-gpu", help="Rename a trace GPU model to a catalog id (SRC=ID)."),
    ] = None,
) -> None:
    """Replay a job trace on the planned cluster: allocation, queueing, preemption, MIG changes."""
    mapping = _gpu_map(map_gpu or [])
    loaded = _load_spec(spec)
    jobs = read_trace(trace, gpu_map=mapping)
    catalog = load_catalog()
    with _progress_bar() as bar:
        planned = _plan_or_fail(loaded, bar.task("plan"))
        policy = sim_policy(loaded.spec, catalog, planned, seed=seed)
        result = replay(
            loaded.spec, planned, catalog, jobs, policy=policy, progress=bar.task("simulate")
        )
    _say(result_json(result) if output_format is Format.JSON else result_text(result))
